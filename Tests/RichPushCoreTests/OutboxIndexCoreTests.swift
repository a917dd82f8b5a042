import Foundation
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

@Suite("A campaign's outbox indexes")
struct OutboxIndexCoreTests {
    @Test("on SQLite a campaign's pushes are indexed by campaign, with partial indexes for its pending and its failed ones (core-v30): recording a push sent deletes its pending entry and writes no other entry of the campaign's; the looks for pending and failed pushes take their index; PostgreSQL keeps (campaignId, state); counts and lists hold on both",
          arguments: StoreEngine.all)
    func campaignIndexes(engine: StoreEngine) async throws {
        let (dir, store, campaign) = try await LeaseCoreTests.queued(engine, users: 10)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }

        if engine == .shared {
            let definitions = try await store.database.read { db in
                try String.fetchAll(db, sql: "SELECT indexdef FROM pg_indexes WHERE tablename = 'deliveries' AND indexname LIKE 'deliveries_campaign%'")
            }
            #expect(definitions.count == 1 && definitions.allSatisfy { $0.lowercased().contains("(campaignid, state)") }, "\(definitions)")
        } else {
            let keys = try await store.database.read { db in
                try String.fetchAll(db, sql: """
                    SELECT i.name || ':' || c.name FROM sqlite_master i, pragma_index_info(i.name) c
                    WHERE i.type = 'index' AND i.tbl_name = 'deliveries' AND i.name LIKE 'deliveries_campaign%' ORDER BY i.name, c.seqno
                    """)
            }
            #expect(keys == ["deliveries_campaign:campaignId", "deliveries_campaign_failed:campaignId", "deliveries_campaign_pending:campaignId"])
            let (roots, writes, plans): ([String: Int], [Int], [String: String]) = try await store.database.read { db in
                var roots: [String: Int] = [:]
                for row in try db.fetchAll(sql: "SELECT name, rootpage FROM sqlite_master WHERE tbl_name = 'deliveries' AND rootpage > 0") {
                    roots[row["name"]] = row["rootpage"]
                }
                let program = try db.fetchAll(sql: "EXPLAIN " + OutboxStore.recordSentStatement(db), arguments: [0.0, "[1]", 1])
                // The shapes of the looks a campaign's progress, its end and its failures take
                // (CampaignStore, CampaignQueueing, Insight, DeliveryStore.failed).
                var plans: [String: String] = [:]
                for (name, sql) in [
                    ("pending", "SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE campaignId = ? AND state = 'pending' LIMIT ?) AS pending"),
                    ("done", "SELECT 1 FROM campaigns c WHERE c.id = ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.campaignId = c.id AND d.state = 'pending')"),
                    ("failed", "SELECT * FROM deliveries WHERE campaignId = ? AND state = 'failed' ORDER BY id LIMIT ?"),
                    ("list", "SELECT * FROM deliveries WHERE campaignId = ? AND id > ? ORDER BY id LIMIT ?"),
                ] {
                    let arguments = SQLArguments(values: Array(repeating: SQLValue.integer(1), count: sql.filter { $0 == "?" }.count))
                    plans[name] = try db.fetchAll(sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }.joined(separator: "; ")
                }
                return (roots, program.filter { ($0["opcode"] as String) == "OpenWrite" }.map { $0["p2"] as Int }, plans)
            }
            #expect(writes.contains(try #require(roots["deliveries"])), "the record writes the row")
            #expect(writes.contains(try #require(roots["deliveries_campaign_pending"])), "the record deletes the pending entry")
            #expect(!writes.contains(try #require(roots["deliveries_campaign"])), "the record writes no entry of the campaign's index")
            // (The failed pushes' index is opened too, since the state is in its predicate: neither
            // version of a push recorded sent is in it, so no entry is written; the listing below.)
            for (name, index) in [("pending", "deliveries_campaign_pending"), ("done", "deliveries_campaign_pending"),
                                  ("failed", "deliveries_campaign_failed"), ("list", "deliveries_campaign")] {
                #expect(plans[name]?.contains("INDEX \(index) (") == true, "\(name): \(plans[name] ?? "")")
            }
        }

        let holder = OutboxHolder(pid: 1)
        try await store.outbox.heartbeat(holder: holder)
        let jobs = try await store.outbox.claim(limit: 4, lease: 60, holder: holder)
        try #require(jobs.count == 4)
        _ = try await store.outbox.record([(jobs[0], .sent), (jobs[1], .sent), (jobs[2], .failed(reason: "BadDeviceToken", prune: false, deadSince: nil))],
                                          holder: holder)
        let (pending, all) = try await store.database.read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ? AND state = 'pending'", arguments: [campaign.id]),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ?", arguments: [campaign.id]))
        }
        #expect(pending == 7 && all == 10, "a leased push is still pending: \(String(describing: pending)) of \(String(describing: all))")
        #expect(try await store.deliveries.failed(campaign: campaign.id).map(\.id) == [jobs[2].id])
        let listed = try await store.deliveries.list(campaign: campaign.id, after: 0, limit: 100)
        #expect(listed.count == 10 && Set(listed.filter { $0.state == .sent }.map(\.id)) == [jobs[0].id, jobs[1].id])
        let progress = try #require(try await store.campaigns(links: ClaimCoreTests.links, defaultImage: "logo.png").progress(campaign.id))
        #expect(progress.pending == 7 && progress.sent == 2 && progress.failed == 1)
    }
}
