import Foundation
import SQLEngine
import HTTPTypes
import HummingbirdTesting
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import RichPushTestSupport
import Testing

@Suite("Segments through the server (SPEC §27)")
struct SegmentRouteTests {
    /// alice: gold, 34, follows news, two devices; bob: free, 17, one device; root: nothing.
    static func people(_ s: TestServer) async throws -> (alice: Set<String>, bob: String) {
        #expect(try await s.json(.put, "/api/admin/users/alice/attributes", as: "root", body: #"{"attributes":{"plan":"gold","age":34}}"#).0.status == .ok)
        #expect(try await s.json(.put, "/api/admin/users/bob/attributes", as: "root", body: #"{"attributes":{"plan":"free","age":17}}"#).0.status == .ok)
        #expect(try await s.request(.put, "/api/me/topics/news").status == .noContent)
        let alice = [try await s.registerDevice(tokenA), try await s.registerDevice(String(repeating: "cd", count: 32))]
        let bob = try await s.registerDevice(String(repeating: "ef", count: 32), as: "bob")
        return (Set(alice), bob)
    }

    static func text(_ response: TestResponse) -> String { String(decoding: response.bytes, as: UTF8.self) }

    @Test("PUT saves a segment and answers it; GET shows it and lists them by name; count answers users and devices; DELETE removes it (404 after); only admins",
          arguments: StoreEngine.all)
    func lifecycle(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            _ = try await Self.people(s)
            let (put, saved) = try await s.json(.put, "/api/admin/segments/gold", as: "root", body: #"{"filter":{"attribute":"plan","op":"eq","value":"gold"}}"#)
            #expect(put.status == .ok)
            let object = try #require(saved as? [String: Any])
            #expect(object["name"] as? String == "gold" && object["createdBy"] as? String == "root" && object["updatedAt"] is String)
            #expect(Self.text(put).contains(#""filter":{"attribute":"plan","op":"eq","value":"gold"}"#))
            let (get, _) = try await s.json(.get, "/api/admin/segments/gold", as: "root")
            #expect(get.status == .ok && Self.text(get) == Self.text(put))
            #expect(try await s.json(.put, "/api/admin/segments/adults-or-news", as: "root",
                                     body: #"{"filter":{"any":[{"attribute":"age","op":"gte","value":18},{"topic":"news"}]}}"#).0.status == .ok)
            #expect(try await s.json(.put, "/api/admin/segments/gold-adults", as: "root",
                                     body: #"{"filter":{"all":[{"segment":"gold"},{"segment":"adults-or-news"}]}}"#).0.status == .ok)
            let (list, listed) = try await s.json(.get, "/api/admin/segments", as: "root")
            #expect(list.status == .ok)
            let names = ((listed as? [String: Any])?["segments"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
            #expect(names == ["adults-or-news", "gold", "gold-adults"])

            let (count, _) = try await s.json(.get, "/api/admin/segments/gold/count", as: "root")
            #expect(count.status == .ok && Self.text(count) == #"{"devices":2,"users":1}"#)
            let (minors, _) = try await s.json(.get, "/api/admin/segments/adults-or-news/count", as: "root")
            #expect(Self.text(minors) == #"{"devices":2,"users":1}"#)
            // bob turns 18: the segment naming it follows.
            #expect(try await s.json(.patch, "/api/admin/users/bob/attributes", as: "root", body: #"{"attributes":{"age":18}}"#).0.status == .ok)
            #expect(try await Self.text(s.json(.get, "/api/admin/segments/adults-or-news/count", as: "root").0) == #"{"devices":3,"users":2}"#)
            #expect(try await Self.text(s.json(.get, "/api/admin/segments/gold-adults/count", as: "root").0) == #"{"devices":2,"users":1}"#)

            // Named by another: 409; then removable; gone: 404 everywhere.
            let (named, _) = try await s.json(.delete, "/api/admin/segments/gold", as: "root")
            #expect(named.status == .conflict && named.detail.contains("gold-adults"))
            #expect(try await s.request(.delete, "/api/admin/segments/gold-adults", as: "root").status == .noContent)
            #expect(try await s.request(.delete, "/api/admin/segments/gold-adults", as: "root").status == .notFound)
            #expect(try await s.request(.get, "/api/admin/segments/gold-adults", as: "root").status == .notFound)
            #expect(try await s.request(.get, "/api/admin/segments/gold-adults/count", as: "root").status == .notFound)

            for (method, path) in [(HTTPRequest.Method.get, "/api/admin/segments"), (.get, "/api/admin/segments/gold"), (.delete, "/api/admin/segments/gold"),
                                   (.get, "/api/admin/segments/gold/count")] {
                #expect(try await s.request(method, path, as: "alice").status == .forbidden, "\(method) \(path)")
                #expect(try await s.request(method, path, as: nil).status == .unauthorized, "\(method) \(path)")
            }
            #expect(try await s.json(.put, "/api/admin/segments/gold", as: "alice", body: #"{"filter":{"topic":"news"}}"#).0.status == .forbidden)
        }
    }

    @Test("a filter that breaks a rule is a 400 whose detail starts with its JSON path; so are a bad name, an unknown segment and a circle; nothing is saved")
    func refusals() async throws {
        try await TestServer.run { s in
            let cases: [(String, String)] = [
                (#"{"filter":{"all":[{"topic":"news"},{"attribute":"plan","op":"eqq","value":"gold"}]}}"#,
                 #"filter.all[1].op: unknown operator "eqq"; one of eq, ne, lt, lte, gt, gte, in, exists, missing, contains"#),
                (#"{"filter":{"attribute":"age","op":"lt","value":"18"}}"#, "filter.value: lt needs a number, not a string"),
                (#"{"filter":{"any":[{"platform":"ios"}]}}"#, #"filter.any[0].platform: "ios" is not a platform"#),
                (#"{"filter":{"lastSeen":{"withinDays":-3}}}"#, "filter.lastSeen.withinDays: -3 is negative"),
                (#"{"filter":{"not":{"segment":"nope"}}}"#, #"filter.not.segment: no segment named "nope""#),
                (#"{"filter":{"segment":"loop"}}"#, #"filter.segment: segments name each other in a circle: "loop" → "loop""#),
                (#"{"filter":[]}"#, "filter: a filter is an object"),
                (#"{"filtre":{"topic":"news"}}"#, #"unknown field "filtre"; the body is {"filter":{…}}"#),
                (#"{}"#, #""filter" is missing"#),
            ]
            for (body, detail) in cases {
                let (response, _) = try await s.json(.put, "/api/admin/segments/loop", as: "root", body: body)
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.detail.hasPrefix(detail) || response.detail.contains(detail), "\(response.detail)")
            }
            #expect(try await s.request(.get, "/api/admin/segments/loop", as: "root").status == .notFound)
            let (badName, _) = try await s.json(.put, "/api/admin/segments/a!b", as: "root", body: #"{"filter":{"topic":"news"}}"#)
            #expect(badName.status == .badRequest && badName.detail.contains("1 to 64 of A-Z a-z 0-9 _ . -"))
            #expect(try await s.request(.get, "/api/admin/segments/a!b", as: "root").status == .badRequest)
            let huge = #"{"filter":{"any":["# + Array(repeating: #"{"attribute":"bio","op":"contains","value":"\#(String(repeating: "x", count: 200))"}"#, count: 400)
                .joined(separator: ",") + "]}}"
            #expect(try await s.json(.put, "/api/admin/segments/huge", as: "root", body: huge).0.status == .contentTooLarge)
        }
    }

    @Test("a campaign to {\"segment\":NAME} reaches exactly the matching users' devices, and keeps the segment as it was when made; {\"filter\":F} too; a bad one is 400 naming audience…",
          arguments: StoreEngine.all)
    func campaigns(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (alice, bob) = try await Self.people(s)
            #expect(try await s.json(.put, "/api/admin/segments/gold", as: "root", body: #"{"filter":{"attribute":"plan","op":"eq","value":"gold"}}"#).0.status == .ok)
            let (response, body) = try await s.campaign(#"{"audience":{"segment":"gold"},"message":"For gold members"}"#)
            #expect(response.status == .accepted)
            #expect(body["recipients"] as? Int == 1 && body["devices"] as? Int == 2)
            #expect(body["audience"] as? String == #"filter: {"attribute":"plan","op":"eq","value":"gold"}"#)
            let id = try #require(body["id"] as? Int)
            func queued(_ campaign: Int) async throws -> (recipients: Set<String>, devices: Set<String>) {
                let recipients = try await s.database.read { db in
                    Set(try String.fetchAll(db, sql: "SELECT recipient FROM notifications WHERE campaignId = ?", arguments: [campaign]))
                }
                // Its pushes, rows or runs as the engine queued them.
                return (recipients, Set(try await DeliveryStore(database: s.database).list(campaign: Int64(campaign)).compactMap(\.registrationId)))
            }
            let first = try await queued(id)
            #expect(first.recipients == ["alice"] && first.devices == alice)

            // The segment changes: the campaign made before keeps its audience; a new one takes the new.
            #expect(try await s.json(.put, "/api/admin/segments/gold", as: "root", body: #"{"filter":{"attribute":"plan","op":"ne","value":"gold"}}"#).0.status == .ok)
            let (_, shown) = try await s.json(.get, "/api/admin/campaigns/\(id)", as: "root")
            #expect((shown as? [String: Any])?["audience"] as? String == #"filter: {"attribute":"plan","op":"eq","value":"gold"}"#)
            let (_, second) = try await s.campaign(#"{"audience":{"segment":"gold"},"message":"For everyone else"}"#)
            let secondID = try #require(second["id"] as? Int)
            let others = try await queued(secondID)
            #expect(others.recipients == ["bob", "root"] && others.devices == [bob]) // root has no attributes (ne matches) and no device

            // A filter of its own: users with a device seen in the last day who follow news.
            let (_, third) = try await s.campaign(#"{"audience":{"filter":{"all":[{"topic":"news"},{"lastSeen":{"withinDays":1}}]}},"message":"News"}"#)
            let thirdID = try #require(third["id"] as? Int)
            #expect(try await queued(thirdID).devices == alice)

            let refusals: [(String, String)] = [
                (#"{"audience":{"segment":"nope"},"message":"x"}"#, #"audience.segment: no segment named "nope""#),
                (#"{"audience":{"filter":{"attribute":"plan","op":"like","value":"g"}},"message":"x"}"#, #"audience.filter.op: unknown operator "like""#),
                (#"{"audience":{"filter":{"all":[{"segment":"nope"}]}},"message":"x"}"#, #"audience.filter.all[0].segment: no segment named "nope""#),
                (#"{"audience":{"segment":"a b"},"message":"x"}"#, "audience.segment: invalid segment name"),
                (#"{"audience":{"segment":"gold","all":true},"message":"x"}"#, "audience must have exactly one of"),
            ]
            for (body, detail) in refusals {
                let (refused, _) = try await s.campaign(body)
                #expect(refused.status == .badRequest, "\(body)")
                #expect(refused.detail.hasPrefix(detail), "\(refused.detail)")
            }
        }
    }
}
