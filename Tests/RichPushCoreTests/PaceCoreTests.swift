import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: paced campaigns (SPEC §22)")
struct PaceCoreTests {
    @Test("a paced campaign's pushes are due one step apart, across batches; only what is due is claimed; each push lives from its turn; progress says when the last goes out")
    func pace() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(250)
        try await f.registerDevices(names)
        var store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        store.batchSize = 100
        let started = Date().timeIntervalSince1970
        let content = NotificationDraft(message: "sale", title: "T", mode: .alert, options: PushOptions(expiresIn: 60))
        let campaign = try await store.create(CampaignDraft(audience: .all, content: content, ratePerMinute: 600), by: "admin")
        _ = try await store.queue(campaign.id, addressing: .perDevice)
        let queued = Date().timeIntervalSince1970
        let due = try await f.database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT dueAt FROM deliveries WHERE campaignId = ? ORDER BY dueAt", arguments: [campaign.id]).map { $0["dueAt"] as Double }
        }
        #expect(due.count == 250)
        // The first turn is when it was queued (bounds read from the clock, not a time limit: a slow machine passes too).
        #expect(due[0] >= started - 0.01 && due[0] <= queued + 0.01, "\(due[0] - started)")
        // 600 a minute: a tenth of a second apart, the three batches continuing one another.
        let steps = zip(due.dropFirst(), due).map { $0 - $1 }
        #expect(steps.allSatisfy { abs($0 - 0.1) < 0.001 }, "\(steps.filter { abs($0 - 0.1) >= 0.001 }.prefix(5))")
        let progress = try #require(try await store.progress(campaign.id))
        #expect(progress.campaign.ratePerMinute == 600)
        // The last turn; when the outbox is behind, the pending pushes one step apart from now
        // (read around the property, which reads the clock: no bound on how long the test took).
        #expect(progress.pending == 250)
        let before = Date().timeIntervalSince1970
        let end = try #require(progress.expectedEnd).timeIntervalSince1970
        let after = Date().timeIntervalSince1970
        let behind = Double(progress.pending - 1) * 0.1
        #expect(end >= max(due.last!, before + behind) - 0.01 && end <= max(due.last!, after + behind) + 0.01,
                "\(end - due.last!)")
        // Each term on its own (here the pending always reach past the last turn): a last turn
        // ahead of the pending is the end; pending behind the pace end one step apart from now.
        var ahead = progress
        ahead.campaign.paceNextAt = Date(timeIntervalSinceNow: 100)
        ahead.pending = 1
        #expect(ahead.expectedEnd == ahead.campaign.paceNextAt!.addingTimeInterval(-0.1))
        var behindPace = progress
        behindPace.campaign.paceNextAt = Date(timeIntervalSinceNow: -100)
        behindPace.pending = 11
        let (from, lateEnd, to) = (Date(), try #require(behindPace.expectedEnd), Date())
        #expect(lateEnd >= from.addingTimeInterval(1.0) && lateEnd <= to.addingTimeInterval(1.0))
        // Each inbox entry shows from its push's turn: the first recipient's now, the last one's (25 s out) not yet.
        func recipient(_ order: String) async throws -> String {
            try #require(try await f.database.read { db in
                try String.fetchOne(db, sql: """
                    SELECT n.recipient FROM deliveries d JOIN notifications n ON n.id = d.notificationId
                    WHERE d.campaignId = ? ORDER BY d.dueAt \(order) LIMIT 1
                    """, arguments: [campaign.id])
            })
        }
        let inbox = NotificationStore(database: f.database)
        #expect(try await inbox.list(for: recipient("ASC")).count == 1)
        #expect(try await inbox.list(for: recipient("DESC")).isEmpty)
        // Only what is due is claimed now (the first push or two), not the whole campaign.
        let outbox = OutboxStore(database: f.database)
        let claimFrom = Date().timeIntervalSince1970
        let claimed = try await outbox.claim(limit: 500, lease: 30, holder: OutboxHolder(pid: 1))
        let claimTo = Date().timeIntervalSince1970
        // Those due by the claim's clock: bounded by the clock read around it, not by how long the test took.
        #expect(claimed.count >= due.filter { $0 <= claimFrom - 0.01 }.count && claimed.count <= due.filter { $0 <= claimTo + 0.01 }.count
                && claimed.count < 250, "\(claimed.count)")
        // A push's 60 s of life count from its turn: the last one, 25 s out, lives until 85 s from now.
        try await f.database.write { db in
            try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = 0 WHERE campaignId = ? AND leasedBy IS NULL", arguments: [campaign.id])
        }
        let rest = try await outbox.claim(limit: 500, lease: 30, holder: OutboxHolder(pid: 1))
        #expect(rest.count == 250 - claimed.count)
        let lastLife = try #require(rest.compactMap(\.expiresAt).max()).timeIntervalSince1970
        #expect(abs(lastLife - (due.last! + 60)) < 0.01)
        #expect(rest.allSatisfy { $0.remainingLife() != nil })
    }

    @Test("a push's remaining life: what is left of expiresIn, nil once it ended (failed, never sent late); expiresIn 0 is sent with a life of 0 within its short window, then failed")
    func remainingLife() {
        let now = Date()
        var job = DeliveryJob(id: 1, notificationId: 1, target: "t", payload: Data(), pushId: "p")
        job.options = PushOptions(expiresIn: 3600)
        job.expiresAt = now.addingTimeInterval(100)
        #expect(job.remainingLife(now: now) == 100)
        job.expiresAt = now.addingTimeInterval(-1)
        #expect(job.remainingLife(now: now) == nil)
        job.options = PushOptions(expiresIn: 0)
        job.expiresAt = now.addingTimeInterval(DeliveryJob.nowOrNeverWindow / 2)
        #expect(job.remainingLife(now: now) == 0)
        job.expiresAt = now.addingTimeInterval(-1)
        #expect(job.remainingLife(now: now) == nil)
        #expect(job.expiredReason.contains("expired"))
    }

    @Test("a pace out of range is refused")
    func badPace() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        for rate in [0, -5, Campaign.maxRatePerMinute + 1] {
            await #expect(throws: CoreError.self) {
                _ = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "x", mode: .alert), ratePerMinute: rate), by: "admin")
            }
        }
    }
}
