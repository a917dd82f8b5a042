import Foundation
import SQLEngine
import HTTPTypes
import HummingbirdTesting
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import RichPushTestSupport
import Testing

@Suite("Attributes, devices' versions and topics through the server (SPEC §27)")
struct AudienceRouteTests {
    /// The `attributes` object of an answer.
    static func attributes(_ object: Any?) -> [String: Any]? {
        (object as? [String: Any])?["attributes"] as? [String: Any]
    }

    @Test("PUT replaces the caller's attributes, PATCH merges (null removes), GET reads them back; numbers and booleans keep their kind",
          arguments: StoreEngine.all)
    func mine(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (empty, none) = try await s.json(.get, "/api/me/attributes")
            #expect(empty.status == .ok && Self.attributes(none)?.isEmpty == true)
            let (put, replaced) = try await s.json(.put, "/api/me/attributes", body: #"{"attributes":{"plan":"gold","age":34,"score":0.5,"beta":true}}"#)
            #expect(put.status == .ok)
            #expect(String(decoding: put.bytes, as: UTF8.self) == #"{"attributes":{"age":34,"beta":true,"plan":"gold","score":0.5}}"#)
            #expect(Self.attributes(replaced)?["plan"] as? String == "gold")
            let patch = try await s.request(.patch, "/api/me/attributes", headers: [.contentType: "application/merge-patch+json"],
                                            body: Array(#"{"attributes":{"beta":null,"city":"Lyon","absent":null}}"#.utf8))
            #expect(patch.status == .ok)
            #expect(String(decoding: patch.bytes, as: UTF8.self) == #"{"attributes":{"age":34,"city":"Lyon","plan":"gold","score":0.5}}"#)
            let (get, _) = try await s.json(.get, "/api/me/attributes")
            #expect(String(decoding: get.bytes, as: UTF8.self) == #"{"attributes":{"age":34,"city":"Lyon","plan":"gold","score":0.5}}"#)
            // Keys of the body in any case, as every body's; bob's are his own.
            #expect(try await s.json(.put, "/api/me/attributes", as: "bob", body: #"{"Attributes":{"plan":"free"}}"#).0.status == .ok)
            let (bobs, _) = try await s.json(.get, "/api/me/attributes", as: "bob")
            #expect(String(decoding: bobs.bytes, as: UTF8.self) == #"{"attributes":{"plan":"free"}}"#)
            // PUT is whole: an empty object removes every one.
            let (cleared, _) = try await s.json(.put, "/api/me/attributes", body: #"{"attributes":{}}"#)
            #expect(String(decoding: cleared.bytes, as: UTF8.self) == #"{"attributes":{}}"#)
            #expect(try await s.request(.get, "/api/me/attributes", as: nil).status == .unauthorized)
        }
    }

    @Test("a refused attribute is a 400 naming the key, and nothing changes; 51 keys, 257 bytes, null in a PUT, an array; 413 past 64 KiB")
    func refusals() async throws {
        try await TestServer.run { s in
            #expect(try await s.json(.put, "/api/me/attributes", body: #"{"attributes":{"plan":"gold"}}"#).0.status == .ok)
            let fifty = (1...50).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
            let cases: [(String, String)] = [
                (#"{"attributes":{"First-Name":"Alice"}}"#, #"attribute "First-Name": a key is a lowercase letter, then up to 63 lowercase letters, digits or _"#),
                (#"{"attributes":{"bio":"\#(String(repeating: "x", count: 257))"}}"#, #"attribute "bio": a string is at most 256 bytes of UTF-8; this one is 257"#),
                (#"{"attributes":{"tags":["a","b"]}}"#, #"attribute "tags": a value is a string, a number, true or false"#),
                (#"{"attributes":{"address":{"city":"Lyon"}}}"#, #"attribute "address": a value is"#),
                (#"{"attributes":{"plan":null}}"#, #"attribute "plan": null removes an attribute, which only PATCH does"#),
                ("{\"attributes\":{\(fifty),\"k51\":51}}", "51 attributes, at most 50"),
                (#"{"attributes":"plan"}"#, #""attributes" must be an object"#),
                (#"{"attrs":{}}"#, #"unknown field "attrs""#),
                (#"{}"#, #""attributes" is missing"#),
            ]
            for (body, detail) in cases {
                let (response, _) = try await s.json(.put, "/api/me/attributes", body: body)
                #expect(response.status == .badRequest, "\(body.prefix(60))")
                #expect(response.detail.contains(detail), "\(response.detail)")
            }
            #expect(try await s.json(.put, "/api/me/attributes", body: #"{"attributes":{"bio":"\#(String(repeating: "é", count: 128))"}}"#).0.status == .ok)
            #expect(try await s.json(.put, "/api/me/attributes", body: "{\"attributes\":{\(fifty)}}").0.status == .ok)
            // A merge that would make 51 is refused; a key that breaks a rule is named in a PATCH too.
            let (over, _) = try await s.json(.patch, "/api/me/attributes", body: #"{"attributes":{"k51":51}}"#)
            #expect(over.status == .badRequest && over.detail.contains("at most 50"))
            let (badKey, _) = try await s.json(.patch, "/api/me/attributes", body: #"{"attributes":{"Bad Key":null}}"#)
            #expect(badKey.status == .badRequest && badKey.detail.hasPrefix(#"attribute "Bad Key""#))
            let (kept, object) = try await s.json(.get, "/api/me/attributes")
            #expect(kept.status == .ok && Self.attributes(object)?.count == 50)
            let huge = #"{"attributes":{"bio":""# + String(repeating: "x", count: 70_000) + #""}}"#
            #expect(try await s.json(.put, "/api/me/attributes", body: huge).0.status == .contentTooLarge)
            // A body that is not JSON by its type is refused as on every JSON route.
            #expect(try await s.request(.put, "/api/me/attributes", headers: [.contentType: "text/plain"],
                                        body: Array(#"{"attributes":{}}"#.utf8)).status == .unsupportedMediaType)
        }
    }

    @Test("an admin reads, replaces and merges anyone's attributes; no such user is 404; a user who is not an admin gets 403",
          arguments: StoreEngine.all)
    func admin(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (put, _) = try await s.json(.put, "/api/admin/users/alice/attributes", as: "root", body: #"{"attributes":{"plan":"gold","vip":true}}"#)
            #expect(put.status == .ok)
            let (patch, _) = try await s.json(.patch, "/api/admin/users/alice/attributes", as: "root", body: #"{"attributes":{"vip":null}}"#)
            #expect(String(decoding: patch.bytes, as: UTF8.self) == #"{"attributes":{"plan":"gold"}}"#)
            let (mine, _) = try await s.json(.get, "/api/me/attributes")
            #expect(String(decoding: mine.bytes, as: UTF8.self) == #"{"attributes":{"plan":"gold"}}"#)
            #expect(try await s.json(.get, "/api/admin/users/alice/attributes", as: "root").0.status == .ok)
            for method in [HTTPRequest.Method.get, .put, .patch] {
                let body = method == .get ? nil : #"{"attributes":{}}"#
                let (missing, _) = try await s.json(method, "/api/admin/users/nobody/attributes", as: "root", body: body)
                #expect(missing.status == .notFound, "\(method)")
                let (forbidden, _) = try await s.json(method, "/api/admin/users/alice/attributes", as: "bob", body: body)
                #expect(forbidden.status == .forbidden && forbidden.detail.contains("not an admin"), "\(method)")
                #expect(try await s.json(method, "/api/admin/users/alice/attributes", as: nil, body: body).0.status == .unauthorized)
            }
            let (bad, _) = try await s.json(.put, "/api/admin/users/alice/attributes", as: "root", body: #"{"attributes":{"First-Name":"A"}}"#)
            #expect(bad.status == .badRequest && bad.detail.hasPrefix(#"attribute "First-Name""#))
        }
    }

    @Test("topics: following and unfollowing are idempotent 204s, the list is sorted (in GET /api/me too), a bad name is 400 naming the rule; an admin's change is all or nothing",
          arguments: StoreEngine.all)
    func topics(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            // A path's escapes are decoded: "caf%C3%A9" (a name with its own % signs) is written %25,
            // and an escape of anything outside the pattern (é itself) is refused.
            for topic in ["team-lyon", "team-lyon", "Breaking.News", "caf%25C3%25A9"] {
                #expect(try await s.request(.put, "/api/me/topics/\(topic)").status == .noContent)
            }
            #expect(try await s.request(.put, "/api/me/topics/caf%C3%A9").status == .badRequest)
            #expect(try await s.request(.delete, "/api/me/topics/%F4%8E%AE%8ED").status == .badRequest)
            let (list, _) = try await s.json(.get, "/api/me/topics")
            #expect(String(decoding: list.bytes, as: UTF8.self) == #"{"topics":["Breaking.News","caf%C3%A9","team-lyon"]}"#)
            for _ in 0..<2 { #expect(try await s.request(.delete, "/api/me/topics/Breaking.News").status == .noContent) }
            #expect(try await s.request(.delete, "/api/me/topics/never-followed").status == .noContent)
            let (after, _) = try await s.json(.get, "/api/me/topics")
            #expect(String(decoding: after.bytes, as: UTF8.self) == #"{"topics":["caf%C3%A9","team-lyon"]}"#)
            // GET /api/me lists them too, and PUT /api/me answers them with the account as it is now.
            let (me, _) = try await s.json(.get, "/api/me")
            #expect(String(decoding: me.bytes, as: UTF8.self) == #"{"admin":false,"name":"alice","timezone":"UTC","topics":["caf%C3%A9","team-lyon"]}"#)
            let (set, _) = try await s.json(.put, "/api/me", body: #"{"locale":"fr"}"#)
            #expect(String(decoding: set.bytes, as: UTF8.self) == #"{"admin":false,"locale":"fr","name":"alice","timezone":"UTC","topics":["caf%C3%A9","team-lyon"]}"#)
            let (bobMe, _) = try await s.json(.get, "/api/me", as: "bob")
            #expect(String(decoding: bobMe.bytes, as: UTF8.self) == #"{"admin":false,"name":"bob","timezone":"UTC","topics":[]}"#)
            for bad in ["a!b", "a+b", String(repeating: "t", count: 65)] {
                let response = try await s.request(.put, "/api/me/topics/\(bad)")
                #expect(response.status == .badRequest && response.detail.contains("1 to 64 of A-Z a-z 0-9 _ . ~ % -"), "\(bad)")
            }
            #expect(try await s.request(.put, "/api/me/topics/x", as: nil).status == .unauthorized)

            // One call adds bob and removes alice.
            let (changed, object) = try await s.json(.post, "/api/admin/topics/team-lyon/subscribers", as: "root", body: #"{"add":["bob"],"remove":["alice"]}"#)
            #expect(changed.status == .ok)
            #expect(String(decoding: changed.bytes, as: UTF8.self) == #"{"added":1,"removed":1,"subscribers":1,"topic":"team-lyon"}"#)
            #expect((object as? [String: Any])?["subscribers"] as? Int == 1)
            let (bobs, _) = try await s.json(.get, "/api/me/topics", as: "bob")
            #expect(String(decoding: bobs.bytes, as: UTF8.self) == #"{"topics":["team-lyon"]}"#)
            // An unknown name refuses all of it, naming the unknown ones.
            let (unknown, _) = try await s.json(.post, "/api/admin/topics/team-lyon/subscribers", as: "root",
                                                body: #"{"add":["alice","nobody"],"remove":["bob","ghost"]}"#)
            #expect(unknown.status == .badRequest && unknown.detail.contains("nobody, ghost") && unknown.detail.contains("nothing was changed"))
            let (unchanged, _) = try await s.json(.get, "/api/me/topics", as: "bob")
            #expect(String(decoding: unchanged.bytes, as: UTF8.self) == #"{"topics":["team-lyon"]}"#)
            let (mine, _) = try await s.json(.get, "/api/me/topics")
            #expect(String(decoding: mine.bytes, as: UTF8.self) == #"{"topics":["caf%C3%A9"]}"#)
            let (both, _) = try await s.json(.post, "/api/admin/topics/team-lyon/subscribers", as: "root", body: #"{"add":["bob"],"remove":["bob"]}"#)
            #expect(both.status == .badRequest && both.detail.contains("in both"))
            let names = (0...TopicStore.maxNamesPerChange).map { "\"user\($0)\"" }.joined(separator: ",")
            let (tooMany, _) = try await s.json(.post, "/api/admin/topics/team-lyon/subscribers", as: "root", body: "{\"add\":[\(names)]}")
            #expect(tooMany.status == .contentTooLarge && tooMany.detail.contains("at most 1000"))
            let (badTopic, _) = try await s.json(.post, "/api/admin/topics/a!b/subscribers", as: "root", body: #"{"add":["bob"]}"#)
            #expect(badTopic.status == .badRequest)
            let (forbidden, _) = try await s.json(.post, "/api/admin/topics/team-lyon/subscribers", as: "alice", body: #"{"add":["alice"]}"#)
            #expect(forbidden.status == .forbidden)
        }
    }

    @Test("a user follows at most 2,000 topics: the next PUT is 409 naming the limit and what to do")
    func topicCap() async throws {
        try await TestServer.run { s in
            // 1,999 rows in one transaction, as that many PUTs would leave them.
            let names = (1..<TopicStore.maxPerUser).map { String(format: "topic-%04d", $0) }
            try await s.database.write { db in
                for chunk in names.sqlBatches() {
                    try db.execute(sql: "INSERT INTO topics (username, topic, createdAt) VALUES " + Array(repeating: "(?, ?, 0)", count: chunk.count).joined(separator: ", "),
                                   arguments: SQLArguments(chunk.flatMap { ["alice", $0] }))
                }
            }
            #expect(try await s.request(.put, "/api/me/topics/the-last-one").status == .noContent)
            let refused = try await s.request(.put, "/api/me/topics/one-more")
            #expect(refused.status == .conflict && refused.detail.contains("2000") && refused.detail.contains("DELETE /api/me/topics/{topic}"))
            #expect(try await s.request(.put, "/api/me/topics/topic-0001").status == .noContent) // already followed
            #expect(try await s.request(.delete, "/api/me/topics/topic-0001").status == .noContent)
            #expect(try await s.request(.put, "/api/me/topics/one-more").status == .noContent)
        }
    }

    @Test("PUT /api/register/{id} keeps appVersion and osVersion and answers them; lastSeen is the start of an hour; bad versions are 400 by name",
          arguments: StoreEngine.all)
    func deviceVersions(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (_, created) = try await s.json(.post, "/api/register")
            let id = try #require((created as? [String: Any])?["registrationId"] as? String)
            let (put, body) = try await s.json(.put, "/api/register/\(id)",
                                               body: #"{"Platform":"apns","Handle":"\#(tokenA)","AppVersion":"2.4.1","osVersion":"iOS 18.2"}"#)
            #expect(put.status == .ok)
            let answer = try #require(body as? [String: Any])
            #expect(answer["appVersion"] as? String == "2.4.1" && answer["osVersion"] as? String == "iOS 18.2")
            let stored = try #require(try await RegistrationStore(database: s.database).list(for: "alice").first)
            #expect(stored.appVersion == "2.4.1" && stored.osVersion == "iOS 18.2")
            let seen = try #require(stored.lastSeen)
            #expect(seen.timeIntervalSince1970.truncatingRemainder(dividingBy: 3600) == 0 && seen <= Date())
            // A body without versions (an older app) keeps them.
            #expect(try await s.json(.put, "/api/register/\(id)", body: #"{"platform":"apns","handle":"\#(tokenA)"}"#).0.status == .ok)
            #expect(try await RegistrationStore(database: s.database).list(for: "alice").first?.appVersion == "2.4.1")
            let refusals: [(String, String)] = [
                (#"{"platform":"apns","handle":"\#(tokenA)","appVersion":"\#(String(repeating: "9", count: 65))"}"#, "appVersion"),
                (#"{"platform":"apns","handle":"\#(tokenA)","osVersion":"iOS\u0007"}"#, "osVersion"),
                (#"{"platform":"apns","handle":"\#(tokenA)","appVersion":2}"#, "appVersion"),
            ]
            for (body, field) in refusals {
                let (response, _) = try await s.json(.put, "/api/register/\(id)", body: body)
                #expect(response.status == .badRequest && response.detail.contains(field), "\(response.detail)")
            }
            #expect(try await RegistrationStore(database: s.database).list(for: "alice").first?.osVersion == "iOS 18.2")
        }
    }

    @Test("a removed user's attributes and topics go with them", arguments: StoreEngine.all)
    func removedUser(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            #expect(try await s.json(.put, "/api/me/attributes", body: #"{"attributes":{"plan":"gold"}}"#).0.status == .ok)
            #expect(try await s.request(.put, "/api/me/topics/team-lyon").status == .noContent)
            #expect(try await s.request(.put, "/api/me/topics/team-lyon", as: "bob").status == .noContent)
            try await s.data.users.remove(name: "alice") // richpush users rm alice
            #expect(try await s.json(.get, "/api/admin/users/alice/attributes", as: "root").0.status == .notFound)
            #expect(try await s.data.topics.subscribers(of: "team-lyon") == 1)
            #expect(try await s.data.topics.list(of: "alice").isEmpty)
            // An account made again under the name starts without them.
            try await s.data.users(cost: 4).add(name: "alice", password: "wonderland")
            let (attributes, _) = try await s.json(.get, "/api/admin/users/alice/attributes", as: "root")
            #expect(String(decoding: attributes.bytes, as: UTF8.self) == #"{"attributes":{}}"#)
            let (changed, _) = try await s.json(.post, "/api/admin/topics/team-lyon/subscribers", as: "root", body: #"{}"#)
            #expect(String(decoding: changed.bytes, as: UTF8.self) == #"{"added":0,"removed":0,"subscribers":1,"topic":"team-lyon"}"#)
        }
    }
}
