import Foundation
import RichPushClient
import Testing

@Suite("Reading pushes on the device")
struct RichPushMessageTests {
    func parse(_ json: String) throws -> RichPushMessage {
        try RichPushMessage(json: Data(json.utf8))
    }

    @Test("SPEC §6's silent push, as the server sends it")
    func silent() throws {
        let message = try parse(#"{"aps":{"content-available":1,"sound":""},"richId":"42","richMessage":"Check this image out!","richType":"img"}"#)
        #expect(message == RichPushMessage(id: 42, message: "Check this image out!", richType: "img", title: nil, payloadURL: nil, kind: .silent))
    }

    @Test("SPEC §11's alert push: title, body and the payload URL")
    func alert() throws {
        let message = try parse("""
            {"aps":{"alert":{"title":"Sale","body":"20% off"},"mutable-content":1,"sound":"default"},\
            "richId":"7","richMessage":"20% off","richType":"img","richUrl":"https://push.example.com/p/abcDEF_-123"}
            """)
        #expect(message.kind == .alert)
        #expect(message.id == 7)
        #expect(message.title == "Sale")
        #expect(message.message == "20% off")
        #expect(message.richType == "img")
        #expect(message.payloadURL == URL(string: "https://push.example.com/p/abcDEF_-123"))
    }

    @Test("an alert without a title (the server leaves the key out); the body stands in for a missing richMessage")
    func alertWithoutTitle() throws {
        let untitled = try parse(#"{"aps":{"alert":{"body":"Hello"},"mutable-content":1},"richId":"3","richMessage":"Hello","richType":"img","richUrl":"http://127.0.0.1:8080/p/x"}"#)
        #expect(untitled.kind == .alert)
        #expect(untitled.title == nil)
        #expect(untitled.payloadURL?.host == "127.0.0.1")

        let bodyOnly = try parse(#"{"aps":{"alert":{"title":"","body":"From the body"}},"richId":"4"}"#)
        #expect(bodyOnly.message == "From the body")
        #expect(bodyOnly.title == nil)
        #expect(bodyOnly.richType == "img")
        #expect(bodyOnly.payloadURL == nil)

        let stringAlert = try parse(#"{"aps":{"alert":"Plain alert"},"richId":"5"}"#)
        #expect(stringAlert.kind == .alert)
        #expect(stringAlert.message == "Plain alert")
    }

    @Test("userInfo as iOS hands it over: AnyHashable keys, nested dictionaries, NSNumber values")
    func userInfo() throws {
        let aps: [AnyHashable: Any] = ["alert": ["title": "T", "body": "B"] as [AnyHashable: Any], "mutable-content": NSNumber(value: 1)]
        let userInfo: [AnyHashable: Any] = ["aps": aps, "richId": "11", "richMessage": "B", "richType": "img", "richUrl": "https://h.example/p/t"]
        let message = try RichPushMessage(userInfo: userInfo)
        #expect(message == RichPushMessage(id: 11, message: "B", richType: "img", title: "T", payloadURL: URL(string: "https://h.example/p/t"), kind: .alert))
    }

    @Test("the flat data map of FCM and Web Push: alert with a title, silent without")
    func flatData() throws {
        let alert = try RichPushMessage(userInfo: ["richId": "9", "richMessage": "m", "richType": "img", "richUrl": "https://h.example/p/t", "title": "Hello"])
        #expect(alert == RichPushMessage(id: 9, message: "m", richType: "img", title: "Hello", payloadURL: URL(string: "https://h.example/p/t"), kind: .alert))

        let silent = try RichPushMessage(userInfo: ["richId": "10", "richMessage": "m", "richType": "img", "richUrl": ""])
        #expect(silent.kind == .silent)
        #expect(silent.title == nil)
        #expect(silent.payloadURL == nil)

        let webPush = try parse(#"{"richId":"12","richMessage":"m","richType":"img","richUrl":"https://h.example/p/t","title":null}"#)
        #expect(webPush.kind == .silent)
        #expect(webPush.title == nil)
        #expect(webPush.payloadURL == URL(string: "https://h.example/p/t"))
    }

    @Test("richId as a number as well as a decimal string")
    func numericIdentifiers() throws {
        #expect(try parse(#"{"aps":{"content-available":1},"richId":12}"#).id == 12)
        #expect(try parse(#"{"richId":"9223372036854775807"}"#).id == Int64.max)
        #expect(try parse(#"{"richId":"0007"}"#).id == 7)
        #expect(try RichPushMessage(userInfo: ["richId": 13]).id == 13)
        #expect(try RichPushMessage(userInfo: ["richId": Int64(14)]).id == 14)
        #expect(try RichPushMessage(userInfo: ["richId": NSNumber(value: 15)]).id == 15)
        #expect(try RichPushMessage(userInfo: ["richId": 16.0]).id == 16)
    }

    @Test("a missing or malformed richId is not RichPush's", arguments: [
        #"{"aps":{"content-available":1},"richMessage":"no id"}"#,
        #"{"richId":null}"#,
        #"{"richId":""}"#,
        #"{"richId":"abc"}"#,
        #"{"richId":"-1"}"#,
        #"{"richId":"+1"}"#,
        #"{"richId":" 1"}"#,
        #"{"richId":"1.5"}"#,
        #"{"richId":"0x1F"}"#,
        #"{"richId":"٣"}"#,
        #"{"richId":"9223372036854775808"}"#,
        #"{"richId":"99999999999999999999"}"#,
        #"{"richId":1.5}"#,
        #"{"richId":-3}"#,
        #"{"richId":[1]}"#,
        #"{"richId":{"id":1}}"#,
    ])
    func refusedIdentifiers(json: String) {
        let error = #expect(throws: RichPushClientError.self) { try parse(json) }
        #expect(error?.kind == .notRichPush)
        #expect(error?.message.contains("richId") == true)
    }

    @Test("bytes that are not a JSON object are not a push", arguments: ["", "not json", "[1,2]", #""richId""#, "42"])
    func notAnObject(json: String) {
        let error = #expect(throws: RichPushClientError.self) { try parse(json) }
        #expect(error?.kind == .notRichPush)
    }

    @Test("a richUrl that is not an http(s) URL is refused, not fetched", arguments: [
        #"{"richId":"1","richUrl":"file:///etc/passwd"}"#,
        #"{"richId":"1","richUrl":"javascript:alert(1)"}"#,
        #"{"richId":"1","richUrl":"/p/relative"}"#,
        #"{"richId":"1","richUrl":42}"#,
    ])
    func refusedURLs(json: String) {
        let error = #expect(throws: RichPushClientError.self) { try parse(json) }
        #expect(error?.kind == .notRichPush)
        #expect(error?.message.contains("richUrl") == true)
    }

    @Test("a message with quotes, new lines and emoji survives")
    func awkwardText() throws {
        let text = "She said \"hi\"\nthen left 🎉 \\ / </script>"
        let push: [String: Any] = ["aps": ["content-available": 1, "sound": ""] as [String: Any], "richId": "8", "richMessage": text, "richType": "img"]
        let body = try JSONSerialization.data(withJSONObject: push)
        #expect(try RichPushMessage(json: body).message == text)
    }

    @Test("a session answer: expiry in ISO 8601 with or without fractional seconds")
    func sessionAnswer() throws {
        let plain = try RichPushClient.Session(json: Data(#"{"token":"rps_abc","expires":"2027-02-20T10:00:00Z"}"#.utf8))
        #expect(plain == RichPushClient.Session(token: "rps_abc", expires: Date(timeIntervalSince1970: 1_803_117_600)))
        let fractional = try RichPushClient.Session(json: Data(#"{"token":"rps_abc","expires":"2027-02-20T10:00:00.250Z"}"#.utf8))
        #expect(abs(fractional.expires.timeIntervalSince1970 - 1_803_117_600.25) < 0.001)
        let offset = try RichPushClient.Session(json: Data(#"{"token":"t","expires":"2027-02-20T11:00:00+01:00"}"#.utf8))
        #expect(offset.expires == plain.expires)

        for bad in [#"{"expires":"2027-02-20T10:00:00Z"}"#, #"{"token":"t","expires":"tomorrow"}"#, #"{"token":"t","expires":1803117600}"#, "[]"] {
            let error = #expect(throws: RichPushClientError.self) { try RichPushClient.Session(json: Data(bad.utf8)) }
            #expect(error?.kind == .invalidResponse, "\(bad)")
        }
    }

    @Test("errors read as what to do, and compare by kind")
    func errorWords() {
        let unauthorized = RichPushClientError.http(status: 401, detail: "invalid or expired token")
        #expect(unauthorized.kind == .http(status: 401))
        #expect(unauthorized.description.contains("invalid or expired token"))
        #expect(unauthorized.description.contains("new session"))
        #expect(RichPushClientError.tooLarge(limit: 100, size: 5000).description.contains("5000"))
        #expect(RichPushClientError.http(status: 404).kind != RichPushClientError.http(status: 410).kind)
    }

    @Test("SPEC §22's options in each shape: an APNs push's subtitle, thread, category, badge and richActions; FCM's data map; a Web Push message's actions and badgeCount")
    func options() throws {
        let apns = try parse("""
            {"aps":{"badge":3,"alert":{"title":"Sale","subtitle":"Today only","body":"50% off"},"mutable-content":1,"sound":"chime.caf",\
            "thread-id":"sale-7","category":"SALE","interruption-level":"time-sensitive","relevance-score":0.75},"richId":"9",\
            "richMessage":"50% off","richType":"img","richUrl":"https://push.example.com/p/t","richActions":[{"id":"buy","title":"Buy now"},{"id":"later","title":"Later"}]}
            """)
        #expect(apns.subtitle == "Today only" && apns.threadID == "sale-7" && apns.category == "SALE" && apns.badge == 3)
        #expect(apns.actions == [.init(id: "buy", title: "Buy now"), .init(id: "later", title: "Later")])
        // FCM's data map holds strings: the buttons arrive as JSON text.
        let fcm = try RichPushMessage(userInfo: ["richId": "9", "richMessage": "50% off", "richType": "img",
                                                 "richActions": #"[{"id":"buy","title":"Buy now"}]"#])
        #expect(fcm.actions == [.init(id: "buy", title: "Buy now")] && fcm.badge == nil)
        let web = try parse(#"{"richId":"9","richMessage":"50% off","title":"Sale","subtitle":"Today only","badgeCount":2,"actions":[{"action":"buy","title":"Buy now"}]}"#)
        #expect(web.subtitle == "Today only" && web.badge == 2 && web.actions == [.init(id: "buy", title: "Buy now")])
        // Without options: nothing set, and a malformed button or badge is left out, not an error.
        let plain = try parse(#"{"aps":{"alert":{"body":"x"},"badge":-1},"richId":"1","richActions":"not json"}"#)
        #expect(plain.subtitle == nil && plain.threadID == nil && plain.badge == nil && plain.actions.isEmpty)
        #expect(try parse(#"{"aps":{"alert":"x","badge":true},"richId":"1"}"#).badge == nil)
    }
}
