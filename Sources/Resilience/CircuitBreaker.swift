import CoreMetrics
import Foundation
import Logging
import NIOConcurrencyHelpers

/// Something outside the process that RichPush calls: the database, the media bucket, a push
/// service. Its `name` is what `/ready` and the metrics call it; its `phrase` is what a person
/// reads in a 503 (`"the media bucket"`).
public struct Dependency: Sendable, Hashable, CustomStringConvertible {
    /// A short machine name (`database`, `blobs`, `hub`).
    public let name: String
    /// How an answer names it to a person.
    public let phrase: String

    /// A dependency called `name`, named `phrase` in answers.
    public init(name: String, phrase: String) {
        self.name = name
        self.phrase = phrase
    }

    public var description: String { name }

    /// PostgreSQL (SQLite is a file of this process, never unreachable in this sense).
    public static let database = Dependency(name: "database", phrase: "the database")
    /// The S3 bucket holding the blobs.
    public static let blobs = Dependency(name: "blobs", phrase: "the media bucket")
    /// Azure Notification Hubs.
    public static let hub = Dependency(name: "hub", phrase: "the notification hub")
}

/// A request needed a dependency that is not answering: answered 503 with `Retry-After`, naming
/// the dependency and never its address (`reason`, for the log, may hold it).
public struct DependencyUnavailable: Error, CustomStringConvertible, Sendable {
    /// What is down.
    public let dependency: Dependency
    /// What was seen (`connection refused`, `no answer within 4 s`): for the log.
    public let reason: String
    /// Seconds until it is worth trying again (at least 1).
    public let retryAfter: Int

    /// An outage of `dependency`, seen as `reason`.
    public init(_ dependency: Dependency, reason: String, retryAfter: Int = 1) {
        self.dependency = dependency
        self.reason = reason
        self.retryAfter = max(1, retryAfter)
    }

    /// What a client is told: the dependency, and that it is worth trying again.
    public var publicMessage: String {
        "\(dependency.phrase) is not answering; nothing was changed by this request, try again in \(retryAfter) s"
    }

    public var description: String { "\(dependency.phrase) is not answering: \(reason)" }
}

/// A circuit breaker for one dependency: after a call fails because the dependency could not be
/// reached (refused, reset, no answer by the deadline), calls fail at once with
/// `DependencyUnavailable` instead of each waiting for its own timeout. After a cool-down one
/// call goes through as a probe; its success closes the breaker, its failure doubles the
/// cool-down (1 s, 2 s, 4 s, up to `maxCooldown`). A dependency that answers with an error
/// (a 404, a constraint violation) is up: only unreachability opens the breaker.
public final class CircuitBreaker: Sendable {
    /// What this breaker guards.
    public let dependency: Dependency
    private let firstCooldown: Double
    private let maxCooldown: Double
    private let logger: Logger
    /// Seconds on a monotonic clock (injected by tests).
    private let clock: @Sendable () -> Double

    private struct State {
        var open = false
        /// When (uptime seconds) the next probe may go.
        var retryAt = 0.0
        var cooldown = 0.0
        /// When the probe under way started (nil: none); a probe that never reports back is
        /// forgotten after a minute.
        var probeStarted: Double?
        var reason = ""
        var openedAt = 0.0
        var refused = 0
    }

    private let state = NIOLockedValueBox(State())

    /// A breaker for `dependency`; `clock` gives seconds on a monotonic clock (the system's
    /// uptime unless a test drives it).
    public init(_ dependency: Dependency, firstCooldown: Duration = .seconds(1), maxCooldown: Duration = .seconds(8),
                logger: Logger = Logger(label: "richpush.dependency"), clock: @escaping @Sendable () -> Double = CircuitBreaker.uptime) {
        self.dependency = dependency
        self.clock = clock
        self.firstCooldown = Self.seconds(firstCooldown)
        self.maxCooldown = Self.seconds(maxCooldown)
        self.logger = logger
    }

    /// Whether calls are being refused now (probes aside).
    public var isOpen: Bool { state.withLockedValue { $0.open } }

    /// Calls refused without being tried, since the breaker last closed.
    public var refusals: Int { state.withLockedValue { $0.refused } }

    /// Sets `richpush_dependency_up` (1 answering, 0 not) to the breaker's state now: call once the
    /// metrics system is bootstrapped (the breaker may be made before it); transitions set it after.
    public func reportState() {
        Gauge(label: "richpush_dependency_up", dimensions: [("dependency", dependency.name)]).record(isOpen ? 0 : 1)
    }

    /// How a call ended, for `record`.
    public enum Outcome: Sendable {
        /// The dependency answered (with success or with an error of its own).
        case answered
        /// It could not be reached: what was seen.
        case unreachable(String)
        /// The caller gave up (cancelled): says nothing about the dependency.
        case abandoned
    }

    /// Lets a call go (true when it is the probe of an open breaker), or throws
    /// `DependencyUnavailable` at once while the breaker is open and cooling down.
    public func admit() throws -> Bool {
        let now = clock()
        let decision: Result<Bool, DependencyUnavailable> = state.withLockedValue { state in
            guard state.open else { return .success(false) }
            let probing = state.probeStarted.map { now - $0 < 60 } ?? false
            if probing || now < state.retryAt {
                state.refused += 1
                let wait = Int(max(1, state.retryAt - now).rounded(.up))
                return .failure(DependencyUnavailable(dependency, reason: state.reason, retryAfter: wait))
            }
            state.probeStarted = now
            return .success(true)
        }
        if case .failure = decision {
            Counter(label: "richpush_dependency_refused_total", dimensions: [("dependency", dependency.name)]).increment()
        }
        return try decision.get()
    }

    /// Reports how an admitted call ended.
    public func record(_ outcome: Outcome, probe: Bool) {
        let now = clock()
        switch outcome {
        case .answered:
            let reopened: (down: Double, refused: Int)? = state.withLockedValue { state in
                guard state.open else { return nil }
                defer { state = State() }
                return (now - state.openedAt, state.refused)
            }
            if let reopened {
                reportState()
                logger.notice("\(dependency.phrase) is answering again", metadata: [
                    "dependency": "\(dependency.name)", "down_seconds": "\(String(format: "%.1f", reopened.down))",
                    "requests_refused": "\(reopened.refused)",
                ])
            }
        case .unreachable(let reason):
            let opened: Bool = state.withLockedValue { state in
                if state.open && !probe {
                    // A call admitted before the breaker opened: it confirms the outage.
                    state.reason = reason
                    return false
                }
                let wasOpen = state.open
                state.cooldown = wasOpen ? min(maxCooldown, max(firstCooldown, state.cooldown * 2)) : firstCooldown
                if !wasOpen { state.openedAt = now }
                state.open = true
                state.retryAt = now + state.cooldown
                state.probeStarted = nil
                state.reason = reason
                return !wasOpen
            }
            if opened {
                reportState()
                Counter(label: "richpush_dependency_outages_total", dimensions: [("dependency", dependency.name)]).increment()
                logger.error("\(dependency.phrase) is not answering; requests that need it get 503 until it does", metadata: [
                    "dependency": "\(dependency.name)", "error": "\(reason)",
                ])
            }
        case .abandoned:
            if probe { state.withLockedValue { $0.probeStarted = nil } }
        }
    }

    /// Runs `body` through the breaker: refused at once while open; an error that `classify`
    /// calls unreachability (a reason) opens the breaker and is thrown as `DependencyUnavailable`,
    /// any other error is the dependency's answer and is thrown as it is.
    public func call<T>(classify: (any Error) -> String?, _ body: () async throws -> T) async throws -> T {
        let probe = try admit()
        do {
            let value = try await body()
            record(.answered, probe: probe)
            return value
        } catch is CancellationError {
            record(.abandoned, probe: probe)
            throw CancellationError()
        } catch let error as DependencyUnavailable {
            record(.unreachable(error.reason), probe: probe)
            throw error
        } catch {
            guard let reason = classify(error) else {
                record(.answered, probe: probe)
                throw error
            }
            record(.unreachable(reason), probe: probe)
            throw DependencyUnavailable(dependency, reason: reason, retryAfter: Int(firstCooldown.rounded(.up)))
        }
    }

    /// The error to throw for a failure seen outside `call` (a watchdog's): with the cool-down
    /// left.
    public func unavailable(_ reason: String) -> DependencyUnavailable {
        let now = clock()
        let wait = state.withLockedValue { max(1, $0.retryAt - now) }
        return DependencyUnavailable(dependency, reason: reason, retryAfter: Int(wait.rounded(.up)))
    }

    /// The system's uptime in seconds.
    public static func uptime() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
