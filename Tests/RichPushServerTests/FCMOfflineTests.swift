import AsyncHTTPClient
import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import PushDelivery
import PushSandboxes
import RichPushCore
import PushTestSupport
import RichPushTestSupport
import Testing

/// An Android phone that is offline: what FCM holds for it, and RichPush's notifications all
/// reaching it when it comes back (docs/delivery.md).
@Suite("FCM and an offline Android device (SPEC §24)")
struct FCMOfflineTests {
    @Test("a phone offline while six notifications are sent gets all six when it comes back, each once, and shows six")
    func sixWhileOffline() async throws {
        let fcm = FCMFixtures.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI))
            let platforms = PlatformRouter(["fcm": FCMProvider(client: try FCMClient(account: account, endpoint: "\(origin)/fcm"))])
            try await TestServer.run(provider: platforms) { s in
                let token = fcm.register()
                let (_, created) = try await s.json(.post, "/api/register", as: "alice")
                let registration = try #require((created as? [String: Any])?["registrationId"] as? String)
                let (registered, _) = try await s.json(.put, "/api/register/\(registration)", as: "alice",
                                                       body: #"{"platform":"fcm","handle":"\#(token)"}"#)
                #expect(registered.status == .ok)

                // The phone goes off for the weekend.
                let offline = try await FCMFixtures.call(.POST, "\(origin)/fcm/devices/\(token)/offline")
                #expect(offline.status == 200 && offline.body["online"] as? Bool == false)
                var sent: [String] = []
                for index in 1...6 {
                    let (response, object) = try await s.json(.post, "/api/notifications", as: "alice",
                                                              body: #"{"mode":"alert","title":"Weekend","message":"note \#(index)"}"#)
                    #expect(response.status == .created)
                    let id = try #require((object as? [String: Any])?["id"] as? Int)
                    sent.append(String(id))
                }
                let ids = sent

                // FCM took all six (200); the phone has none of them yet.
                #expect(try await eventually { fcm.acceptedCount == 6 && fcm.device(token)?.held == 6 })
                #expect(fcm.delivered(to: token).isEmpty)
                // Each notification replaces only a resend of itself: a tag, and no collapse key.
                for message in fcm.accepted {
                    let id = try #require(message.data["richId"])
                    #expect(message.collapseKey == nil && message.tag == "rp-\(id)" && message.apnsCollapseID == "rp-\(id)")
                }

                // Back on Monday: all six arrive, each once, and the phone shows six.
                let online = try await FCMFixtures.call(.POST, "\(origin)/fcm/devices/\(token)/online")
                #expect(online.status == 200 && online.body["online"] as? Bool == true)
                #expect(FCMFixtures.arrived(online.body).sorted() == ids.sorted())
                let received = fcm.delivered(to: token).compactMap { $0.data["richId"] }
                #expect(received.count == 6 && Set(received) == Set(ids))
                #expect(fcm.shown(on: token).count == 6)
                let report = try #require(fcm.device(token))
                #expect(report.online && report.held == 0 && report.delivered == 6)
                #expect(report.dropped == 0 && report.deleted == 0 && report.collapsed == 0 && report.expired == 0)
            }
        }
    }
}
