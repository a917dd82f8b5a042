import APNsSandbox
import Foundation
import HTTPTypes
import Hummingbird
import PushDelivery
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import SQLEngine
import Testing

/// docs/api.md#frequency-caps-and-quiet-hours: caps counted across nodes, quiet hours in the
/// user's zone, and what passes them by.
@Suite("Frequency caps and quiet hours")
struct GuardrailTests {
    static let apnsToken = String(repeating: "ab", count: 32)

    @Test("one user with a cap of 3 a day, 100 campaigns sent to them at once from two nodes: exactly 3 pushes reach APNs, 97 are capped", arguments: StoreEngine.all)
    func capAcrossNodes(engine: StoreEngine) async throws {
        let guardrails = Guardrails(apps: [AppName.default: AppLimits(frequencyCap: try FrequencyCap("3/24h"))])
        try await RunningSandbox.with { apns in
            let provider = PlatformRouter(["apns": APNsProvider(client: try apns.client())])
            try await TestServer.run(engine: engine, provider: provider, guardrails: guardrails) { s in
                _ = try await PlatformDeliveryTests().register(s, platform: "apns", handle: "\"\(Self.apnsToken)\"", as: "alice")
                try await s.secondNode(provider: PlatformRouter(["apns": APNsProvider(client: try apns.client())])) { t in
                    // 20 in flight at a time, half to each node: parallel enough to race for the cap, and
                    // no request left waiting past the test client's 20 s on a machine busy with the rest of the suite.
                    let ids = try await withThrowingTaskGroup(of: Int64.self) { group in
                        var made: [Int64] = []
                        for i in 0..<100 {
                            if i >= 20, let id = try await group.next() { made.append(id) }
                            let node = i % 2 == 0 ? s : t
                            group.addTask {
                                let (response, object) = try await node.json(.post, "/api/admin/campaigns", as: "root",
                                                                             body: #"{"audience":{"users":["alice"]},"message":"sale \#(i)","title":"Sale"}"#)
                                #expect(response.status == .accepted, "\(String(describing: object))")
                                return try #require((object as? [String: Any])?["id"] as? Int64 ?? ((object as? [String: Any])?["id"] as? Int).map(Int64.init))
                            }
                        }
                        return try await group.reduce(into: made) { $0.append($1) }
                    }
                    #expect(ids.count == 100)
                    // Every campaign done on both nodes' dispatchers: its one push sent or capped.
                    #expect(try await eventually(within: 60) {
                        try await s.database.read { db in
                            try Int.fetchOne(db, sql: "SELECT count(*) FROM campaigns WHERE doneAt IS NOT NULL") == 100
                        }
                    })
                    var sent = 0, capped = 0
                    for id in ids {
                        let (_, stats) = try await s.json(.get, "/api/admin/campaigns/\(id)/stats", as: "root")
                        let object = try #require(stats as? [String: Any])
                        sent += object["sent"] as? Int ?? -1000
                        capped += object["capped"] as? Int ?? -1000
                    }
                    #expect(sent == 3 && capped == 97, "sent \(sent), capped \(capped)")
                    #expect(apns.sandbox.acceptedCount == 3)
                    let reasons = try await s.database.read { db in
                        try String.fetchAll(db, sql: "SELECT reason FROM deliveries WHERE state = 'failed'")
                    }
                    #expect(reasons.count == 97 && reasons.allSatisfy { $0 == "capped: over app default's frequency cap of 3/1d" })
                }
            }
        }
    }

    @Test("a user's own quiet hours in their zone delay a campaign's push to their end (counted delayed, still pending); POST /api/notifications, a time-sensitive push and limits false go at once; null clears them; bad ones are 400 naming the field")
    func quietHours() async throws {
        try await RunningSandbox.with { apns in
            let provider = PlatformRouter(["apns": APNsProvider(client: try apns.client())])
            try await TestServer.run(provider: provider, guardrails: Guardrails()) { s in
                _ = try await PlatformDeliveryTests().register(s, platform: "apns", handle: "\"\(Self.apnsToken)\"", as: "alice")
                _ = try await PlatformDeliveryTests().register(s, platform: "apns", handle: "\"\(String(repeating: "cd", count: 32))\"", as: "bob")
                // Quiet from the top of this hour in New York to two hours later: now is inside.
                let zone = try #require(TimeZone(identifier: "America/New_York"))
                var calendar = Calendar(identifier: .gregorian)
                calendar.timeZone = zone
                let hour = calendar.component(.hour, from: Date())
                let window = (String(format: "%02d:00", hour), String(format: "%02d:00", (hour + 2) % 24))
                let (set, me) = try await s.json(.put, "/api/me", as: "alice",
                                                 body: #"{"timezone":"America/New_York","quietHours":{"from":"\#(window.0)","to":"\#(window.1)"}}"#)
                #expect(set.status == .ok)
                #expect((me as? [String: Any])?["quietHours"] as? [String: String] == ["from": window.0, "to": window.1, "mode": "delay"])
                let expectedEnd = try #require(QuietHours(from: LocalTime(window.0), to: LocalTime(window.1)).end(containing: Date(), in: zone))

                let (made, campaign) = try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"users":["alice","bob"]},"message":"later"}"#)
                #expect(made.status == .accepted)
                #expect((campaign as? [String: Any])?["limits"] as? Bool == true)
                let id = try #require((campaign as? [String: Any])?["id"] as? Int)
                // Bob's push goes; Alice's waits for the end of her quiet hours.
                #expect(try await eventually { apns.sandbox.accepted.contains { $0.token == String(repeating: "cd", count: 32) } })
                #expect(try await eventually {
                    let (_, stats) = try await s.json(.get, "/api/admin/campaigns/\(id)/stats", as: "root")
                    return (stats as? [String: Any])?["delayed"] as? Int == 1
                })
                let waiting = try #require(try await s.database.read { db in
                    try SQLRow.fetchOne(db, sql: """
                        SELECT d.state, d.reason, d.nextAttemptAt FROM deliveries d JOIN notifications n ON n.id = d.notificationId
                        WHERE d.campaignId = ? AND n.recipient = 'alice'
                        """, arguments: [id])
                })
                #expect(waiting["state"] as String == "pending" && waiting["reason"] as String? == "quiet hours")
                let due: Double = waiting["nextAttemptAt"]
                #expect(due >= expectedEnd.timeIntervalSince1970 && due < expectedEnd.timeIntervalSince1970 + Guardrails.spread,
                        "due \(Date(timeIntervalSince1970: due)), window ends \(expectedEnd)")
                let (_, shown) = try await s.json(.get, "/api/admin/campaigns/\(id)", as: "root")
                #expect((shown as? [String: Any])?["status"] as? String == "sending")
                #expect(!apns.sandbox.accepted.contains { $0.token == Self.apnsToken })

                // What passes quiet hours by: a notification of one's own, a time-sensitive campaign, a campaign with limits false.
                _ = try await s.json(.post, "/api/notifications", as: "alice", body: #""mine""#)
                #expect(try await eventually { apns.sandbox.accepted.filter { $0.token == Self.apnsToken }.count == 1 })
                let (urgent, _) = try await s.json(.post, "/api/admin/campaigns", as: "root",
                                                   body: #"{"audience":{"users":["alice"]},"message":"now","options":{"interruptionLevel":"time-sensitive"}}"#)
                #expect(urgent.status == .accepted)
                #expect(try await eventually { apns.sandbox.accepted.filter { $0.token == Self.apnsToken }.count == 2 })
                let (unlimited, answer) = try await s.json(.post, "/api/admin/campaigns", as: "root",
                                                           body: #"{"audience":{"users":["alice"]},"message":"now","limits":false}"#)
                #expect(unlimited.status == .accepted && (answer as? [String: Any])?["limits"] as? Bool == false)
                #expect(try await eventually { apns.sandbox.accepted.filter { $0.token == Self.apnsToken }.count == 3 })

                // null clears them; left out, they stay.
                let (_, kept) = try await s.json(.put, "/api/me", as: "alice", body: #"{"locale":"en"}"#)
                #expect((kept as? [String: Any])?["quietHours"] != nil)
                let (_, cleared) = try await s.json(.put, "/api/me", as: "alice", body: #"{"quietHours":null}"#)
                #expect((cleared as? [String: Any])?["quietHours"] == nil)
                for (body, field) in [(#"{"quietHours":{"from":"22:00","to":"22:00"}}"#, "quietHours.from"),
                                      (#"{"quietHours":{"from":"22:00","to":"8:00"}}"#, "quietHours.to"),
                                      (#"{"quietHours":{"from":"22:00","to":"08:00","mode":"later"}}"#, "mode"),
                                      (#"{"quietHours":"22:00-08:00"}"#, "quietHours")] {
                    let (refused, problem) = try await s.json(.put, "/api/me", as: "alice", body: body)
                    #expect(refused.status == .badRequest, "\(body)")
                    #expect("\(String(describing: problem))".contains(field), "\(body): \(String(describing: problem))")
                }
                let (badLimits, _) = try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"x","limits":"no"}"#)
                #expect(badLimits.status == .badRequest)
            }
        }
    }
}
