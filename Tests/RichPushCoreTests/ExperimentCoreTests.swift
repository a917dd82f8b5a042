import Foundation
import SQLEngine
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: an A/B test through queueing, its decision and conversions (SPEC §28)")
struct ExperimentCoreTests {
    @Test("the test group gets its variants (fields left out are the campaign's), holdout and rest nothing; once due, the winner is decided once, by χ² over who was sent it, and the rest gets it; conversions count once per campaign and user, the holdout's apart")
    func wholeTest() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(400)
        try await f.registerDevices(names)
        let store = f.campaigns(batchSize: 100)
        var draft = CampaignDraft(audience: .all, content: NotificationDraft(message: "base", title: "Base", mode: .alert))
        draft.experiment = ExperimentDraft(variants: [ExperimentVariantDraft(name: "A", title: "Title A"), ExperimentVariantDraft(name: "B", message: "Message B")],
                                           testShare: 0.5, holdout: 0.1, winner: ExperimentWinnerDraft(metric: .opened, after: "1h", fallback: nil))
        let campaign = try await store.create(draft, by: "admin")
        #expect(try await store.queue(campaign.id, addressing: .perDevice).queued)
        let state = try #require(try await f.database.read { db in try Experiments.state(db, campaign.id) })
        let arms = Dictionary(uniqueKeysWithValues: names.map { ($0, state.experiment.arm(campaign: campaign.id, user: $0)) })
        let count = { (arm: Int) in arms.values.filter { $0 == arm }.count }
        #expect(count(0) > 0 && count(1) > 0 && count(ExperimentArm.holdout) > 0 && count(ExperimentArm.rest) > 0)
        func inbox() async throws -> [(id: Int64, recipient: String, title: String?, message: String)] {
            try await f.database.read { db in
                try SQLRow.fetchAll(db, sql: "SELECT id, recipient, title, message FROM notifications WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
                    .map { (id: $0["id"] as Int64, recipient: $0["recipient"] as String, title: $0["title"] as String?, message: $0["message"] as String) }
            }
        }
        let tested = try await inbox()
        #expect(tested.count == count(0) + count(1))
        for entry in tested {
            switch arms[entry.recipient] {
            case 0?: #expect(entry.title == "Title A" && entry.message == "base")
            case 1?: #expect(entry.title == "Base" && entry.message == "Message B")
            default: Issue.record("\(entry.recipient) is in arm \(String(describing: arms[entry.recipient])) and got the test")
            }
        }
        let waiting = try #require(try await store.progress(campaign.id))
        #expect(waiting.status == .sending && waiting.experiment?.decidedAt == nil && waiting.experiment?.decideAt != nil)
        #expect(try await store.decideExperiments(addressing: .perDevice).isEmpty) // due in an hour

        // Every user of A opens it, none of B: A wins.
        let notifications = NotificationStore(database: f.database)
        for entry in tested where arms[entry.recipient] == 0 { #expect(try await notifications.markOpened(id: entry.id, recipient: entry.recipient)) }
        try await f.database.write { db in
            try db.execute(sql: "UPDATE campaign_experiments SET decideAt = ? WHERE campaignId = ?", arguments: [db.now - 1, campaign.id])
        }
        #expect(try await store.decideExperiments(addressing: .perDevice) == [campaign.id])
        #expect(try await store.decideExperiments(addressing: .perDevice).isEmpty) // once
        let stats = try #require(try await store.stats(campaign.id)?.experiment)
        #expect(stats.winner == "A" && stats.significant == true)
        #expect(stats.variants.map(\.name) == ["A", "B"] && stats.variants.map(\.users) == [count(0), count(1)])
        #expect(stats.variants.map(\.opened) == [count(0), 0] && stats.holdoutUsers == count(ExperimentArm.holdout))
        let reference = ChiSquared.test([[count(0), 0], [0, count(1)]])
        #expect(stats.statistic == reference.statistic && stats.pValue == reference.pValue)
        // The rest got A's content, queued by the decision; the holdout nothing.
        let all = try await inbox()
        #expect(all.count == count(0) + count(1) + count(ExperimentArm.rest))
        for entry in all.dropFirst(tested.count) {
            #expect(arms[entry.recipient] == ExperimentArm.rest && entry.title == "Title A" && entry.message == "base", "\(entry)")
        }
        let decided = try #require(try await store.progress(campaign.id))
        #expect(decided.experiment?.winner == "A" && decided.experiment?.decidedAt != nil && decided.campaign.queued)

        // Conversions: pushes recorded sent (no push service here), then events.
        try await f.database.write { db in
            try db.execute(sql: "UPDATE deliveries SET state = 'sent', updatedAt = ? WHERE campaignId = ?", arguments: [db.now, campaign.id])
        }
        let buyer = try #require(names.first { arms[$0] == 1 })
        #expect(try await store.recordConversion(user: buyer, name: "purchase") == 1)
        #expect(try await store.recordConversion(user: buyer, name: "purchase") == 0)
        let heldOut = try #require(names.first { arms[$0] == ExperimentArm.holdout })
        #expect(try await store.recordConversion(user: heldOut, name: "sign-up") == 1)
        #expect(try await store.recordConversion(user: heldOut, name: "sign-up") == 0)
        let converted = try #require(try await store.stats(campaign.id))
        #expect(converted.converted == 1)
        #expect(converted.experiment?.variants.map(\.converted) == [0, 1] && converted.experiment?.holdoutConverted == 1)
        let refused = await #expect(throws: CoreError.self) { try await store.recordConversion(user: buyer, name: "no spaces") }
        #expect(refused?.kind == .invalid && refused?.message.hasPrefix("name") == true)
        // Its content stays the variants': a change is refused.
        await #expect(throws: CoreError.self) { try await store.change(campaign.id, ContentChange(message: "one for all")) }
    }
}
