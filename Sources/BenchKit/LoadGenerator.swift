import Atomics
import CEpoll
import Foundation

/// Drives load: `connections` spread over `threads` threads for `duration`, each connection one
/// HTTP/1.1 request at a time (keep-alive, or a connection per request) or `streams` HTTP/2
/// streams at a time, over plain TCP or TLS.
///
/// Each thread drives its connections from its own `epoll` set, as wrk does (see
/// `EpollWorker`). Closed loop: a connection writes its next request when `epoll` next reports
/// it writable after the previous response ended. Open loop (`rate`): each connection has a
/// schedule of intended start times and latency is measured from the intended time, so a slow
/// server is charged for the requests it delayed (no coordinated omission). Results are merged
/// at the end.
public enum LoadGenerator {
    /// Runs the load; `onSecond(second, requests, errors)` is called once per second with that second's counts.
    public static func run(_ configuration: LoadConfiguration,
                           onSecond: (@Sendable (Int, Int, Int) -> Void)? = nil) async throws -> LoadResult {
        guard configuration.connections > 0, configuration.threads > 0 else { throw LoadError("--connections and --threads must be positive") }
        if let rate = configuration.rate, rate <= 0 { throw LoadError("--rate must be positive") }
        guard configuration.streams > 0 else { throw LoadError("--streams must be positive") }
        let address = try SocketAddress.resolve(host: configuration.host, port: configuration.port)
        let plan = try LoadPlan(configuration, address: address)
        // OpenSSL writes to its sockets without MSG_NOSIGNAL (a close_notify to a server that has
        // closed, say): a broken pipe must be an error, not the end of the process (as wrk does).
        if configuration.isTLS { signal(SIGPIPE, SIG_IGN) }
        let threads = min(configuration.threads, configuration.connections)
        let start = MonotonicClock.now
        let end = start + UInt64(configuration.duration * 1e9)
        let interval = configuration.rate.map { UInt64(Double(configuration.connections) / $0 * 1e9) }
        var workers: [EpollWorker] = []
        var assigned = 0
        for thread in 0..<threads {
            // Connections are spread as evenly as they go; open-loop schedules are staggered over
            // all of them so the connections do not fire in step.
            let count = (configuration.connections - assigned) / (threads - thread)
            let first = assigned
            workers.append(EpollWorker(
                plan: plan, connections: count, deadline: end,
                interval: interval, firstIntended: { local in
                    start + (interval.map { $0 * UInt64(first + local) / UInt64(configuration.connections) } ?? 0)
                }, timeout: configuration.timeout))
            assigned += count
        }
        let finished = WorkerThreads(workers)
        var second = 1
        var last = (requests: 0, errors: 0)
        // Once a second the counts so far; in between, every 50 ms, whether --requests are all done.
        while MonotonicClock.now < end, !finished.allEnded {
            let next = min(end, start + UInt64(second) * 1_000_000_000)
            let now = MonotonicClock.now
            if next > now { try await Task.sleep(nanoseconds: min(next - now, 50_000_000)) }
            guard MonotonicClock.now >= next else { continue }
            let current = workers.reduce((0, 0)) { ($0.0 + $1.requests.load(ordering: .relaxed), $0.1 + $1.errors.load(ordering: .relaxed)) }
            if next == start + UInt64(second) * 1_000_000_000 {
                onSecond?(second, current.0 - last.requests, current.1 - last.errors)
            }
            last = (current.0, current.1)
            second += 1
        }
        try await finished.wait()
        var result = LoadResult()
        for worker in workers { result.merge(worker.stats) }
        result.limit = plan.limit
        result.issued = plan.issued
        // With --requests done before the cap, the run lasted until its last response.
        let ended = configuration.requests == nil || result.capped ? end
            : min(end, result.lastResponse > start ? result.lastResponse : MonotonicClock.now)
        result.seconds = Double(ended - start) / 1e9
        return result
    }
}

/// The workers' threads, started at once; `wait()` returns when all have ended.
final class WorkerThreads: @unchecked Sendable {
    private let lock = NSLock()
    private var remaining: Int
    private var failure: LoadError?
    private var waiter: CheckedContinuation<Void, any Error>?

    /// Every worker has returned.
    var allEnded: Bool {
        lock.lock()
        defer { lock.unlock() }
        return remaining == 0
    }

    init(_ workers: [EpollWorker]) {
        remaining = workers.count
        for worker in workers {
            let thread = Thread { [self] in
                // Named for top and perf (a thread started from a task would show Dispatch's name).
                cepoll_name_thread("richpush-bench")
                var failure: LoadError?
                do { try worker.run() } catch let error as LoadError { failure = error } catch { failure = LoadError("\(error)") }
                ended(failure)
            }
            thread.start()
        }
    }

    private func ended(_ error: LoadError?) {
        lock.lock()
        remaining -= 1
        if let error { failure = error }
        let resume = remaining == 0 ? waiter : nil
        if resume != nil { waiter = nil }
        let failure = self.failure
        lock.unlock()
        if let failure { resume?.resume(throwing: failure) } else { resume?.resume() }
    }

    func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            lock.lock()
            if remaining == 0 {
                lock.unlock()
                if let failure { continuation.resume(throwing: failure) } else { continuation.resume() }
                return
            }
            waiter = continuation
            lock.unlock()
        }
    }
}
