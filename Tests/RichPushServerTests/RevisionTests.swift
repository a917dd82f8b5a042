import APNsSandbox
import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
@testable import HTTPEdge
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import PushDelivery
import PushSandboxes
@testable import RichPushCore
@testable import RichPushAPI
import RichPushClient
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import SQLEngine
import Testing

/// docs/api.md#change-or-take-back-what-was-sent: a campaign changed and then taken back, seen
/// through the three push services' stand-ins, two nodes, the inboxes and the payload URLs.
@Suite("Change or take back what was sent")
struct RevisionTests {
    /// The three stand-ins and a router over senders to them, as the platforms' own tests have them.
    func withPlatforms(_ body: @Sendable (RunningSandbox, FCMSandbox, WebPushSandbox, VAPID, PlatformRouter) async throws -> Void) async throws {
        try await PlatformDeliveryTests().withPlatforms(body)
    }

    func register(_ s: TestServer, platform: String, handle: String, as user: String) async throws {
        _ = try await PlatformDeliveryTests().register(s, platform: platform, handle: handle, as: user)
    }

    /// The path of a URL (`https://host/p/…` → `/p/…`).
    func path(_ url: String) -> String { String(url.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" }) }

    func object(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// A status from the fast path and one from the router, as the corrections' tests read them.
    func statuses(_ port: Int, path: String) async throws -> (fast: String, router: String) {
        try await CorrectionsTests().statuses(port, path: path, authorization: nil)
    }

    /// Records what the device library asks to remove.
    actor Remover: DeliveredNotificationRemoving {
        var removed: [[String]] = []
        func removeDeliveredNotifications(withIdentifiers identifiers: [String]) async { removed.append(identifiers) }
    }

    @Test("a campaign to 30 devices on three platforms, changed on one node and taken back on the other: replacements under the same collapse id, tag and Topic, then retractions; inboxes empty, payload URLs 410 on both nodes", arguments: StoreEngine.all)
    func changeThenRetract(engine: StoreEngine) async throws {
        try await withPlatforms { apns, fcm, web, vapid, platforms in
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true }, provider: platforms) { s in
                let users = s.data.users(cost: 4)
                let names = (0..<10).map { "fan\($0)" }
                var fcmTokens: [String: String] = [:] // token → user
                for name in names {
                    _ = try await users.add(name: name, password: name)
                    try await register(s, platform: "apns", handle: "\"\(String(repeating: "0", count: 62))\(String(format: "%02d", names.firstIndex(of: name)!))\"", as: name)
                    let token = fcm.register()
                    fcmTokens[token] = name
                    try await register(s, platform: "fcm", handle: "\"\(token)\"", as: name)
                    let subscription = try web.subscribe(applicationServerKey: vapid.publicKey)
                    let handle = #"{"endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(Base64URL.encode(subscription.p256dh))","auth":"\#(Base64URL.encode(subscription.auth))"}}"#
                    try await register(s, platform: "web", handle: handle, as: name)
                }
                let audience = names.map { "\"\($0)\"" }.joined(separator: ",")
                let (made, campaign) = try await s.json(.post, "/api/admin/campaigns", as: "root",
                                                       body: #"{"audience":{"users":[\#(audience)]},"title":"Sale","message":"50% off"}"#)
                #expect(made.status == .accepted)
                let id = try #require((campaign as? [String: Any])?["id"] as? Int)
                #expect(try await eventually { apns.sandbox.acceptedCount == 10 && fcm.acceptedCount == 10 && web.acceptedCount == 10 })
                let firstAPNs = apns.sandbox.accepted, firstFCM = fcm.accepted, firstWeb = web.accepted
                let links = try firstAPNs.map { try #require(try object($0.payload)["richUrl"] as? String) }

                try await s.secondNode(provider: platforms) { t in
                    // Changed through the second node: every device that showed it gets the new words, quietly.
                    let (changed, answer) = try await t.json(.patch, "/api/admin/campaigns/\(id)", as: "root", body: #"{"message":"40% off"}"#)
                    #expect(changed.status == .ok, "\(String(describing: answer))")
                    let change = try #require(answer as? [String: Any])
                    #expect(change["notifications"] as? Int == 10 && change["pending"] as? Int == 0)
                    #expect(change["replacements"] as? [String: Int] == ["apns": 10, "fcm": 10, "web": 10])
                    #expect((change["campaign"] as? [String: Any])?["message"] as? String == "40% off")
                    #expect(try await eventually { apns.sandbox.acceptedCount == 20 && fcm.acceptedCount == 20 && web.acceptedCount == 20 })
                    let againAPNs = apns.sandbox.accepted.dropFirst(10)
                    #expect(Set(againAPNs.map(\.token)) == Set(firstAPNs.map(\.token)))
                    for push in againAPNs {
                        let original = try #require(firstAPNs.first { $0.token == push.token })
                        #expect(push.headers["apns-collapse-id"] == original.headers["apns-collapse-id"] && push.headers["apns-collapse-id"] != nil)
                        #expect(push.apnsID != original.apnsID)
                        let body = try object(push.payload)
                        let aps = try #require(body["aps"] as? [String: Any])
                        #expect((aps["alert"] as? [String: Any])?["body"] as? String == "40% off")
                        #expect(aps["interruption-level"] as? String == "passive")
                        #expect((aps["sound"] as? String ?? "") == "")
                    }
                    for message in fcm.accepted.dropFirst(10) {
                        let original = try #require(firstFCM.first { $0.token == message.token })
                        #expect(message.tag == original.tag && message.tag != nil)
                        #expect(message.data["richMessage"] == "40% off" && message.data["richUpdate"] == "1")
                        #expect(message.notification?["body"] == "40% off")
                    }
                    for message in web.accepted.dropFirst(10) {
                        let original = try #require(firstWeb.first { $0.subscriptionID == message.subscriptionID })
                        #expect(message.topic == original.topic && message.topic != nil)
                        let shown = try object(Data(message.plaintext))
                        #expect(shown["richMessage"] as? String == "40% off" && shown["richUpdate"] as? Bool == true && shown["silent"] as? Bool == true)
                    }
                    // The inbox shows the new words, on either node.
                    let (_, inbox) = try await t.json(.get, "/api/notifications", as: "fan3")
                    #expect((inbox as? [[String: Any]])?.map { $0["message"] as? String } == ["40% off"])
                    #expect(try await s.request(.get, path(links[0]), as: nil).status == .ok)

                    // Taken back through the first node.
                    let (retracted, out) = try await s.json(.post, "/api/admin/campaigns/\(id)/retract", as: "root")
                    #expect(retracted.status == .ok, "\(String(describing: out))")
                    let retraction = try #require(out as? [String: Any])
                    #expect(retraction["inboxes"] as? Int == 10 && retraction["cancelled"] as? Int == 0)
                    #expect(retraction["retractPushes"] as? [String: Int] == ["apns": 10, "fcm": 10, "web": 10])
                    #expect(try await eventually { apns.sandbox.acceptedCount == 30 && fcm.acceptedCount == 30 && web.acceptedCount == 30 })
                    let remover = Remover()
                    for push in apns.sandbox.accepted.dropFirst(20) {
                        let original = try #require(firstAPNs.first { $0.token == push.token })
                        let collapse = try #require(original.headers["apns-collapse-id"])
                        #expect(try object(push.payload) as NSDictionary == ["aps": ["content-available": 1], "richpushRetract": collapse] as NSDictionary)
                        #expect(push.headers["apns-push-type"] == "background" && push.headers["apns-priority"] == "5")
                        #expect(push.headers["apns-collapse-id"] == nil)
                        // What the app does with it: the device library removes the delivered notification by its id.
                        let message = try RichPushMessage(userInfo: try object(push.payload))
                        #expect(message.kind == .retraction)
                        let client = RichPushClient(baseURL: URL(string: "https://push.example.com")!)
                        #expect(await client.handleRetraction(message, remover: remover) == [collapse])
                    }
                    #expect(await remover.removed.count == 10)
                    for message in fcm.accepted.dropFirst(20) {
                        let original = try #require(firstFCM.first { $0.token == message.token })
                        #expect(message.data == ["richpushRetract": try #require(original.tag)] && message.notification == nil)
                    }
                    for message in web.accepted.dropFirst(20) {
                        let original = try #require(firstWeb.first { $0.subscriptionID == message.subscriptionID })
                        #expect(message.topic == original.topic)
                        let shown = try object(Data(message.plaintext))
                        #expect(shown["richpushRetract"] as? String == original.topic && shown["richMessage"] as? String == "This message was withdrawn")
                        #expect(shown["richUrl"] == nil)
                    }
                    // Every inbox is empty; every payload URL is gone, from memory and from the router, on both nodes.
                    for name in names {
                        let (_, inbox) = try await t.json(.get, "/api/notifications", as: name)
                        #expect((inbox as? [Any])?.isEmpty == true)
                    }
                    for node in [s, t] {
                        let port = try #require(node.client.port)
                        for link in links {
                            #expect(try await eventually {
                                let (fast, router) = try await statuses(port, path: path(link))
                                return fast == "410" && router == "410"
                            })
                        }
                    }
                    let (again, _) = try await t.json(.patch, "/api/admin/campaigns/\(id)", as: "root", body: #"{"message":"too late"}"#)
                    #expect(again.status == .conflict)
                    let (_, shown) = try await t.json(.get, "/api/admin/campaigns/\(id)", as: "root")
                    #expect((shown as? [String: Any])?["status"] as? String == "retracted")
                    #expect(try await eventually {
                        let (_, stats) = try await t.json(.get, "/api/admin/campaigns/\(id)/stats", as: "root")
                        let totals = stats as? [String: Any]
                        return totals?["sent"] as? Int == 30 && totals?["updated"] as? Int == 30 && totals?["retracted"] as? Int == 30
                    })
                }
            }
        }
    }

    @Test("a device is sent at most two background pushes an hour: a third retraction waits for the hour, and a fourth goes with it")
    func backgroundBudget() async throws {
        try await RunningSandbox.with { apns in
            let platforms = PlatformRouter(["apns": APNsProvider(client: try apns.client())])
            try await TestServer.run(provider: platforms) { s in
                try await register(s, platform: "apns", handle: "\"\(String(repeating: "cd", count: 32))\"", as: "alice")
                var ids: [Int] = []
                for n in 0..<4 {
                    let (made, body) = try await s.json(.post, "/api/notifications", body: #"{"message":"note \#(n)","mode":"alert"}"#)
                    #expect(made.status == .created)
                    ids.append(try #require((body as? [String: Any])?["id"] as? Int))
                }
                #expect(try await eventually { apns.sandbox.acceptedCount == 4 })
                for id in ids {
                    let (response, body) = try await s.json(.delete, "/api/notifications/\(id)")
                    #expect(response.status == .ok && (body as? [String: Any])?["retractPushes"] as? [String: Int] == ["apns": 1, "fcm": 0, "web": 0])
                }
                #expect(try await eventually { apns.sandbox.acceptedCount == 6 })
                let sent = apns.sandbox.accepted.dropFirst(4).map { (try? object($0.payload))?["richpushRetract"] as? String }
                // The first two, in either order (they go out at once).
                #expect(Set(sent) == ["rp-\(ids[0])", "rp-\(ids[1])"])
                let waiting = try await s.database.read { db in
                    try SQLRow.fetchAll(db, sql: "SELECT dueAt, extra, state FROM deliveries WHERE kind = 'retract' ORDER BY id")
                }
                #expect(waiting.count == 3)
                let third = try #require(waiting.last)
                #expect(third["state"] as String == "pending")
                #expect(RetractionExtra(stored: third["extra"])?.ids == [Int64(ids[2]), Int64(ids[3])])
                #expect((third["dueAt"] as Double) >= (waiting[0]["dueAt"] as Double) + 3600)
                // The same notifications are gone from the inbox, and a second retraction is refused.
                let (_, inbox) = try await s.json(.get, "/api/notifications")
                #expect((inbox as? [Any])?.isEmpty == true)
                let (twice, _) = try await s.json(.delete, "/api/notifications/\(ids[0])")
                #expect(twice.status == .conflict)
                // The waiting push, once due, names both.
                try await s.database.write { db in try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = 0 WHERE kind = 'retract' AND state = 'pending'") }
                #expect(try await eventually { apns.sandbox.acceptedCount == 7 })
                #expect((try object(apns.sandbox.accepted[6].payload))["richpushRetract"] as? String == "rp-\(ids[2]),rp-\(ids[3])")
            }
        }
    }

    @Test("who may change or take back a notification, what is refused, a change before the push goes, and a new image behind the old payload URL", arguments: StoreEngine.all)
    func rulesAndImages(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            try await register(s, platform: "apns", handle: "\"\(String(repeating: "ef", count: 32))\"", as: "alice")
            // root sends alice an alert; nothing sends it (no provider), so its push waits.
            let (made, body) = try await s.json(.post, "/api/notifications", as: "root", body: #"{"to":"alice","title":"Hi","message":"typo","mode":"alert"}"#)
            #expect(made.status == .created)
            let created = try #require(body as? [String: Any])
            let id = try #require(created["id"] as? Int)
            let link = path(try #require(created["richUrl"] as? String))
            #expect(try await s.request(.get, link, as: nil).status == .ok)
            // bob cannot see it; alice, its recipient, may not change it; its sender may.
            #expect(try await s.json(.patch, "/api/notifications/\(id)", as: "bob", body: #"{"message":"x"}"#).0.status == .notFound)
            let (forbidden, _) = try await s.json(.patch, "/api/notifications/\(id)", as: "alice", body: #"{"message":"x"}"#)
            #expect(forbidden.status == .forbidden)
            #expect(try await s.json(.delete, "/api/notifications/\(id)", as: "alice").0.status == .forbidden)
            // Refused as a new one is, naming what is wrong.
            let (empty, _) = try await s.json(.patch, "/api/notifications/\(id)", as: "root", body: "{}")
            #expect(empty.status == .badRequest)
            let (unknown, problem) = try await s.json(.patch, "/api/notifications/\(id)", as: "root", body: #"{"mesage":"x"}"#)
            #expect(unknown.status == .badRequest && ((problem as? [String: Any])?["detail"] as? String ?? "").contains("mesage"))
            let (noImage, _) = try await s.json(.patch, "/api/notifications/\(id)", as: "root", body: #"{"payload":"no-such-image"}"#)
            #expect(noImage.status == .unprocessableContent)
            let (tooLong, _) = try await s.json(.patch, "/api/notifications/\(id)", as: "root", body: #"{"message":"\#(String(repeating: "x", count: 5000))"}"#)
            #expect(tooLong.status == .unprocessableContent)
            // Its push has not gone: it goes with the new words, and no replacement is made.
            let coupon = try Fixtures.bytes(Fixtures.media.appendingPathComponent("coupon.png"))
            #expect(try await s.request(.post, "/api/media?name=other", as: "root", body: coupon).status == .created)
            let (changed, answer) = try await s.json(.patch, "/api/notifications/\(id)", as: "root", body: #"{"message":"fixed","payload":"other"}"#)
            #expect(changed.status == .ok, "\(String(describing: answer))")
            let change = try #require(answer as? [String: Any])
            #expect(change["pending"] as? Int == 1 && change["replacements"] as? [String: Int] == ["apns": 0, "fcm": 0, "web": 0])
            let push = try await s.database.read { db in
                try SQLRow.fetchOne(db, sql: "SELECT push, message FROM notifications WHERE id = ?", arguments: [id])
            }
            #expect(push?["message"] as String? == "fixed")
            let stored = String(decoding: (push?["push"] as Data?) ?? Data(), as: UTF8.self)
            #expect(stored.contains("fixed"))
            let deliveries = try await s.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE notificationId = ?", arguments: [id]) }
            #expect(deliveries == 1)
            // The old payload URL serves the new image, from the router and from memory; so does the credential fetch.
            let other = MediaID(hashing: coupon)
            let port = try #require(s.client.port)
            for _ in 0..<2 {
                let fetched = try await s.request(.get, link, as: nil)
                #expect(fetched.status == .ok && fetched.headers[.eTag] == "\"\(other.hex)\"")
            }
            #expect(try await statuses(port, path: link) == ("200", "200"))
            #expect(try await s.request(.get, "/api/notifications/\(id)").headers[.eTag] == "\"\(other.hex)\"")
            // Taken back: the recipient's fetch says so (410), as the payload URL does.
            let (retracted, out) = try await s.json(.delete, "/api/notifications/\(id)", as: "root")
            #expect(retracted.status == .ok && (out as? [String: Any])?["inboxes"] as? Int == 1 && (out as? [String: Any])?["cancelled"] as? Int == 1)
            #expect(try await s.request(.get, "/api/notifications/\(id)").status == .gone)
            #expect(try await s.request(.get, link, as: nil).status == .gone)
            #expect(try await statuses(port, path: link) == ("410", "410"))
            #expect(try await s.json(.patch, "/api/notifications/\(id)", as: "root", body: #"{"message":"again"}"#).0.status == .conflict)
            // A notification alice sent herself is hers to take back.
            let (own, ownBody) = try await s.json(.post, "/api/notifications", body: #""mine""#)
            #expect(own.status == .created)
            let ownID = try #require((ownBody as? [String: Any])?["id"] as? Int)
            #expect(try await s.json(.delete, "/api/notifications/\(ownID)").0.status == .ok)
        }
    }

    @Test("a send key changes and takes back only its own campaigns; webhooks are told updated and retracted; a campaign not yet sent takes the new words")
    func keysAndEvents() async throws {
        try await TestServer.run { s in
            let keys = APIKeyStore(database: s.database)
            let mine = try await keys.add(name: "mine", scope: .send, app: nil)
            let theirs = try await keys.add(name: "theirs", scope: .send, app: nil)
            func call(_ method: HTTPRequest.Method, _ uri: String, key: String, _ body: String? = nil) async throws -> TestResponse {
                try await s.request(method, uri, as: nil, headers: [.authorization: "Bearer \(key)", .contentType: "application/json"],
                                    body: body.map { Array($0.utf8) })
            }
            _ = try await WebhookStore(database: s.database).add(url: "https://hooks.example.com/x", events: [.updated, .retracted], secret: "a-secret-of-16-bytes-or-more",
                                                                 allowPrivate: true)
            let sendAt = Date().addingTimeInterval(3600).formatted(.iso8601)
            let made = try await call(.post, "/api/admin/campaigns", key: mine, #"{"audience":{"all":true},"message":"later","sendAt":"\#(sendAt)"}"#)
            #expect(made.status == .accepted)
            let id = try #require((try JSONSerialization.jsonObject(with: Data(made.body.readableBytesView)) as? [String: Any])?["id"] as? Int)
            #expect(try await call(.patch, "/api/admin/campaigns/\(id)", key: theirs, #"{"message":"x"}"#).status == .forbidden)
            #expect(try await call(.post, "/api/admin/campaigns/\(id)/retract", key: theirs).status == .forbidden)
            let changed = try await call(.patch, "/api/admin/campaigns/\(id)", key: mine, #"{"message":"sooner","content":{"fr":{"message":"plus tôt"}}}"#)
            #expect(changed.status == .ok)
            let (_, shown) = try await s.json(.get, "/api/admin/campaigns/\(id)", as: "root")
            #expect((shown as? [String: Any])?["message"] as? String == "sooner" && (shown as? [String: Any])?["locales"] as? [String] == ["fr"])
            let badLocale = try await call(.patch, "/api/admin/campaigns/\(id)", key: mine, #"{"content":{"fr":{}}}"#)
            #expect(badLocale.status == .unprocessableContent)
            let retracted = try await call(.post, "/api/admin/campaigns/\(id)/retract", key: mine, #"{"retractedText":"Oops"}"#)
            #expect(retracted.status == .ok)
            #expect(try await call(.post, "/api/admin/campaigns/\(id)/retract", key: mine).status == .conflict)
            // The events of pushes sent as updated and retracted are queued for the webhook.
            try await s.database.write { db in
                try Insight.record(db, [Happening(type: .updated, campaign: Int64(id), notification: nil, user: "alice", platform: "apns"),
                                        Happening(type: .retracted, campaign: Int64(id), notification: nil, user: "alice", platform: "apns")],
                                   now: db.now)
            }
            let types = try await s.database.read { db in try String.fetchAll(db, sql: "SELECT type FROM events ORDER BY id") }
            #expect(types == ["updated", "retracted"])
        }
    }
}
