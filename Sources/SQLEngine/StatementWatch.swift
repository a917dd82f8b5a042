import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import Resilience

/// Notices a PostgreSQL server that stopped answering (docs/operations.md#when-a-dependency-fails). A stalled server (a frozen
/// process, a network partition that drops packets) fails nothing: its connections stay open
/// and every statement waits forever. So every statement is registered while it runs, and once
/// one has run for `stallAfter`, a probe opens a fresh connection and runs `SELECT 1` within a
/// second more than the connect timeout. A slow statement on a server that answers the probe is left alone; if the
/// probe gets no answer, the breaker opens (later transactions are refused at once) and the
/// connections of the running statements are closed, so their callers get a 503 within
/// seconds instead of a hang. A probe that succeeds while the breaker is open closes it.
final class StatementWatch: Sendable {
    /// How long a statement runs before the server is probed.
    static let stallAfter = 1.0
    /// How long the probe has to connect and answer: a second more than a connection may take.
    private let probeTimeout: TimeAmount

    private struct Running {
        var connection: PostgresConnection
        /// Fails the statement's caller.
        var fail: @Sendable (any Error) -> Void
        var started: Double
    }

    private struct State {
        var next = 0
        var running: [Int: Running] = [:]
        var probing = false
        var lastProbe = -Double.infinity
    }

    let breaker: CircuitBreaker
    private let configuration: PostgresConnection.Configuration
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    private let timer = NIOLockedValueBox<RepeatedTask?>(nil)

    init(configuration: PostgresConnection.Configuration, breaker: CircuitBreaker, logger: Logger) {
        var probing = configuration
        probeTimeout = configuration.options.connectTimeout + .seconds(1)
        probing.options.connectTimeout = probeTimeout
        self.configuration = probing
        self.breaker = breaker
        self.logger = logger
    }

    /// Starts looking, four times a second.
    func start() {
        let task = MultiThreadedEventLoopGroup.singleton.any().scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) {
            [weak self] _ in self?.check()
        }
        timer.withLockedValue { $0 = task }
    }

    /// Stops looking.
    func stop() {
        timer.withLockedValue { $0?.cancel(); $0 = nil }
    }

    /// A statement starts on `connection`, its caller waiting for `answer`; the ticket ends it.
    func begin<Answer>(_ connection: PostgresConnection, _ answer: EventLoopPromise<Answer>) -> Int {
        let now = CircuitBreaker.uptime()
        return state.withLockedValue { state in
            state.next += 1
            state.running[state.next] = Running(connection: connection, fail: { answer.fail($0) }, started: now)
            return state.next
        }
    }

    func end(_ ticket: Int) {
        _ = state.withLockedValue { $0.running.removeValue(forKey: ticket) }
    }

    private func check() {
        let now = CircuitBreaker.uptime()
        // A statement whose connection is closed has no answer coming, whatever its future says.
        let orphans = state.withLockedValue { state in
            state.running.values.filter { now - $0.started >= Self.stallAfter && $0.connection.isClosed }.map(\.fail)
        }
        for fail in orphans {
            fail(SQLEngineError("PostgreSQL: the connection was lost before the statement's answer", unreachable: true))
        }
        let due = state.withLockedValue { state -> Bool in
            guard !state.probing, now - state.lastProbe >= 1,
                  let oldest = state.running.values.map(\.started).min(), now - oldest >= Self.stallAfter else { return false }
            state.probing = true
            state.lastProbe = now
            return true
        }
        guard due else { return }
        let started = now
        probe().whenComplete { [self] result in
            state.withLockedValue { $0.probing = false }
            switch result {
            case .success:
                breaker.record(.answered, probe: false)
            case .failure(let error):
                let failure = SQLEngineError(error)
                guard failure.unreachable || error is ProbeTimeout else { return } // it answered, with an error
                let reason = "a statement ran \(String(format: "%.1f", CircuitBreaker.uptime() - started + Self.stallAfter)) s and a new connection's SELECT 1 got no answer within \(probeTimeout.nanoseconds / 1_000_000_000) s (\(failure.message))"
                breaker.record(.unreachable(reason), probe: false)
                let stalled = state.withLockedValue { state in state.running.values.filter { $0.started <= started } }
                logger.error("PostgreSQL is not answering: closing the connections of \(stalled.count) waiting statements",
                             metadata: ["error": "\(reason)"])
                for statement in stalled {
                    statement.fail(SQLEngineError("PostgreSQL: \(reason)", unreachable: true))
                    PostgresPool.close(statement.connection)
                }
            }
        }
    }

    private struct ProbeTimeout: Error, CustomStringConvertible {
        var description: String { "no answer to SELECT 1" }
    }

    /// Connects and runs `SELECT 1`, all within `probeTimeout`; the connection is closed after.
    private func probe() -> EventLoopFuture<Void> {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let deadline = NIODeadline.now() + probeTimeout
        return PostgresConnection.connect(on: loop, configuration: configuration, id: -1, logger: logger).flatMap { connection in
            let promise = loop.makePromise(of: Void.self)
            let timeout = loop.scheduleTask(deadline: deadline) { promise.fail(ProbeTimeout()) }
            connection.query(PostgresQuery(unsafeSQL: "SELECT 1"), logger: self.logger).whenComplete { result in
                timeout.cancel()
                promise.completeWith(result.map { _ in () })
            }
            promise.futureResult.whenComplete { _ in PostgresPool.close(connection) }
            return promise.futureResult
        }
    }
}
