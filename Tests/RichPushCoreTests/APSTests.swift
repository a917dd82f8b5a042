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
        PushOptions(subtitle: "Sub", titleLocKey: "SALE_TITLE", locKey: "SALE_BODY %@ \"q\"", locArgs: ["Ann \"A\"", "line\nbreak", "", "é / 👍"]),
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

    @Test("device-side localization keys go in aps.alert after the body, as Apple names them: title-loc-key, loc-key and loc-args (docs/api.md#templates-and-localization-keys)")
    func localizationKeys() throws {
        let options = PushOptions(titleLocKey: "SALE_TITLE", locKey: "SALE_BODY", locArgs: ["Ann", "50%"])
        let push = AlertPush(id: 9, title: "Sale", message: "50% off", richType: "img", richUrl: "https://h.example/p/x", options: options)
        #expect(push.aps.json == """
            {"alert":{"title":"Sale","body":"50% off","title-loc-key":"SALE_TITLE","loc-key":"SALE_BODY","loc-args":["Ann","50%"]},\
            "mutable-content":1,"sound":"default"}
            """)
        let alert = try #require((try Self.object(push.encoded())["aps"] as? [String: Any])?["alert"] as? [String: Any])
        #expect(alert["title-loc-key"] as? String == "SALE_TITLE" && alert["loc-key"] as? String == "SALE_BODY")
        #expect(alert["loc-args"] as? [String] == ["Ann", "50%"])
        // Without them, the alert is as it always was.
        #expect(APS.alertPush(title: "Sale", body: "50% off", options: PushOptions(), badge: nil).alert?.json == #"{"title":"Sale","body":"50% off"}"#)
    }

    @Test("the localization options' limits: a key 1 to 256 bytes, at most 10 arguments of up to 256 bytes each (400 naming the field); arguments need a key, and a silent push takes none (422)")
    func localizationLimits() {
        func refusal(_ options: PushOptions, _ mode: PushMode = .alert) -> CoreError? {
            do { try options.validate(mode: mode); return nil } catch { return error as? CoreError }
        }
        let longest = String(repeating: "é", count: 128) // 256 bytes
        #expect(refusal(PushOptions(titleLocKey: longest, locKey: longest, locArgs: Array(repeating: longest, count: 10))) == nil)
        #expect(refusal(PushOptions(locKey: "K", locArgs: [""])) == nil)
        let over = refusal(PushOptions(titleLocKey: longest + "x"))
        #expect(over?.kind == .invalid && over?.message.hasPrefix("options.titleLocKey must be 1 to 256 bytes") == true, "\(String(describing: over))")
        #expect(refusal(PushOptions(locKey: ""))?.message.hasPrefix("options.locKey ") == true)
        let eleven = refusal(PushOptions(locKey: "K", locArgs: Array(repeating: "a", count: 11)))
        #expect(eleven?.kind == .invalid && eleven?.message == "options.locArgs has 11 arguments; at most 10")
        #expect(refusal(PushOptions(locKey: "K", locArgs: ["a", longest + "x"]))?.message.hasPrefix("options.locArgs[1] must be 0 to 256 bytes") == true)
        let alone = refusal(PushOptions(locArgs: ["a"]))
        #expect(alone?.kind == .unprocessable && alone?.message.hasPrefix("options.locArgs") == true)
        let silent = refusal(PushOptions(locKey: "K"), .silent)
        #expect(silent?.kind == .unprocessable && silent?.message.hasPrefix("options.locKey applies to alert pushes") == true)
        // Kept with the notification's options, as the others are.
        let stored = PushOptions(titleLocKey: "T", locKey: "K", locArgs: ["a", "b"])
        #expect(PushOptions(stored: stored.stored) == stored)
    }
}
