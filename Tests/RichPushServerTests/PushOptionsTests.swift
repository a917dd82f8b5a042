import APNsSandbox
import CryptoExtras
import Foundation
import Hummingbird
import HummingbirdTesting
import PushDelivery
import PushSandboxes
import RichPushClient
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import Testing

/// docs/api.md#options-badges-and-paced-sends: a notification's options, each in its platform's form, checked by the stand-ins
/// that refuse what Apple and Google refuse.
@Suite("Options and badges on every platform (SPEC §22)")
struct PushOptionsTests {
    static let options = #"""
        {"threadId":"sale-7","category":"SALE","subtitle":"Today only","sound":"chime.caf","interruptionLevel":"time-sensitive",
         "relevanceScore":0.75,"expiresIn":3600,"priority":"normal","androidChannelId":"offers",
         "actions":[{"id":"buy","title":"Buy now"},{"id":"later","title":"Later"}]}
        """#

    @Test("a campaign's options reach APNs as headers and aps keys, FCM as its android and apns blocks, Web Push as TTL, Urgency and buttons; \"badge\":\"unread\" is the user's unread count at send time", arguments: StoreEngine.all)
    func everyPlatform(engine: StoreEngine) async throws {
        let platformsTest = PlatformDeliveryTests()
        try await platformsTest.withPlatforms { apns, fcm, web, vapid, platforms in
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true }, provider: platforms) { s in
                let fcmToken = fcm.register()
                let subscription = try web.subscribe(applicationServerKey: vapid.publicKey)
                _ = try await platformsTest.register(s, platform: "apns", handle: "\"\(String(repeating: "ab", count: 32))\"", as: "alice")
                _ = try await platformsTest.register(s, platform: "fcm", handle: "\"\(fcmToken)\"", as: "alice")
                let object = #"{"endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(Base64URL.encode(subscription.p256dh))","auth":"\#(Base64URL.encode(subscription.auth))"}}"#
                _ = try await platformsTest.register(s, platform: "web", handle: object, as: "alice")
                // Two unread notifications before the campaign: its own makes three.
                for _ in 0..<2 { #expect(try await s.json(.post, "/api/notifications", body: #""before""#).0.status == .created) }
                #expect(try await eventually { apns.sandbox.acceptedCount == 2 && fcm.acceptedCount == 2 && web.acceptedCount == 2 })
                // Silent through FCM: a background push for its iOS devices, as Apple requires.
                let silent = try #require(fcm.accepted.first)
                #expect(silent.apnsHeaders["apns-push-type"] == "background" && silent.apnsHeaders["apns-priority"] == "5")
                #expect(silent.apnsAps["content-available"] as? Double == 1)

                let sent = Date()
                let (response, campaign) = try await s.campaign(#"{"audience":{"users":["alice"]},"title":"Sale","message":"50% off","badge":"unread","options":\#(Self.options)}"#)
                #expect(response.status == .accepted, "\(campaign)")
                #expect(campaign["badge"] as? String == "unread")
                #expect((campaign["options"] as? [String: Any])?["threadId"] as? String == "sale-7")
                #expect(try await eventually { apns.sandbox.acceptedCount == 3 && fcm.acceptedCount == 3 && web.acceptedCount == 3 })

                // APNs: priority 5 (normal), an expiry an hour out, and the aps keys.
                let iphone = try #require(apns.sandbox.accepted.last)
                #expect(iphone.headers["apns-priority"] == "5")
                let expiration = try #require(iphone.headers["apns-expiration"].flatMap(Double.init))
                #expect(abs(expiration - sent.timeIntervalSince1970 - 3600) < 120)
                let push = try #require(try JSONSerialization.jsonObject(with: iphone.payload) as? [String: Any])
                let aps = try #require(push["aps"] as? [String: Any])
                #expect(aps["thread-id"] as? String == "sale-7" && aps["category"] as? String == "SALE")
                #expect(aps["sound"] as? String == "chime.caf" && aps["interruption-level"] as? String == "time-sensitive")
                #expect(aps["relevance-score"] as? Double == 0.75 && aps["badge"] as? Int == 3)
                #expect((aps["alert"] as? [String: Any])?["subtitle"] as? String == "Today only")
                let buttons = try #require(push["richActions"] as? [[String: String]])
                #expect(buttons == [["id": "buy", "title": "Buy now"], ["id": "later", "title": "Later"]])

                // FCM: the android block (checked by the stand-in as FCM checks it) and the apns block for
                // iOS devices (the stand-in records JSON numbers as Double).
                let android = try #require(fcm.accepted.last)
                // (What is left of the push's hour when it is sent: a few seconds may have passed.)
                #expect(android.android["priority"] as? String == "NORMAL")
                let ttl = try #require((android.android["ttl"] as? String).flatMap { Int($0.dropLast()) })
                #expect((3500...3600).contains(ttl))
                let shown = try #require(android.android["notification"] as? [String: any Sendable])
                #expect(shown["channel_id"] as? String == "offers" && shown["notification_count"] as? Double == 3 && shown["sound"] as? String == "chime.caf")
                #expect(android.apnsHeaders["apns-priority"] == "5")
                #expect(android.apnsAps["thread-id"] as? String == "sale-7" && android.apnsAps["badge"] as? Double == 3)
                #expect(android.data["richActions"].map { $0.contains("\"buy\"") } == true)

                // Web Push: TTL and Urgency headers, and the buttons, subtitle and badge in the message.
                let browser = try #require(web.accepted.last)
                #expect((3500...3600).contains(browser.ttl) && browser.urgency == "normal")
                let message = try #require(try JSONSerialization.jsonObject(with: Data(browser.plaintext)) as? [String: Any])
                #expect(message["subtitle"] as? String == "Today only" && message["badgeCount"] as? Int == 3)
                #expect(message["actions"] as? [[String: String]] == [["action": "buy", "title": "Buy now"], ["action": "later", "title": "Later"]])

                // What the device's library reads from each: the same buttons, subtitle and badge.
                let buttons2 = [RichPushMessage.Action(id: "buy", title: "Buy now"), .init(id: "later", title: "Later")]
                let onIPhone = try RichPushMessage(json: iphone.payload)
                #expect(onIPhone.subtitle == "Today only" && onIPhone.threadID == "sale-7" && onIPhone.category == "SALE")
                #expect(onIPhone.badge == 3 && onIPhone.actions == buttons2)
                let onAndroid = try RichPushMessage(userInfo: Dictionary(uniqueKeysWithValues: android.data.map { (AnyHashable($0.key), $0.value as Any) }))
                #expect(onAndroid.actions == buttons2)
                let inBrowser = try RichPushMessage(json: Data(browser.plaintext))
                #expect(inBrowser.subtitle == "Today only" && inBrowser.badge == 3 && inBrowser.actions == buttons2)

                // Reading one lowers the next push's badge; reading pushes nothing.
                let (_, list) = try await s.json(.get, "/api/notifications")
                let first = try #require((list as? [[String: Any]])?.last?["id"] as? Int)
                #expect(try await s.request(.get, "/api/notifications/\(first)", as: "alice").status == .ok)
                try await Task.sleep(for: .milliseconds(300))
                #expect(apns.sandbox.acceptedCount == 3)
                let (again, _) = try await s.json(.post, "/api/notifications", body: #"{"mode":"alert","message":"again","badge":"unread"}"#)
                #expect(again.status == .created)
                #expect(try await eventually { apns.sandbox.acceptedCount == 4 })
                let latest = try #require(apns.sandbox.accepted.last)
                let next = try #require(try JSONSerialization.jsonObject(with: latest.payload) as? [String: Any])
                #expect((next["aps"] as? [String: Any])?["badge"] as? Int == 3)
                // No options: the defaults of before (priority 10, sound default, a day's life).
                #expect(apns.sandbox.accepted.last?.headers["apns-priority"] == "10")
            }
        }
    }

    @Test("an unknown option, an unknown interruption level, a score out of range, five buttons: each 400 naming the field; a visible option on a silent push or a button id twice: 422; nothing is made")
    func refusals() async throws {
        try await TestServer.run { s in
            let cases: [(String, String)] = [
                (#"{"options":{"colour":"red"}}"#, "options.colour"),
                (#"{"mode":"alert","options":{"interruptionLevel":"loud"}}"#, "options.interruptionLevel"),
                (#"{"mode":"alert","options":{"relevanceScore":1.5}}"#, "options.relevanceScore"),
                (#"{"mode":"alert","options":{"expiresIn":-1}}"#, "options.expiresIn"),
                (#"{"mode":"alert","options":{"priority":"urgent"}}"#, "options.priority"),
                (#"{"mode":"alert","options":{"actions":[{"id":"a","title":"A"},{"id":"b","title":"B"},{"id":"c","title":"C"},{"id":"d","title":"D"},{"id":"e","title":"E"}]}}"#, "options.actions"),
                (#"{"mode":"alert","options":{"actions":[{"id":"a","title":"A","icon":"x"}]}}"#, "options.actions.icon"),
                (#"{"mode":"alert","options":{"threadId":"has space"}}"#, "options.threadId"),
                (#"{"mode":"alert","badge":"many"}"#, "badge"),
                (#"{"mode":"alert","badge":-1}"#, "badge"),
            ]
            for (body, field) in cases {
                let (response, _) = try await s.json(.post, "/api/notifications", body: body)
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.detail.contains(field), "\(body): \(response.detail)")
            }
            // Each value in range, but not together: 422.
            for (body, field) in [(#"{"mode":"silent","options":{"category":"SALE"}}"#, "options.category"),
                                  (#"{"mode":"silent","badge":3}"#, "badge"),
                                  (#"{"mode":"alert","options":{"actions":[{"id":"a","title":"A"},{"id":"a","title":"B"}]}}"#, "options.actions")] {
                let (response, _) = try await s.json(.post, "/api/notifications", body: body)
                #expect(response.status == .unprocessableContent, "\(body)")
                #expect(response.detail.contains(field), "\(body): \(response.detail)")
            }
            let (_, campaign) = try await s.campaign(#"{"audience":{"all":true},"message":"x","ratePerMinute":0}"#)
            #expect((campaign["detail"] as? String)?.contains("ratePerMinute") == true)
            // A locale's button titles: an object of strings (400 otherwise), for buttons the options have (422 otherwise).
            let buttons = #""mode":"alert","message":"x","options":{"actions":[{"id":"buy","title":"Buy"}]}"#
            for (body, status, field) in [
                (#"{"audience":{"all":true},\#(buttons),"content":{"fr":{"actions":"Acheter"}}}"#, HTTPResponse.Status.badRequest, "content.fr.actions"),
                (#"{"audience":{"all":true},\#(buttons),"content":{"fr":{"subtitle":["x"]}}}"#, .badRequest, "content"),
                (#"{"audience":{"all":true},\#(buttons),"content":{"fr":{"actions":{"sell":"Vendre"}}}}"#, .unprocessableContent, "content.fr.actions"),
                (#"{"audience":{"all":true},"mode":"silent","message":"x","content":{"fr":{"subtitle":"Aujourd'hui"}}}"#, .unprocessableContent, "options.subtitle"),
            ] {
                let (response, object) = try await s.campaign(body)
                #expect(response.status == status, "\(body): \(object)")
                #expect((object["detail"] as? String)?.contains(field) == true, "\(body): \(object)")
            }
            let (_, list) = try await s.json(.get, "/api/notifications")
            #expect((list as? [Any])?.isEmpty == true)
        }
    }

    @Test("the stand-ins refuse what Apple and Google refuse: an unknown interruption level, a relevance score out of range, an expiry in the past, an unknown Android priority, a TTL over 28 days")
    func standInsRefuse() async throws {
        try await RunningSandbox.with { apns in
            let client = try apns.client()
            let hour = Date().addingTimeInterval(3600)
            func send(_ aps: String, expiration: Date = hour) async -> DeliveryOutcome {
                await client.send(token: tokenA, payload: Data(#"{"aps":{"alert":"x",\#(aps)}}"#.utf8), mode: .alert, pushID: UUID().uuidString,
                                  expiration: expiration, priority: "10").0
            }
            #expect(await send(#""interruption-level":"loud""#) == .failed(reason: "400 BadPayload", prune: false))
            #expect(await send(#""relevance-score":1.5"#) == .failed(reason: "400 BadPayload", prune: false))
            #expect(await send(#""badge":-1"#) == .failed(reason: "400 BadPayload", prune: false))
            #expect(await send(#""sound":"x""#, expiration: Date().addingTimeInterval(-60)) == .failed(reason: "400 BadExpirationDate", prune: false))
            // The same keys within their ranges are sent (the device token is unknown to Apple: past every payload check).
            let accepted = await send(#""interruption-level":"time-sensitive","relevance-score":0.5,"badge":2,"thread-id":"t""#)
            #expect(accepted != .failed(reason: "400 BadPayload", prune: false) && accepted != .failed(reason: "400 BadExpirationDate", prune: false))
        }
        let fcm = FCMSandbox(account: .init(projectID: "rich-push-test", clientEmail: "sender@rich-push-test.iam.gserviceaccount.com",
                                            publicKey: FCMFixtures.key.publicKey))
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI))
            let client = try FCMClient(account: account, endpoint: "\(origin)/fcm")
            let token = fcm.register()
            func send(_ android: String, apns: String = "{}") async -> DeliveryOutcome {
                await client.send(Data(#"{"message":{"token":"\#(token)","data":{"richId":"1"},"android":\#(android),"apns":\#(apns)}}"#.utf8))
            }
            #expect(await send(#"{"priority":"URGENT"}"#).isFailure)
            #expect(await send(#"{"ttl":"2419201s"}"#).isFailure)
            #expect(await send(#"{"notification":{"channel_id":7}}"#).isFailure)
            #expect(await send("{}", apns: #"{"payload":{"aps":{"interruption-level":"loud"}}}"#).isFailure)
            #expect(await send(#"{"priority":"HIGH","ttl":"3600s","notification":{"channel_id":"offers","notification_count":2}}"#).isFailure == false)
            #expect(fcm.acceptedCount == 1)
            try await client.shutdown()
        }
    }
}

extension DeliveryOutcome {
    /// Whether the service refused the push.
    var isFailure: Bool {
        if case .failed = self { return true }
        return false
    }
}
