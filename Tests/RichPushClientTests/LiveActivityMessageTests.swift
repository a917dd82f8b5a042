import Foundation
import RichPushClient
import Testing

/// An app's `ActivityAttributes.ContentState`, as the tests' pushes carry it.
private struct Delivery: Decodable, Equatable {
    var eta: Int
    var stage: String
}

@Suite("Live Activities as Android and browsers get them (SPEC §25)")
struct LiveActivityMessageTests {
    func parse(_ json: String) throws -> RichPushMessage {
        try RichPushMessage(json: Data(json.utf8))
    }

    /// FCM hands the app its data as a map of strings.
    func fcm(_ data: [String: String]) throws -> RichPushMessage {
        try RichPushMessage(userInfo: Dictionary(uniqueKeysWithValues: data.map { (AnyHashable($0.key), $0.value as Any) }))
    }

    @Test("FCM's data message: the content state is JSON text, decoded into the app's type; title and body are the message's")
    func fcmData() throws {
        let message = try fcm(["richpushActivity": "la_7Kq2-x", "event": "update", "contentState": #"{"stage":"out for delivery","eta":5}"#,
                               "title": "Your order", "body": "5 minutes away"])
        #expect(message.kind == .liveActivity)
        #expect(message.id == 0)
        #expect(message.title == "Your order")
        #expect(message.message == "5 minutes away")
        #expect(message.payloadURL == nil && message.retractedIdentifiers.isEmpty && !message.isUpdate)
        let activity = try #require(message.liveActivity)
        #expect(activity.id == "la_7Kq2-x")
        #expect(activity.event == .update)
        #expect(activity.dismissAt == nil)
        #expect(try activity.contentState(as: Delivery.self) == Delivery(eta: 5, stage: "out for delivery"))
        // Compact, keys sorted: the same state reads as the same bytes in either shape.
        #expect(activity.contentStateJSON == Data(#"{"eta":5,"stage":"out for delivery"}"#.utf8))
    }

    @Test("Web Push's message: the content state as an object, the same bytes as FCM's text; dismissAt as RFC 3339 or seconds")
    func webPush() throws {
        let ended = try parse(#"{"richpushActivity":"la_7Kq2-x","event":"end","contentState":{"stage":"delivered","eta":0},"dismissAt":"2030-01-01T00:00:00Z"}"#)
        #expect(ended.kind == .liveActivity)
        #expect(ended.title == nil && ended.message == "")
        let activity = try #require(ended.liveActivity)
        #expect(activity.event == .end)
        #expect(activity.dismissAt == Date(timeIntervalSince1970: 1_893_456_000))
        #expect(try activity.contentState(as: Delivery.self) == Delivery(eta: 0, stage: "delivered"))
        let fromFCM = try fcm(["richpushActivity": "la_7Kq2-x", "event": "end", "contentState": #"{"eta":0,"stage":"delivered"}"#])
        #expect(fromFCM.liveActivity?.contentStateJSON == activity.contentStateJSON)

        let fractional = try parse(#"{"richpushActivity":"la_1","event":"end","contentState":{},"dismissAt":"2030-01-01T00:00:00.500Z"}"#)
        let half = try #require(fractional.liveActivity?.dismissAt)
        #expect(abs(half.timeIntervalSince1970 - 1_893_456_000.5) < 0.001)
        let seconds = try parse(#"{"richpushActivity":"la_1","event":"end","contentState":{},"dismissAt":1893456000}"#)
        #expect(seconds.liveActivity?.dismissAt == Date(timeIntervalSince1970: 1_893_456_000))
        let secondsText = try fcm(["richpushActivity": "la_1", "event": "end", "dismissAt": "1893456000"])
        #expect(secondsText.liveActivity?.dismissAt == Date(timeIntervalSince1970: 1_893_456_000))
        // A dismissal time in no form it knows is left out, not a reason to drop the push.
        // Forty digits of fraction killed the process in Foundation's formatter on Linux (SIGFPE in ICU).
        let long = #"{"richpushActivity":"la_1","event":"end","dismissAt":"2030-01-01T00:00:00.\#(String(repeating: "0", count: 40))Z"}"#
        for json in [#"{"richpushActivity":"la_1","event":"end","dismissAt":"soon"}"#, #"{"richpushActivity":"la_1","event":"end","dismissAt":true}"#, long] {
            let message = try parse(json)
            #expect(message.liveActivity?.dismissAt == nil, "\(json)")
            #expect(message.liveActivity?.event == .end, "\(json)")
        }
    }

    @Test("a start with its alert, and a push without a content state, whose decoding says so")
    func start() throws {
        let started = try parse(#"{"richpushActivity":"la_1","event":"start","contentState":{"eta":10,"stage":"packed"},"title":"Your order","body":"On its way"}"#)
        #expect(started.liveActivity?.event == .start)
        #expect(started.title == "Your order" && started.message == "On its way")
        #expect(try started.liveActivity?.contentState(as: Delivery.self) == Delivery(eta: 10, stage: "packed"))

        let bare = try #require(try parse(#"{"richpushActivity":"la_1","event":"end","contentState":null}"#).liveActivity)
        #expect(bare.contentStateJSON == nil)
        let missing = #expect(throws: RichPushClientError.self) { try bare.contentState(as: Delivery.self) }
        #expect(missing?.kind == .notRichPush)
        #expect(missing?.message.contains("contentState") == true)

        let wrongShape = #expect(throws: RichPushClientError.self) { try started.liveActivity?.contentState(as: [String].self) }
        #expect(wrongShape?.kind == .notRichPush)
        #expect(wrongShape?.message.contains("contentState") == true)
    }

    /// A push, and the field its refusal names.
    static let refused: [(String, String)] = [
        (#"{"richpushActivity":12,"event":"start"}"#, "richpushActivity"),
        (#"{"richpushActivity":"","event":"start"}"#, "richpushActivity"),
        (#"{"richpushActivity":"la 1","event":"start"}"#, "richpushActivity"),
        (#"{"richpushActivity":"la/1","event":"start"}"#, "richpushActivity"),
        (#"{"richpushActivity":"la_1?x=1","event":"start"}"#, "richpushActivity"),
        ("{\"richpushActivity\":\"la_\(String(repeating: "x", count: 126))\",\"event\":\"start\"}", "richpushActivity"),
        (#"{"richpushActivity":"la_1"}"#, "event"),
        (#"{"richpushActivity":"la_1","event":"pause"}"#, "event"),
        (#"{"richpushActivity":"la_1","event":"START"}"#, "event"),
        (#"{"richpushActivity":"la_1","event":1}"#, "event"),
        (#"{"richpushActivity":"la_1","event":"update","contentState":"[1,2]"}"#, "contentState"),
        (#"{"richpushActivity":"la_1","event":"update","contentState":"{\"eta\":"}"#, "contentState"),
        (#"{"richpushActivity":"la_1","event":"update","contentState":[1,2]}"#, "contentState"),
        (#"{"richpushActivity":"la_1","event":"update","contentState":12}"#, "contentState"),
        (#"{"richpushActivity":"la_1","event":"update","contentState":"\"text\""}"#, "contentState"),
    ]

    @Test("a malformed activity id, event or content state is not RichPush's, and the refusal names the field",
          arguments: LiveActivityMessageTests.refused)
    func refusedShapes(json: String, names: String) throws {
        let error = #expect(throws: RichPushClientError.self) { try parse(json) }
        #expect(error?.kind == .notRichPush)
        #expect(error?.message.contains(names) == true, "\(String(describing: error))")
    }

    @Test("the longest id read is 128 bytes")
    func longestID() throws {
        let id = "la_" + String(repeating: "x", count: RichPushMessage.LiveActivity.maxIDBytes - 3)
        #expect(try fcm(["richpushActivity": id, "event": "update"]).liveActivity?.id == id)
    }

    @Test("every other push has no liveActivity; a null richpushActivity is none")
    func others() throws {
        let silent = try parse(#"{"aps":{"content-available":1,"sound":""},"richId":"42","richMessage":"m","richType":"img"}"#)
        #expect(silent.kind == .silent && silent.liveActivity == nil)
        let retraction = try fcm(["richpushRetract": "rp-12"])
        #expect(retraction.kind == .retraction && retraction.liveActivity == nil)
        let plain = try parse(#"{"richId":"3","richpushActivity":null}"#)
        #expect(plain.kind == .silent && plain.id == 3 && plain.liveActivity == nil)
        let nothing = #expect(throws: RichPushClientError.self) { try parse(#"{"richpushActivity":null,"event":"start"}"#) }
        #expect(nothing?.message.contains("richId") == true)
    }

    @Test("a Live Activity call names the device by the client's registration, or the one passed; with neither it throws noRegistration before any request")
    func registration() async throws {
        // Nothing listens on port 9: a call that got as far as a request would be a transport error.
        let url = try #require(URL(string: "http://127.0.0.1:9"))
        let anonymous = RichPushClient(baseURL: url, credentials: .basic(user: "alice", password: "wonderland"))
        #expect(anonymous.registration == nil && anonymous.with(registration: "r1").registration == "r1")
        #expect(RichPushClient(baseURL: url, registration: "r2").with(credentials: nil).registration == "r2")
        for call in [{ try await anonymous.registerPushToStartToken(type: "T", token: "ab") },
                     { try await anonymous.reportActivityToken(activity: "la_x", token: Data([1])) },
                     { try await anonymous.removePushToStartToken(type: "T") }] as [@Sendable () async throws -> Void] {
            await #expect(throws: RichPushClientError.noRegistration) { try await call() }
        }
        await #expect { try await anonymous.registerPushToStartToken(type: "T", token: "ab", registration: "r3", timeout: 2) } throws: { error in
            (error as? RichPushClientError)?.kind == .transport
        }
    }
}
