import Foundation
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

@Suite("A first fetch's read mark")
struct ReadMarkCoreTests {
    @Test("a read mark changes no indexed column: a campaign's index keys its notifications by id, not by read state (core-v29), and on SQLite the mark's program writes the table and no index; marks still count, by the campaign's counter and by its rows",
          arguments: StoreEngine.all)
    func markWritesNoIndex(engine: StoreEngine) async throws {
        let (dir, store, campaign) = try await LeaseCoreTests.queued(engine, users: 12)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaigns = store.campaigns(links: ClaimCoreTests.links, defaultImage: "logo.png")

        let indexed: [String] = try await store.database.read { db in
            if db.dialect == .postgres {
                return try String.fetchAll(db, sql: "SELECT indexdef FROM pg_indexes WHERE tablename = 'notifications'")
            }
            return try String.fetchAll(db, sql: """
                SELECT i.name || ':' || c.name FROM sqlite_master i, pragma_index_info(i.name) c
                WHERE i.type = 'index' AND i.tbl_name = 'notifications'
                """)
        }
        #expect(indexed.contains { $0.lowercased().contains("notifications_campaign") }, "\(indexed)")
        for index in indexed {
            #expect(!index.lowercased().contains("read"), "no index keys the read state: \(index)")
        }
        if engine != .shared {
            #expect(indexed.filter { $0.hasPrefix("notifications_campaign:") } == ["notifications_campaign:campaignId"])
            let (roots, writes): ([String: Int], [Int]) = try await store.database.read { db in
                var roots: [String: Int] = [:]
                for row in try db.fetchAll(sql: "SELECT name, rootpage FROM sqlite_master WHERE tbl_name = 'notifications' AND rootpage > 0") {
                    roots[row["name"]] = row["rootpage"]
                }
                let program = try db.fetchAll(sql: "EXPLAIN " + NotificationStore.markStatement(db), arguments: [0.0, "[1]"])
                return (roots, program.filter { ($0["opcode"] as String) == "OpenWrite" }.map { $0["p2"] as Int })
            }
            let table = try #require(roots["notifications"])
            #expect(writes.contains(table), "the mark writes the row")
            for (name, root) in roots where name != "notifications" {
                #expect(!writes.contains(root), "the mark writes no entry of \(name)")
            }
        } else {
            #expect(indexed.contains { $0.lowercased().contains("notifications_campaign on public.notifications using btree (campaignid, id)") }, "\(indexed)")
        }

        let ids = try await store.database.read { db in
            try Int64.fetchAll(db, sql: "SELECT id FROM notifications WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
        }
        try #require(ids.count == 12)
        try await store.notifications().markRead(ids: Array(ids[0..<5]) + [ids[2]])
        try await store.notifications().markRead(ids: [ids[4], ids[9]])
        let (counted, rows) = try await store.database.read { db in
            (try Int.fetchOne(db, sql: "SELECT coalesce(sum(displayed), 0) FROM campaign_stats WHERE campaignId = ?", arguments: [campaign.id]),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE campaignId = ? AND read = 1", arguments: [campaign.id]))
        }
        #expect(counted == 6 && rows == 6, "each notification counted once: \(String(describing: counted)), \(String(describing: rows))")
        #expect(try await campaigns.progress(campaign.id)?.fetched == 6)
    }
}
