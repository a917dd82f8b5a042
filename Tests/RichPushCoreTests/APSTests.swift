import Foundation
@testable import RichPushCore
import RichPushTestSupport
import Testing

/// `APS` is the one writer of `aps`: the alert and silent pushes embed its text, FCM's `apns` block
/// its dictionary. Its three forms must say the same, and the pushes' bytes must not move.
@Suite("APS: the one aps of APNs pushes and FCM's apns block")
struct APSTests {
    /// Between them, every field an alert push writes, awkward strings and whole-number scores.
    static let optionSets: [PushOptions] = [
        PushOptions(),
        PushOptions(sound: ""),
        PushOptions(threadId: "sale-7", category: "SALE", subtitle: "Today only", sound: "chime.caf",
                    interruptionLevel: .timeSensitive, relevanceScore: 0.75, badge: .count(3)),
        PushOptions(subtitle: "Tab\there \"now\" / é 👍", interruptionLevel: .passive, relevanceScore: 1, badge: .unread),
        PushOptions(category: "c/1", sound: "default", interruptionLevel: .critical, relevanceScore: 0, badge: .count(0)),
    ]

    static func object(_ json: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
    }

    @Test("an alert push with every option writes aps in the order pushes always had, which the SPEC's byte-for-byte tests pin")
    func alertBytes() throws {
        let push = AlertPush(id: 9, title: "Sale", message: "50% off", richType: "img", richUrl: "https://h.example/p/x", options: Self.optionSets[2])
        #expect(String(decoding: push.encoded(), as: UTF8.self) == """
            {"aps":{"alert":{"title":"Sale","subtitle":"Today only","body":"50% off"},"mutable-content":1,"sound":"chime.caf",\
            "thread-id":"sale-7","category":"SALE","interruption-level":"time-sensitive","relevance-score":0.75,"badge":3},\
            "richId":"9","richMessage":"50% off","richType":"img","richUrl":"https://h.example/p/x"}
            """)
        let plain = AlertPush(id: 7, title: "Sale", message: "20% off", richType: "img", richUrl: "https://h/p/abc")
        #expect(plain.aps.json == #"{"alert":{"title":"Sale","body":"20% off"},"mutable-content":1,"sound":"default"}"#)
        let quiet = AlertPush(id: 7, title: nil, message: "hi", richType: "img", richUrl: "https://h/p/abc", options: Self.optionSets[1])
        #expect(quiet.aps.json == #"{"alert":{"body":"hi"},"mutable-content":1}"#)
        // An unread badge is the device's, added at send time in front of the others.
        let unread = AlertPush(id: 7, title: nil, message: "hi", richType: "img", richUrl: "https://h/p/abc", options: PushOptions(badge: .unread))
        #expect(String(decoding: AlertPush.settingBadge(unread.encoded(), to: 4), as: UTF8.self)
            .hasPrefix(#"{"aps":{"badge":4,"alert":{"body":"hi"},"mutable-content":1,"sound":"default"},"#))
    }

    @Test("the alert and silent pushes carry APS's text as their aps")
    func pushesEmbedAPS() throws {
        for options in Self.optionSets {
            let push = AlertPush(id: 42, title: "Tab\there", message: "Line\nbreak \\ \"q\"", richType: "img", richUrl: "https://h/p/x", options: options)
            var badge: Int?
            if case .count(let fixed)? = options.badge { badge = fixed }
            let aps = APS.alertPush(title: "Tab\there", body: "Line\nbreak \\ \"q\"", options: options, badge: badge)
            #expect(push.aps == aps)
            #expect(String(decoding: push.encoded(), as: UTF8.self).hasPrefix("{\"aps\":" + aps.json + ",\"richId\":\"42\","))
        }
        let silent = SilentPush(id: 42, message: "Check this image out!", richType: "img")
        #expect(APS.silentPush.json == #"{"content-available":1,"sound":""}"#)
        #expect(String(decoding: silent.encoded(), as: UTF8.self).hasPrefix("{\"aps\":" + APS.silentPush.json + ",\"richId\":"))
        #expect(APS.background.json == #"{"content-available":1}"#)
    }

    @Test("APS's text, its dictionary (FCM's apns block) and its Encodable form are the same JSON for the same options")
    func formsAgree() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var values = Self.optionSets.map { APS.alertPush(title: "Sale \"now\"", body: "20% off\n/ 🎉", options: $0, badge: 2) }
        values += [APS.silentPush, APS.background, APS()]
        for aps in values {
            let text = try Self.object(Data(aps.json.utf8))
            let encoded = try Self.object(try encoder.encode(aps))
            let dictionary = try Self.object(try JSONSerialization.data(withJSONObject: aps.dictionary, options: [.sortedKeys]))
            #expect(JSONValues.same(text, aps.dictionary), "\(aps.json)")
            #expect(JSONValues.same(encoded, aps.dictionary), "\(aps.json)")
            #expect(JSONValues.same(text, dictionary), "\(aps.json)")
            // Every key written is one `Key` names.
            #expect(Set(text.keys).isSubset(of: Set(APS.Key.allCases.map(\.stringValue))))
            if let alert = text["alert"] as? [String: Any] {
                #expect(Set(alert.keys).isSubset(of: Set(APS.Alert.Key.allCases.map(\.stringValue))))
            }
        }
    }
}
