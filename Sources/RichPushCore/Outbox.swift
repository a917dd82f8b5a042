import Foundation
import SQLEngine

/// One push to make, as the outbox hands it to a provider.
public struct DeliveryJob: Sendable {
    public var id: Int64
    public var notificationId: Int64
    public var registrationId: String?
    /// A device token, or a tag such as `username:alice`.
    public var target: String
    /// The push's exact bytes.
    public var payload: Data
    /// Alert or silent: decides `apns-push-type` and `apns-priority`.
    public var mode: PushMode
    /// Sent as `apns-id`; the same on every attempt.
    public var pushId: String
    /// Attempts made before this one.
    public var attempts: Int
    /// When the device's registration last changed (410 prunes only registrations older than Apple's timestamp).
    public var registrationUpdatedAt: Date?

    /// Creates a job.
    public init(id: Int64, notificationId: Int64, registrationId: String? = nil, target: String, payload: Data, mode: PushMode = .silent,
                pushId: String, attempts: Int = 0, registrationUpdatedAt: Date? = nil) {
        self.id = id
        self.notificationId = notificationId
        self.registrationId = registrationId
        self.target = target
        self.payload = payload
        self.mode = mode
        self.pushId = pushId
        self.attempts = attempts
        self.registrationUpdatedAt = registrationUpdatedAt
    }
}

/// Who holds a claim on outbox rows: a process (its pid, so a dead holder's rows can be taken
/// back) and a random tag (so only this holder, not a later process with the same pid, may
/// record their outcomes).
public struct OutboxHolder: Sendable, Equatable {
    public var pid: Int
    public var tag: Int64

    /// A new holder for process `pid`.
    public init(pid: Int, tag: Int64 = .random(in: 1 ... .max)) {
        self.pid = pid
        self.tag = tag
    }
}

/// What to record for one attempt, decided by the dispatcher.
public enum OutboxResult: Sendable, Equatable {
    /// Accepted by the push service.
    case sent
    /// Refused for good. With `prune`, the device's registration goes too, unless it changed
    /// after `deadSince` (Apple's timestamp of the token's death) or after the push was claimed.
    case failed(reason: String, prune: Bool, deadSince: Date?)
    /// Tried again at `at`.
    case retry(reason: String, at: Date)
}

/// The outbox (`deliveries`): claims due pushes under a lease, renews and takes back leases, and
/// records outcomes. The only writer of delivery state; `DeliveryStore` reads it.
public struct OutboxStore: Sendable {
    private let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// Claims up to `limit` due deliveries for `holder`, oldest due first: each is leased for
    /// `lease` seconds (its next attempt moves that far ahead), so nobody else sends it meanwhile.
    public func claim(limit: Int, lease: Double, holder: OutboxHolder) async throws -> [DeliveryJob] {
        let now = Date().timeIntervalSince1970
        return try await database.write { db in
            let rows = try SQLRow.fetchAll(db, sql: """
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
            for job in jobs {
                try db.execute(cached: "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = ?, leaseTag = ? WHERE id = ?",
                               arguments: [now + lease, holder.pid, holder.tag, job.id])
            }
            return jobs
        }
    }

    /// Extends every lease `holder` still has by `lease` seconds from now.
    public func renew(holder: OutboxHolder, lease: Double) async throws {
        let now = Date().timeIntervalSince1970
        try await database.write { db in
            try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ? WHERE leaseTag = ? AND state = 'pending' AND nextAttemptAt > ?",
                           arguments: [now + lease, holder.tag, now])
        }
    }

    /// Makes due now the deliveries leased by processes that no longer exist (`isAlive` says,
    /// given a pid), and those of an earlier process that had `holder`'s pid. Returns the dead pids.
    public func reclaimDeadLeases(holder: OutboxHolder, isAlive: @Sendable (Int) -> Bool) async throws -> [Int] {
        let now = Date().timeIntervalSince1970
        try await database.write { db in
            try db.execute(sql: """
                UPDATE deliveries SET nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL
                WHERE state = 'pending' AND leasedBy = ? AND (leaseTag IS NULL OR leaseTag != ?)
                """, arguments: [now, holder.pid, holder.tag])
        }
        let holders = try await database.read { db in
            try Int.fetchAll(db, sql: "SELECT DISTINCT leasedBy FROM deliveries WHERE state = 'pending' AND leasedBy IS NOT NULL")
        }
        let dead = holders.filter { $0 != holder.pid && !isAlive($0) }
        guard !dead.isEmpty else { return [] }
        try await database.write { db in
            for pid in dead {
                try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = NULL WHERE state = 'pending' AND leasedBy = ?",
                               arguments: [now, pid])
            }
        }
        return dead
    }

    /// Records outcomes in one transaction (one fsync). Returns each one's metrics label:
    /// `sent`, `failed`, `retried`, or `lease_lost` where `holder` no longer held the row (another
    /// took it after the lease lapsed: its outcome stands, nothing is overwritten or pruned).
    public func record(_ results: [(DeliveryJob, OutboxResult)], holder: OutboxHolder) async throws -> [String] {
        let now = Date().timeIntervalSince1970
        return try await database.write { db in
            try results.map { job, result in try Self.record(db, job, result, holder: holder, now: now) }
        }
    }

    private static func record(_ db: SQLConnection, _ job: DeliveryJob, _ result: OutboxResult, holder: OutboxHolder, now: Double) throws -> String {
        let attempts = job.attempts + 1
        let held = "AND leaseTag = ? AND state = 'pending'"
        switch result {
        case .sent:
            try db.execute(cached: "UPDATE deliveries SET state = 'sent', attempts = ?, reason = NULL, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? \(held)",
                           arguments: [attempts, now, job.id, holder.tag])
            return db.changesCount > 0 ? "sent" : "lease_lost"
        case .failed(let reason, let prune, let deadSince):
            try db.execute(cached: "UPDATE deliveries SET state = 'failed', attempts = ?, reason = ?, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? \(held)",
                           arguments: [attempts, reason, now, job.id, holder.tag])
            guard db.changesCount > 0 else { return "lease_lost" }
            // 410 only prunes a registration that has not been renewed since Apple saw the token die,
            // and that nobody changed since this push was claimed (a device may have registered again meanwhile).
            let renewedSince = deadSince.map { stamp in (job.registrationUpdatedAt ?? .distantPast) > stamp } ?? false
            if prune, let registration = job.registrationId, let claimedVersion = job.registrationUpdatedAt, !renewedSince {
                guard try RegistrationStore.prune(db, id: registration, ifUpdatedAt: claimedVersion) else { return "failed" }
                try db.execute(
                    sql: "UPDATE deliveries SET state = 'failed', reason = ?, leasedBy = NULL, updatedAt = ? WHERE registrationId = ? AND state = 'pending'",
                    arguments: ["device registration removed after \(reason)", now, registration])
            }
            return "failed"
        case .retry(let reason, let at):
            try db.execute(sql: "UPDATE deliveries SET attempts = ?, reason = ?, nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? \(held)",
                           arguments: [attempts, reason, at.timeIntervalSince1970, now, job.id, holder.tag])
            return db.changesCount > 0 ? "retried" : "lease_lost"
        }
    }
}
