import Foundation

/// The `aps` dictionary of an APNs payload: the one type that knows its keys and writes it, for
/// RichPush's own APNs pushes (`AlertPush`, `SilentPush`) and for the `apns.payload.aps` block of an
/// FCM message (APNSwift's `APNSAlertNotificationAPSStorage` is the model).
///
/// One value, three forms that say the same: `json`, the text an APNs payload embeds, keys in
/// `Key`'s order (the order pushes have had since docs/api.md#alert-pushes-and-payload-urls, which tests and devices compare byte
/// for byte); `dictionary`, for a `JSONSerialization` document such as FCM's message, which sorts
/// keys itself; and `Encodable`. A field left nil, or a flag left false, is not written. The
/// sandboxes check the result against Apple's rules (`APSRules`) independently, in their own words.
public struct APS: Sendable, Equatable, Encodable {
    /// The keys of `aps` RichPush writes, in the order `json` writes them.
    public enum Key: String, CodingKey, CaseIterable, Sendable {
        case alert
        case contentAvailable = "content-available"
        case mutableContent = "mutable-content"
        case sound
        case threadId = "thread-id"
        case category
        case interruptionLevel = "interruption-level"
        case relevanceScore = "relevance-score"
        case badge
    }

    /// `aps.alert` as a dictionary: what the notification shows.
    public struct Alert: Sendable, Equatable, Encodable {
        /// The keys of `aps.alert` RichPush writes, in the order `json` writes them.
        public enum Key: String, CodingKey, CaseIterable, Sendable {
            case title, subtitle, body
        }

        /// The first line, bold.
        public var title: String?
        /// The line under the title (`options.subtitle`).
        public var subtitle: String?
        /// The message.
        public var body: String

        /// Creates an alert; `title` and `subtitle` are left out when nil.
        public init(title: String? = nil, subtitle: String? = nil, body: String) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
        }

        /// The JSON text, keys in `Key`'s order.
        public var json: String {
            var out = "{"
            if let title { out += APS.name(Key.title) + AlertPush.quote(title) + "," }
            if let subtitle { out += APS.name(Key.subtitle) + AlertPush.quote(subtitle) + "," }
            return out + APS.name(Key.body) + AlertPush.quote(body) + "}"
        }

        /// The dictionary `JSONSerialization` writes.
        public var dictionary: [String: Any] {
            var out: [String: Any] = [Key.body.rawValue: body]
            if let title { out[Key.title.rawValue] = title }
            if let subtitle { out[Key.subtitle.rawValue] = subtitle }
            return out
        }

        /// Writes the fields that are set.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encodeIfPresent(title, forKey: .title)
            try container.encodeIfPresent(subtitle, forKey: .subtitle)
            try container.encode(body, forKey: .body)
        }
    }

    /// What the notification shows; nil in a background push.
    public var alert: Alert?
    /// `content-available: 1`: a background push that wakes the app.
    public var contentAvailable: Bool
    /// `mutable-content: 1`: the Notification Service Extension may change the notification (and fetch its image).
    public var mutableContent: Bool
    /// A sound file in the app's bundle or `default`; an empty one is written as it is (the tutorial's silent push has one).
    public var sound: String?
    /// iOS groups notifications with the same one.
    public var threadId: String?
    /// The app's notification category (its buttons, on iOS).
    public var category: String?
    /// How much the notification may interrupt (iOS 15).
    public var interruptionLevel: PushOptions.InterruptionLevel?
    /// 0 to 1: which notification a summary shows first.
    public var relevanceScore: Double?
    /// The number on the app icon.
    public var badge: Int?

    /// Creates an `aps`; every field is optional, the flags default to absent.
    public init(alert: Alert? = nil, contentAvailable: Bool = false, mutableContent: Bool = false, sound: String? = nil,
                threadId: String? = nil, category: String? = nil, interruptionLevel: PushOptions.InterruptionLevel? = nil,
                relevanceScore: Double? = nil, badge: Int? = nil) {
        self.alert = alert
        self.contentAvailable = contentAvailable
        self.mutableContent = mutableContent
        self.sound = sound
        self.threadId = threadId
        self.category = category
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.badge = badge
    }

    /// The `aps` of an alert push (docs/api.md#alert-pushes-and-payload-urls, §22): the alert (`title`, `options.subtitle`, `body`),
    /// `mutable-content` for the Notification Service Extension, `options.sound` (`default` when not
    /// given, none when empty), the options' `thread-id`, `category`, `interruption-level` and
    /// `relevance-score`, and `badge`, which the caller resolves (a fixed one, or an unread count).
    public static func alertPush(title: String?, body: String, options: PushOptions, badge: Int?) -> APS {
        let sound = options.sound ?? "default"
        return APS(alert: Alert(title: title, subtitle: options.subtitle, body: body), mutableContent: true,
                   sound: sound.isEmpty ? nil : sound, threadId: options.threadId, category: options.category,
                   interruptionLevel: options.interruptionLevel, relevanceScore: options.relevanceScore, badge: badge)
    }

    /// The tutorial's background push (docs/api.md#http-api): `content-available` and an empty `sound`.
    public static let silentPush = APS(contentAvailable: true, sound: "")

    /// A background push as Apple asks for one: `content-available` alone (FCM's data messages to iOS devices).
    public static let background = APS(contentAvailable: true)

    /// The JSON text, keys in `Key`'s order.
    ///
    /// Written by hand with `AlertPush.quote` (a campaign writes one per recipient); the same JSON
    /// values as `dictionary` and `Encodable` give.
    public var json: String {
        var out = "{"
        var first = true
        func add(_ key: Key, _ value: String) {
            if !first { out += "," }
            out += Self.name(key)
            out += value
            first = false
        }
        if let alert { add(.alert, alert.json) }
        if contentAvailable { add(.contentAvailable, "1") }
        if mutableContent { add(.mutableContent, "1") }
        if let sound { add(.sound, AlertPush.quote(sound)) }
        if let threadId { add(.threadId, AlertPush.quote(threadId)) }
        if let category { add(.category, AlertPush.quote(category)) }
        if let interruptionLevel { add(.interruptionLevel, AlertPush.quote(interruptionLevel.rawValue)) }
        if let relevanceScore { add(.relevanceScore, Self.number(relevanceScore)) }
        if let badge { add(.badge, String(badge)) }
        return out + "}"
    }

    /// The dictionary `JSONSerialization` writes: flags as the number 1, the score a `Double`, the badge an `Int`.
    public var dictionary: [String: Any] {
        var out: [String: Any] = [:]
        if let alert { out[Key.alert.rawValue] = alert.dictionary }
        if contentAvailable { out[Key.contentAvailable.rawValue] = 1 }
        if mutableContent { out[Key.mutableContent.rawValue] = 1 }
        if let sound { out[Key.sound.rawValue] = sound }
        if let threadId { out[Key.threadId.rawValue] = threadId }
        if let category { out[Key.category.rawValue] = category }
        if let interruptionLevel { out[Key.interruptionLevel.rawValue] = interruptionLevel.rawValue }
        if let relevanceScore { out[Key.relevanceScore.rawValue] = relevanceScore }
        if let badge { out[Key.badge.rawValue] = badge }
        return out
    }

    /// Writes the fields that are set, flags as the number 1.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encodeIfPresent(alert, forKey: .alert)
        if contentAvailable { try container.encode(1, forKey: .contentAvailable) }
        if mutableContent { try container.encode(1, forKey: .mutableContent) }
        try container.encodeIfPresent(sound, forKey: .sound)
        try container.encodeIfPresent(threadId, forKey: .threadId)
        try container.encodeIfPresent(category, forKey: .category)
        try container.encodeIfPresent(interruptionLevel, forKey: .interruptionLevel)
        try container.encodeIfPresent(relevanceScore, forKey: .relevanceScore)
        try container.encodeIfPresent(badge, forKey: .badge)
    }

    /// `"<key>":` (no key needs escaping).
    static func name(_ key: some CodingKey) -> String {
        "\"" + key.stringValue + "\":"
    }

    /// A JSON number as short as it reads (`0.5`, `1`).
    static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
