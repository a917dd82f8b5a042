import APNsSandbox
import Foundation
import PushDelivery
import RichPushCore
import RichPushTestSupport
import Testing

/// One `aps` (issue #43): the APNs alert push and FCM's `apns.payload.aps` come from `APS` and agree
/// for the same options, and the sandboxes' rules, written in Apple's words apart from the writer,
/// accept what it writes and know every key it uses.
@Suite("APS: APNs pushes, FCM's apns block and the sandbox's rules agree")
struct APSAgreementTests {
    static let optionSets: [PushOptions] = [
        PushOptions(),
        PushOptions(sound: ""),
        PushOptions(threadId: "sale-7", category: "SALE", subtitle: "Today only", sound: "chime.caf",
                    interruptionLevel: .timeSensitive, relevanceScore: 0.75, badge: .count(3)),
        PushOptions(subtitle: "Tab\there \"now\"", interruptionLevel: .passive, relevanceScore: 1),
        PushOptions(category: "c/1", interruptionLevel: .critical, relevanceScore: 0, badge: .count(0)),
        PushOptions(titleLocKey: "SALE_TITLE", locKey: "SALE_BODY", locArgs: ["Ann", "50%"]),
    ]

    static func object(_ json: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
    }

    /// The sandbox accepts `aps`, and every key in it is one Apple names.
    static func checkApple(_ aps: [String: Any], _ label: String) {
        #expect(APSRules.refusal(aps) == nil, "\(label)")
        #expect(Set(aps.keys).isSubset(of: APSRules.keys), "\(label): \(aps.keys.sorted())")
        if let alert = aps["alert"] as? [String: Any] {
            #expect(Set(alert.keys).isSubset(of: APSRules.alertKeys), "\(label): alert \(alert.keys.sorted())")
        }
    }

    @Test("every key APS can write is one Apple names")
    func keysAreApples() {
        #expect(Set(APS.Key.allCases.map(\.stringValue)).isSubset(of: APSRules.keys))
        #expect(Set(APS.Alert.Key.allCases.map(\.stringValue)).isSubset(of: APSRules.alertKeys))
    }

    @Test("for the same options the APNs alert push and FCM's apns block carry the same aps (FCM's alert only for a subtitle or localization keys), and the sandbox accepts both")
    func alertAgrees() throws {
        for options in Self.optionSets {
            var badge: Int?
            if case .count(let fixed)? = options.badge { badge = fixed }
            let push = AlertPush(id: 7, title: "Sale", message: "20% off", richType: "img", richUrl: "https://h.example/p/x", options: options)
            let apnsAPS = try #require(try Self.object(push.encoded())["aps"] as? [String: Any])
            let body = FCMClient.message(token: "t", data: ["richId": "7"], notification: (title: "Sale", body: "20% off", image: nil),
                                         collapseID: "rp-7", mode: .alert, options: options, badge: badge, ttl: 60)
            let message = try #require(try Self.object(body)["message"] as? [String: Any])
            let payload = try #require((message["apns"] as? [String: Any])?["payload"] as? [String: Any])
            let fcmAPS = try #require(payload["aps"] as? [String: Any])
            // FCM makes the APNs alert from `notification`: `aps.alert` goes along only with a subtitle or localization keys.
            var expected = apnsAPS
            if options.subtitle == nil && options.titleLocKey == nil && options.locKey == nil { expected.removeValue(forKey: "alert") }
            #expect(JSONValues.same(fcmAPS, expected), "\(fcmAPS) vs \(expected)")
            #expect(JSONValues.same(apnsAPS, push.aps.dictionary))
            Self.checkApple(apnsAPS, "APNs \(options)")
            Self.checkApple(fcmAPS, "FCM \(options)")
        }
    }

    @Test("the silent push and FCM's data message to iOS are background pushes the sandbox accepts")
    func backgroundAgrees() throws {
        let silent = try #require(try Self.object(SilentPush(id: 7, message: "hi", richType: "img").encoded())["aps"] as? [String: Any])
        #expect(silent["content-available"] as? Int == 1)
        Self.checkApple(silent, "silent")
        let body = FCMClient.message(token: "t", data: ["richId": "7"], notification: nil, collapseID: "rp-7", mode: .silent, ttl: 60)
        let message = try #require(try Self.object(body)["message"] as? [String: Any])
        let fcmAPS = try #require(((message["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(JSONValues.same(fcmAPS, APS.background.dictionary))
        Self.checkApple(fcmAPS, "FCM data message")
    }
}
