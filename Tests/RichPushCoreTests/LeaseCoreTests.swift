import Foundation
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

@Suite("The outbox's leases: their own column, beside the due time (and beside holders from before it)")
struct LeaseCoreTests {
    /// Each row of campaign `id`'s outbox, by id: its due time, lease end, and holder's tag.
    static func rows(_ store: DataStore, campaign id: Int64) async throws -> [Int64: (due: Double, until: Double?, tag: Int64?)] {
        try await store.database.read { db in
            var rows: [Int64: (due: Double, until: Double?, tag: Int64?)] = [:]
            for row in try db.fetchAll(sql: "SELECT id, nextAttemptAt, leaseUntil, leaseTag FROM deliveries WHERE campaignId = ?", arguments: [id]) {
                rows[row["id"]] = (row["nextAttemptAt"], row["leaseUntil"], row["leaseTag"])
            }
            return rows
        }
    }

    /// A store on `engine` with `users` users of a device each, and a campaign queued to all of
    /// them a row a push (these are the rows' leases; runs have theirs in `OutboxRunsCoreTests`).
    static func queued(_ engine: StoreEngine, users: Int) async throws -> (URL, DataStore, Campaign) {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(engine, users: users, runs: false)
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        return (dir, store, campaign)
    }

    @Test("a claim writes the lease's end and keeps each push's due time; the next claim passes over what is leased; renewing moves only the end; a holder that retires gives its pushes back",
          arguments: StoreEngine.all)
    func leaseKeepsDueTime(engine: StoreEngine) async throws {
        let (dir, store, campaign) = try await Self.queued(engine, users: 20)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let holder = OutboxHolder(pid: 1), other = OutboxHolder(pid: 2)
        try await store.outbox.heartbeat(holder: holder)
        let queued = try await Self.rows(store, campaign: campaign.id)
        let before = store.database.now()
        let first = try await store.outbox.claim(limit: 12, lease: 300, holder: holder)
        let after = store.database.now()
        #expect(first.count == 12)
        var rows = try await Self.rows(store, campaign: campaign.id)
        for job in first {
            let row = try #require(rows[job.id])
            #expect(row.due == queued[job.id]?.due, "push \(job.id) keeps its due time")
            #expect(row.until.map { $0 >= before + 300 && $0 <= after + 300 } == true, "push \(job.id) is leased for 300 s")
            #expect(row.tag == holder.tag)
        }
        // The leased rows are due first and are passed over.
        let second = try await store.outbox.claim(limit: 12, lease: 300, holder: other)
        #expect(second.count == 8 && Set(second.map(\.id)).isDisjoint(with: first.map(\.id)))
        #expect(try await store.outbox.claim(limit: 12, lease: 300, holder: other).isEmpty)
        let afterSecond = store.database.now()

        try await store.outbox.renew(holder: holder, lease: 900)
        rows = try await Self.rows(store, campaign: campaign.id)
        for job in first {
            #expect(rows[job.id]?.due == queued[job.id]?.due)
            #expect(rows[job.id]?.until.map { $0 >= after + 890 } == true, "push \(job.id)'s lease is renewed")
        }
        for job in second { #expect(rows[job.id]?.until.map { $0 <= afterSecond + 300 } == true, "another holder's lease stays") }

        try await store.outbox.retire(holder: holder)
        rows = try await Self.rows(store, campaign: campaign.id)
        for job in first { #expect(rows[job.id]?.until == nil && rows[job.id]?.tag == nil) }
        let again = try await store.outbox.claim(limit: 20, lease: 300, holder: other)
        #expect(Set(again.map(\.id)) == Set(first.map(\.id)))
        #expect(try await store.outbox.record(first.map { ($0, .sent) }, holder: holder) == Array(repeating: "lease_lost", count: 12))
        #expect(try await store.outbox.record(again.map { ($0, .sent) }, holder: other) == Array(repeating: "sent", count: 12))
        rows = try await Self.rows(store, campaign: campaign.id)
        for job in again { #expect(rows[job.id]?.until == nil && rows[job.id]?.tag == nil) }

        // Cancelling leaves the pushes in flight, leased by the column alone: the other holder's eight.
        let progress = try await store.campaigns(links: ClaimCoreTests.links, defaultImage: "logo.png").cancel(campaign.id)
        rows = try await Self.rows(store, campaign: campaign.id)
        #expect(progress.pending == 8 && progress.sent == 12)
        #expect(Set(rows.keys) == Set(first.map(\.id) + second.map(\.id)), "no row of the eight in flight is deleted")
    }

    @Test("on PostgreSQL what a node from before core-v28 writes on a push leased by the column alone (its claim, hold-back, take-back) is refused while that lease lasts, and goes through once it has ended; a lease is judged on PostgreSQL's clock alone",
          .enabled(if: StoreEngine.all.contains(.shared)))
    func olderClaimRefused() async throws {
        let (dir, store, campaign) = try await Self.queued(.shared, users: 3)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let holder = OutboxHolder(pid: 1)
        let claimed = try await store.outbox.claim(limit: 1, lease: 300, holder: holder)
        let id = try #require(claimed.first?.id)
        // The older node's writes, as its code made them: its claim's lease (60 s ahead), a push
        // held back by quiet hours, a dead holder's pushes taken back.
        let olderLease = "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = 9, leaseTag = 99 WHERE id = ?"
        let refused = await #expect(throws: (any Error).self) {
            try await store.database.write { db in try db.execute(sql: olderLease, arguments: [db.now + 60, id]) }
        }
        #expect("\(refused.map { String(describing: $0) } ?? "")".contains("deliveries_lease_kept"))
        await #expect(throws: (any Error).self) {
            try await store.database.write { db in
                try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, reason = 'quiet', leasedBy = NULL, leaseTag = NULL WHERE id = ?",
                               arguments: [db.now + 3600, id])
            }
        }
        await #expect(throws: (any Error).self) {
            try await store.database.write { db in
                try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending' AND leaseTag = ?",
                               arguments: [db.now, holder.tag])
            }
        }
        var rows = try await Self.rows(store, campaign: campaign.id)
        #expect(rows[id]?.tag == holder.tag)
        let others = rows.keys.filter { $0 != id }.sorted()
        // A node whose clock runs 30 s ahead of PostgreSQL's claims a push due in 30 s: accepted.
        try await store.database.write { db in
            try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ? WHERE id = ?", arguments: [db.now + 30, others[1]])
            try db.execute(sql: "UPDATE deliveries SET leaseUntil = ?, leasedBy = 1, leaseTag = 7, leaseOwner = 7 WHERE id = ?",
                           arguments: [db.now + 90, others[1]])
        }
        // A push never leased the older node may lease; and this one once the lease has ended.
        try await store.database.write { db in
            try db.execute(sql: olderLease, arguments: [db.now + 60, others[0]])
            try db.execute(sql: "UPDATE deliveries SET leaseUntil = ? WHERE id = ?", arguments: [db.now - 1, id])
            try db.execute(sql: olderLease, arguments: [db.now + 60, id])
        }
        rows = try await Self.rows(store, campaign: campaign.id)
        #expect(rows[id]?.tag == 99 && rows[others[0]]?.tag == 99 && rows[others[1]]?.tag == 7)
        // Leased either way: not claimed, and in flight to cancelling.
        #expect(try await store.outbox.claim(limit: 3, lease: 300, holder: holder).isEmpty)
        let progress = try await store.campaigns(links: ClaimCoreTests.links, defaultImage: "logo.png").cancel(campaign.id)
        #expect(progress.pending == 3)
    }

    @Test("while a holder from before leases had their own column is alive, a claim moves the due time to the lease's end too (that holder looks only there); its own leases are in flight; once it is silent, claims stop moving it",
          arguments: StoreEngine.all)
    func olderHolderAlive(engine: StoreEngine) async throws {
        let (dir, store, campaign) = try await Self.queued(engine, users: 10)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let holder = OutboxHolder(pid: 1)
        try await store.outbox.heartbeat(holder: holder)
        let queued = try await Self.rows(store, campaign: campaign.id)
        let ids = queued.keys.sorted()
        // An older node, alive: it wrote no version, and leased the first push its way.
        let now = store.database.now()
        try await store.database.write { db in
            try db.execute(sql: "INSERT INTO outbox_holders (tag, pid, host, seenAt) VALUES (99, 9, 'older', ?)", arguments: [now])
            try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = 9, leaseTag = 99 WHERE id = ?", arguments: [now + 300, ids[0]])
        }
        let claimed = try await store.outbox.claim(limit: 4, lease: 300, holder: holder)
        #expect(claimed.map(\.id) == Array(ids[1...4]), "the older node's push is not claimed")
        var rows = try await Self.rows(store, campaign: campaign.id)
        for job in claimed {
            let row = try #require(rows[job.id])
            #expect(row.until != nil && row.due == row.until, "push \(job.id) is due again only at its lease's end")
        }
        try await store.outbox.renew(holder: holder, lease: 900)
        rows = try await Self.rows(store, campaign: campaign.id)
        for job in claimed { #expect(rows[job.id].map { $0.due == $0.until && $0.due >= now + 890 } == true, "push \(job.id) renewed, both") }

        // Cancelling leaves what is in flight, however it was leased: the older node's push and these four.
        let progress = try await store.campaigns(links: ClaimCoreTests.links, defaultImage: "logo.png").cancel(campaign.id)
        rows = try await Self.rows(store, campaign: campaign.id)
        #expect(Set(rows.keys) == Set(ids[0...4]), "cancelled: the pushes not in flight")
        #expect(progress.pending == 5)

        // The older node goes silent: claims lease by the column alone again.
        let (dir2, store2, campaign2) = try await Self.queued(engine, users: 3)
        defer { store2.close(); try? FileManager.default.removeItem(at: dir2) }
        try await store2.database.write { db in
            try db.execute(sql: "INSERT INTO outbox_holders (tag, pid, host, seenAt) VALUES (99, 9, 'older', ?)",
                           arguments: [db.now - OutboxStore.holderTimeout - 1])
        }
        let later = try await store2.outbox.claim(limit: 3, lease: 300, holder: holder)
        #expect(later.count == 3)
        let queued2 = try await Self.rows(store2, campaign: campaign2.id)
        for job in later { #expect(queued2[job.id].map { $0.until != nil && $0.due < $0.until! } == true, "push \(job.id)") }
        // It wakes: renewing moves the due time of leases taken meanwhile to their end.
        try await store2.database.write { db in try db.execute(sql: "UPDATE outbox_holders SET seenAt = ? WHERE tag = 99", arguments: [db.now]) }
        try await store2.outbox.renew(holder: holder, lease: 300)
        let renewed = try await Self.rows(store2, campaign: campaign2.id)
        for job in later { #expect(renewed[job.id].map { $0.until != nil && $0.due == $0.until } == true, "push \(job.id)") }
    }

    /// The outbox as the version before core-v28 left it, in a database migrated to `migrations`
    /// and closed again: a campaign to 12 queued through the store (its queueing names no column
    /// core-v28 adds); then, by that version's own statements, eight pushes leased to a live holder
    /// (tag 99) its way, in the due time, and four of those recorded sent. Returns the campaign,
    /// its pushes' ids and each row as `id state attempts nextAttemptAt leaseTag`.
    static func olderOutbox(_ directory: DataDirectory, postgres: String?, migrations: [SQLMigration]) async throws -> (Int64, [Int64], [String]) {
        let old = DataStore(directory: directory, database: try await onOwnThread { try StoreDatabase.open(directory, migrations: migrations, postgres: postgres) },
                            limits: .default)
        defer { old.close() }
        _ = try await old.media.ingest(file: Fixtures.media.appendingPathComponent("logo.png").path, name: "logo.png")
        let names = (1...12).map { String(format: "user%02d", $0) }
        _ = try await old.users(cost: 4).importUsers(names.map { .init(name: $0, secret: .password("pw"), admin: false, timezone: nil, locale: nil) })
        for (index, name) in names.enumerated() {
            let registration = try await old.registrations.create(for: name)
            _ = try await old.registrations.update(id: registration.id, for: name,
                                                   with: DeviceRegistration(platform: "apns", handle: String(format: "%064x", index + 1), tags: []))
        }
        // That version queued a row a push (today's code, queueing for it, is told so).
        try await old.settings.set(SettingsStore.outboxRuns, "off")
        let campaigns = old.campaigns(links: ClaimCoreTests.links, defaultImage: "logo.png")
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let ids = try await old.database.read { db in
            try Int64.fetchAll(db, sql: "SELECT id FROM deliveries WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
        }
        try #require(ids.count == 12)
        try await old.database.write { db in
            try db.execute(sql: "INSERT INTO outbox_holders (tag, pid, host, seenAt) VALUES (99, 9, 'older', ?)", arguments: [db.now])
            for id in ids[0..<8] {
                try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = 9, leaseTag = 99 WHERE id = ?", arguments: [db.now + 300, id])
            }
            for id in ids[4..<8] {
                try db.execute(sql: "UPDATE deliveries SET state = 'sent', attempts = attempts + 1, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? AND leaseTag = 99",
                               arguments: [db.now, id])
            }
        }
        let kept = try await old.database.read { db in
            try db.fetchAll(sql: "SELECT id, state, attempts, nextAttemptAt, leaseTag FROM deliveries ORDER BY id").map { row in
                "\(row["id"] as Int64) \(row["state"] as String) \(row["attempts"] as Int) \(row["nextAttemptAt"] as Double) \(row["leaseTag"] as Int64? ?? 0)"
            }
        }
        return (campaign.id, ids, kept)
    }

    @Test("core-v28 over a populated outbox from before it: every row kept as it was; an older holder's leases (in the due time) stay its own until they end and its records land; the rest are claimed the new way; on PostgreSQL the check is added without a scan and holds on the old rows once they are leased anew",
          arguments: StoreEngine.all)
    func populatedUpgrade(engine: StoreEngine) async throws {
        let locations = try await engine.locations()
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let directory = DataDirectory(path: dir.path)
        var url: String?
        if let database = locations.database, case .postgres(let found) = try DatabaseLocation(database) { url = found }
        let postgres = url
        let before = Array(CoreDatabase.migrations.prefix { $0.identifier != "core-v28-lease-until" })
        #expect(before.count < CoreDatabase.migrations.count && CoreDatabase.migrations[before.count].identifier == "core-v28-lease-until")

        let (campaign, ids, kept) = try await Self.olderOutbox(directory, postgres: postgres, migrations: before)
        let olderLease = "UPDATE deliveries SET nextAttemptAt = ?, leasedBy = 9, leaseTag = 99 WHERE id = ?"
        let olderRecord = "UPDATE deliveries SET state = 'sent', attempts = attempts + 1, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? AND leaseTag = 99"

        // Connecting and migrating block: on a thread of their own, not one of the test pool's.
        let store = DataStore(directory: directory, database: try await onOwnThread { try CoreDatabase.open(directory, postgres: postgres) }, limits: .default)
        defer { store.close() }
        let upgraded = try await store.database.read { db in
            try db.fetchAll(sql: "SELECT id, state, attempts, nextAttemptAt, leaseTag, leaseUntil, leaseOwner FROM deliveries ORDER BY id").map { row in
                "\(row["id"] as Int64) \(row["state"] as String) \(row["attempts"] as Int) \(row["nextAttemptAt"] as Double) \(row["leaseTag"] as Int64? ?? 0)"
                    + " \(row["leaseUntil"] as Double? ?? -1) \(row["leaseOwner"] as Int64? ?? -1)"
            }
        }
        #expect(upgraded == kept.map { $0 + " -1.0 -1" }, "every row as the version before left it, the new columns empty")
        if postgres != nil {
            let (validated, options) = try await store.database.read { db in
                (try Bool.fetchOne(db, sql: "SELECT convalidated FROM pg_constraint WHERE conname = 'deliveries_lease_kept'"),
                 try String.fetchOne(db, sql: "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'deliveries'"))
            }
            #expect(validated == false, "added NOT VALID: the rows already there are not scanned")
            #expect(options == "fillfactor=40")
        }

        // A new holder claims the four waiting, not the older holder's four in flight; with that
        // holder alive, its claims move their due time too.
        let holder = OutboxHolder(pid: 1)
        try await store.outbox.heartbeat(holder: holder)
        try await store.database.write { db in try db.execute(sql: "UPDATE outbox_holders SET seenAt = ? WHERE tag = 99", arguments: [db.now]) }
        let claimed = try await store.outbox.claim(limit: 12, lease: 300, holder: holder)
        #expect(claimed.map(\.id) == Array(ids[8..<12]))
        var rows = try await Self.rows(store, campaign: campaign)
        for job in claimed { #expect(rows[job.id].map { $0.until != nil && $0.due == $0.until && $0.tag == holder.tag } == true, "push \(job.id)") }
        // The older holder records one of its pushes, as its code does; then it dies, and its
        // three other leases end: they are claimed the new way.
        try await store.database.write { db in
            try db.execute(sql: olderRecord, arguments: [db.now, ids[0]])
            try db.execute(sql: "UPDATE outbox_holders SET seenAt = ? WHERE tag = 99", arguments: [db.now - OutboxStore.holderTimeout - 1])
            for id in ids[1..<4] { try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ? WHERE id = ?", arguments: [db.now - 1, id]) }
        }
        let retaken = try await store.outbox.claim(limit: 12, lease: 300, holder: holder)
        #expect(retaken.map(\.id) == Array(ids[1..<4]))
        rows = try await Self.rows(store, campaign: campaign)
        for job in retaken { #expect(rows[job.id].map { $0.until != nil && $0.due < $0.until! && $0.tag == holder.tag } == true, "push \(job.id)") }
        if postgres != nil {
            // A row from before, leased anew by the column: the older claim is refused on it.
            let refused = await #expect(throws: (any Error).self) {
                try await store.database.write { db in try db.execute(sql: olderLease, arguments: [db.now + 60, ids[1]]) }
            }
            #expect("\(refused.map { String(describing: $0) } ?? "")".contains("deliveries_lease_kept"))
        }
        #expect(try await store.outbox.record((claimed + retaken).map { ($0, .sent) }, holder: holder) == Array(repeating: "sent", count: 7))
        let states = try await store.database.read { db in
            try String.fetchAll(db, sql: "SELECT state FROM deliveries WHERE campaignId = ? ORDER BY id", arguments: [campaign])
        }
        #expect(states == Array(repeating: "sent", count: 12))
    }

    @Test("on PostgreSQL a lease changes no indexed column and finds room on its page: it is a HOT update (no index entry written)",
          .enabled(if: StoreEngine.all.contains(.shared)))
    func leaseIsHeapOnly() async throws {
        let (dir, store, _) = try await Self.queued(.shared, users: 40)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let (indexes, options) = try await store.database.read { db in
            (try String.fetchAll(db, sql: "SELECT indexdef FROM pg_indexes WHERE tablename = 'deliveries'"),
             try String.fetchOne(db, sql: "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'deliveries'"))
        }
        #expect(indexes.count >= 4)
        for index in indexes {
            #expect(!["leaseuntil", "leasedby", "leasetag", "leaseowner"].contains { index.lowercased().contains($0) }, "\(index)")
        }
        #expect(options == "fillfactor=40")
        let claimed = try await store.outbox.claim(limit: 30, lease: 300, holder: OutboxHolder(pid: 1))
        #expect(claimed.count == 30)
        // The claim's connection reports its counts once it is idle, within seconds, all at once;
        // nothing else updated the outbox of this new database.
        var counts: (updated: Int, heapOnly: Int) = (0, 0)
        for _ in 0..<300 where counts.updated < 30 {
            counts = try await store.database.read { db in
                let row = try #require(try db.fetchAll(sql: "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'deliveries'").first)
                return (row["n_tup_upd"], row["n_tup_hot_upd"])
            }
            if counts.updated < 30 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(counts.updated == 30 && counts.heapOnly == 30, "\(counts)")
    }
}
