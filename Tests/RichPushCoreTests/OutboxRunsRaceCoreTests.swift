import Foundation
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

@Suite("Runs of pushes under two holders, a doubled record, a user removed after a send, and a copy to another store",
       .enabled(if: StoreEngine.all.contains(.shared)))
struct OutboxRunsRaceCoreTests {
    @Test("two holders claiming at once take different runs; a push listed twice in one record is recorded by its first result (retried then sent: one row, and lease_lost); a run's sentAt is its last send; a user removed after their push was sent takes its sent bit with them")
    func racesAndDoubles() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 450)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let one = OutboxHolder(pid: 1), two = OutboxHolder(pid: 2)
        async let a = store.outbox.claim(limit: 200, lease: 300, holder: one)
        async let b = store.outbox.claim(limit: 200, lease: 300, holder: two)
        let (first, second) = try await (a, b)
        let run = { (job: DeliveryJob) in OutboxRuns.place(of: job.id).run }
        #expect(first.count == 200 && second.count == 200, "\(first.count), \(second.count)")
        #expect(Set(first.map(run)).count == 1 && Set(second.map(run)).count == 1 && Set(first.map(run)).isDisjoint(with: second.map(run)))

        let before = store.database.now()
        let (retried, sent) = (first[0], first[1])
        let labels = try await store.outbox.record([(retried, .retry(reason: "TooManyRequests", at: Date().addingTimeInterval(3600))), (retried, .sent),
                                                    (sent, .sent), (sent, .sent)], holder: one)
        #expect(labels == ["retried", "lease_lost", "sent", "lease_lost"])
        let sentRun = run(sent)
        let (rows, sentAt) = try await store.database.read { db in
            (try db.fetchAll(sql: "SELECT pushId, state FROM deliveries WHERE campaignId = ?", arguments: [campaign.id]),
             try Double.fetchOne(db, sql: "SELECT sentAt FROM outbox_runs WHERE id = ?", arguments: [sentRun]))
        }
        #expect(rows.count == 1 && rows.first?["pushId"] as String? == retried.pushId && rows.first?["state"] as String? == "pending")
        var runs = try await OutboxRunsCoreTests.runs(store, campaign: campaign.id)
        let place = { (job: DeliveryJob) in OutboxRuns.place(of: job.id).index }
        #expect(runs[run(sent)]?.sent == [place(sent)] && runs[run(sent)]?.settled == [place(retried), place(sent)])
        #expect(runs[run(sent)]?.remaining == 198)
        #expect(sentAt.map { $0 >= before - 1 && $0 <= store.database.now() + 1 } == true, "\(String(describing: sentAt))")

        // Their inbox, and what was sent to them, go with the user.
        try await store.users.remove(name: try #require(sent.recipient))
        runs = try await OutboxRunsCoreTests.runs(store, campaign: campaign.id)
        #expect(runs[run(sent)]?.sent.isEmpty == true && runs[run(sent)]?.remaining == 198)
        let listed = try await store.deliveries.list(campaign: campaign.id, limit: 1000)
        #expect(!listed.contains { $0.notificationId == sent.notificationId })
        #expect(listed.count == 449, "the retried row, and 448 pushes in runs")
    }

    @Test("a copy from PostgreSQL to PostgreSQL, and to SQLite, writes a run's pushes sent or still to send as rows after the rows copied (ids the target's own); a removed user's push is not among them")
    func copiedAsRows() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 5)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let holder = OutboxHolder(pid: 1)
        let claimed = try await store.outbox.claim(limit: 200, lease: 300, holder: holder)
        try #require(claimed.count == 5)
        // Two sent, one failed (a row of its own), two still to send; then the user of one sent push is removed.
        _ = try await store.outbox.record([(claimed[0], .sent), (claimed[1], .sent),
                                           (claimed[2], .failed(reason: "BadDeviceToken", prune: false, deadSince: nil))], holder: holder)
        try await store.users.remove(name: try #require(claimed[1].recipient))
        let expected: [String: String] = [claimed[0].pushId: "sent", claimed[2].pushId: "failed", claimed[3].pushId: "pending", claimed[4].pushId: "pending"]

        // (`richpush migrate` moves an embedded store to PostgreSQL; a copy from PostgreSQL is the one that meets runs.)
        for target in ["postgres", "sqlite"] {
            let targetDir = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: targetDir) }
            let locations = target == "postgres" ? try await StoreEngine.shared.locations() : nil
            let copy = try await DataStore.open(path: targetDir.path, database: locations?.database, blobs: locations?.blobs,
                                                environment: locations?.environment ?? ProcessInfo.processInfo.environment)
            defer { copy.close() }
            _ = try await store.copy(to: copy)
            let rows = try await copy.database.read { db in
                try db.fetchAll(sql: "SELECT id, pushId, state FROM deliveries WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
            }
            var states: [String: String] = [:]
            for row in rows { states[row["pushId"]] = row["state"] }
            #expect(states == expected, "\(target): \(states)")
            #expect(Set(rows.map { $0["id"] as Int64 }).count == rows.count && rows.allSatisfy { ($0["id"] as Int64) > 0 }, "\(target)")
            // A push the target queues after the copy takes an id of its own.
            let more = try await copy.database.write { db in
                try Int64.fetchOne(db, sql: """
                    INSERT INTO deliveries (notificationId, campaignId, registrationId, target, platform, app, state, attempts, pushId, nextAttemptAt, createdAt, updatedAt)
                    SELECT notificationId, campaignId, registrationId, target, platform, app, 'pending', 0, 'after-copy', 0, 0, 0 FROM deliveries WHERE campaignId = ? LIMIT 1
                    RETURNING id
                    """, arguments: [campaign.id])
            }
            #expect(more.map { id in !rows.contains { $0["id"] as Int64 == id } } == true, "\(target)")
        }
    }
}
