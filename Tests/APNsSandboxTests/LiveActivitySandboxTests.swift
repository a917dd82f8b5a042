@testable import APNsSandbox
import Foundation
import Testing

/// The APNs stand-in's Live Activities, channels and broadcasts, and the phones it plays behind
/// the tokens, checked without a listener: the rules after the provider token (`pushVerdict`,
/// `broadcastVerdict`, channel management) and what an accepted push does (`record`).
@Suite("APNs sandbox: Live Activities, channels, broadcasts and the phone view")
struct LiveActivitySandboxTests {
    static let bundle = "com.example.app"
    static let liveTopic = "com.example.app.push-type.liveactivity"
    static let phoneA = String(repeating: "a1", count: 32)
    static let phoneB = String(repeating: "b2", count: 32)
    static let phoneC = String(repeating: "c3", count: 32)
    static let phoneD = String(repeating: "d4", count: 32)

    func makeSandbox(topics: Set<String>? = [LiveActivitySandboxTests.bundle], deviceTopics: [String: String] = [:], keep: Int = 100_000) throws -> APNsSandbox {
        let (certificate, key) = try APNsSandbox.selfSignedCertificate()
        var configuration = try APNsSandbox.Configuration(teamID: "TEAM123456", keyID: "KEY1234567", publicKeyPEM: key,
                                                          tlsCertificatePEM: certificate, tlsKeyPEM: key)
        configuration.topics = topics
        configuration.deviceTopics = deviceTopics
        return try APNsSandbox(configuration, keepAccepted: keep)
    }

    static func liveHeaders(topic: String = LiveActivitySandboxTests.liveTopic, priority: String = "10") -> [String: String] {
        ["apns-topic": topic, "apns-push-type": "liveactivity", "apns-priority": priority]
    }

    static func start(timestamp: Int, alert: Any? = ["title": "Kick-off", "body": "The match starts"], channel: String? = nil,
                      activity: String? = nil) -> [String: Any] {
        var aps: [String: Any] = [
            "timestamp": timestamp, "event": "start", "attributes-type": "MatchAttributes",
            "attributes": ["home": "Ajax", "away": "PSV"], "content-state": ["home": 0, "away": 0],
        ]
        if let alert { aps["alert"] = alert }
        if let channel { aps["input-push-channel"] = channel }
        var payload: [String: Any] = ["aps": aps]
        if let activity { payload["richpushActivity"] = activity }
        return payload
    }

    static func update(timestamp: Int, event: String = "update", home: Int = 1) -> [String: Any] {
        aps(["timestamp": timestamp, "event": event, "content-state": ["home": home, "away": 0]])
    }

    /// A payload of `fields` as its `aps`.
    static func aps(_ fields: [String: Any]) -> [String: Any] {
        ["aps": fields]
    }

    /// What the sandbox answers a push to `token` that passed its provider-token checks ("200" or
    /// "STATUS Reason"); an accepted push is recorded, so the phones play it.
    @discardableResult
    func push(_ sandbox: APNsSandbox, to token: String, _ payload: [String: Any],
              headers: [String: String] = LiveActivitySandboxTests.liveHeaders()) throws -> String {
        switch sandbox.pushVerdict(headers: headers, token: token, body: try JSONSerialization.data(withJSONObject: payload)) {
        case .accept(let push):
            sandbox.record(push)
            return "200"
        case .reject(let status, let reason, _):
            return "\(status) \(reason)"
        }
    }

    /// The same for a broadcast on `channel`.
    @discardableResult
    func broadcast(_ sandbox: APNsSandbox, on channel: String?, _ payload: [String: Any], pushType: String = "liveactivity",
                   expiration: String = "0", bundle: String = LiveActivitySandboxTests.bundle) throws -> String {
        var headers = ["apns-push-type": pushType, "apns-expiration": expiration, "apns-priority": "10"]
        headers["apns-channel-id"] = channel
        switch sandbox.broadcastVerdict(bundleID: bundle, headers: headers, body: try JSONSerialization.data(withJSONObject: payload)) {
        case .accept(let push):
            sandbox.record(push)
            return "200"
        case .reject(let status, let reason, _):
            return "\(status) \(reason)"
        }
    }

    /// A new channel of the app; its id.
    func channel(_ sandbox: APNsSandbox, policy: Int = 1) throws -> String {
        let body = try JSONSerialization.data(withJSONObject: ["message-storage-policy": policy, "push-type": "LiveActivity"] as [String: Any])
        let answer = sandbox.createChannel(bundleID: Self.bundle, headers: [:], body: body)
        #expect(answer.status == 201)
        return try #require(answer.headers["apns-channel-id"])
    }

    @Test("a live activity's topic is the bundle id with .push-type.liveactivity; the app's checks are of the bundle id")
    func topicRule() throws {
        let sandbox = try makeSandbox()
        let payload = Self.start(timestamp: 1000)
        #expect(try push(sandbox, to: Self.phoneA, payload) == "200")
        #expect(try push(sandbox, to: Self.phoneA, payload, headers: Self.liveHeaders(topic: Self.bundle)) == "400 TopicDisallowed")
        #expect(try push(sandbox, to: Self.phoneA, payload, headers: Self.liveHeaders(topic: ".push-type.liveactivity")) == "400 TopicDisallowed")
        #expect(try push(sandbox, to: Self.phoneA, payload, headers: Self.liveHeaders(topic: "com.other.app.push-type.liveactivity"))
            == "400 TopicDisallowed")
        // An alert's topic is still the bundle id itself.
        let alert: [String: Any] = ["aps": ["alert": "Hi"]]
        #expect(try push(sandbox, to: Self.phoneA, alert, headers: ["apns-topic": Self.bundle]) == "200")
        // Priorities 5 and 10 only.
        #expect(try push(sandbox, to: Self.phoneA, payload, headers: Self.liveHeaders(priority: "5")) == "200")
        #expect(try push(sandbox, to: Self.phoneA, payload, headers: Self.liveHeaders(priority: "1")) == "400 BadPriority")
        // A token known as the app's activity token takes its live activities; the app's own device
        // token does not (a push-to-start or update token is another token), nor another app's.
        let liveTopic = Self.bundle + ".push-type.liveactivity"
        let known = try makeSandbox(deviceTopics: [Self.phoneA: liveTopic, Self.phoneB: "com.other.app", Self.phoneC: Self.bundle])
        #expect(try push(known, to: Self.phoneA, payload) == "200")
        #expect(try push(known, to: Self.phoneB, payload) == "400 DeviceTokenNotForTopic")
        #expect(try push(known, to: Self.phoneC, payload) == "400 DeviceTokenNotForTopic")
    }

    @Test("a live activity's push carries an integer timestamp, an event, and what its event needs; else 400 BadPayload")
    func payloadRules() throws {
        let sandbox = try makeSandbox()
        var missingTimestamp = Self.start(timestamp: 1000)
        var aps = try #require(missingTimestamp["aps"] as? [String: Any])
        aps["timestamp"] = nil
        missingTimestamp["aps"] = aps
        #expect(try push(sandbox, to: Self.phoneA, missingTimestamp) == "400 BadPayload")
        let empty: [String: Any] = [:]
        let refused: [[String: Any]] = [
            Self.aps(["timestamp": 1000.5, "event": "update", "content-state": empty]),
            Self.aps(["timestamp": 1000, "event": "pause", "content-state": empty]),
            Self.aps(["timestamp": 1000, "content-state": empty]),
            Self.aps(["timestamp": 1000, "event": "update"]),
            Self.aps(["timestamp": 1000, "event": "update", "content-state": "score 1-0"]),
            Self.aps(["timestamp": 1000, "event": "start", "attributes": empty, "content-state": empty]),
            Self.aps(["timestamp": 1000, "event": "start", "attributes-type": "A", "content-state": empty]),
            Self.aps(["timestamp": 1000, "event": "start", "attributes-type": "A", "attributes": empty]),
        ]
        for payload in refused {
            #expect(try push(sandbox, to: Self.phoneA, payload) == "400 BadPayload", "\(payload)")
        }
        // An end needs no content state; more than 4 KB is too large.
        #expect(try push(sandbox, to: Self.phoneA, Self.aps(["timestamp": 1000, "event": "end"])) == "200")
        let large = Self.aps(["timestamp": 1000, "event": "update", "content-state": ["text": String(repeating: "x", count: 4100)]])
        #expect(try push(sandbox, to: Self.phoneA, large) == "413 PayloadTooLarge")
    }

    @Test("Apple's aps rules let a live activity's keys through: a localized title, a sound in the alert, any relevance score")
    func liveActivityKeysPass() throws {
        let aps: [String: Any] = [
            "timestamp": 1000, "event": "update", "content-state": ["home": 1], "stale-date": 2000, "dismissal-date": 3000,
            "relevance-score": 100, "input-push-channel": "dGVzdA==",
            "alert": ["title": ["loc-key": "%@ scored", "loc-args": ["Ajax"]] as [String: Any], "body": "1-0", "sound": "goal.aiff"] as [String: Any],
        ]
        #expect(APSRules.refusal(aps, liveActivity: true) == nil)
        #expect(APSRules.liveActivityRefusal(aps) == nil)
        #expect(Set(aps.keys).isSubset(of: APSRules.liveActivityKeys))
        // An ordinary push keeps Apple's ordinary rules.
        #expect(APSRules.refusal(aps) != nil)
    }

    @Test("a start makes an activity with a new update token, unless it has no alert title: iOS drops it though APNs answers 200")
    func startWithoutAlertIsDropped() throws {
        let sandbox = try makeSandbox()
        #expect(try push(sandbox, to: Self.phoneA, Self.start(timestamp: 1000, alert: nil)) == "200")
        #expect(try push(sandbox, to: Self.phoneA, Self.start(timestamp: 1001, alert: ["body": "No title"])) == "200")
        #expect(try push(sandbox, to: Self.phoneA, Self.start(timestamp: 1002, alert: ["title": ""])) == "200")
        #expect(sandbox.phoneActivities.isEmpty)
        #expect(sandbox.phoneEvents.map(\.reason) == ["start without alert", "start without alert", "start without alert"])
        #expect(sandbox.phoneEvents.allSatisfy { !$0.shown && $0.token == Self.phoneA && $0.event == "start" })

        #expect(try push(sandbox, to: Self.phoneA, Self.start(timestamp: 1003, alert: "Kick-off", activity: "match-7")) == "200")
        let activity = try #require(sandbox.phoneActivities(pushToStartToken: Self.phoneA).first)
        #expect(activity.updateToken.count == 160 && activity.updateToken.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(activity.attributesType == "MatchAttributes" && activity.richpushActivity == "match-7")
        #expect(activity.attributes == #"{"away":"PSV","home":"Ajax"}"#)
        #expect(activity.contentState == #"{"away":0,"home":0}"#)
        #expect(activity.lastTimestamp == 1003 && !activity.ended && activity.shown == 1)
        #expect(sandbox.phoneEvents.last == PhoneEvent(token: Self.phoneA, channelID: nil, activity: "match-7", event: "start",
                                                       timestamp: 1003, shown: true, reason: nil))
        #expect(sandbox.acceptedCount == 4)
    }

    @Test("the activity's richpushActivity may come from its attributes")
    func activityFromAttributes() throws {
        let sandbox = try makeSandbox()
        var payload = Self.start(timestamp: 1000)
        var aps = try #require(payload["aps"] as? [String: Any])
        aps["attributes"] = ["richpushActivity": "match-9"]
        payload["aps"] = aps
        #expect(try push(sandbox, to: Self.phoneA, payload) == "200")
        #expect(sandbox.phoneActivities.map(\.richpushActivity) == ["match-9"])
    }

    @Test("updates and ends reach the activity through its update token, newer than the last shown, until it ended")
    func staleTimestampIsDropped() throws {
        let sandbox = try makeSandbox()
        try push(sandbox, to: Self.phoneA, Self.start(timestamp: 1000, activity: "match-7"))
        let token = try #require(sandbox.phoneActivities.first?.updateToken)
        #expect(try push(sandbox, to: token, Self.update(timestamp: 1000)) == "200")
        #expect(try push(sandbox, to: token, Self.update(timestamp: 999)) == "200")
        #expect(try push(sandbox, to: token, Self.update(timestamp: 1001, home: 2)) == "200")
        #expect(try push(sandbox, to: token, Self.update(timestamp: 1002, event: "end", home: 3)) == "200")
        #expect(try push(sandbox, to: token, Self.update(timestamp: 1003, home: 4)) == "200")
        #expect(sandbox.phoneEvents.map(\.reason) == [nil, "stale timestamp", "stale timestamp", nil, nil, "ended"])
        #expect(sandbox.phoneEvents.map(\.shown) == [true, false, false, true, true, false])
        #expect(sandbox.phoneEvents.dropFirst().allSatisfy { $0.token == token && $0.activity == "match-7" })
        let activity = try #require(sandbox.phoneActivities.first)
        #expect(activity.contentState == #"{"away":0,"home":3}"# && activity.lastTimestamp == 1002 && activity.ended && activity.shown == 3)
    }

    @Test("an update to a token that is no activity's update token is dropped: unknown activity")
    func unknownActivityIsDropped() throws {
        let sandbox = try makeSandbox()
        let stranger = String(repeating: "ef", count: 80)
        #expect(try push(sandbox, to: stranger, Self.update(timestamp: 1000)) == "200")
        #expect(try push(sandbox, to: Self.phoneA, Self.update(timestamp: 1000)) == "200")
        #expect(sandbox.phoneEvents == [
            PhoneEvent(token: stranger, channelID: nil, activity: nil, event: "update", timestamp: 1000, shown: false, reason: "unknown activity"),
            PhoneEvent(token: Self.phoneA, channelID: nil, activity: nil, event: "update", timestamp: 1000, shown: false, reason: "unknown activity"),
        ])
        #expect(sandbox.phoneActivities.isEmpty)
    }

    @Test("a broadcast reaches every activity subscribed to its channel: one event each")
    func broadcastToSubscribers() throws {
        let sandbox = try makeSandbox()
        let match = try channel(sandbox)
        let other = try channel(sandbox)
        for (index, phone) in [Self.phoneA, Self.phoneB, Self.phoneC].enumerated() {
            #expect(try push(sandbox, to: phone, Self.start(timestamp: 1000 + index, channel: match, activity: "match-7")) == "200")
        }
        try push(sandbox, to: Self.phoneD, Self.start(timestamp: 1000, channel: other))
        #expect(try broadcast(sandbox, on: match, Self.update(timestamp: 1010, home: 2)) == "200")

        let subscribed = sandbox.phoneActivities.filter { $0.channelID == match }
        #expect(subscribed.count == 3)
        let events = sandbox.phoneEvents.suffix(3)
        #expect(events.count == 3 && events.allSatisfy { $0.shown && $0.channelID == match && $0.event == "update" && $0.activity == "match-7" })
        #expect(Set(events.map(\.token)) == Set(subscribed.map(\.updateToken)))
        #expect(subscribed.allSatisfy { $0.contentState == #"{"away":0,"home":2}"# && $0.shown == 2 && $0.lastTimestamp == 1010 })
        #expect(sandbox.phoneActivities.first { $0.channelID == other }?.shown == 1)
        // Kept as an accepted push too: the channel id as its token.
        #expect(sandbox.acceptedCount == 5)
        #expect(sandbox.accepted.last?.token == match && sandbox.accepted.last?.headers["apns-channel-id"] == match)

        // The same rules as for a push to an update token: an older one is dropped by each.
        #expect(try broadcast(sandbox, on: match, Self.update(timestamp: 1005)) == "200")
        #expect(sandbox.phoneEvents.suffix(3).allSatisfy { !$0.shown && $0.reason == "stale timestamp" })
    }

    @Test("channel management: 201 with a base64 id, its configuration, the app's list, 204 on delete; Apple's refusals")
    func channelRules() throws {
        let sandbox = try makeSandbox()
        func create(_ object: [String: Any]) throws -> String {
            let answer = sandbox.createChannel(bundleID: Self.bundle, headers: [:], body: try JSONSerialization.data(withJSONObject: object))
            return answer.reason.map { "\(answer.status) \($0)" } ?? "\(answer.status)"
        }
        #expect(try create(["message-storage-policy": 2, "push-type": "LiveActivity"]) == "400 BadRequestPayload")
        #expect(try create(["push-type": "LiveActivity"]) == "400 BadRequestPayload")
        #expect(try create(["message-storage-policy": 1]) == "400 MissingPushType")
        #expect(try create(["message-storage-policy": 1, "push-type": "Alert"]) == "400 InvalidPushType")
        #expect(sandbox.createChannel(bundleID: Self.bundle, headers: [:], body: Data("policy".utf8)).reason == "BadRequestPayload")

        let id = try channel(sandbox, policy: 0)
        #expect(Data(base64Encoded: id) != nil)
        let read = sandbox.readChannel(bundleID: Self.bundle, headers: ["apns-channel-id": id])
        #expect(read.status == 200)
        let configuration = try #require(try JSONSerialization.jsonObject(with: read.body ?? Data()) as? [String: Any])
        #expect(configuration["message-storage-policy"] as? Int == 0 && configuration["push-type"] as? String == "LiveActivity")
        let list = try #require(try JSONSerialization.jsonObject(with: sandbox.allChannels(bundleID: Self.bundle).body ?? Data()) as? [String: Any])
        #expect(list["channels"] as? [String] == [id])
        #expect(sandbox.allChannels(bundleID: "com.other.app").body.map { String(decoding: $0, as: UTF8.self) } == #"{"channels":[]}"#)

        #expect(sandbox.readChannel(bundleID: Self.bundle, headers: [:]).reason == "MissingChannelId")
        #expect(sandbox.readChannel(bundleID: Self.bundle, headers: ["apns-channel-id": "not base64!"]).reason == "BadChannelId")
        #expect(sandbox.readChannel(bundleID: "com.other.app", headers: ["apns-channel-id": id]).status == 404)

        // A channel that stores no message takes only broadcasts that expire at once.
        let later = String(Int(Date().timeIntervalSince1970) + 3600)
        #expect(try broadcast(sandbox, on: id, Self.update(timestamp: 1000), expiration: later) == "400 BadExpirationDate")
        #expect(try broadcast(sandbox, on: id, Self.update(timestamp: 1000)) == "200")
        #expect(try broadcast(sandbox, on: nil, Self.update(timestamp: 1000)) == "400 MissingChannelId")
        #expect(try broadcast(sandbox, on: id, Self.update(timestamp: 1000), pushType: "alert") == "400 InvalidPushType")
        #expect(try broadcast(sandbox, on: id, Self.update(timestamp: 1000), bundle: "com.other.app") == "400 ChannelNotRegistered")
        #expect(try broadcast(sandbox, on: id, ["aps": ["event": "update"]]) == "400 BadPayload")

        #expect(sandbox.deleteChannel(bundleID: Self.bundle, headers: ["apns-channel-id": id]).status == 204)
        #expect(sandbox.readChannel(bundleID: Self.bundle, headers: ["apns-channel-id": id]) == APNsSandbox.Answer(status: 404, reason: "ChannelNotRegistered"))
        #expect(sandbox.deleteChannel(bundleID: Self.bundle, headers: ["apns-channel-id": id]).status == 404)
        #expect(try broadcast(sandbox, on: id, Self.update(timestamp: 1001)) == "400 ChannelNotRegistered")
        #expect(sandbox.acceptedCount == 1)
    }

    @Test("the phone view is JSON keyed by the Swift property names, null for nil")
    func phoneViewJSON() throws {
        let sandbox = try makeSandbox()
        try push(sandbox, to: Self.phoneA, Self.start(timestamp: 1000))
        try push(sandbox, to: Self.phoneB, Self.start(timestamp: 1000, alert: nil))
        let view = try #require(try JSONSerialization.jsonObject(with: sandbox.phoneViewJSON()) as? [String: Any])
        let activities = try #require(view["activities"] as? [[String: Any]])
        let events = try #require(view["events"] as? [[String: Any]])
        #expect(activities.count == 1 && events.count == 2)
        #expect(Set(activities[0].keys) == ["pushToStartToken", "updateToken", "attributesType", "attributes", "richpushActivity",
                                            "channelID", "contentState", "lastTimestamp", "ended", "shown"])
        #expect(activities[0]["pushToStartToken"] as? String == Self.phoneA && activities[0]["richpushActivity"] is NSNull)
        #expect(Set(events[1].keys) == ["token", "channelID", "activity", "event", "timestamp", "shown", "reason"])
        #expect(events[1]["reason"] as? String == "start without alert" && events[1]["token"] as? String == Self.phoneB)
        // ?activity= keeps one activity's: its richpushActivity.
        try push(sandbox, to: Self.phoneC, Self.start(timestamp: 1000, activity: "la_one"))
        let one = try #require(try JSONSerialization.jsonObject(with: sandbox.phoneViewJSON(activity: "la_one")) as? [String: Any])
        #expect((one["activities"] as? [[String: Any]])?.map { $0["pushToStartToken"] as? String } == [Self.phoneC])
        #expect((one["events"] as? [[String: Any]])?.map { $0["token"] as? String } == [Self.phoneC])
    }

    @Test("a start naming a channel APNs did not make, or deleted, is dropped: the phone would never be updated through it; a deleted channel reaches none of its old subscribers")
    func unknownChannel() throws {
        let sandbox = try makeSandbox()
        #expect(try push(sandbox, to: Self.phoneA, Self.start(timestamp: 1000, channel: "bm9zdWNoY2hhbm5lbA==")) == "200")
        #expect(sandbox.phoneEvents.last?.reason == "unknown channel" && sandbox.phoneActivities.isEmpty)
        let match = try channel(sandbox)
        #expect(try push(sandbox, to: Self.phoneB, Self.start(timestamp: 1000, channel: match)) == "200")
        #expect(sandbox.phoneActivities.count == 1)
        #expect(sandbox.deleteChannel(bundleID: Self.bundle, headers: ["apns-channel-id": match]).status == 204)
        #expect(try push(sandbox, to: Self.phoneC, Self.start(timestamp: 1001, channel: match)) == "200")
        #expect(sandbox.phoneEvents.last?.reason == "unknown channel" && sandbox.phoneActivities.count == 1)
    }

    @Test("the phones' memory is bounded: past about keepAccepted the oldest activities and events go, their channel subscriptions with them")
    func bounded() throws {
        let sandbox = try makeSandbox(keep: 40)
        let match = try channel(sandbox)
        for n in 0..<200 {
            #expect(try push(sandbox, to: String(format: "%064x", n + 1), Self.start(timestamp: 1000, channel: match)) == "200")
        }
        #expect(sandbox.phoneActivities.count <= 45 && sandbox.phoneActivities.count >= 40)
        #expect(sandbox.phoneEvents.count <= 45)
        // The newest are the ones kept, and a broadcast reaches exactly those.
        #expect(sandbox.phoneActivities.last?.pushToStartToken == String(format: "%064x", 200))
        let kept = sandbox.phoneActivities.count
        #expect(try broadcast(sandbox, on: match, Self.update(timestamp: 1010)) == "200")
        #expect(sandbox.phoneEvents.suffix(kept).allSatisfy { $0.shown && $0.event == "update" })
        #expect(sandbox.phoneActivities.allSatisfy { $0.shown == 2 })
    }
}
