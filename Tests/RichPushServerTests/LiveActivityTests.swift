import APNsSandbox
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
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

/// docs/api.md#live-activities: an activity started, updated and ended from the server, as a
/// scripted phone (the APNs sandbox's phone view and `RichPushClient`) sees it.
@Suite("Live Activities")
struct LiveActivityTests {
    func withPlatforms(_ body: @Sendable (RunningSandbox, FCMSandbox, WebPushSandbox, VAPID, PlatformRouter) async throws -> Void) async throws {
        try await PlatformDeliveryTests().withPlatforms(body)
    }

    func register(_ s: TestServer, platform: String, handle: String, as user: String) async throws -> String {
        try await PlatformDeliveryTests().register(s, platform: platform, handle: handle, as: user)
    }

    func object(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func hex(_ byte: Int, count: Int = 80) -> String { String(repeating: String(format: "%02x", byte), count: count) }

    static func baseURL(_ s: TestServer) throws -> URL { try ClientLibraryTests.baseURL(s) }

    @Test("a scripted phone: push-to-start, its update token reported, 20 updates from two nodes in order with strictly increasing timestamps, the end; Android and a browser get the same activity", arguments: StoreEngine.all)
    func lifecycle(engine: StoreEngine) async throws {
        try await withPlatforms { apns, fcm, web, vapid, platforms in
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true }, provider: platforms) { s in
                _ = try await s.data.users(cost: 4).add(name: "rider", password: "rider")
                let iphone = try await register(s, platform: "apns", handle: "\"\(Self.hex(0x11, count: 32))\"", as: "rider")
                let fcmToken = fcm.register()
                _ = try await register(s, platform: "fcm", handle: "\"\(fcmToken)\"", as: "rider")
                let subscription = try web.subscribe(applicationServerKey: vapid.publicKey)
                let handle = #"{"endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(Base64URL.encode(subscription.p256dh))","auth":"\#(Base64URL.encode(subscription.auth))"}}"#
                _ = try await register(s, platform: "web", handle: handle, as: "rider")

                // The phone: ActivityKit hands the app a push-to-start token, which it registers.
                let phone = RichPushClient(baseURL: try Self.baseURL(s), credentials: .basic(user: "rider", password: "rider"), registration: iphone)
                let startToken = Self.hex(0xa7)
                try await phone.registerPushToStartToken(type: "DeliveryAttributes", token: startToken)

                let (started, answer) = try await s.json(.post, "/api/live-activities", as: "root", body: """
                    {"type":"DeliveryAttributes","audience":{"users":["rider"]},"attributes":{"orderId":"A17"},
                     "contentState":{"stage":"packed","eta":"12:30"},"alert":{"title":"Your order is on its way","body":"Packed"}}
                    """)
                #expect(started.status == .accepted, "\(String(describing: answer))")
                let id = try #require((answer as? [String: Any])?["id"] as? String)
                #expect((answer as? [String: Any])?["devices"] as? Int == 3)

                // The phone shows it, and ActivityKit gives the app the activity's update token.
                #expect(try await eventually { apns.sandbox.phoneActivities(pushToStartToken: startToken).count == 1 })
                let shown = try #require(apns.sandbox.phoneActivities(pushToStartToken: startToken).first)
                #expect(shown.richpushActivity == id && shown.attributesType == "DeliveryAttributes")
                let startPush = try #require(apns.sandbox.accepted.first { $0.token == startToken })
                #expect(startPush.headers["apns-push-type"] == "liveactivity")
                #expect(startPush.headers["apns-topic"] == RunningSandbox.topic + ".push-type.liveactivity")
                #expect(startPush.headers["apns-priority"] == "10")
                let aps = try #require(try object(startPush.payload)["aps"] as? [String: Any])
                #expect(aps["event"] as? String == "start" && aps["attributes-type"] as? String == "DeliveryAttributes")
                #expect((aps["content-state"] as? [String: Any])?["stage"] as? String == "packed")
                #expect((aps["attributes"] as? [String: Any])?["orderId"] as? String == "A17")
                #expect(aps["timestamp"] is Int)

                try await s.secondNode(provider: platforms) { t in
                    let phoneOnT = RichPushClient(baseURL: try Self.baseURL(t), credentials: .basic(user: "rider", password: "rider"))
                    try await phoneOnT.reportActivityToken(activity: id, token: shown.updateToken, registration: iphone)

                    // 20 updates, ten through each node at once.
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for (node, server) in [s, t].enumerated() {
                            group.addTask {
                                for step in 0..<10 {
                                    let (updated, body) = try await server.json(.patch, "/api/live-activities/\(id)", as: "root",
                                                                                body: #"{"contentState":{"stage":"moving","step":\#(node * 10 + step)}}"#)
                                    #expect(updated.status == .accepted, "\(String(describing: body))")
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    let (ended, _) = try await t.json(.delete, "/api/live-activities/\(id)", as: "root",
                                                      body: #"{"contentState":{"stage":"delivered"},"dismissAt":1900000000}"#)
                    #expect(ended.status == .accepted)
                    let (again, refusal) = try await s.json(.patch, "/api/live-activities/\(id)", as: "root", body: #"{"contentState":{"stage":"x"}}"#)
                    #expect(again.status == .conflict, "\(String(describing: refusal))")
                    // Both nodes send until the end is out (they share the providers, which the second closes as it stops).
                    let updateToken = shown.updateToken
                    #expect(try await eventually(within: 30) {
                        apns.sandbox.phoneEvents.filter { $0.token == updateToken }.count == 21 && fcm.acceptedCount == 22 && web.acceptedCount == 22
                    })
                }

                let updateToken = shown.updateToken
                let events = apns.sandbox.phoneEvents
                #expect(events.allSatisfy { $0.shown }, "\(events.filter { !$0.shown })")
                let onPhone = events.filter { $0.token == updateToken }
                #expect(onPhone.map(\.event) == Array(repeating: "update", count: 20) + ["end"])
                let stamps = onPhone.compactMap(\.timestamp)
                #expect(stamps.count == 21 && zip(stamps, stamps.dropFirst()).allSatisfy { $0 < $1 }, "\(stamps)")
                let final = try #require(apns.sandbox.phoneActivities(pushToStartToken: startToken).first)
                #expect(final.ended && final.shown == 22)
                #expect((try object(Data(final.contentState.utf8)))["stage"] as? String == "delivered")

                // Android: a data message per event, collapsed under the activity's id; high priority to start and end.
                let messages = fcm.accepted
                #expect(messages.allSatisfy { $0.collapseKey == id && $0.data["richpushActivity"] == id && $0.notification == nil })
                #expect(messages.map { $0.data["event"] ?? "" } == ["start"] + Array(repeating: "update", count: 20) + ["end"])
                #expect(messages.first?.android["priority"] as? String == "HIGH" && messages.last?.android["priority"] as? String == "HIGH")
                #expect(messages[1].android["priority"] as? String == "NORMAL")
                // The browser: one notification replaced under the activity's Topic.
                #expect(web.accepted.allSatisfy { $0.topic == id })
                let last = try object(Data(try #require(web.accepted.last).plaintext))
                #expect(last["event"] as? String == "end" && (last["contentState"] as? [String: Any])?["stage"] as? String == "delivered")

                let (_, state) = try await s.json(.get, "/api/live-activities/\(id)", as: "root")
                let activity = try #require(state as? [String: Any])
                #expect(activity["state"] as? String == "ended" && activity["updates"] as? Int == 20 && activity["failures"] as? Int == 0)
                #expect(activity["devices"] as? Int == 3)
                let devices = try #require(activity["perDevice"] as? [[String: Any]])
                #expect(devices.count == 3 && devices.allSatisfy { $0["lastEvent"] as? String == "end" && $0["lastState"] as? String == "sent" })
            }
        }
    }

    @Test("a broadcast activity: a channel made through APNs' channel management, 1,000 subscribed devices updated by one push per update, the channel deleted after the end")
    func broadcast() async throws {
        try await withPlatforms { apns, _, _, _, platforms in
            try await TestServer.run(provider: platforms) { s in
                let users = s.data.users(cost: 4)
                var tokens: [String] = []
                for u in 0..<100 {
                    let name = "fan\(u)"
                    _ = try await users.add(name: name, password: name)
                    for d in 0..<10 {
                        let registration = try await s.data.registrations.create(for: name)
                        let n = u * 10 + d
                        _ = try await s.data.registrations.update(id: registration.id, for: name,
                                                                  with: DeviceRegistration(platform: "apns", handle: String(format: "%064x", n + 1), tags: []))
                        let token = String(format: "%0160x", n + 7_000_000)
                        try await s.data.liveActivities.setPushToStartToken(registration: registration.id, owner: name, type: "MatchAttributes", token: token)
                        tokens.append(token)
                    }
                }
                let (started, answer) = try await s.json(.post, "/api/live-activities", as: "root", body: """
                    {"type":"MatchAttributes","audience":{"all":true},"broadcast":true,"attributes":{"match":"Final"},
                     "contentState":{"home":0,"away":0},"alert":{"title":"Kick-off"}}
                    """)
                #expect(started.status == .accepted, "\(String(describing: answer))")
                let body = try #require(answer as? [String: Any])
                let id = try #require(body["id"] as? String)
                let channel = try #require(body["channelId"] as? String)
                #expect(body["devices"] as? Int == 1000)
                // The first goal comes at once: its broadcast waits for the starts that subscribe the phones.
                let (updated, _) = try await s.json(.patch, "/api/live-activities/\(id)", as: "root", body: #"{"contentState":{"home":1,"away":0}}"#)
                #expect(updated.status == .accepted)
                #expect(try await eventually(within: 60) { apns.sandbox.phoneEvents.filter { $0.channelID == channel && $0.event == "update" && $0.shown }.count == 1000 })
                #expect(apns.sandbox.phoneActivities.filter { $0.channelID == channel }.count == 1000)
                #expect(apns.sandbox.acceptedCount == 1001)
                let before = 1000
                let broadcastPush = try #require(apns.sandbox.accepted.last)
                #expect(broadcastPush.headers["apns-channel-id"] == channel && broadcastPush.headers["apns-push-type"] == "liveactivity")
                let (ended, _) = try await s.json(.delete, "/api/live-activities/\(id)", as: "root")
                #expect(ended.status == .accepted)
                #expect(try await eventually { apns.sandbox.phoneEvents.filter { $0.channelID == channel && $0.event == "end" && $0.shown }.count == 1000 })
                #expect(apns.sandbox.acceptedCount == before + 2)
                #expect(apns.sandbox.phoneActivities.filter { $0.channelID == channel }.allSatisfy { $0.ended && $0.shown == 3 })
                // The channel goes after the end.
                #expect(try await eventually { !apns.sandbox.channelIDs.contains(channel) })
            }
        }
    }

    @Test("bad input: unknown type 202 with no devices, malformed JSON 400 naming it, a bad token 400, no alert 422, over 4 KiB 413 with its size, an update after 8 hours 409")
    func refusals() async throws {
        try await withPlatforms { _, _, _, _, platforms in
            try await TestServer.run(provider: platforms) { s in
                let iphone = try await register(s, platform: "apns", handle: "\"\(Self.hex(0x22, count: 32))\"", as: "alice")
                let (bad, badBody) = try await s.json(.put, "/api/register/\(iphone)/live-activities/Delivery", body: #"{"pushToStartToken":"xyz"}"#)
                #expect(bad.status == .badRequest && "\(String(describing: badBody))".contains("hex"))
                let (short, _) = try await s.json(.put, "/api/register/\(iphone)/live-activities/Delivery", body: #"{"pushToStartToken":"abcd"}"#)
                #expect(short.status == .badRequest)
                let (others, _) = try await s.json(.put, "/api/register/\(iphone)/live-activities/Delivery", as: "bob",
                                                   body: #"{"pushToStartToken":"\#(Self.hex(1))"}"#)
                #expect(others.status == .notFound)
                let (kept, _) = try await s.json(.put, "/api/register/\(iphone)/live-activities/Delivery", body: #"{"pushToStartToken":"\#(Self.hex(1))"}"#)
                #expect(kept.status == .noContent)

                let (unknown, none) = try await s.json(.post, "/api/live-activities", as: "root",
                                                       body: #"{"type":"Nobody","audience":{"all":true},"contentState":{},"alert":{"title":"Hi"}}"#)
                #expect(unknown.status == .accepted && (none as? [String: Any])?["devices"] as? Int == 0)
                let (malformed, why) = try await s.json(.post, "/api/live-activities", as: "root",
                                                        body: #"{"type":"Delivery","audience":{"all":true},"contentState":"{\"eta\": 12,","alert":{"title":"Hi"}}"#)
                #expect(malformed.status == .badRequest)
                let detail = (why as? [String: Any])?["detail"] as? String ?? ""
                #expect(detail.hasPrefix("contentState"), "\(String(describing: why))")
                let (notObject, _) = try await s.json(.post, "/api/live-activities", as: "root",
                                                      body: #"{"type":"Delivery","audience":{"all":true},"contentState":{},"attributes":"[1]","alert":{"title":"Hi"}}"#)
                #expect(notObject.status == .badRequest)
                let (silent, silentWhy) = try await s.json(.post, "/api/live-activities", as: "root",
                                                           body: #"{"type":"Delivery","audience":{"all":true},"contentState":{}}"#)
                #expect(silent.status == .unprocessableContent && "\(String(describing: silentWhy))".contains("alert.title"))
                let big = String(repeating: "x", count: 4200)
                let (large, largeWhy) = try await s.json(.post, "/api/live-activities", as: "root",
                                                         body: #"{"type":"Delivery","audience":{"all":true},"contentState":{"note":"\#(big)"},"alert":{"title":"Hi"}}"#)
                #expect(large.status == .contentTooLarge && "\(String(describing: largeWhy))".contains("bytes"))
                #expect(try await s.data.liveActivities.list(limit: 10).count == 1) // the refused ones left nothing

                let (started, answer) = try await s.json(.post, "/api/live-activities", as: "root",
                                                         body: #"{"type":"Delivery","audience":{"users":["alice"]},"contentState":{"a":1},"alert":{"title":"Hi"}}"#)
                #expect(started.status == .accepted && (answer as? [String: Any])?["devices"] as? Int == 1)
                let id = try #require((answer as? [String: Any])?["id"] as? String)
                let (noState, _) = try await s.json(.patch, "/api/live-activities/\(id)", as: "root", body: #"{"alert":{"title":"x"}}"#)
                #expect(noState.status == .badRequest)
                let (badPriority, _) = try await s.json(.patch, "/api/live-activities/\(id)", as: "root", body: #"{"contentState":{},"priority":7}"#)
                #expect(badPriority.status == .badRequest)
                let (asUser, _) = try await s.json(.patch, "/api/live-activities/\(id)", as: "alice", body: #"{"contentState":{}}"#)
                #expect(asUser.status == .forbidden)
                let (badToken, _) = try await s.json(.put, "/api/live-activities/\(id)/tokens", body: #"{"registration":"\#(iphone)","token":"zz"}"#)
                #expect(badToken.status == .badRequest)
                // Eight hours on, iOS has ended it: an update is 409, the end is still taken.
                try await s.database.write { db in
                    try db.execute(sql: "UPDATE live_activities SET createdAt = createdAt - ? WHERE id = ?", arguments: [8 * 3600 + 1, id])
                }
                let (late, lateWhy) = try await s.json(.patch, "/api/live-activities/\(id)", as: "root", body: #"{"contentState":{"a":2}}"#)
                #expect(late.status == .conflict && "\(String(describing: lateWhy))".contains("8 hours"))
                let (ended, _) = try await s.json(.delete, "/api/live-activities/\(id)", as: "root")
                #expect(ended.status == .accepted)
                let (twice, _) = try await s.json(.delete, "/api/live-activities/\(id)", as: "root")
                #expect(twice.status == .conflict)
                let (missing, _) = try await s.json(.get, "/api/live-activities/la_00000000000000000000", as: "root")
                #expect(missing.status == .notFound)
            }
        }
    }

    @Test("APNs' channel management down, then silent: a broadcast start is 503 with Retry-After (after the 10 s request timeout when silent) and stores nothing; one the store refuses (a push over 4 KiB) gives its channel back")
    func channelFaults() async throws {
        try await RunningSandbox.with { apns in
            let proxy = try FaultProxy(targetPort: apns.port)
            defer { proxy.stop() }
            let client = try APNsClient(credentials: apns.credentials, topic: RunningSandbox.topic, environment: .custom("https://127.0.0.1:\(proxy.port)"),
                                        extraRoots: [apns.certificatePath])
            try await TestServer.run(provider: PlatformRouter(["apns": APNsProvider(client: client)])) { s in
                let start = #"{"type":"Match","audience":{"all":true},"broadcast":true,"contentState":{},"alert":{"title":"Kick-off"}}"#
                for mode in [FaultProxy.Mode.down, .stall] {
                    proxy.set(mode)
                    try await Task.sleep(for: .milliseconds(200)) // the proxy's thread acts within 50 ms
                    let (refused, why) = try await s.json(.post, "/api/live-activities", as: "root", body: start)
                    #expect(refused.status == .serviceUnavailable && refused.headers[.retryAfter] != nil, "\(mode): \(String(describing: why))")
                    #expect("\(String(describing: why))".contains("broadcast channel"))
                }
                #expect(try await s.data.liveActivities.list(limit: 10).isEmpty)
                #expect(apns.sandbox.channelIDs.isEmpty)
                proxy.set(.forward)
                try await Task.sleep(for: .milliseconds(200))
                let big = String(repeating: "x", count: 4200)
                let (large, _) = try await s.json(.post, "/api/live-activities", as: "root",
                                                  body: #"{"type":"Match","audience":{"all":true},"broadcast":true,"contentState":{"n":"\#(big)"},"alert":{"title":"Kick-off"}}"#)
                // The request that went unanswered was never sent: the stalled connection never got
                // as far as APNs' SETTINGS, and a request still waiting for them at its timeout is
                // dropped. (One APNs receives but answers too late can still make a channel nobody
                // uses, as docs/api.md#live-activities says.) The refused start gave its channel back.
                #expect(large.status == .contentTooLarge, "\(String(describing: try? JSONSerialization.jsonObject(with: Data(large.body.readableBytesView))))")
                try await Task.sleep(for: .milliseconds(300))
                #expect(apns.sandbox.channelIDs.isEmpty)
                // Through the same path, a start the store takes keeps its channel.
                let (started, answer) = try await s.json(.post, "/api/live-activities", as: "root", body: start)
                #expect(started.status == .accepted, "\(String(describing: answer))")
                #expect(apns.sandbox.channelIDs == [(answer as? [String: Any])?["channelId"] as? String ?? ""])
            }
        }
    }

    /// Sends `pushes` (`token`, `topic`, `priority`, `payload`) with aioapns, one after another; its results.
    static func aioapns(_ apns: RunningSandbox, keyPath: String, _ pushes: [[String: Any]]) async throws -> [[String: Any]] {
        let script = Fixtures.packageRoot.appendingPathComponent("scripts/aioapns-liveactivity.py").path
        let json = String(decoding: try JSONSerialization.data(withJSONObject: pushes), as: UTF8.self)
        let output = try await onOwnThread {
            try runCapturing("/usr/bin/env", ["python3", script, String(apns.port), apns.certificatePath, keyPath, RunningSandbox.keyID,
                                              RunningSandbox.teamID, json]).output
        }
        let line = output.split(separator: "\n").last { $0.hasPrefix("[") }.map(String.init) ?? output
        return try #require((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [[String: Any]], "\(output)")
    }

    @Test("aioapns, a client nobody here wrote, sends Live Activity pushes through the sandbox: the start under the activity topic is shown, under the bare bundle id refused; the phone shows an update, drops a stale one, shows the end")
    func aioapnsPeer() async throws {
        guard (try? await python("import aioapns"))?.status == 0 else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "the aioapns test needs PyPI's aioapns; .ci/run installs it")
            return
        }
        try await RunningSandbox.with { apns in
            let dir = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let keyPath = dir.appendingPathComponent("AuthKey.p8").path
            try apns.key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
            let startToken = Self.hex(0x5c)
            let topic = RunningSandbox.topic + ".push-type.liveactivity"
            let start: [String: Any] = ["aps": ["event": "start", "timestamp": 1_800_000_000, "attributes-type": "DeliveryAttributes",
                                                "attributes": ["orderId": "A17"], "content-state": ["stage": "packed"],
                                                "alert": ["title": "On its way"]] as [String: Any]]
            let started = try await Self.aioapns(apns, keyPath: keyPath, [
                ["token": startToken, "topic": topic, "priority": 10, "payload": start],
                ["token": startToken, "topic": RunningSandbox.topic, "priority": 10, "payload": start],
            ])
            #expect(started.map { $0["status"] as? String } == ["200", "400"], "\(started)")
            #expect(started.last?["description"] as? String == "TopicDisallowed")
            let update = try #require(apns.sandbox.phoneActivities(pushToStartToken: startToken).first?.updateToken)
            func state(_ stage: String, _ timestamp: Int, event: String = "update") -> [String: Any] {
                ["aps": ["event": event, "timestamp": timestamp, "content-state": ["stage": stage]] as [String: Any]]
            }
            let later = try await Self.aioapns(apns, keyPath: keyPath, [
                ["token": update, "topic": topic, "priority": 5, "payload": state("moving", 1_800_000_010)],
                ["token": update, "topic": topic, "priority": 5, "payload": state("older", 1_800_000_005)],
                ["token": update, "topic": topic, "priority": 10, "payload": state("delivered", 1_800_000_020, event: "end")],
            ])
            #expect(later.allSatisfy { $0["status"] as? String == "200" }, "\(later)")
            #expect(apns.sandbox.phoneEvents.map { "\($0.event) \($0.reason ?? "shown")" } == ["start shown", "update shown", "update stale timestamp", "end shown"])
            let phone = try #require(apns.sandbox.phoneActivities(pushToStartToken: startToken).first)
            #expect(phone.ended && phone.contentState == #"{"stage":"delivered"}"#)
        }
    }
}
