import APNsSandbox
import Crypto
import CryptoExtras
import Foundation
import Hummingbird
import HummingbirdTesting
import PushDelivery
import PushSandboxes
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import Testing

/// One audience on iPhones, Android phones and browsers: each device gets its own platform's
/// shape through its own (stand-in) service (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).
@Suite("Campaigns and notifications across APNs, FCM and Web Push")
struct PlatformDeliveryTests {
    /// The three stand-ins, and a router over senders to them.
    func withPlatforms(_ body: @Sendable (RunningSandbox, FCMSandbox, WebPushSandbox, VAPID, PlatformRouter) async throws -> Void) async throws {
        let fcm = FCMSandbox(account: .init(projectID: "rich-push-test", clientEmail: "sender@rich-push-test.iam.gserviceaccount.com",
                                            publicKey: FCMFixtures.key.publicKey))
        let web = WebPushSandbox()
        try await serving([(fcm, "fcm"), (web, "web")]) { origin in
            try await RunningSandbox.with { apns in
                let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI))
                let vapid = try VAPID(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com")
                let platforms = PlatformRouter([
                    "apns": APNsProvider(client: try apns.client()),
                    "fcm": FCMProvider(client: try FCMClient(account: account, endpoint: "\(origin)/fcm")),
                    "web": WebPushProvider(client: try WebPushClient(vapid: vapid, allowPrivateEndpoints: true)),
                ])
                try await body(apns, fcm, web, vapid, platforms)
            }
        }
    }

    func register(_ s: TestServer, platform: String, handle: String, as user: String) async throws -> String {
        let (_, created) = try await s.json(.post, "/api/register", as: user)
        let id = try #require((created as? [String: Any])?["registrationId"] as? String)
        let (response, object) = try await s.json(.put, "/api/register/\(id)", as: user, body: #"{"platform":"\#(platform)","handle":\#(handle)}"#)
        #expect(response.status == .ok, "\(platform): \(String(describing: object))")
        return id
    }

    @Test("an alert campaign reaches each platform in its own shape; a silent notification too, with richUrl for FCM and Web Push", arguments: StoreEngine.all)
    func shapes(engine: StoreEngine) async throws {
        try await withPlatforms { apns, fcm, web, vapid, platforms in
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true }, provider: platforms) { s in
                let apnsToken = String(repeating: "ab", count: 32)
                let fcmToken = fcm.register()
                let subscription = try web.subscribe(applicationServerKey: vapid.publicKey)
                _ = try await register(s, platform: "apns", handle: "\"\(apnsToken)\"", as: "alice")
                _ = try await register(s, platform: "fcm", handle: "\"\(fcmToken)\"", as: "alice")
                // As the browser's subscription.toJSON() gives it: an object.
                let object = #"{"endpoint":"\#(subscription.endpoint)","expirationTime":null,"keys":{"p256dh":"\#(Base64URL.encode(subscription.p256dh))","auth":"\#(Base64URL.encode(subscription.auth))"}}"#
                _ = try await register(s, platform: "web", handle: object, as: "alice")

                let (response, campaign) = try await s.campaign(#"{"audience":{"users":["alice"]},"title":"Sale","message":"50% off"}"#)
                #expect(response.status == .accepted && campaign["devices"] as? Int == 3)
                #expect(try await eventually { apns.sandbox.acceptedCount == 1 && fcm.acceptedCount == 1 && web.acceptedCount == 1 })

                let apnsAccepted = try #require(apns.sandbox.accepted.first)
                let apnsPush = try #require(try JSONSerialization.jsonObject(with: apnsAccepted.payload) as? [String: Any])
                let richUrl = try #require(apnsPush["richUrl"] as? String)
                let id = try #require(apnsPush["richId"] as? String)
                let android = try #require(fcm.accepted.first)
                #expect(android.token == fcmToken)
                #expect(android.data == ["richId": id, "richMessage": "50% off", "richType": "img", "richUrl": richUrl])
                // Android's image is the push variant (at most 1 MB, docs/configuration.md#the-media-store): a JPEG made from the PNG payload.
                #expect(android.notification == ["title": "Sale", "body": "50% off", "image": richUrl + "?variant=push"])
                let image = try await s.request(.get, String((richUrl + "?variant=push").drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" }), as: nil)
                #expect(image.status == .ok && image.headers[.contentType] == "image/jpeg" && image.bytes.count <= 1_048_576)
                let webAccepted = try #require(web.accepted.first)
                let browser = try #require(try JSONSerialization.jsonObject(with: Data(webAccepted.plaintext)) as? [String: String])
                #expect(browser == ["richId": id, "richMessage": "50% off", "richType": "img", "richUrl": richUrl, "title": "Sale"])
                #expect(web.accepted.first?.urgency == "high")
                // One collapse id per notification on every platform: a resend replaces, never adds, an alert.
                // On Android it is the notification's tag, not a collapse key (FCM holds only four of those
                // for an offline phone, docs/security.md).
                let collapse = "rp-\(id)"
                #expect(apnsAccepted.headers["apns-collapse-id"] == collapse)
                #expect(android.tag == collapse && android.collapseKey == nil && android.apnsCollapseID == collapse)
                #expect(webAccepted.topic == collapse)
                // The payload URL every platform got fetches the image, with no credentials.
                #expect(try await s.request(.get, String(richUrl.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" }), as: nil).status == .ok)

                // Silent: FCM gets data only and the browser a normal-urgency message, both with the payload URL.
                let (created, _) = try await s.json(.post, "/api/notifications", body: #""psst""#)
                #expect(created.status == .created)
                #expect(try await eventually { fcm.acceptedCount == 2 && web.acceptedCount == 2 && apns.sandbox.acceptedCount == 2 })
                #expect(fcm.accepted.last?.notification == nil && fcm.accepted.last?.data["richUrl"]?.contains("/p/") == true)
                #expect(web.accepted.last?.urgency == "normal")
            }
        }
    }

    @Test("UNREGISTERED and 410 remove the FCM and Web Push registrations; a node leaves the pushes of a platform it does not send to the nodes that do", arguments: StoreEngine.all)
    func pruning(engine: StoreEngine) async throws {
        try await withPlatforms { _, fcm, web, vapid, platforms in
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true }, provider: platforms) { s in
                let fcmToken = fcm.register()
                let subscription = try web.subscribe(applicationServerKey: vapid.publicKey)
                _ = try await register(s, platform: "fcm", handle: "\"\(fcmToken)\"", as: "bob")
                // The subscription's JSON text is taken too.
                let text = subscription.handle.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                _ = try await register(s, platform: "web", handle: "\"\(text)\"", as: "bob")
                fcm.unregister(fcmToken)
                web.unsubscribe(subscription)
                _ = try await s.json(.post, "/api/notifications", as: "bob", body: #""gone""#)
                let store = try await s.openStoreAgain()
                defer { store.close() }
                #expect(try await eventually { try await store.registrations.list(for: "bob").isEmpty })
            }
        }
        // A node without --vapid-key sends the APNs push and never claims the Web Push one: it
        // waits, unattempted, for a node that sends Web Push (as during a rolling restart).
        try await RunningSandbox.with { apns in
            // (push.example.net does not resolve here: private endpoints allowed, no lookup is made.)
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true },
                                     provider: PlatformRouter(["apns": APNsProvider(client: try apns.client())])) { s in
                let point = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
                let handle = #"{"endpoint":"https://push.example.net/p/1","keys":{"p256dh":"\#(Base64URL.encode(point))","auth":"\#(Base64URL.encode([UInt8](repeating: 1, count: 16)))"}}"#
                _ = try await register(s, platform: "web", handle: handle, as: "bob")
                _ = try await register(s, platform: "apns", handle: "\"\(String(repeating: "cd", count: 32))\"", as: "bob")
                _ = try await s.json(.post, "/api/notifications", as: "bob", body: #""x""#)
                #expect(try await eventually { apns.sandbox.acceptedCount == 1 })
                let store = try await s.openStoreAgain()
                defer { store.close() }
                #expect(try await eventually { try await store.deliveries.list().contains { $0.state == .sent } })
                try await Task.sleep(for: .milliseconds(300))
                let web = try #require(try await store.deliveries.list().first { $0.state != .sent })
                #expect(web.state == .pending && web.attempts == 0 && web.reason == nil)
                // What a Web Push node claims: that row alone; an APNs-only node claims nothing.
                let holder = OutboxHolder(pid: 1)
                #expect(try await store.outbox.claim(limit: 10, lease: 0, holder: holder, platforms: ["apns", "fcm"]).isEmpty)
                #expect(try await store.outbox.claim(limit: 10, lease: 0, holder: holder, platforms: ["web"]).map(\.id) == [web.id])
                #expect(try await store.registrations.list(for: "bob").count == 2)
            }
        }
    }

    @Test("handles are checked for their platform: an FCM token, a PushSubscription with a point on P-256; GET /api/webpush/key needs --vapid-key")
    func handles() async throws {
        try await TestServer.run { s in
            let (_, created) = try await s.json(.post, "/api/register")
            let id = try #require((created as? [String: Any])?["registrationId"] as? String)
            let bad = [#"{"platform":"fcm","handle":"short"}"#, #"{"platform":"web","handle":"{}"}"#,
                       #"{"platform":"web","handle":{"endpoint":"https://p.example/1","keys":{"p256dh":"BBBB","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}}"#,
                       #"{"platform":"web","handle":{"endpoint":"http://p.example/1","keys":{"p256dh":"BBBB","auth":"AAAA"}}}"#]
            for body in bad {
                let (response, _) = try await s.json(.put, "/api/register/\(id)", body: body)
                #expect(response.status == .badRequest, "\(body)")
            }
            let (unknown, problem) = try await s.json(.put, "/api/register/\(id)", body: #"{"platform":"wns","handle":"x"}"#)
            #expect(unknown.status == .unprocessableContent && "\(String(describing: problem))".contains("fcm"))
            #expect(try await s.request(.get, "/api/webpush/key", as: nil).status == .notFound)
        }
        try await TestServer.run({ $0.vapidPublicKey = "BKey" }) { s in
            let (response, object) = try await s.json(.get, "/api/webpush/key", as: nil)
            #expect(response.status == .ok && (object as? [String: Any])?["publicKey"] as? String == "BKey")
        }
    }
}
