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
import RichPushTestSupport
import Testing

/// An Android phone that is offline: what FCM holds for it, and RichPush's notifications all
/// reaching it when it comes back (SPEC §24).
@Suite("FCM and an offline Android device (SPEC §24)")
struct FCMOfflineTests {
    static func sandbox() -> FCMSandbox {
        FCMSandbox(account: .init(projectID: "rich-push-test", clientEmail: "sender@rich-push-test.iam.gserviceaccount.com",
                                  publicKey: FCMAuthTests.key.publicKey))
    }

    /// A device route of the sandbox, as `curl` calls it: its status and JSON object.
    static func call(_ method: NIOHTTP1.HTTPMethod, _ url: String) async throws -> (status: Int, body: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        return (Int(response.status.code), object ?? [:])
    }

    /// The `richId`s of the messages in a device route's `arrived`.
    static func arrived(_ body: [String: Any]) -> [String] {
        (body["arrived"] as? [[String: Any]] ?? []).compactMap { ($0["data"] as? [String: Any])?["richId"] as? String }
    }

    @Test("a phone offline while six notifications are sent gets all six when it comes back, each once, and shows six")
    func sixWhileOffline() async throws {
        let fcm = Self.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMAuthTests.accountJSON(tokenURI: fcm.tokenURI))
            let platforms = PlatformRouter(["fcm": FCMProvider(client: try FCMClient(account: account, endpoint: "\(origin)/fcm"))])
            try await TestServer.run(provider: platforms) { s in
                let token = fcm.register()
                let (_, created) = try await s.json(.post, "/api/register", as: "alice")
                let registration = try #require((created as? [String: Any])?["registrationId"] as? String)
                let (registered, _) = try await s.json(.put, "/api/register/\(registration)", as: "alice",
                                                       body: #"{"platform":"fcm","handle":"\#(token)"}"#)
                #expect(registered.status == .ok)

                // The phone goes off for the weekend.
                let offline = try await Self.call(.POST, "\(origin)/fcm/devices/\(token)/offline")
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
                let online = try await Self.call(.POST, "\(origin)/fcm/devices/\(token)/online")
                #expect(online.status == 200 && online.body["online"] as? Bool == true)
                #expect(Self.arrived(online.body).sorted() == ids.sorted())
                let received = fcm.delivered(to: token).compactMap { $0.data["richId"] }
                #expect(received.count == 6 && Set(received) == Set(ids))
                #expect(fcm.shown(on: token).count == 6)
                let report = try #require(fcm.device(token))
                #expect(report.online && report.held == 0 && report.delivered == 6)
                #expect(report.dropped == 0 && report.deleted == 0 && report.collapsed == 0 && report.expired == 0)
            }
        }
    }

    @Test("the sandbox holds what FCM holds for an offline device: four collapse keys (six keyed messages, four arrive), the latest per key, at most 100 without a key (the 101st discards all), none past its ttl")
    func heldAsFCMHolds() async throws {
        let fcm = Self.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMAuthTests.accountJSON(tokenURI: fcm.tokenURI))
            try await using(try FCMClient(account: account, endpoint: "\(origin)/fcm"), shutdown: { try await $0.shutdown() }) { client in
                let token = fcm.register()
                func send(_ index: Int, collapseKey: String? = nil, ttl: Int = 3600) async -> Bool {
                    let body = FCMClient.message(token: token, data: ["richId": String(index)],
                                                 notification: (title: nil, body: "note \(index)", image: nil),
                                                 collapseID: "rp-\(index)", collapseKey: collapseKey, mode: .alert, ttl: ttl)
                    if case .sent = await client.send(body) { return true }
                    return false
                }

                // The old shape, a collapse key per notification: FCM accepts six, the phone gets four.
                #expect(try await Self.call(.POST, "\(origin)/fcm/devices/\(token)/offline").status == 200)
                for index in 1...6 { #expect(await send(index, collapseKey: "rp-\(index)")) }
                #expect(fcm.acceptedCount == 6 && fcm.device(token)?.held == 4)
                let keyed = try await Self.call(.POST, "\(origin)/fcm/devices/\(token)/online")
                #expect(Self.arrived(keyed.body).count == 4 && keyed.body["dropped"] as? Int == 2)
                #expect(fcm.delivered(to: token).count == 4)

                // One key twice: the latest arrives, as a collapse key means.
                #expect(fcm.setOffline(token))
                #expect(await send(7, collapseKey: "score"))
                #expect(await send(8, collapseKey: "score"))
                #expect(fcm.setOnline(token).compactMap { $0.data["richId"] } == ["8"])
                #expect(fcm.device(token)?.collapsed == 1)

                // 101 without a key: past 100, FCM discards every held message, and says how many.
                fcm.setOffline(token)
                for index in 100..<201 { #expect(await send(index)) }
                #expect(fcm.device(token)?.held == 0)
                let flooded = try await Self.call(.POST, "\(origin)/fcm/devices/\(token)/online")
                #expect(Self.arrived(flooded.body).isEmpty && flooded.body["deleted"] as? Int == 101)

                // A ttl of 0 is now or never; the others, fewer than 100 and without keys, all arrive in order.
                fcm.setOffline(token)
                #expect(await send(300, ttl: 0))
                for index in 301...306 { #expect(await send(index)) }
                #expect(fcm.setOnline(token).compactMap { $0.data["richId"] } == (301...306).map { String($0) })
                #expect(fcm.device(token)?.expired == 1)

                // A token the sandbox never issued has no device routes.
                #expect(try await Self.call(.POST, "\(origin)/fcm/devices/unknown/offline").status == 404)
                #expect(!fcm.setOffline("unknown"))
            }
        }
    }

    @Test("on the phone, a notification replaces the one with its tag: a resend is shown once, another notification beside it; a data message shows nothing")
    func tray() async throws {
        let fcm = Self.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMAuthTests.accountJSON(tokenURI: fcm.tokenURI))
            try await using(try FCMClient(account: account, endpoint: "\(origin)/fcm"), shutdown: { try await $0.shutdown() }) { client in
                let token = fcm.register()
                for (id, text) in [(1, "first"), (1, "first, resent"), (2, "second")] {
                    let body = FCMClient.message(token: token, data: ["richId": String(id)], notification: (title: nil, body: text, image: nil),
                                                 collapseID: "rp-\(id)", mode: .alert, ttl: 3600)
                    guard case .sent = await client.send(body) else { Issue.record("\(text) not sent"); return }
                }
                guard case .sent = await client.send(FCMClient.message(token: token, data: ["richId": "3"], notification: nil, collapseID: "rp-3",
                                                                        mode: .silent, ttl: 3600)) else {
                    Issue.record("the data message was not sent"); return
                }
                #expect(fcm.delivered(to: token).count == 4)
                #expect(fcm.shown(on: token).map { $0.notification?["body"] ?? "" } == ["first, resent", "second"])
                let (status, device) = try await Self.call(.GET, "\(origin)/fcm/devices/\(token)")
                #expect(status == 200 && device["delivered"] as? Int == 4 && (device["shown"] as? [[String: Any]])?.count == 2)
            }
        }
    }

    @Test("the message's shape: a notification's collapse id is its Android tag and its apns-collapse-id, never a collapse key; a data message has no tag; a collapse key only when asked for")
    func shape() throws {
        func parts(_ body: Data) throws -> (android: [String: Any], apnsHeaders: [String: Any]) {
            let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
            let message = try #require(object["message"] as? [String: Any])
            return (message["android"] as? [String: Any] ?? [:], (message["apns"] as? [String: Any])?["headers"] as? [String: Any] ?? [:])
        }
        let alert = try parts(FCMClient.message(token: "t", data: ["richId": "5"], notification: (title: "Hi", body: "Sale", image: nil),
                                                collapseID: "rp-5", mode: .alert, ttl: 60))
        #expect(!alert.android.keys.contains("collapse_key"))
        #expect((alert.android["notification"] as? [String: Any])?["tag"] as? String == "rp-5")
        #expect(alert.apnsHeaders["apns-collapse-id"] as? String == "rp-5")

        let silent = try parts(FCMClient.message(token: "t", data: ["richId": "6"], notification: nil, collapseID: "rp-6", mode: .silent, ttl: 60))
        #expect(!silent.android.keys.contains("collapse_key") && !silent.android.keys.contains("notification"))
        #expect(silent.apnsHeaders["apns-collapse-id"] as? String == "rp-6")

        let keyed = try parts(FCMClient.message(token: "t", data: [:], notification: nil, collapseKey: "activity-1", mode: .silent, ttl: 60))
        #expect(keyed.android["collapse_key"] as? String == "activity-1")
    }
}
