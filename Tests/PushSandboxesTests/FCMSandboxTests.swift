import AsyncHTTPClient
import CryptoExtras
import Foundation
import NIOCore
import NIOHTTP1
import PushDelivery
import PushSandboxes
import RichPushCore
import PushTestSupport
import RichPushTestSupport
import Testing

/// `fcm-sandbox` keeps what FCM keeps for an offline device, and shows what a phone shows (docs/delivery.md).
@Suite("The FCM sandbox and an offline device (SPEC §24)")
struct FCMSandboxTests {
    @Test("the sandbox holds what FCM holds for an offline device: four collapse keys (six keyed messages, four arrive), the latest per key, at most 100 without a key (the 101st discards all), none past its ttl")
    func heldAsFCMHolds() async throws {
        let fcm = FCMFixtures.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI))
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
                #expect(try await FCMFixtures.call(.POST, "\(origin)/fcm/devices/\(token)/offline").status == 200)
                for index in 1...6 { #expect(await send(index, collapseKey: "rp-\(index)")) }
                #expect(fcm.acceptedCount == 6 && fcm.device(token)?.held == 4)
                let keyed = try await FCMFixtures.call(.POST, "\(origin)/fcm/devices/\(token)/online")
                #expect(FCMFixtures.arrived(keyed.body).count == 4 && keyed.body["dropped"] as? Int == 2)
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
                let flooded = try await FCMFixtures.call(.POST, "\(origin)/fcm/devices/\(token)/online")
                #expect(FCMFixtures.arrived(flooded.body).isEmpty && flooded.body["deleted"] as? Int == 101)

                // A ttl of 0 is now or never; the others, fewer than 100 and without keys, all arrive in order.
                fcm.setOffline(token)
                #expect(await send(300, ttl: 0))
                for index in 301...306 { #expect(await send(index)) }
                #expect(fcm.setOnline(token).compactMap { $0.data["richId"] } == (301...306).map { String($0) })
                #expect(fcm.device(token)?.expired == 1)

                // A token the sandbox never issued has no device routes.
                #expect(try await FCMFixtures.call(.POST, "\(origin)/fcm/devices/unknown/offline").status == 404)
                #expect(!fcm.setOffline("unknown"))
            }
        }
    }

    @Test("on the phone, a notification replaces the one with its tag: a resend is shown once, another notification beside it; a data message shows nothing")
    func tray() async throws {
        let fcm = FCMFixtures.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI))
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
                let (status, device) = try await FCMFixtures.call(.GET, "\(origin)/fcm/devices/\(token)")
                #expect(status == 200 && device["delivered"] as? Int == 4 && (device["shown"] as? [[String: Any]])?.count == 2)
            }
        }
    }

    @Test("the sandbox takes FCM v1's localization keys as RichPush sends them, and refuses arguments that are not a list of strings (docs/api.md#templates-and-localization-keys)")
    func localizationKeys() async throws {
        let fcm = FCMFixtures.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI))
            try await using(try FCMClient(account: account, endpoint: "\(origin)/fcm"), shutdown: { try await $0.shutdown() }) { client in
                let token = fcm.register()
                let options = PushOptions(titleLocKey: "SALE_TITLE", locKey: "SALE_BODY", locArgs: ["Ann", "50%"])
                let body = FCMClient.message(token: token, data: ["richId": "1"], notification: (title: "Sale", body: "50% off", image: nil),
                                             collapseID: "rp-1", mode: .alert, options: options, ttl: 3600)
                guard case .sent = await client.send(body) else { Issue.record("the message with localization keys was refused"); return }
                let accepted = try #require(fcm.delivered(to: token).first)
                let shown = try #require(accepted.android["notification"] as? [String: any Sendable])
                #expect(shown["title_loc_key"] as? String == "SALE_TITLE" && shown["body_loc_key"] as? String == "SALE_BODY")
                #expect(shown["body_loc_args"] as? [String] == ["Ann", "50%"])
                #expect((accepted.apnsAps["alert"] as? [String: any Sendable])?["loc-args"] as? [String] == ["Ann", "50%"])

                let bad = Data(#"{"message":{"token":"\#(token)","android":{"notification":{"body_loc_key":"K","body_loc_args":"Ann"}}}}"#.utf8)
                guard case .failed(let reason, _) = await client.send(bad) else { Issue.record("arguments that are not a list were taken"); return }
                #expect(reason.contains("body_loc_args"), "\(reason)")
            }
        }
    }
}
