import Foundation
import RichPushClient
import Testing

/// What a test's remover was asked, in order.
private actor RecordingRemover: DeliveredNotificationRemoving {
    private(set) var calls: [[String]] = []

    func removeDeliveredNotifications(withIdentifiers identifiers: [String]) async {
        calls.append(identifiers)
    }
}

@Suite("Withdrawn and changed notifications on the device (SPEC §26)")
struct RetractionTests {
    func parse(_ json: String) throws -> RichPushMessage {
        try RichPushMessage(json: Data(json.utf8))
    }

    /// FCM hands the app its data as a map of strings.
    func fcm(_ data: [String: String]) throws -> RichPushMessage {
        try RichPushMessage(userInfo: Dictionary(uniqueKeysWithValues: data.map { (AnyHashable($0.key), $0.value as Any) }))
    }

    @Test("APNs' background retraction, as JSON and as the userInfo iOS hands over")
    func apns() throws {
        let fromJSON = try parse(#"{"aps":{"content-available":1},"richpushRetract":"rp-12"}"#)
        #expect(fromJSON.kind == .retraction)
        #expect(fromJSON.id == 12)
        #expect(fromJSON.retractedIdentifiers == ["rp-12"])
        #expect(fromJSON.retractedNotificationIDs == [12])
        #expect(fromJSON.message == "" && fromJSON.title == nil && fromJSON.payloadURL == nil && !fromJSON.isUpdate)

        let aps: [AnyHashable: Any] = ["content-available": NSNumber(value: 1)]
        let fromUserInfo = try RichPushMessage(userInfo: ["aps": aps, "richpushRetract": "rp-12"])
        #expect(fromUserInfo == fromJSON)
    }

    @Test("FCM's data message, one identifier or several coalesced")
    func fcmData() throws {
        let one = try fcm(["richpushRetract": "rp-12"])
        #expect(one.kind == .retraction && one.id == 12 && one.retractedIdentifiers == ["rp-12"])

        let two = try fcm(["richpushRetract": "rp-12,rp-15"])
        #expect(two.kind == .retraction)
        #expect(two.id == 12)
        #expect(two.retractedIdentifiers == ["rp-12", "rp-15"])
        #expect(two.retractedNotificationIDs == [12, 15])
    }

    @Test("a coalesced list keeps the push's order without repeats, and may hold up to 100 identifiers")
    func coalesced() throws {
        let repeated = try fcm(["richpushRetract": "rp-15,rp-12,rp-15,rp-0"])
        #expect(repeated.retractedIdentifiers == ["rp-15", "rp-12", "rp-0"])
        #expect(repeated.retractedNotificationIDs == [15, 12, 0])
        #expect(repeated.id == 15)

        let hundred = (1...100).map { "rp-\($0)" }
        let full = try fcm(["richpushRetract": hundred.joined(separator: ",")])
        #expect(full.retractedIdentifiers == hundred)
        #expect(full.retractedNotificationIDs == Array(Int64(1)...100))

        #expect(try fcm(["richpushRetract": "rp-9223372036854775807"]).id == Int64.max)
    }

    @Test("Web Push's retraction: what the browser shows in place of the old notification")
    func webPush() throws {
        let titled = try parse(#"{"richId":"12","richpushRetract":"rp-12","richMessage":"This message was withdrawn","title":"Flash sale","richType":"img"}"#)
        #expect(titled.kind == .retraction)
        #expect(titled.id == 12)
        #expect(titled.retractedIdentifiers == ["rp-12"])
        #expect(titled.message == "This message was withdrawn")
        #expect(titled.title == "Flash sale")
        #expect(titled.richType == "img")
        #expect(titled.payloadURL == nil)

        let untitled = try parse(#"{"richId":"12","richpushRetract":"rp-12","richMessage":"This message was withdrawn","richType":"img"}"#)
        #expect(untitled.kind == .retraction && untitled.title == nil && untitled.id == 12)

        // richId, when there, is checked as in every other push.
        let error = #expect(throws: RichPushClientError.self) { try parse(#"{"richId":"x","richpushRetract":"rp-12"}"#) }
        #expect(error?.kind == .notRichPush)
    }

    static let refusedValues: [String] = [
        "", "rp-", "rp-x", "12", "rp-12,", ",rp-12", "rp-12,,rp-15", "rp-12, rp-15", " rp-12", "RP-12", "rp_12",
        "rp--1", "rp-+1", "rp-1.5", "rp-012", "rp-١٢", "rp-9223372036854775808", "rp-12;rp-15",
        (1...101).map { "rp-\($0)" }.joined(separator: ","),
        "rp-1" + String(repeating: "0", count: 4100),
    ]

    @Test("a richpushRetract that is not a list of rp-<notification id> is refused, in any shape", arguments: RetractionTests.refusedValues)
    func refused(value: String) throws {
        let fromFCM = #expect(throws: RichPushClientError.self) { try fcm(["richpushRetract": value]) }
        #expect(fromFCM?.kind == .notRichPush)
        #expect(fromFCM?.message.contains("richpushRetract") == true)

        let push: [String: Any] = ["aps": ["content-available": 1] as [String: Any], "richpushRetract": value]
        let body = try JSONSerialization.data(withJSONObject: push)
        let fromAPNs = #expect(throws: RichPushClientError.self) { try RichPushMessage(json: body) }
        #expect(fromAPNs?.kind == .notRichPush)

        // A Web Push message's good richId does not make a bad list good.
        let web = try JSONSerialization.data(withJSONObject: ["richId": "12", "richpushRetract": value, "richMessage": "withdrawn"])
        let fromWeb = #expect(throws: RichPushClientError.self) { try RichPushMessage(json: web) }
        #expect(fromWeb?.kind == .notRichPush)
    }

    @Test("the limits say what was too much")
    func limits() {
        let many = (1...101).map { "rp-\($0)" }.joined(separator: ",")
        let tooMany = #expect(throws: RichPushClientError.self) { try fcm(["richpushRetract": many]) }
        #expect(tooMany?.message.contains("101") == true)

        let long = "rp-1" + String(repeating: "0", count: 4100)
        let tooLong = #expect(throws: RichPushClientError.self) { try fcm(["richpushRetract": long]) }
        #expect(tooLong?.message.contains("\(RichPushMessage.maxRetractValueBytes)") == true)
        #expect(RichPushMessage.maxRetractedIdentifiers == 100 && RichPushMessage.maxRetractValueBytes == 4096)
    }

    @Test("a richpushRetract that is not a string is refused; a null one is no retraction")
    func notAString() throws {
        for json in [#"{"richpushRetract":12}"#, #"{"richpushRetract":["rp-12"]}"#, #"{"richId":"3","richpushRetract":true}"#] {
            let error = #expect(throws: RichPushClientError.self) { try parse(json) }
            #expect(error?.kind == .notRichPush, "\(json)")
        }
        let plain = try parse(#"{"aps":{"content-available":1},"richId":"3","richpushRetract":null}"#)
        #expect(plain.kind == .silent && plain.id == 3 && plain.retractedIdentifiers.isEmpty)
        let nothing = #expect(throws: RichPushClientError.self) { try parse(#"{"richpushRetract":null}"#) }
        #expect(nothing?.message.contains("richId") == true)
    }

    static func server() throws -> URL {
        try #require(URL(string: "https://push.example.com"))
    }

    @Test("handleRetraction asks the remover to remove exactly the retracted identifiers, once")
    func handleRetraction() async throws {
        let client = try RichPushClient(baseURL: Self.server())
        let remover = RecordingRemover()
        let message = try fcm(["richpushRetract": "rp-12,rp-15,rp-12"])

        let removed = await client.handleRetraction(message, remover: remover)
        #expect(removed == ["rp-12", "rp-15"])
        #expect(await remover.calls == [["rp-12", "rp-15"]])
    }

    @Test("handleRetraction leaves alert and silent pushes alone")
    func handleOthers() async throws {
        let client = try RichPushClient(baseURL: Self.server())
        let remover = RecordingRemover()
        let alert = try parse(#"{"aps":{"alert":{"title":"Sale","body":"20% off"},"mutable-content":1},"richId":"12","richUrl":"https://push.example.com/p/t"}"#)
        let silent = try parse(#"{"aps":{"content-available":1,"sound":""},"richId":"12","richMessage":"m","richType":"img"}"#)
        #expect(alert.kind == .alert && silent.kind == .silent)

        #expect(await client.handleRetraction(alert, remover: remover).isEmpty)
        #expect(await client.handleRetraction(silent, remover: remover).isEmpty)
        #expect(await remover.calls.isEmpty)
    }

    @Test("richUpdate marks a changed notification in each shape: a boolean in APNs and Web Push JSON, \"1\" or \"true\" in FCM's strings")
    func update() throws {
        let apns = try parse(#"{"aps":{"alert":{"title":"Sale","body":"30% off"},"mutable-content":1},"richId":"7","richMessage":"30% off","richUpdate":true}"#)
        #expect(apns.isUpdate && apns.kind == .alert && apns.id == 7)
        let aps: [AnyHashable: Any] = ["alert": ["body": "30% off"] as [AnyHashable: Any]]
        #expect(try RichPushMessage(userInfo: ["aps": aps, "richId": "7", "richUpdate": true]).isUpdate)
        #expect(try RichPushMessage(userInfo: ["aps": aps, "richId": "7", "richUpdate": NSNumber(value: true)]).isUpdate)

        #expect(try fcm(["richId": "7", "richMessage": "30% off", "richUpdate": "true"]).isUpdate)
        #expect(try fcm(["richId": "7", "richMessage": "30% off", "richUpdate": "1"]).isUpdate)

        let web = try parse(#"{"richId":"7","richMessage":"30% off","title":"Sale","richType":"img","richUpdate":true,"silent":true}"#)
        #expect(web.isUpdate && web.kind == .alert && web.title == "Sale")

        // Anything else is not an update, and the push reads as before.
        for json in [#"{"richId":"7"}"#, #"{"richId":"7","richUpdate":false}"#, #"{"richId":"7","richUpdate":1}"#,
                     #"{"richId":"7","richUpdate":null}"#, #"{"richId":"7","richUpdate":"yes"}"#] {
            let message = try parse(json)
            #expect(!message.isUpdate, "\(json)")
            #expect(message.id == 7 && message.kind == .silent, "\(json)")
        }
        for value in ["0", "false", "", "TRUE"] {
            #expect(try !fcm(["richId": "7", "richUpdate": value]).isUpdate, "\(value)")
        }
    }
}
