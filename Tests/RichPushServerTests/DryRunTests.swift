import APNsSandbox
import Foundation
import HTTPTypes
import PushDelivery
import PushSandboxes
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import SQLEngine
import Testing

/// docs/api.md#dry-runs (SPEC §29): `"dryRun":true` on a campaign, a notification or a Live
/// Activity's start answers what it would reach and send, checked as the send is, and leaves
/// every table as it was, every push service untouched and no Idempotency-Key behind.
@Suite("Dry runs")
struct DryRunTests {
    /// Every table's rows by table, the tables as the database's catalog lists them.
    static func rowCounts(_ s: TestServer) async throws -> [String: Int] {
        try await s.database.read { db in
            let tables: [String]
            if db.dialect == .postgres {
                tables = try String.fetchAll(db, sql: """
                    SELECT table_name::text FROM information_schema.tables
                    WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1
                    """)
            } else {
                tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            }
            var counts: [String: Int] = [:]
            for table in tables { counts[table] = try Int.fetchOne(db, sql: "SELECT count(*) FROM \"\(table)\"") ?? -1 }
            return counts
        }
    }

    /// One request by each of `users` and a pause: whatever a first sign-in or the server's start
    /// writes is written before rows are counted.
    static func settle(_ s: TestServer, _ users: [String]) async throws {
        for user in users { _ = try await s.request(.get, "/api/notifications", as: user) }
        try await Task.sleep(for: .milliseconds(300))
    }

    /// `body` (a JSON object) with `"dryRun":true`.
    static func dry(_ body: String) -> String { String(body.dropLast()) + #","dryRun":true}"# }

    /// A JSON object as text, keys sorted: two pushes compared whatever their keys' order.
    static func canonical(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.bytes)) as? [String: Any])
    }

    static func browserHandle(_ web: WebPushSandbox, _ vapid: VAPID) throws -> String {
        let subscription = try web.subscribe(applicationServerKey: vapid.publicKey)
        return #"{"endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(Base64URL.encode(subscription.p256dh))","auth":"\#(Base64URL.encode(subscription.auth))"}}"#
    }

    @Test("a campaign to 10,003 users: the exact reach by app and platform, 3 samples per platform rendered as the real send renders them, every table's rows as they were, no push, and its Idempotency-Key neither kept nor replayed", arguments: StoreEngine.all)
    func campaignToTenThousand(engine: StoreEngine) async throws {
        try await PlatformDeliveryTests().withPlatforms { apns, fcm, web, vapid, platforms in
            // Importing 10,000 users on a busy machine may outlast the test client's idle connection (60 s by default).
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true; $0.idleTimeout = 900 }, provider: platforms) { s in
                let people = try await ExperimentTests.users(s, 10_000)
                // The first two also have an Android phone, the third a browser.
                let fcmTokens = [fcm.register(), fcm.register()]
                let webHandle = try Self.browserHandle(web, vapid)
                try await s.database.write { db in
                    for (index, token) in fcmTokens.enumerated() {
                        try db.execute(sql: "INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES (?, ?, 'fcm', ?, '[]', 0, 0)",
                                       arguments: ["reg-fcm-\(index)", people[index].name, token])
                    }
                    try db.execute(sql: "INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES ('reg-web', ?, 'web', ?, '[]', 0, 0)",
                                   arguments: [people[2].name, webHandle])
                }
                let content = #""title":"Hi {{user.name}}","message":"20% off today","options":{"threadId":"sale"}"#
                let key: HTTPFields = [.contentType: "application/json", HTTPField.Name("Idempotency-Key")!: "sale-1"]
                try await Self.settle(s, ["root"])
                let before = try await Self.rowCounts(s)

                let started = ContinuousClock.now
                let dry = try await s.request(.post, "/api/admin/campaigns", as: "root", headers: key,
                                              body: Array(#"{"audience":{"all":true},\#(content),"dryRun":true}"#.utf8))
                print("dry run of a campaign to 10,003 users on \(engine): \(ContinuousClock.now - started)")
                #expect(dry.status == .ok, "\(dry.detail)")
                let answer = try Self.object(dry)
                #expect(answer["dryRun"] as? Bool == true)
                let reach = try #require(answer["reach"] as? [String: Any])
                #expect(reach["users"] as? Int == 10_003 && reach["devices"] as? Int == 10_003, "\(reach)")
                #expect(reach["byApp"] as? [String: [String: Int]] == ["default": ["apns": 10_000, "fcm": 2, "web": 1, "hub": 0]], "\(reach)")
                let samples = try #require(answer["samples"] as? [String: [[String: Any]]])
                #expect(samples["apns"]?.map { $0["user"] as? String } == ["ab00001", "ab00002", "ab00003"])
                #expect(samples["fcm"]?.map { $0["user"] as? String } == ["ab00001", "ab00002"])
                #expect(samples["web"]?.map { $0["user"] as? String } == ["ab00003"])
                #expect(samples["hub"]?.isEmpty == true)
                let warnings = answer["warnings"] as? [String] ?? []
                #expect(warnings.contains { $0.hasPrefix("3 of the 10003 recipients have no device") }, "\(warnings)")

                // Nothing stored in any table, nothing sent.
                #expect(try await Self.rowCounts(s) == before)
                try await Task.sleep(for: .milliseconds(500))
                #expect(apns.sandbox.acceptedCount == 0 && fcm.acceptedCount == 0 && web.acceptedCount == 0)

                let sample = try #require(samples["apns"]?.first)
                let shownPush = try #require(sample["push"] as? [String: Any])
                let shownHeaders = try #require(sample["headers"] as? [String: String])
                #expect(shownHeaders["apns-push-type"] == "alert" && shownHeaders["apns-priority"] == "10")
                #expect(shownHeaders["apns-collapse-id"]?.hasPrefix("rp-") == true)
                let placeholder = try #require(shownPush["richUrl"] as? String)
                #expect(placeholder.hasSuffix("/p/" + DryRun.placeholderToken))
                #expect((sample["size"] as? Int ?? 0) > 0)
                let shownAndroid = try #require(samples["fcm"]?.first?["message"] as? [String: Any])
                // The device's token is not shown (whoever holds it can push to the phone): x's of its length.
                #expect(shownAndroid["token"] as? String == String(repeating: "x", count: fcmTokens[0].count))

                // The same content sent for real to the first sampled user, with the dry run's key: a first request, not a replay.
                let real = Array(#"{"audience":{"users":["ab00001"]},\#(content)}"#.utf8)
                let sent = try await s.request(.post, "/api/admin/campaigns", as: "root", headers: key, body: real)
                #expect(sent.status == .accepted && sent.headers[HTTPField.Name("Idempotent-Replayed")!] == nil, "\(sent.detail)")
                let token = people[0].token
                #expect(try await eventually { apns.sandbox.accepted.contains { $0.token == token } && fcm.acceptedCount == 1 })
                let delivered = try #require(apns.sandbox.accepted.first { $0.token == token })
                var pushed = try #require(try JSONSerialization.jsonObject(with: delivered.payload) as? [String: Any])
                // The payload URL shown has a signed one's length: the push was measured at its size.
                #expect((pushed["richUrl"] as? String)?.count == placeholder.count)
                var shown = shownPush
                for field in ["richId", "richUrl"] {
                    pushed[field] = nil
                    shown[field] = nil
                }
                #expect(try Self.canonical(pushed) == Self.canonical(shown))
                #expect(((pushed["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String == "Hi ab00001")
                #expect(delivered.headers["apns-push-type"] == shownHeaders["apns-push-type"] && delivered.headers["apns-priority"] == shownHeaders["apns-priority"])
                let android = try #require(fcm.accepted.first)
                #expect(android.token == fcmTokens[0] && android.notification?["title"] == "Hi ab00001")
                #expect(android.data["richMessage"] == (shownAndroid["data"] as? [String: String])?["richMessage"])
                // The real request kept the key: its repeat is a replay.
                let again = try await s.request(.post, "/api/admin/campaigns", as: "root", headers: key, body: real)
                #expect(again.status == .accepted && again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            }
        }
    }

    @Test("the same bad body is refused with the same status, dry run or not, and neither writes a row: campaigns, notifications, Live Activities", arguments: StoreEngine.all)
    func validationParity(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let key = try await APIKeyStore(database: s.database).add(name: "shop-backend", scope: .send, app: "shop-ios")
            let long = String(repeating: "x", count: 5_000)
            let locales = (0...50).map { #""en-x\#($0)":{"message":"m"}"# }.joined(separator: ",")
            let activity = #""type":"DeliveryAttributes","audience":{"users":["alice"]}"#
            // (path, caller: a user or "key", body, the status both answer)
            let cases: [(String, String, String, HTTPResponse.Status)] = [
                ("/api/admin/campaigns", "root", #"{"audience":{"users":["alice","nobody"]},"message":"x"}"#, .unprocessableContent),
                ("/api/admin/campaigns", "root", #"{"audience":{"all":true},"title":"Hi {{#attributes.first_name}}"}"#, .unprocessableContent),
                ("/api/admin/campaigns", "root", #"{"audience":{"all":true},"message":"\#(long)"}"#, .unprocessableContent),
                ("/api/admin/campaigns", "root", #"{"audience":{"filter":{"attribute":"First-Name","op":"eq","value":"x"}}}"#, .badRequest),
                ("/api/admin/campaigns", "root", #"{"audience":{"segment":"nope"}}"#, .badRequest),
                ("/api/admin/campaigns", "root", #"{"audience":{"all":true},"content":{\#(locales)}}"#, .contentTooLarge),
                ("/api/admin/campaigns", "root", #"{"audience":{"all":true},"sendAt":"2001-01-01T00:00:00Z"}"#, .unprocessableContent),
                ("/api/admin/campaigns", "root", #"{"audience":{"all":true},"mode":"loud"}"#, .badRequest),
                ("/api/admin/campaigns", "key", #"{"audience":{"all":true},"message":"x"}"#, .forbidden),
                ("/api/notifications", "alice", #"{"to":"bob","message":"x"}"#, .forbidden),
                ("/api/notifications", "root", #"{"to":"nobody","message":"x"}"#, .unprocessableContent),
                ("/api/notifications", "alice", #"{"mode":"alert","message":"\#(long)"}"#, .unprocessableContent),
                ("/api/notifications", "alice", #"{"payload":"no-such-image"}"#, .unprocessableContent),
                ("/api/notifications", "alice", #"{"app":"nope"}"#, .unprocessableContent),
                ("/api/notifications", "alice", #"{"mode":"loud"}"#, .badRequest),
                ("/api/notifications", "key", #"{"to":"alice"}"#, .forbidden),
                ("/api/live-activities", "root", #"{\#(activity),"contentState":{"stage":"packed"}}"#, .unprocessableContent),
                ("/api/live-activities", "root", #"{\#(activity),"contentState":{"text":"\#(long)"},"alert":{"title":"x"}}"#, .contentTooLarge),
                ("/api/live-activities", "root", #"{\#(activity),"contentState":{},"attributes":"[1]","alert":{"title":"x"}}"#, .badRequest),
                ("/api/live-activities", "root", #"{\#(activity),"contentState":{},"alert":{"title":"x"},"relevanceScore":200}"#, .badRequest),
                ("/api/live-activities", "key", #"{\#(activity),"contentState":{},"alert":{"title":"x"}}"#, .forbidden),
            ]
            try await Self.settle(s, ["root", "alice"])
            _ = try await s.request(.get, "/api/admin/campaigns", as: nil, headers: [.authorization: "Bearer \(key)"])
            let before = try await Self.rowCounts(s)
            for (path, caller, body, status) in cases {
                func send(_ text: String) async throws -> TestResponse {
                    var headers: HTTPFields = [.contentType: "application/json"]
                    if caller == "key" { headers[.authorization] = "Bearer \(key)" }
                    return try await s.request(.post, path, as: caller == "key" ? nil : caller, headers: headers, body: Array(text.utf8))
                }
                let dry = try await send(Self.dry(body))
                let real = try await send(body)
                #expect(dry.status == status && real.status == status, "\(path) \(body.prefix(120)): dry run \(dry.status) (\(dry.detail)), send \(real.status) (\(real.detail))")
            }
            #expect(try await Self.rowCounts(s) == before)
        }
    }

    @Test("a notification's and a Live Activity start's dry runs: the devices and each platform's push, nothing written or sent; a broadcast's makes no channel; the notification then sent is what was shown", arguments: StoreEngine.all)
    func notificationAndLiveActivity(engine: StoreEngine) async throws {
        try await PlatformDeliveryTests().withPlatforms { apns, fcm, web, vapid, platforms in
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true }, provider: platforms) { s in
                let devices = PlatformDeliveryTests()
                let iphone = try await devices.register(s, platform: "apns", handle: "\"\(String(repeating: "ab", count: 32))\"", as: "alice")
                let fcmToken = fcm.register()
                _ = try await devices.register(s, platform: "fcm", handle: "\"\(fcmToken)\"", as: "alice")
                _ = try await devices.register(s, platform: "web", handle: try Self.browserHandle(web, vapid), as: "alice")
                let (kept, _) = try await s.json(.put, "/api/register/\(iphone)/live-activities/DeliveryAttributes", as: "alice",
                                                 body: #"{"pushToStartToken":"\#(LiveActivityTests.hex(0xa7))"}"#)
                #expect(kept.status == .noContent)
                try await Self.settle(s, ["root", "alice"])
                let before = try await Self.rowCounts(s)
                let everywhere: [String: [String: Int]] = ["default": ["apns": 1, "fcm": 1, "web": 1, "hub": 0]]

                // A notification to alice: her three devices, each platform's push.
                let notification = #"{"title":"Hi","message":"Look","mode":"alert","badge":"unread"}"#
                let (dry, answer) = try await s.json(.post, "/api/notifications", as: "alice", body: Self.dry(notification))
                #expect(dry.status == .ok, "\(dry.detail)")
                let run = try #require(answer as? [String: Any])
                let reach = try #require(run["reach"] as? [String: Any])
                #expect(reach["users"] as? Int == 1 && reach["devices"] as? Int == 3 && reach["byApp"] as? [String: [String: Int]] == everywhere, "\(reach)")
                let samples = try #require(run["samples"] as? [String: [[String: Any]]])
                let shownPush = try #require(samples["apns"]?.first?["push"] as? [String: Any])
                let aps = try #require(shownPush["aps"] as? [String: Any])
                #expect((aps["alert"] as? [String: Any])?["title"] as? String == "Hi" && aps["mutable-content"] as? Int == 1)
                #expect(aps["badge"] as? Int == 1) // her unread count once it is in her inbox
                #expect((shownPush["richUrl"] as? String)?.hasSuffix("/p/" + DryRun.placeholderToken) == true)
                #expect((samples["apns"]?.first?["headers"] as? [String: String])?["apns-push-type"] == "alert")
                let android = try #require(samples["fcm"]?.first?["message"] as? [String: Any])
                #expect(android["token"] as? String == String(repeating: "x", count: fcmToken.count) && (android["notification"] as? [String: Any])?["title"] as? String == "Hi")
                #expect((android["data"] as? [String: String])?["richMessage"] == "Look")
                let browser = try #require(samples["web"]?.first)
                let plaintext = try #require(browser["payload"] as? [String: Any])
                #expect(plaintext["title"] as? String == "Hi" && plaintext["badgeCount"] as? Int == 1)
                #expect((browser["headers"] as? [String: String])?["Urgency"] == "high")
                #expect(try await Self.rowCounts(s) == before)

                // A Live Activity's start: iOS through its push-to-start token, Android and the browser as data.
                let start = #"{"type":"DeliveryAttributes","audience":{"users":["alice"]},"attributes":{"orderId":"A17"},"contentState":{"stage":"packed"},"alert":{"title":"On its way"}}"#
                let (started, activity) = try await s.json(.post, "/api/live-activities", as: "root", body: Self.dry(start))
                #expect(started.status == .ok, "\(started.detail)")
                let activityRun = try #require(activity as? [String: Any])
                let activityReach = try #require(activityRun["reach"] as? [String: Any])
                #expect(activityReach["devices"] as? Int == 3 && activityReach["byApp"] as? [String: [String: Int]] == everywhere, "\(activityReach)")
                let activitySamples = try #require(activityRun["samples"] as? [String: [[String: Any]]])
                let startPush = try #require(activitySamples["apns"]?.first)
                let startAps = try #require((startPush["push"] as? [String: Any])?["aps"] as? [String: Any])
                #expect(startAps["event"] as? String == "start" && startAps["attributes-type"] as? String == "DeliveryAttributes")
                #expect(((startAps["attributes"] as? [String: Any])?["richpushActivity"]) as? String == DryRun.placeholderActivity)
                #expect((startPush["headers"] as? [String: String])?["apns-push-type"] == "liveactivity")
                let startAndroid = try #require(activitySamples["fcm"]?.first?["message"] as? [String: Any])
                #expect((startAndroid["data"] as? [String: String])?["event"] == "start")
                #expect((startAndroid["android"] as? [String: Any])?["collapse_key"] as? String == DryRun.placeholderActivity)
                let startBrowser = try #require(activitySamples["web"]?.first)
                #expect((startBrowser["payload"] as? [String: Any])?["event"] as? String == "start")
                #expect((startBrowser["headers"] as? [String: String])?["Topic"] == DryRun.placeholderActivity)

                // A broadcast's: no channel is made at APNs; the start names the placeholder.
                let (cast, castAnswer) = try await s.json(.post, "/api/live-activities", as: "root", body: Self.dry(String(start.dropLast()) + #","broadcast":true}"#))
                #expect(cast.status == .ok, "\(cast.detail)")
                #expect(apns.sandbox.channelIDs.isEmpty)
                let castSamples = (castAnswer as? [String: Any])?["samples"] as? [String: [[String: Any]]]
                let castAps = (castSamples?["apns"]?.first?["push"] as? [String: Any])?["aps"] as? [String: Any]
                #expect(castAps?["input-push-channel"] as? String == DryRun.placeholderChannel)
                #expect(((castAnswer as? [String: Any])?["warnings"] as? [String])?.contains { $0.hasPrefix("broadcast: no channel was made") } == true)

                #expect(try await Self.rowCounts(s) == before)
                try await Task.sleep(for: .milliseconds(500))
                #expect(apns.sandbox.acceptedCount == 0 && fcm.acceptedCount == 0 && web.acceptedCount == 0)
                #expect(apns.sandbox.channelIDs.isEmpty)

                // The notification sent: APNs gets what the dry run showed, its id and payload URL aside.
                let (made, _) = try await s.json(.post, "/api/notifications", as: "alice", body: notification)
                #expect(made.status == .created)
                #expect(try await eventually { apns.sandbox.acceptedCount == 1 })
                let delivered = try #require(apns.sandbox.accepted.first)
                var pushed = try #require(try JSONSerialization.jsonObject(with: delivered.payload) as? [String: Any])
                var shown = shownPush
                for field in ["richId", "richUrl"] {
                    pushed[field] = nil
                    shown[field] = nil
                }
                #expect(try Self.canonical(pushed) == Self.canonical(shown))
            }
        }
    }
}
