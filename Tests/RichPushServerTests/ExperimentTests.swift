import APNsSandbox
import Crypto
import Foundation
import HTTPTypes
import PushDelivery
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import SQLEngine
import Testing

extension TestServer {
    /// `GET /api/admin/campaigns/{id}/stats` as root, its JSON.
    func experimentStats(_ id: Int) async throws -> [String: Any] {
        let (_, object) = try await json(.get, "/api/admin/campaigns/\(id)/stats", as: "root")
        return object as? [String: Any] ?? [:]
    }

    /// `POST /api/events` `{"name"}` as `user` (Basic, `password`): the answer and its `campaigns`.
    func event(_ name: String, as user: String, password: String) async throws -> (response: TestResponse, campaigns: Int?) {
        var headers = Self.basic(user, password)
        headers[.contentType] = "application/json"
        let response = try await request(.post, "/api/events", as: nil, headers: headers, body: Array("{\"name\":\"\(name)\"}".utf8))
        let object = try? JSONSerialization.jsonObject(with: Data(response.bytes)) as? [String: Any]
        return (response, object?["campaigns"] as? Int)
    }
}

/// docs/api.md#ab-tests-and-conversions end to end: variants through the APNs sandbox, scripted
/// opens, the decision, the rest, conversions, and the refusals.
@Suite("A/B tests and conversions (SPEC §28)")
struct ExperimentTests {
    /// `count` accounts `ab00001…` (password `secret`, one bcrypt hash for all), each with one APNs
    /// device whose token is 0xab0000 plus its number, in 64 hex digits.
    static func users(_ s: TestServer, _ count: Int) async throws -> [(name: String, token: String)] {
        let users = s.data.users(cost: 4)
        _ = try await users.add(name: "ab-template", password: "secret")
        let hash = try #require(try await users.credentials(of: "ab-template")).passwordHash
        try await users.remove(name: "ab-template")
        let people = (1...count).map { (name: String(format: "ab%05d", $0), token: String(format: "%064x", 0xab0000 + $0)) }
        _ = try await users.importUsers(people.map { UserImport.Entry(name: $0.name, secret: .bcrypt(hash), admin: false) })
        try await s.database.write { db in
            for chunk in people.sqlBatches(of: 200) {
                try db.execute(sql: "INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES "
                               + Array(repeating: "(?, ?, 'apns', ?, ?, 0, 0)", count: chunk.count).joined(separator: ", "),
                               arguments: SQLArguments(chunk.flatMap { person -> [any SQLValueConvertible] in
                                   ["reg-\(person.name)", person.name, person.token, "[\"username:\(person.name)\"]"]
                               }))
            }
        }
        return people
    }

    /// The arm the spec's hash gives `user` in campaign `id` (SHA-256 of "<id>/<user>": the first 8
    /// bytes' top 53 bits over 2^53 below `holdout`: -1; below `holdout + testShare`: the next 8 bytes
    /// modulo `variants`; else -2), worked out here apart from the server's code.
    static func arm(campaign id: Int, user: String, holdout: Double, testShare: Double, variants: Int) -> Int {
        let digest = Array(SHA256.hash(data: Data("\(id)/\(user)".utf8)))
        let first = digest[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let second = digest[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let share = Double(first >> 11) / 9_007_199_254_740_992.0
        if share < holdout { return -1 }
        if holdout + testShare >= 1 || share < holdout + testShare { return Int(second % UInt64(variants)) }
        return -2
    }

    /// `{"users":[…]}` of `people`.
    static func audience(_ people: [(name: String, token: String)]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: ["users": people.map(\.name)]), as: UTF8.self)
    }

    @Test("2,000 sandbox users, A and B to half of them and 10% held out: B, opened far more, wins by χ² (its statistic and p-value SciPy's on the exported users and opens, to 1e-9); the rest gets B's content, the holdout nothing; conversions count once per campaign and user, a held-out user's in holdout.converted")
    func winnerThroughTheSandbox() async throws {
        guard scipyAvailable() else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "the A/B test's check needs SciPy (python3 -m pip install scipy)")
            return
        }
        try await RunningSandbox.with { apns in
            try await TestServer.run({ $0.opensPerMinute = 1_000_000 }, provider: APNsProvider(client: try apns.client())) { s in
                let people = try await Self.users(s, 2_000)
                let audience = try Self.audience(people)
                let (response, body) = try await s.campaign("""
                    {"audience":\(audience),"title":"Base","message":"Base message",
                     "variants":[{"name":"A","title":"Title A","message":"Message A"},{"name":"B","title":"Title B"}],
                     "testShare":0.5,"holdout":0.1,"winner":{"metric":"opened","after":"1h","fallback":null}}
                    """)
                #expect(response.status == .accepted, "\(body)")
                let id = try #require(body["id"] as? Int)
                let experiment = try #require(body["experiment"] as? [String: Any])
                #expect(experiment["variants"] as? [String] == ["A", "B"] && experiment["metric"] as? String == "opened")
                #expect(experiment["after"] as? String == "1h" && experiment["testShare"] as? Double == 0.5 && experiment["holdout"] as? Double == 0.1)
                let pending = try #require(experiment["test"] as? [String: Any])
                #expect(pending["decideAt"] is String && pending["decided"] is NSNull && pending["winner"] is NSNull)

                let arms = Dictionary(uniqueKeysWithValues: people.map {
                    ($0.token, Self.arm(campaign: id, user: $0.name, holdout: 0.1, testShare: 0.5, variants: 2))
                })
                let inArm = { (arm: Int) in arms.values.filter { $0 == arm }.count }
                #expect(inArm(0) > 300 && inArm(1) > 300 && inArm(-1) > 100 && inArm(-2) > 600, "\(inArm(0)), \(inArm(1)), \(inArm(-1)), \(inArm(-2))")
                let perVariant = [inArm(0), inArm(1)], tested = inArm(0) + inArm(1)
                #expect(body["recipients"] as? Int == tested)
                #expect(try await eventually(within: 60) { apns.sandbox.acceptedCount == tested })

                // Each test user got their variant (B's message is the campaign's); B is opened by 3 users in 5, A by 1 in 10.
                var opens = [0, 0]
                for push in apns.sandbox.accepted {
                    let object = try #require(try JSONSerialization.jsonObject(with: push.payload) as? [String: Any])
                    let alert = (object["aps"] as? [String: Any])?["alert"] as? [String: Any]
                    let arm = try #require(arms[push.token])
                    #expect(arm >= 0, "\(push.token) is in arm \(arm) and was sent the test")
                    #expect(alert?["title"] as? String == (arm == 0 ? "Title A" : "Title B"))
                    #expect(alert?["body"] as? String == (arm == 0 ? "Message A" : "Base message"))
                    let number = try #require(Int(push.token, radix: 16))
                    guard arm == 1 ? number % 5 < 3 : number % 10 == 0 else { continue }
                    let url = try #require(object["richUrl"] as? String)
                    #expect(try await s.request(.post, TestServer.path(of: url) + "/opened", as: nil).status == .noContent)
                    opens[arm] += 1
                }
                let counted = opens
                #expect(try await eventually(within: 30) {
                    let variants = try await s.experimentStats(id)["variants"] as? [[String: Any]] ?? []
                    return variants.compactMap { $0["opened"] as? Int } == counted && variants.compactMap { $0["sent"] as? Int } == perVariant
                })
                #expect(try await s.campaignStatus(id)["status"] as? String == "sending") // the winner is not decided yet

                // Its hour passes (as if the service had been down meanwhile): any node's next look decides it.
                try await s.database.write { db in
                    try db.execute(sql: "UPDATE campaign_experiments SET decideAt = ? WHERE campaignId = ?", arguments: [db.now - 1, id])
                }
                #expect(try await eventually(within: 60) { try await s.campaignStatus(id)["status"] as? String == "done" })
                let stats = try await s.experimentStats(id)
                let variants = try #require(stats["variants"] as? [[String: Any]])
                #expect(variants.map { $0["name"] as? String } == ["A", "B"])
                let users = variants.map { $0["users"] as? Int ?? -1 }
                let opened = variants.map { $0["opened"] as? Int ?? -1 }
                #expect(users == perVariant && opened == counted)
                #expect(variants.map { $0["displayed"] as? Int } == [0, 0] && variants.map { $0["converted"] as? Int } == [0, 0])
                let test = try #require(stats["test"] as? [String: Any])
                #expect(test["winner"] as? String == "B" && test["significant"] as? Bool == true)
                let statistic = try #require(test["statistic"] as? Double)
                let pValue = try #require(test["pValue"] as? Double)
                let table = zip(opened, users).map { [$0, $1 - $0] }
                let reference = try #require(try await onOwnThread { try chi2Reference([table]) }.first)
                let scipyStatistic = try #require(reference.statistic)
                let scipyPValue = try #require(reference.pValue)
                #expect(abs(statistic - scipyStatistic) <= 1e-9 * max(1, scipyStatistic), "\(statistic) vs SciPy's \(scipyStatistic) for \(table)")
                #expect(abs(pValue - scipyPValue) <= 1e-9 && pValue < 0.05, "\(pValue) vs SciPy's \(scipyPValue) for \(table)")
                let holdout = try #require(stats["holdout"] as? [String: Any])
                #expect(holdout["users"] as? Int == inArm(-1) && holdout["converted"] as? Int == 0)
                let status = try await s.campaignStatus(id)
                let decided = (status["experiment"] as? [String: Any])?["test"] as? [String: Any]
                #expect(decided?["winner"] as? String == "B" && decided?["decided"] is String)
                #expect(status["recipients"] as? Int == inArm(0) + inArm(1) + inArm(-2))

                // Every push went once: the test group's, then the rest's with B's content; none to the holdout.
                let accepted = apns.sandbox.accepted
                #expect(accepted.count == inArm(0) + inArm(1) + inArm(-2))
                #expect(Set(accepted.map(\.token)).count == accepted.count)
                #expect(!accepted.contains { arms[$0.token] == -1 })
                for push in accepted where arms[push.token] == -2 {
                    let object = try JSONSerialization.jsonObject(with: push.payload) as? [String: Any]
                    let alert = (object?["aps"] as? [String: Any])?["alert"] as? [String: Any]
                    #expect(alert?["title"] as? String == "Title B" && alert?["body"] as? String == "Base message")
                }

                // Conversions: once per campaign and user, in the variant the user was in; a held-out user's in the holdout.
                let names = Dictionary(uniqueKeysWithValues: people.map { ($0.token, $0.name) })
                let buyer = try #require(people.first { arms[$0.token] == 1 }?.name)
                let heldOut = try #require(people.first { arms[$0.token] == -1 }?.name)
                let first = try await s.event("purchase", as: buyer, password: "secret")
                #expect(first.response.status == .accepted && first.campaigns == 1)
                #expect(try await s.event("purchase", as: buyer, password: "secret").campaigns == 0)
                #expect(try await s.event("purchase", as: heldOut, password: "secret").campaigns == 1)
                #expect(try await s.event("sign-up", as: "bob", password: "builder").campaigns == 0) // no push, no test
                let restUser = try #require(accepted.first { arms[$0.token] == -2 }.flatMap { names[$0.token] })
                #expect(try await s.event("purchase", as: restUser, password: "secret").campaigns == 1)
                let converted = try await s.experimentStats(id)
                #expect(converted["converted"] as? Int == 2) // the buyer and the rest's user; the holdout's apart
                #expect((converted["variants"] as? [[String: Any]])?.map { $0["converted"] as? Int } == [0, 1])
                #expect((converted["holdout"] as? [String: Any])?["converted"] as? Int == 1)
                let bad = try await s.event("no spaces", as: buyer, password: "secret")
                #expect(bad.response.status == .badRequest && bad.response.detail.contains("name"), "\(bad.response.detail)")
                #expect(try await s.request(.post, "/api/events", as: nil, headers: [.contentType: "application/json"],
                                            body: Array(#"{"name":"purchase"}"#.utf8)).status == .unauthorized)
                // An A/B test's content is its variants': a change is refused.
                let (change, _) = try await s.json(.patch, "/api/admin/campaigns/\(id)", as: "root", body: #"{"message":"one for all"}"#)
                #expect(change.status == .conflict)
            }
        }
    }

    @Test("a short after decides by itself: nobody fetched a payload (metric displayed), a table SciPy refuses, so statistic 0, p-value 1, no winner by χ², and the fallback A goes to the rest")
    func shortAfter() async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(provider: APNsProvider(client: try apns.client())) { s in
                let people = try await Self.users(s, 60)
                let audience = try Self.audience(people)
                let (response, body) = try await s.campaign("""
                    {"audience":\(audience),"title":"Base","message":"Base message",
                     "variants":[{"name":"A","title":"Title A"},{"name":"B","title":"Title B"}],
                     "testShare":0.5,"winner":{"metric":"displayed","after":"2s","fallback":"A"}}
                    """)
                #expect(response.status == .accepted, "\(body)")
                let id = try #require(body["id"] as? Int)
                #expect(try await eventually(within: 60) { try await s.campaignStatus(id)["status"] as? String == "done" })
                let test = try #require(try await s.experimentStats(id)["test"] as? [String: Any])
                #expect(test["statistic"] as? Double == 0 && test["pValue"] as? Double == 1)
                #expect(test["winner"] as? String == "A" && test["significant"] as? Bool == false)
                let arms = Dictionary(uniqueKeysWithValues: people.map {
                    ($0.token, Self.arm(campaign: id, user: $0.name, holdout: 0, testShare: 0.5, variants: 2))
                })
                // Everyone got one push (no holdout): the rest A's.
                #expect(try await eventually { apns.sandbox.acceptedCount == people.count })
                for push in apns.sandbox.accepted {
                    let object = try JSONSerialization.jsonObject(with: push.payload) as? [String: Any]
                    let title = ((object?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String
                    #expect(title == (arms[push.token] == 1 ? "Title B" : "Title A"), "\(push.token) in arm \(String(describing: arms[push.token]))")
                }
            }
        }
    }

    @Test("bad A/B tests are refused before anything is made: 400 naming the field")
    func refusals() async throws {
        try await TestServer.run { s in
            let audience = #""audience":{"all":true},"message":"m""#
            let winner = #""winner":{"metric":"opened","after":"2h"}"#
            let two = #""variants":[{"name":"A"},{"name":"B"}]"#
            let nine = (1...9).map { "{\"name\":\"V\($0)\"}" }.joined(separator: ",")
            let cases: [(String, String)] = [
                (#"{\#(audience),"variants":[{"name":"A"},{"name":"A"}],\#(winner)}"#, "variants[1].name"),
                (#"{\#(audience),"variants":[{"name":"A"},{"name":"bad name"}],\#(winner)}"#, "variants[1].name"),
                (#"{\#(audience),"variants":[{"name":"A"}],\#(winner)}"#, "variants"),
                (#"{\#(audience),"variants":[\#(nine)],\#(winner)}"#, "variants"),
                (#"{\#(audience),"variants":[{"name":"A","colour":"red"},{"name":"B"}],\#(winner)}"#, "variants.colour"),
                (#"{\#(audience),\#(two),"testShare":1.5,\#(winner)}"#, "testShare"),
                (#"{\#(audience),\#(two),"holdout":0.6,\#(winner)}"#, "holdout"),
                (#"{\#(audience),\#(two),"testShare":0.7,"holdout":0.4,\#(winner)}"#, "testShare + holdout"),
                (#"{\#(audience),\#(two),"winner":{"metric":"opened","after":"2h","fallback":"C"}}"#, "winner.fallback"),
                (#"{\#(audience),\#(two),"winner":{"metric":"opened","after":"8d"}}"#, "winner.after"),
                (#"{\#(audience),\#(two),"winner":{"metric":"opened","after":"2 hours"}}"#, "winner.after"),
                (#"{\#(audience),\#(two),"winner":{"metric":"clicked","after":"2h"}}"#, "winner.metric"),
                (#"{\#(audience),\#(two),"winner":{"after":"2h"}}"#, "winner.metric"),
                (#"{\#(audience),\#(two)}"#, "winner"),
                (#"{\#(audience),\#(two),"localTime":"09:00",\#(winner)}"#, "localTime"),
                (#"{\#(audience),"testShare":0.5}"#, "testShare"),
                (#"{\#(audience),\#(winner)}"#, "winner"),
            ]
            for (body, field) in cases {
                let (response, object) = try await s.campaign(body)
                #expect(response.status == .badRequest, "\(body): \(object)")
                #expect(response.detail.contains(field), "\(field): \(response.detail)")
            }
            // A variant's payload is checked as the campaign's: 422 naming the variant.
            let (unknown, _) = try await s.campaign(#"{\#(audience),"variants":[{"name":"A","payload":"nope"},{"name":"B"}],\#(winner)}"#)
            #expect(unknown.status == .unprocessableContent && unknown.detail.hasPrefix("variants[0] (A)"), "\(unknown.detail)")
            let (list, _) = try await s.json(.get, "/api/admin/campaigns", as: "root")
            #expect(String(decoding: list.bytes, as: UTF8.self) == "[]") // nothing was made
        }
    }
}

extension ExperimentTests {
    @Test("two nodes, one decision: each node's loop looks for due tests every second, one decides, and every user outside the holdout gets exactly one push (the test's or the winner's)", arguments: StoreEngine.all)
    func oneDecisionAcrossNodes(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client())) { s in
                let people = try await Self.users(s, 120)
                let audience = try Self.audience(people)
                try await s.secondNode(provider: APNsProvider(client: try apns.client())) { t in
                    let (response, body) = try await t.campaign("""
                        {"audience":\(audience),"title":"Base","message":"Base message",
                         "variants":[{"name":"A","title":"Title A"},{"name":"B","title":"Title B"}],
                         "testShare":0.4,"holdout":0.2,"winner":{"metric":"opened","after":"2s","fallback":"B"}}
                        """)
                    #expect(response.status == .accepted, "\(body)")
                    let id = try #require(body["id"] as? Int)
                    #expect(try await eventually(within: 60) { try await s.campaignStatus(id)["status"] as? String == "done" })
                    let held = people.filter { Self.arm(campaign: id, user: $0.name, holdout: 0.2, testShare: 0.4, variants: 2) == -1 }
                    #expect(try await eventually { apns.sandbox.acceptedCount == people.count - held.count })
                    let tokens = apns.sandbox.accepted.map(\.token)
                    #expect(Set(tokens).count == tokens.count, "a user got two pushes")
                    #expect(Set(tokens).isDisjoint(with: held.map(\.token)))
                    let (notifications, decisions) = try await s.database.read { db in
                        (try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE campaignId = ?", arguments: [id]) ?? -1,
                         try Int.fetchOne(db, sql: "SELECT count(*) FROM campaign_experiments WHERE campaignId = ? AND decidedAt IS NOT NULL", arguments: [id]) ?? -1)
                    }
                    #expect(notifications == people.count - held.count && decisions == 1)
                    let test = try #require(try await s.experimentStats(id)["test"] as? [String: Any])
                    #expect(test["winner"] as? String == "B" && test["pValue"] as? Double == 1)
                }
            }
        }
    }
}
