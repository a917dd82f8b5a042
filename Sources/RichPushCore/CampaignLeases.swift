import Foundation
import SQLEngine

#if canImport(Glibc)
import Glibc
#endif

extension CampaignStore {
    /// How long a node holds a campaign it queues (renewed with each batch).
    static let lease: Double = 120

    /// This process's mark on the campaigns it leases (a pid is no name across machines or containers).
    static let holder = Int64.random(in: 1 ... Int64(Int32.max))

    /// Takes the lease on campaign `id` if nobody holds it; whether this node has it now.
    func claim(_ id: Int64) async throws -> Bool {
        try await database.write(isolation: .readCommitted) { db in
            let now = db.now
            try db.execute(sql: """
                UPDATE campaigns SET leaseUntil = ?, queuedBy = ? WHERE id = ? AND queued = 0 AND cancelledAt IS NULL
                    AND (leaseUntil IS NULL OR leaseUntil < ?)
                """, arguments: [now + Self.lease, Self.holder, id, now])
            return db.changesCount == 1
        }
    }

    /// Gives this process's lease back (another node may take the campaign's next zone).
    func release(_ id: Int64) async throws {
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: "UPDATE campaigns SET leaseUntil = NULL WHERE id = ? AND queuedBy = ?", arguments: [id, Self.holder])
        }
    }

    /// Ends this node's lease on campaign `id` while it is not wholly queued, so that any node's
    /// `resumeUnfinished` finishes it within seconds (a process stopping mid-campaign).
    public func letLeaseLapse(_ id: Int64) async throws {
        try await database.write(isolation: .readCommitted) { db in
            // Only a lease this process holds: another node may have taken the campaign over since.
            try db.execute(sql: "UPDATE campaigns SET leaseUntil = 0 WHERE id = ? AND queued = 0 AND queuedBy = ?", arguments: [id, Self.holder])
        }
    }

    /// Marks done the campaigns wholly queued with nothing left pending that are not marked yet
    /// (a claim that failed their last pushes, `capped` or `dropped`, finishes them after its
    /// commit; a process that stopped in between leaves them to this); returns their ids.
    @discardableResult
    public func finishStragglers() async throws -> [Int64] {
        try await database.write(isolation: .readCommitted) { db in
            let open = try Int64.fetchAll(db, sql: """
                SELECT id FROM campaigns c WHERE queued = 1 AND doneAt IS NULL AND cancelledAt IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.campaignId = c.id AND d.state = 'pending')
                    AND NOT EXISTS (SELECT 1 FROM outbox_runs r WHERE r.campaignId = c.id AND r.state = 'pending')
                """)
            guard !open.isEmpty else { return [] }
            try Insight.finishCampaigns(db, Set(open), now: db.now, whateverTheCounters: true)
            return try Int64.fetchAll(db, sql: "SELECT id FROM campaigns WHERE doneAt IS NOT NULL AND \(db.idIn("id"))",
                                      arguments: [db.idList(open)])
        }
    }

    /// Queues campaigns left half-queued by processes that died; returns their ids. (Scheduled
    /// campaigns are `runDue`'s: a node's lease on them lapses when it dies.) With `handOff`,
    /// each is leased and handed to it to queue instead (the server's `CampaignQueuer`).
    public func resumeUnfinished(addressing: DeliveryAddressing, handOff: (@Sendable (Int64) -> Void)? = nil,
                                 batchQueued: @Sendable () -> Void = {}) async throws -> [Int64] {
        let pid = Int(getpid())
        let orphans = try await database.write { db -> [Int64] in
            let now = db.now
            let rows = try SQLRow.fetchAll(db, sql: """
                SELECT id, queuedBy, leaseUntil FROM campaigns WHERE queued = 0 AND sendAt IS NULL AND atLocalTime IS NULL AND cancelledAt IS NULL
                """)
            let ids: [Int64] = rows.compactMap { row in
                // Whoever queues a campaign renews its lease with each batch: a live lease is a live
                // holder, a lapsed one a holder that died or gave up (on any machine, whatever its
                // pid). Campaigns made before leases go by their holder's pid on this machine.
                if let until: Double = row["leaseUntil"] { return until < now ? row["id"] : nil }
                let holder: Int? = row["queuedBy"]
                if let holder, holder == pid || kill(pid_t(holder), 0) == 0 || errno == EPERM { return nil }
                return row["id"]
            }
            for id in ids {
                try db.execute(sql: "UPDATE campaigns SET queuedBy = ?, leaseUntil = ? WHERE id = ?", arguments: [Self.holder, now + Self.lease, id])
            }
            return ids
        }
        for id in orphans {
            if let handOff { handOff(id) } else { _ = try await queue(id, addressing: addressing, batchQueued: batchQueued) }
        }
        return orphans
    }
}
