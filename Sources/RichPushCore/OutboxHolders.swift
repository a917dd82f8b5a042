import Foundation
import SQLEngine

/// The outbox's holders (`outbox_holders`): each dispatcher says it is alive, renews its leases
/// and gives them back when it stops; the others take back a dead one's (docs/design/outbox.md).
extension OutboxStore {
    /// Says that `holder` is alive (a shared database has no pid to look at): its leases are
    /// safe while it says so at least every `OutboxStore.holderTimeout` seconds.
    public func heartbeat(holder: OutboxHolder) async throws {
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: """
                INSERT INTO outbox_holders (tag, pid, host, seenAt, outboxVersion) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tag) DO UPDATE SET seenAt = excluded.seenAt
                """, arguments: [holder.tag, holder.pid, Self.hostName, db.now, Self.outboxVersion])
        }
    }

    /// How this version leases (`outbox_holders.outboxVersion`): in `leaseUntil` (2), and it
    /// claims a campaign's runs (3, `OutboxRuns.version`). A holder with none is from before
    /// core-v28 and leases by moving `nextAttemptAt`.
    static let outboxVersion = OutboxRuns.version

    /// Whether a holder from before core-v28 said it was alive within `holderTimeout`.
    static func olderHolderAlive(_ db: SQLConnection, now: Double) throws -> Bool {
        try Int.fetchOne(db, sql: "SELECT 1 FROM outbox_holders WHERE outboxVersion IS NULL AND seenAt >= ? LIMIT 1",
                         arguments: [now - holderTimeout], cached: true) != nil
    }

    /// When a row's lease ends, whoever leased it: `leaseUntil`, or `nextAttemptAt` where a holder
    /// from before core-v28 moved it (a row is leased while its `leaseTag` is set and this is ahead).
    static let leaseEnd = "CASE WHEN leaseUntil > nextAttemptAt THEN leaseUntil ELSE nextAttemptAt END"

    /// `holder` stops: its row goes and its pending leases are due now, as another node would
    /// make them `holderTimeout` seconds later had it died (a graceful stop need not make
    /// anyone wait for that, nor leave a row that a later start reports as a dead dispatcher).
    public func retire(holder: OutboxHolder) async throws {
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: """
                UPDATE deliveries SET nextAttemptAt = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending' AND leaseTag = ?
                """, arguments: [db.now, holder.tag])
            try db.execute(sql: """
                UPDATE activity_pushes SET nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending' AND leaseTag = ?
                """, arguments: [db.now, holder.tag])
            try db.execute(sql: """
                UPDATE outbox_runs SET nextAttemptAt = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending' AND leaseTag = ?
                """, arguments: [db.now, holder.tag])
            try db.execute(sql: "DELETE FROM outbox_holders WHERE tag = ?", arguments: [holder.tag])
        }
    }

    /// This machine's name, read once (it may take a DNS lookup), for `outbox_holders`.
    static let hostName = ProcessInfo.processInfo.hostName

    /// How long a holder may go without a heartbeat before its leases are taken back.
    public static let holderTimeout: Double = 15

    /// Extends every lease `holder` still has by `lease` seconds from now.
    public func renew(holder: OutboxHolder, lease: Double) async throws {
        let now = database.now()
        try await database.write(isolation: .readCommitted) { db in
            // The due time moves with the lease where a claim moved it there (it is ahead), and on
            // every row while a holder from before core-v28 is alive (its claims see only
            // `nextAttemptAt`; rows leased before it came too).
            let movedIfAfter = try Self.olderHolderAlive(db, now: now) ? -Double.greatestFiniteMagnitude : now
            try db.execute(sql: """
                UPDATE deliveries SET leaseUntil = ?, nextAttemptAt = CASE WHEN nextAttemptAt > ? THEN ? ELSE nextAttemptAt END
                WHERE leaseTag = ? AND state = 'pending' AND leaseUntil > ?
                """, arguments: [now + lease, movedIfAfter, now + lease, holder.tag, now])
            try db.execute(sql: "UPDATE activity_pushes SET nextAttemptAt = ? WHERE leaseTag = ? AND state = 'pending' AND nextAttemptAt > ?",
                           arguments: [now + lease, holder.tag, now])
            try db.execute(sql: "UPDATE outbox_runs SET leaseUntil = ? WHERE leaseTag = ? AND state = 'pending' AND leaseUntil > ?",
                           arguments: [now + lease, holder.tag, now])
        }
    }

    /// Makes due now the deliveries leased by holders that are gone, and returns who they were.
    ///
    /// A holder is gone when its heartbeat is older than `holderTimeout` (any engine: this is
    /// how one node takes back a dead node's work). Given `isAlive` (at a dispatcher's start), on
    /// SQLite, where every holder runs on this machine, also when its process no longer exists
    /// (`isAlive` says, given a pid) or is an earlier process that had `holder`'s pid.
    public func reclaimDeadLeases(holder: OutboxHolder, isAlive: (@Sendable (Int) -> Bool)? = nil) async throws -> [String] {
        let now = database.now()
        var gone: [String] = []
        let silent = try await database.write(isolation: .readCommitted) { db -> [String] in
            // Deleting the holder's row re-checks it under its row lock: a heartbeat that lands
            // meanwhile keeps the holder (and its leases) alive.
            let stale = try SQLRow.fetchAll(db, sql: """
                DELETE FROM outbox_holders WHERE seenAt < ? AND tag != ? RETURNING tag, pid, host
                """, arguments: [now - Self.holderTimeout, holder.tag])
            for row in stale {
                try db.execute(sql: """
                    UPDATE deliveries SET nextAttemptAt = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending' AND leaseTag = ?
                    """, arguments: [now, row["tag"] as Int64])
                try db.execute(sql: """
                    UPDATE activity_pushes SET nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending' AND leaseTag = ?
                    """, arguments: [now, row["tag"] as Int64])
                try db.execute(sql: """
                    UPDATE outbox_runs SET nextAttemptAt = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending' AND leaseTag = ?
                    """, arguments: [now, row["tag"] as Int64])
            }
            return stale.map { "\($0["host"] as String)/\($0["pid"] as Int)" }
        }
        gone += silent
        guard database.dialect == .sqlite, let isAlive else { return gone }
        try await database.write { db in
            try db.execute(sql: """
                UPDATE deliveries SET nextAttemptAt = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL
                WHERE state = 'pending' AND leasedBy = ? AND (leaseTag IS NULL OR leaseTag != ?)
                """, arguments: [now, holder.pid, holder.tag])
            try db.execute(sql: """
                UPDATE activity_pushes SET nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL
                WHERE state = 'pending' AND leasedBy = ? AND (leaseTag IS NULL OR leaseTag != ?)
                """, arguments: [now, holder.pid, holder.tag])
        }
        let holders = try await database.read { db in
            try Int.fetchAll(db, sql: """
                SELECT DISTINCT leasedBy FROM deliveries WHERE state = 'pending' AND leasedBy IS NOT NULL
                UNION SELECT DISTINCT leasedBy FROM activity_pushes WHERE state = 'pending' AND leasedBy IS NOT NULL
                """)
        }
        let dead = holders.filter { $0 != holder.pid && !isAlive($0) }
        guard !dead.isEmpty else { return gone }
        try await database.write { db in
            for pid in dead {
                try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, leaseUntil = NULL, leasedBy = NULL WHERE state = 'pending' AND leasedBy = ?",
                               arguments: [now, pid])
                try db.execute(sql: "UPDATE activity_pushes SET nextAttemptAt = ?, leasedBy = NULL WHERE state = 'pending' AND leasedBy = ?",
                               arguments: [now, pid])
            }
        }
        return gone + dead.map { "pid \($0)" }
    }
}
