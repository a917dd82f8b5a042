import Foundation

extension APNsSandbox {
    /// A Live Activity on one of the iPhones the sandbox plays: made by a `start` pushed to a
    /// push-to-start token, then updated and ended through its update token or the broadcast
    /// channel it subscribed to.
    public struct PhoneActivity: Sendable, Equatable {
        /// The device token the `start` was pushed to (ActivityKit's push-to-start token).
        public var pushToStartToken: String
        /// The token iOS hands the app for this activity's updates: 80 random bytes as 160
        /// lowercase hex characters, new for each activity.
        public var updateToken: String
        /// The start's `aps.attributes-type`.
        public var attributesType: String
        /// The start's `aps.attributes`, as JSON text (keys sorted).
        public var attributes: String
        /// The start payload's top-level `richpushActivity`, else `attributes.richpushActivity`.
        public var richpushActivity: String?
        /// The broadcast channel the activity subscribed to (the start's `aps.input-push-channel`).
        public var channelID: String?
        /// The content state shown now, as JSON text (keys sorted).
        public var contentState: String
        /// `aps.timestamp` of the last push shown.
        public var lastTimestamp: Int
        /// Whether an `end` was shown.
        public var ended: Bool
        /// How many pushes were shown, the start among them.
        public var shown: Int

        /// Creates an activity as a phone shows it.
        public init(pushToStartToken: String, updateToken: String, attributesType: String, attributes: String,
                    richpushActivity: String?, channelID: String?, contentState: String, lastTimestamp: Int,
                    ended: Bool, shown: Int) {
            self.pushToStartToken = pushToStartToken
            self.updateToken = updateToken
            self.attributesType = attributesType
            self.attributes = attributes
            self.richpushActivity = richpushActivity
            self.channelID = channelID
            self.contentState = contentState
            self.lastTimestamp = lastTimestamp
            self.ended = ended
            self.shown = shown
        }
    }

    /// What a phone did with one accepted live-activity push: shown, or dropped and why (iOS drops
    /// silently what APNs accepted with a 200).
    public struct PhoneEvent: Sendable, Equatable {
        /// The device token pushed to (a push-to-start or an update token); for a broadcast, the
        /// update token of the subscribed activity this event is about.
        public var token: String
        /// The channel a broadcast came on; for a start, the channel it subscribes to.
        public var channelID: String?
        /// The activity's `richpushActivity`, when the push reached one (or a start carried it).
        public var activity: String?
        /// `aps.event`: start, update or end.
        public var event: String
        /// `aps.timestamp`.
        public var timestamp: Int?
        /// Whether the phone showed it.
        public var shown: Bool
        /// Why it was dropped: "start without alert", "unknown activity", "ended", "stale timestamp"
        /// (or "start on a channel" for a start broadcast to subscribers).
        public var reason: String?

        /// Creates an event as a phone records it.
        public init(token: String, channelID: String?, activity: String?, event: String, timestamp: Int?, shown: Bool, reason: String?) {
            self.token = token
            self.channelID = channelID
            self.activity = activity
            self.event = event
            self.timestamp = timestamp
            self.shown = shown
            self.reason = reason
        }
    }
}

/// `APNsSandbox.PhoneActivity`, by its short name.
public typealias PhoneActivity = APNsSandbox.PhoneActivity
/// `APNsSandbox.PhoneEvent`, by its short name.
public typealias PhoneEvent = APNsSandbox.PhoneEvent

/// The iPhones behind the tokens, as far as Live Activities go: what each accepted live-activity
/// push does on the phone it reaches (or on every phone subscribed to the channel it was broadcast
/// on). Kept in the sandbox's locked state.
struct Phones {
    /// Activities by update token.
    private var byUpdateToken: [String: APNsSandbox.PhoneActivity] = [:]
    /// Their update tokens, oldest first.
    private var order: [String] = []
    private(set) var events: [APNsSandbox.PhoneEvent] = []
    /// Update tokens of the activities subscribed to each channel.
    private var subscribers: [String: [String]] = [:]
    /// Keep about this many activities and events: the oldest go once there are an eighth more
    /// (so that dropping them, a copy, is not paid on every push).
    let keep: Int

    init(keep: Int) {
        self.keep = keep
    }

    /// The activities the phones show or showed, oldest first.
    var activities: [APNsSandbox.PhoneActivity] { order.compactMap { byUpdateToken[$0] } }

    /// What the phones did with an accepted push; nil when it is not a live-activity push.
    /// `channelExists` says whether a start's `input-push-channel` is one APNs made.
    mutating func receive(_ push: APNsSandbox.AcceptedPush, channelExists: (String) -> Bool) -> [APNsSandbox.PhoneEvent]? {
        guard push.headers["apns-push-type"] == "liveactivity",
              let object = (try? JSONSerialization.jsonObject(with: push.payload)) as? [String: Any],
              let aps = object["aps"] as? [String: Any]
        else { return nil }
        let event = aps["event"] as? String ?? ""
        let timestamp = (aps["timestamp"] as? NSNumber)?.intValue
        // The content state as the phones keep it, made once for every phone a broadcast reaches.
        let state = aps["content-state"].map(Self.jsonText)
        let made = push.isBroadcast
            ? broadcast(channelID: push.token, event: event, timestamp: timestamp ?? 0, state: state)
            : [deliver(token: push.token, payload: object, aps: aps, event: event, timestamp: timestamp, state: state, channelExists: channelExists)]
        events.append(contentsOf: made)
        if events.count > keep + keep / 8 { events.removeFirst(events.count - keep) }
        return made
    }

    /// The activities started by pushes to `pushToStartToken`, oldest first.
    func activities(pushToStartToken token: String) -> [APNsSandbox.PhoneActivity] {
        let token = token.lowercased()
        return activities.filter { $0.pushToStartToken == token }
    }

    /// A channel was deleted: nothing more reaches its subscribers through it.
    mutating func forget(channel: String) {
        subscribers.removeValue(forKey: channel)
    }

    /// A push to one device token: a start there makes an activity; an update or end reaches the
    /// activity whose update token it is.
    private mutating func deliver(token: String, payload: [String: Any], aps: [String: Any], event: String, timestamp: Int?, state: String?,
                                  channelExists: (String) -> Bool) -> APNsSandbox.PhoneEvent {
        guard event == "start" else {
            guard byUpdateToken[token] != nil else {
                return .init(token: token, channelID: nil, activity: nil, event: event, timestamp: timestamp, shown: false, reason: "unknown activity")
            }
            return apply(event: event, timestamp: timestamp ?? 0, state: state, to: token, channelID: nil)
        }
        let attributes = aps["attributes"] as? [String: Any] ?? [:]
        let activity = Self.text(payload["richpushActivity"]) ?? Self.text(attributes["richpushActivity"])
        let channel = aps["input-push-channel"] as? String
        func dropped(_ reason: String) -> APNsSandbox.PhoneEvent {
            .init(token: token, channelID: channel, activity: activity, event: event, timestamp: timestamp, shown: false, reason: reason)
        }
        // iOS shows a remotely started activity only with an alert that has a title (APNs answers 200 all the same).
        guard Self.hasAlertTitle(aps) else { return dropped("start without alert") }
        // A channel APNs did not make (or deleted) would never update it.
        if let channel, !channelExists(channel) { return dropped("unknown channel") }
        let started = APNsSandbox.PhoneActivity(
            pushToStartToken: token, updateToken: Self.newUpdateToken(), attributesType: aps["attributes-type"] as? String ?? "",
            attributes: Self.jsonText(attributes), richpushActivity: activity, channelID: channel,
            contentState: state ?? "{}", lastTimestamp: timestamp ?? 0, ended: false, shown: 1)
        byUpdateToken[started.updateToken] = started
        order.append(started.updateToken)
        if let channel { subscribers[channel, default: []].append(started.updateToken) }
        if order.count > keep + keep / 8 { dropOldest(order.count - keep) }
        return .init(token: token, channelID: channel, activity: activity, event: event, timestamp: timestamp, shown: true, reason: nil)
    }

    /// Forgets the `count` oldest activities (and their channel subscriptions).
    private mutating func dropOldest(_ count: Int) {
        let gone = Set(order.prefix(count))
        var channels = Set<String>()
        for token in gone {
            if let channel = byUpdateToken.removeValue(forKey: token)?.channelID { channels.insert(channel) }
        }
        order.removeFirst(count)
        for channel in channels { subscribers[channel]?.removeAll { gone.contains($0) } }
    }

    /// A broadcast: every activity subscribed to `channelID` applies it as it would a push to its update token.
    private mutating func broadcast(channelID: String, event: String, timestamp: Int, state: String?) -> [APNsSandbox.PhoneEvent] {
        var made: [APNsSandbox.PhoneEvent] = []
        for token in subscribers[channelID] ?? [] {
            guard let activity = byUpdateToken[token] else { continue }
            if event == "start" {
                made.append(.init(token: token, channelID: channelID, activity: activity.richpushActivity, event: event,
                                  timestamp: timestamp, shown: false, reason: "start on a channel"))
            } else {
                made.append(apply(event: event, timestamp: timestamp, state: state, to: token, channelID: channelID))
            }
        }
        return made
    }

    /// An update or end reaching the activity of update token `token`: dropped when it ended or
    /// when the push is not newer than the last one shown; else its content state is shown (and an
    /// end ends it).
    private mutating func apply(event: String, timestamp: Int, state: String?, to token: String, channelID: String?) -> APNsSandbox.PhoneEvent {
        guard var activity = byUpdateToken[token] else {
            return .init(token: token, channelID: channelID, activity: nil, event: event, timestamp: timestamp, shown: false, reason: "unknown activity")
        }
        func dropped(_ reason: String) -> APNsSandbox.PhoneEvent {
            .init(token: token, channelID: channelID, activity: activity.richpushActivity, event: event, timestamp: timestamp, shown: false, reason: reason)
        }
        if activity.ended { return dropped("ended") }
        if timestamp <= activity.lastTimestamp { return dropped("stale timestamp") }
        if let state { activity.contentState = state }
        activity.lastTimestamp = timestamp
        activity.shown += 1
        if event == "end" { activity.ended = true }
        byUpdateToken[token] = activity
        return .init(token: token, channelID: channelID, activity: activity.richpushActivity, event: event, timestamp: timestamp, shown: true, reason: nil)
    }

    /// Whether `aps.alert` has a title: a non-empty string alert, or a dictionary whose `title` is
    /// a non-empty string or a localized `{loc-key}`.
    static func hasAlertTitle(_ aps: [String: Any]) -> Bool {
        guard let alert = aps["alert"] else { return false }
        if let text = alert as? String { return !text.isEmpty }
        guard let fields = alert as? [String: Any], let title = fields["title"] else { return false }
        if let text = title as? String { return !text.isEmpty }
        if let localized = title as? [String: Any], let key = localized["loc-key"] as? String { return !key.isEmpty }
        return false
    }

    /// 80 random bytes as lowercase hex, as an activity's update token is.
    static func newUpdateToken() -> String {
        let digits = Array("0123456789abcdef")
        var generator = SystemRandomNumberGenerator()
        var token = ""
        token.reserveCapacity(160)
        for _ in 0..<80 {
            let byte = UInt8.random(in: .min ... .max, using: &generator)
            token.append(digits[Int(byte >> 4)])
            token.append(digits[Int(byte & 0x0F)])
        }
        return token
    }

    /// A string as it is, a number in its decimal form; nil otherwise.
    static func text(_ value: Any?) -> String? {
        if let string = value as? String { return string }
        if let number = value as? NSNumber, !APSRules.isBool(number) { return number.stringValue }
        return nil
    }

    /// JSON text of `value`, keys sorted (a phone's view of attributes and content state).
    static func jsonText(_ value: Any) -> String {
        guard JSONSerialization.isValidJSONObject(value),
              let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The phone view as JSON objects, keys as the Swift property names (null for nil).
    func viewObject(activity only: String? = nil) -> [String: Any] {
        let activities = only.map { id in self.activities.filter { $0.richpushActivity == id } } ?? self.activities
        let events = only.map { id in self.events.filter { $0.activity == id } } ?? self.events
        let activityObjects = activities.map { activity -> [String: Any] in
            [
                "pushToStartToken": activity.pushToStartToken, "updateToken": activity.updateToken,
                "attributesType": activity.attributesType, "attributes": activity.attributes,
                "richpushActivity": Self.orNull(activity.richpushActivity), "channelID": Self.orNull(activity.channelID),
                "contentState": activity.contentState, "lastTimestamp": activity.lastTimestamp,
                "ended": activity.ended, "shown": activity.shown,
            ]
        }
        let eventObjects = events.map { event -> [String: Any] in
            [
                "token": event.token, "channelID": Self.orNull(event.channelID), "activity": Self.orNull(event.activity),
                "event": event.event, "timestamp": Self.orNull(event.timestamp), "shown": event.shown,
                "reason": Self.orNull(event.reason),
            ]
        }
        return ["activities": activityObjects, "events": eventObjects]
    }

    /// A push's events as its JSON-lines log line carries them.
    static func logObjects(_ events: [APNsSandbox.PhoneEvent]) -> [[String: Any]] {
        events.map { event -> [String: Any] in
            ["token": event.token, "activity": orNull(event.activity), "event": event.event, "shown": event.shown, "reason": orNull(event.reason)]
        }
    }

    /// `value`, or JSON's null.
    static func orNull(_ value: Any?) -> Any {
        value ?? NSNull()
    }
}
