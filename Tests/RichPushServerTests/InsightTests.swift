import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import PushDelivery
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import PushTestSupport
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Delivery insight: displayed, opened, stats and webhooks (SPEC §20)")
struct InsightTests {
    let secret = "whsec_test_secret_0123456789"

    @Test("a campaign's stats match what the push service and the fetches did, number for number; every event reaches a webhook that refused at first, signed as Python's hmac checks, once each",
          arguments: StoreEngine.all)
    func statsAndWebhooks(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data().write(to: dir.appendingPathComponent("fail")) // down at first
        let (receiver, port) = try startWebhookReceiver(in: dir, secret: secret)
        defer { receiver.terminate() }
        let dead = String(repeating: "de", count: 32)
        let provider = ScriptedProvider(outcomes: [dead: .failed(reason: "410 Unregistered: the device token is inactive", prune: false)])
        try await TestServer.run(engine: engine, { configuration in
            configuration.webhookBackoff = 0.2
            configuration.webhookInterval = .milliseconds(100)
            configuration.allowPrivateWebhooks = true // the receiver is on loopback
        }, provider: provider) { s in
            let webhooks = WebhookStore(database: s.database)
            let hook = try await webhooks.add(url: "http://127.0.0.1:\(port)/hook", events: [], secret: secret, allowPrivate: true)
            await #expect(throws: CoreError.self) { try await webhooks.add(url: "http://example.com/hook", events: [], secret: secret) }
            _ = try await s.registerDevice(String(repeating: "a", count: 64), as: "alice")
            _ = try await s.registerDevice(dead, as: "alice")
            _ = try await s.registerDevice(String(repeating: "b", count: 64), as: "bob")
            let (made, campaign) = try await s.campaign(#"{"audience":{"all":true},"title":"Sale","message":"Half price"}"#)
            #expect(made.status == .accepted)
            let id = try #require(campaign["id"] as? Int)
            #expect(try await eventually(within: 30) { try await s.campaignStatus(id)["status"] as? String == "done" })

            // Alice's device shows it (a payload fetch) and she opens it, twice; bob opens his through the payload URL.
            let inbox = try await s.json(.get, "/api/notifications", as: "alice").1 as? [[String: Any]] ?? []
            let aliceNotification = try #require(inbox.first?["id"] as? Int)
            #expect(try await s.request(.get, "/api/notifications/\(aliceNotification)", as: "alice").status == .ok)
            for _ in 0..<2 {
                #expect(try await s.request(.post, "/api/notifications/\(aliceNotification)/opened", as: "alice").status == .noContent)
            }
            #expect(try await s.request(.post, "/api/notifications/\(aliceNotification)/opened", as: "bob").status == .notFound)
            let bobInbox = try await s.json(.get, "/api/notifications", as: "bob").1 as? [[String: Any]] ?? []
            let bobNotification = try #require(bobInbox.first?["id"] as? Int)
            let link = try #require(try await NotificationStore(database: s.database).created(id: Int64(bobNotification))?.1)
            let token = try #require(link.split(separator: "/").last)
            #expect(try await s.request(.post, "/p/\(token)/opened", as: nil).status == .noContent)
            #expect(try await s.request(.post, "/p/\(token)x/opened", as: nil).status == .notFound)

            let (answered, statsObject) = try await s.json(.get, "/api/admin/campaigns/\(id)/stats", as: "root")
            #expect(answered.status == .ok)
            let stats = try #require(statsObject as? [String: Any])
            #expect(stats["queued"] as? Int == 3 && stats["sent"] as? Int == 2 && stats["failed"] as? Int == 1, "\(stats)")
            #expect(stats["displayed"] as? Int == 1 && stats["opened"] as? Int == 2, "\(stats)")
            #expect((stats["byPlatform"] as? [String: [String: Int]])?["apns"] == ["sent": 2, "failed": 1], "\(stats)")
            #expect(stats["failures"] as? [String: Int] == ["410 Unregistered": 1], "\(stats)")
            let timeline = stats["timeline"] as? [[String: Any]] ?? []
            #expect(timeline.reduce(0) { $0 + ($1["sent"] as? Int ?? 0) } == 2 && timeline.reduce(0) { $0 + ($1["opened"] as? Int ?? 0) } == 2)
            // What the push service saw, and the database's own rows, agree with the counters.
            let rows = try await DeliveryStore(database: s.database).list(campaign: Int64(id), after: 0)
            #expect(rows.filter { $0.state == .sent }.count == 2 && rows.filter { $0.state == .failed }.count == 1)
            #expect(try await s.json(.get, "/api/admin/campaigns/\(id)/stats", as: "alice").0.status == .forbidden)
            #expect(try await s.json(.get, "/api/admin/campaigns/999/stats", as: "root").0.status == .notFound)

            // The receiver was refusing: nothing was lost. Back up, it gets every event, each once.
            #expect(try await eventually(within: 20) { try await webhooks.list().first?.lastError == "HTTP 503" })
            let failing = try await webhooks.list().first
            #expect((failing?.attempts ?? 0) > 0 && failing?.delivered == 0, "\(String(describing: failing))")
            try FileManager.default.removeItem(at: dir.appendingPathComponent("fail"))
            @Sendable func received() -> [[String: Any]] {
                ((try? String(contentsOf: dir.appendingPathComponent("events.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
            }
            #expect(try await eventually(within: 40) { received().count >= 7 }, "\(received())")
            try await Task.sleep(for: .seconds(1))
            let events = received()
            let types = events.compactMap { $0["type"] as? String }.sorted()
            #expect(types == ["campaign.done", "displayed", "failed", "opened", "opened", "sent", "sent"], "\(types)")
            #expect(Set(events.compactMap { $0["id"] as? Int }).count == events.count, "an event came twice")
            #expect(events.first { $0["type"] as? String == "failed" }?["reason"] as? String == "410 Unregistered: the device token is inactive")
            #expect(events.allSatisfy { $0["type"] as? String == "campaign.done" || $0["campaign"] as? Int == id })
            #expect(events.filter { $0["type"] as? String == "opened" }.compactMap { $0["user"] as? String }.sorted() == ["alice", "bob"])
            #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("bad").path), "a signature did not verify")
            let state = try #require(try await webhooks.list().first { $0.id == hook })
            #expect(state.delivered == 7 && state.dropped == 0 && state.lastError == nil)
        }
    }

    @Test("a receiver that stalls holds only its own queue: the campaign's pushes all go out meanwhile, and its events arrive once it answers again")
    func stallingReceiver() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data().write(to: dir.appendingPathComponent("stall")) // holds each request 30 s, past the dispatcher's 15 s
        let (receiver, port) = try startWebhookReceiver(in: dir, secret: secret)
        defer { receiver.terminate() }
        let provider = AnsweringProvider()
        try await TestServer.run({ configuration in
            configuration.webhookBackoff = 0.2
            configuration.webhookInterval = .milliseconds(100)
            configuration.allowPrivateWebhooks = true // the receiver is on loopback
        }, provider: provider) { s in
            let webhooks = WebhookStore(database: s.database)
            _ = try await webhooks.add(url: "http://127.0.0.1:\(port)/hook", events: [.sent], secret: secret, allowPrivate: true)
            for index in 0..<20 { _ = try await s.registerDevice(String(format: "%064x", index + 1), as: index % 2 == 0 ? "alice" : "bob") }
            let (made, campaign) = try await s.campaign(#"{"audience":{"all":true},"mode":"silent"}"#)
            #expect(made.status == .accepted)
            let id = try #require(campaign["id"] as? Int)
            #expect(try await eventually(within: 30) { try await s.campaignStatus(id)["status"] as? String == "done" })
            #expect(provider.sent.withLockedValue { $0.count } == 20)
            // The receiver holds the first batch; the pushes did not wait for it.
            #expect(try await eventually(within: 20) { FileManager.default.fileExists(atPath: dir.appendingPathComponent("requests").path) })
            #expect(try await s.campaignStatus(id)["status"] as? String == "done")
            #expect(try await webhooks.list().first?.delivered == 0)
            try FileManager.default.removeItem(at: dir.appendingPathComponent("stall"))
            @Sendable func received() -> Int {
                ((try? String(contentsOf: dir.appendingPathComponent("events.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n").count
            }
            #expect(try await eventually(within: 60) { received() >= 20 }, "\(received())")
            #expect(try await eventually(within: 10) { try await webhooks.list().first?.delivered == 20 })
        }
    }

    @Test("the signature is HMAC-SHA-256 of \"t.body\", as documented")
    func signature() {
        let header = WebhookSignature.header(body: Data("{}".utf8), secret: "key", time: 1_700_000_000)
        // python3 -c 'import hmac,hashlib;print(hmac.new(b"key",b"1700000000.{}",hashlib.sha256).hexdigest())'
        #expect(header == "t=1700000000,v1=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae")
    }
}
