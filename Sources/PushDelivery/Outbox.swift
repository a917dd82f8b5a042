import Foundation
import GRDB
import Logging
import MediaStore
import Metrics
import NIOConcurrencyHelpers
import RichPushCore
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// What the HTTP layer tells the delivery side: new deliveries are in the outbox.
///
/// The outbox rows are committed before anyone is told, so a dispatcher that is not running
/// (or a process that dies) loses nothing: pending rows are picked up on the next start.
public protocol PushDispatching: Sendable {
    /// How new notifications address their pushes.
    var addressing: DeliveryAddressing { get }
    /// Called after a notification and its deliveries were committed.
    func enqueued(_ created: CreatedNotification, logger: Logger)
    /// Called after a batch of a campaign's deliveries was committed.
    func outboxChanged()
}

/// Used when no push provider is configured: pushes stay pending, and the log says why.
public struct NoPushProvider: PushDispatching {
    public init() {}
    public var addressing: DeliveryAddressing { .perDevice }

    public func enqueued(_ created: CreatedNotification, logger: Logger) {
        logger.warning(
            "no push provider configured (--apns-key… or --anh-connection-string…): pushes stay pending",
            metadata: ["notification": "\(created.notification.id)", "pending": "\(created.deliveries)"])
    }

    public func outboxChanged() {}
}

/// Delivers the outbox: a `Service` that claims due deliveries, sends them through a provider
/// with many in flight, and records each outcome.
///
/// A claim is a lease (the row's `nextAttemptAt` moves a minute ahead, with this process's pid
/// and a random tag), renewed while the push is in flight, so a second server on the same data
/// directory does not send the same push; leases of dead processes are taken back at start. A
/// push is recorded `sent` only after the service accepted it, and only by the lease's holder.
/// The guarantee is at-least-once: a crash between Apple's acceptance and the record (at most
/// 20 ms of outcomes) sends those pushes again, with the same `apns-id`.
public final class OutboxDispatcher: Service, PushDispatching {
    private let database: DatabasePool
    private let provider: any PushProvider
    private let logger: Logger
    private let concurrency: Int
    private let pollInterval: Duration
    private let maxAttempts: Int
    private let backoffBase: Double
    private let backoffCap: Double
    private let recordBatch = 256
    /// How long a claim is held before others may take it; renewed every third of it while sending.
    private let lease: Double
    /// This dispatcher's lease tag: only it may record outcomes of the rows it claimed.
    private let leaseTag = Int64.random(in: 1 ... .max)
    private let wake: AsyncStream<Void>.Continuation
    private let wakeups: AsyncStream<Void>

    /// Creates a dispatcher. Retries back off exponentially from `backoffBase` seconds, capped,
    /// with jitter; after `maxAttempts` a delivery fails with its last reason.
    public init(database: DatabasePool, provider: any PushProvider, logger: Logger, concurrency: Int = 200,
                pollInterval: Duration = .milliseconds(250), maxAttempts: Int = 12, backoffBase: Double = 1, backoffCap: Double = 300,
                lease: Double = 60) {
        self.lease = lease
        self.database = database
        self.provider = provider
        self.logger = logger
        self.concurrency = concurrency
        self.pollInterval = pollInterval
        self.maxAttempts = maxAttempts
        self.backoffBase = backoffBase
        self.backoffCap = backoffCap
        (self.wakeups, self.wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public var addressing: DeliveryAddressing { provider.addressing }

    public func enqueued(_ created: CreatedNotification, logger: Logger) {
        wake.yield()
    }

    public func outboxChanged() {
        wake.yield()
    }

    public func run() async throws {
        try await reclaimDeadLeases()
        let pollInterval = self.pollInterval
        let wake = self.wake
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: pollInterval)
                wake.yield()
            }
        }
        defer { ticker.cancel() }
        wake.yield()
        for await _ in wakeups.cancelOnGracefulShutdown() {
            do {
                try await drain()
            } catch {
                logger.error("outbox dispatch failed", metadata: ["error": "\(error)"])
            }
        }
        await provider.shutdown()
    }

    /// Delivers every due push until none is due, as a pipeline: up to `concurrency` sends in
    /// flight at all times, more claimed as slots free up, and outcomes recorded as they arrive,
    /// a commit (one fsync) per `recordBatch` outcomes or per 20 ms, whichever comes first. No
    /// send waits for another batch's stragglers, and a crash loses at most the outcomes of the
    /// last 20 ms (those pushes are sent again: at-least-once).
    func drain() async throws {
        // Leases are renewed while anything is claimed, however long one send takes.
        let renewer = Task { [database, lease, leaseTag] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(lease / 3))
                guard !Task.isCancelled else { return }
                let now = Date().timeIntervalSince1970
                _ = try? await database.write { db in
                    try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ? WHERE leaseTag = ? AND state = 'pending' AND nextAttemptAt > ?",
                                   arguments: [now + lease, leaseTag, now])
                }
            }
        }
        defer { renewer.cancel() }
        let window = NIOLockedValueBox(Window())
        let provider = self.provider
        let recordBatch = self.recordBatch
        @Sendable func recordDue(force: Bool) async {
            let batch = window.withLockedValue { w -> [(DeliveryJob, DeliveryOutcome, Date?)] in
                guard !w.outcomes.isEmpty, force || w.outcomes.count >= recordBatch else { return [] }
                defer { w.outcomes.removeAll(keepingCapacity: true) }
                return w.outcomes
            }
            guard !batch.isEmpty else { return }
            do {
                try await record(batch)
            } catch {
                logger.error("cannot record deliveries", metadata: ["count": "\(batch.count)", "error": "\(error)"])
            }
        }
        // Whatever arrived is committed within 20 ms, even while the loop waits on a slow send.
        // Stopped by a flag, not cancellation: a cancelled task's database write could be refused.
        let stopFlusher = NIOLockedValueBox(false)
        let flusher = Task {
            while !stopFlusher.withLockedValue({ $0 }) {
                try? await Task.sleep(for: .milliseconds(20))
                await recordDue(force: true)
            }
        }
        func finish() async {
            stopFlusher.withLockedValue { $0 = true }
            await flusher.value
            await recordDue(force: true)
        }
        do {
            try await sendAll(window: window, provider: provider, recordDue: recordDue)
        } catch {
            await finish()
            throw error
        }
        await finish()
    }

    /// The sends in flight and the outcomes not yet recorded, shared with the providers' callbacks.
    private struct Window {
        var inFlight = 0
        var outcomes: [(DeliveryJob, DeliveryOutcome, Date?)] = []
    }

    /// The send loop of `drain`: keeps the window full, claims as slots free up. Sends are started
    /// with a callback, not a task each: outcomes land in the window from the provider's event
    /// loop, and the loop is woken once for however many arrived meanwhile.
    private func sendAll(window: NIOLockedValueBox<Window>, provider: any PushProvider,
                         recordDue: @Sendable (Bool) async -> Void) async throws {
        let (completions, completed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        var wake = completions.makeAsyncIterator()
        var queue: [DeliveryJob] = []
        var drained = false
        var drainedAt = ContinuousClock.now
        while true {
            var inFlight = window.withLockedValue { $0.inFlight }
            // Claim while there is room for more than half a window: the claim's commit overlaps the sends in flight.
            if !drained && queue.count + inFlight <= concurrency / 2 {
                let claimed = try await claim(limit: concurrency)
                drained = claimed.isEmpty
                drainedAt = ContinuousClock.now
                queue.append(contentsOf: claimed.reversed())
                inFlight = window.withLockedValue { $0.inFlight }
            }
            let room = concurrency - inFlight
            if room > 0 && !queue.isEmpty {
                let jobs = queue.suffix(room).reversed()
                queue.removeLast(min(room, queue.count))
                window.withLockedValue { $0.inFlight += jobs.count }
                inFlight += jobs.count
                for job in jobs {
                    provider.start(job) { outcome, timestamp in
                        window.withLockedValue { w in
                            w.inFlight -= 1
                            w.outcomes.append((job, outcome, timestamp))
                        }
                        completed.yield()
                    }
                }
            }
            if inFlight == 0 && queue.isEmpty && drained { break }
            if inFlight > 0 {
                _ = await wake.next()
            }
            await recordDue(false)
            // New rows may have been queued meanwhile (a campaign queues in batches): look again, at most every 20 ms.
            if drained && ContinuousClock.now - drainedAt > .milliseconds(20) { drained = false }
        }
        completed.finish()
    }

    private func claim(limit: Int) async throws -> [DeliveryJob] {
        let now = Date().timeIntervalSince1970
        let pid = Int(getpid())
        return try await database.write { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT d.id, d.notificationId, d.registrationId, d.target, d.pushId, d.attempts, n.push, n.mode, r.updatedAt AS registrationUpdatedAt
                FROM deliveries d JOIN notifications n ON n.id = d.notificationId
                LEFT JOIN registrations r ON r.id = d.registrationId
                WHERE d.state = 'pending' AND d.nextAttemptAt <= ?
                ORDER BY d.nextAttemptAt, d.id LIMIT ?
                """, arguments: [now, limit])
            let jobs = rows.map { row in
                DeliveryJob(id: row["id"], notificationId: row["notificationId"], registrationId: row["registrationId"], target: row["target"],
                            payload: row["push"], mode: PushMode(rawValue: row["mode"]) ?? .silent, pushId: row["pushId"], attempts: row["attempts"],
                            registrationUpdatedAt: (row["registrationUpdatedAt"] as Double?).map(Date.init(timeIntervalSince1970:)))
            }
            let takeLease = try db.cachedStatement(sql: "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = ?, leaseTag = ? WHERE id = ?")
            for job in jobs {
                try takeLease.execute(arguments: [now + lease, pid, leaseTag, job.id])
            }
            return jobs
        }
    }

    /// Leases held by processes that no longer exist become due now, and so do those of an
    /// earlier process that had this one's pid.
    private func reclaimDeadLeases() async throws {
        let pid = Int(getpid()), tag = leaseTag
        let now = Date().timeIntervalSince1970
        try await database.write { db in
            try db.execute(sql: """
                UPDATE deliveries SET nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL
                WHERE state = 'pending' AND leasedBy = ? AND (leaseTag IS NULL OR leaseTag != ?)
                """, arguments: [now, pid, tag])
        }
        let holders = try await database.read { db in
            try Int.fetchAll(db, sql: "SELECT DISTINCT leasedBy FROM deliveries WHERE state = 'pending' AND leasedBy IS NOT NULL")
        }
        let dead = holders.filter { pid in pid != Int(getpid()) && kill(pid_t(pid), 0) != 0 && errno == ESRCH }
        guard !dead.isEmpty else { return }
        try await database.write { db in
            for pid in dead {
                try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = NULL WHERE state = 'pending' AND leasedBy = ?",
                               arguments: [now, pid])
            }
        }
        logger.info("took back deliveries leased by processes that died", metadata: ["pids": "\(dead)"])
    }

    private func record(_ results: [(DeliveryJob, DeliveryOutcome, Date?)]) async throws {
        let now = Date().timeIntervalSince1970
        let counts = try await database.write { db in
            var counts: [String: Int] = [:]
            for (job, outcome, timestamp) in results {
                counts[try self.record(db, job, outcome: outcome, timestamp: timestamp, now: now), default: 0] += 1
            }
            return counts
        }
        for (outcome, count) in counts {
            Counter(label: "richpush_pushes_total", dimensions: [("outcome", outcome)]).increment(by: count)
        }
        for (job, outcome, _) in results {
            if case .failed(let reason, let prune) = outcome {
                logger.notice("push failed", metadata: ["delivery": "\(job.id)", "reason": "\(reason)", "pruned": "\(prune)"])
            }
        }
    }

    /// Records one outcome inside the batch's transaction; returns the metrics outcome.
    ///
    /// Only while this dispatcher still holds the row's lease: if it lapsed and another took the
    /// row, the other's outcome stands (the push went out twice, at-least-once; nothing is
    /// overwritten or pruned by a holder that no longer holds it).
    private func record(_ db: Database, _ job: DeliveryJob, outcome: DeliveryOutcome, timestamp: Date?, now: Double) throws -> String {
        let attempts = job.attempts + 1
        let held = "AND leaseTag = ? AND state = 'pending'"
        switch outcome {
        case .sent:
            try db.cachedStatement(sql: "UPDATE deliveries SET state = 'sent', attempts = ?, reason = NULL, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? \(held)")
                .execute(arguments: [attempts, now, job.id, leaseTag])
            return db.changesCount > 0 ? "sent" : "lease_lost"
        case .failed(let reason, let prune):
            try db.cachedStatement(sql: "UPDATE deliveries SET state = 'failed', attempts = ?, reason = ?, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? \(held)")
                .execute(arguments: [attempts, reason, now, job.id, leaseTag])
            guard db.changesCount > 0 else { return "lease_lost" }
            // 410 only prunes a registration that has not been renewed since Apple saw the token die,
            // and that nobody changed since this push was claimed (a device may have registered again meanwhile).
            let renewedSince = timestamp.map { stamp in (job.registrationUpdatedAt ?? .distantPast) > stamp } ?? false
            if prune, let registration = job.registrationId, let claimedVersion = job.registrationUpdatedAt, !renewedSince {
                try db.execute(sql: "DELETE FROM registrations WHERE id = ? AND updatedAt = ?",
                               arguments: [registration, claimedVersion.timeIntervalSince1970])
                guard db.changesCount > 0 else { return "failed" }
                try db.execute(
                    sql: "UPDATE deliveries SET state = 'failed', reason = ?, leasedBy = NULL, updatedAt = ? WHERE registrationId = ? AND state = 'pending'",
                    arguments: ["device registration removed after \(reason)", now, registration])
            }
            return "failed"
        case .retry(let reason, let after):
            if attempts >= maxAttempts {
                try db.execute(sql: "UPDATE deliveries SET state = 'failed', attempts = ?, reason = ?, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? \(held)",
                               arguments: [attempts, "gave up after \(attempts) attempts: \(reason)", now, job.id, leaseTag])
                return db.changesCount > 0 ? "failed" : "lease_lost"
            }
            let delay = after ?? backoff(attempt: attempts)
            try db.execute(sql: "UPDATE deliveries SET attempts = ?, reason = ?, nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? \(held)",
                           arguments: [attempts, "retrying: \(reason)", now + delay, now, job.id, leaseTag])
            return db.changesCount > 0 ? "retried" : "lease_lost"
        }
    }

    /// Capped exponential backoff with full jitter in its upper half.
    func backoff(attempt: Int) -> Double {
        let ceiling = min(backoffCap, backoffBase * pow(2, Double(attempt - 1)))
        return ceiling / 2 + Double.random(in: 0...(ceiling / 2))
    }
}
