import Foundation
import PushDelivery
import RichPushCore
import Testing

/// The message FCMClient builds: a collapse id is a tag, never a collapse key (docs/delivery.md).
@Suite("FCM messages")
struct FCMMessageTests {
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

    @Test("device-side localization keys: Android's title_loc_key, body_loc_key and body_loc_args in android.notification, Apple's in the apns block's aps.alert; none in a data message (docs/api.md#templates-and-localization-keys)")
    func localizationKeys() throws {
        let options = PushOptions(titleLocKey: "SALE_TITLE", locKey: "SALE_BODY", locArgs: ["Ann", "50%"])
        let body = FCMClient.message(token: "t", data: ["richId": "5"], notification: (title: "Sale", body: "50% off", image: nil),
                                     collapseID: "rp-5", mode: .alert, options: options, ttl: 60)
        let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        let message = try #require(object["message"] as? [String: Any])
        let shown = try #require((message["android"] as? [String: Any])?["notification"] as? [String: Any])
        #expect(shown["title_loc_key"] as? String == "SALE_TITLE" && shown["body_loc_key"] as? String == "SALE_BODY")
        #expect(shown["body_loc_args"] as? [String] == ["Ann", "50%"])
        let aps = try #require(((message["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["title-loc-key"] as? String == "SALE_TITLE" && alert["loc-key"] as? String == "SALE_BODY")
        #expect(alert["loc-args"] as? [String] == ["Ann", "50%"])

        let plain = FCMClient.message(token: "t", data: ["richId": "6"], notification: (title: "Sale", body: "50% off", image: nil),
                                      collapseID: "rp-6", mode: .alert, ttl: 60)
        let plainMessage = try #require((try JSONSerialization.jsonObject(with: plain) as? [String: Any])?["message"] as? [String: Any])
        let plainShown = try #require((plainMessage["android"] as? [String: Any])?["notification"] as? [String: Any])
        #expect(!plainShown.keys.contains { $0.contains("loc") })
        let plainAPS = try #require(((plainMessage["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(plainAPS["alert"] == nil)
    }
}
