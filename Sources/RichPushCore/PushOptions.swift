import Foundation

/// What a notification may ask of each platform beyond its words (docs/api.md#options-badges-and-paced-sends), checked against
/// the platforms' own limits before anything is stored. Each platform gets them in its form:
/// APNs headers and `aps` keys, FCM v1's `android` and `apns` blocks, Web Push's headers and
/// message.
public struct PushOptions: Sendable, Equatable, Codable {
    /// `aps.interruption-level` (iOS 15): how much the notification may interrupt.
    public enum InterruptionLevel: String, Sendable, Codable, CaseIterable {
        case passive, active, timeSensitive = "time-sensitive", critical
    }

    /// High or normal delivery priority: APNs 10 or 5, FCM `android.priority`, Web Push `Urgency`.
    public enum Priority: String, Sendable, Codable, CaseIterable { case high, normal }

    /// A button: its `id` is what the app (or the service worker) is told was tapped.
    public struct Action: Sendable, Equatable, Codable {
        public var id: String
        public var title: String

        /// Creates a button.
        public init(id: String, title: String) {
            self.id = id
            self.title = title
        }
    }

    /// The app icon's badge: the recipient's unread count at send time, or a number.
    public enum Badge: Sendable, Equatable, Codable {
        case unread
        case count(Int)

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self), text == "unread" {
                self = .unread
            } else if let number = try? container.decode(Int.self) {
                self = .count(number)
            } else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "badge is \"unread\" or a number")
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .unread: try container.encode("unread")
            case .count(let number): try container.encode(number)
            }
        }
    }

    /// `aps.thread-id`: iOS groups notifications with the same one.
    public var threadId: String?
    /// `aps.category`: the app's notification category (its buttons, on iOS).
    public var category: String?
    /// `aps.alert.subtitle`.
    public var subtitle: String?
    /// `aps.sound`: a sound file in the app's bundle, `default`, or empty for none. Default `default`.
    public var sound: String?
    public var interruptionLevel: InterruptionLevel?
    /// `aps.relevance-score`, 0 to 1: which notification a summary shows first.
    public var relevanceScore: Double?
    /// Seconds a push service keeps trying an offline device (0: now or never). Default a day.
    public var expiresIn: Int?
    public var priority: Priority?
    /// Android 8's notification channel (`android.notification.channel_id`).
    public var androidChannelId: String?
    /// Up to four buttons; Web Push shows them, an iOS category's buttons are the app's.
    public var actions: [Action]?
    /// A key of the app's localized strings the device shows as the title instead of `title`
    /// (APNs `aps.alert.title-loc-key`, FCM `android.notification.title_loc_key`).
    public var titleLocKey: String?
    /// A key of the app's localized strings the device shows as the body instead of the message
    /// (APNs `aps.alert.loc-key`, FCM `android.notification.body_loc_key`).
    public var locKey: String?
    /// The values the `locKey` string's format specifiers take, in order (APNs `aps.alert.loc-args`,
    /// FCM `android.notification.body_loc_args`).
    public var locArgs: [String]?
    /// Kept with the options, though the API takes it beside them (`"badge"`): not one of the
    /// `options` keys (`CodingKeys`), stored with them all the same (`stored`).
    public var badge: Badge?

    /// The API's `options` keys: everything but the badge.
    enum CodingKeys: String, CodingKey {
        case threadId, category, subtitle, sound, interruptionLevel, relevanceScore, expiresIn, priority, androidChannelId, actions
        case titleLocKey, locKey, locArgs
    }

    /// The stored form: the options and the badge.
    private struct Stored: Codable {
        var options: PushOptions
        var badge: Badge?
    }

    /// Creates options; every field is optional.
    public init(threadId: String? = nil, category: String? = nil, subtitle: String? = nil, sound: String? = nil,
                interruptionLevel: InterruptionLevel? = nil, relevanceScore: Double? = nil, expiresIn: Int? = nil,
                priority: Priority? = nil, androidChannelId: String? = nil, actions: [Action]? = nil, badge: Badge? = nil,
                titleLocKey: String? = nil, locKey: String? = nil, locArgs: [String]? = nil) {
        self.threadId = threadId
        self.category = category
        self.subtitle = subtitle
        self.sound = sound
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.expiresIn = expiresIn
        self.priority = priority
        self.androidChannelId = androidChannelId
        self.actions = actions
        self.badge = badge
        self.titleLocKey = titleLocKey
        self.locKey = locKey
        self.locArgs = locArgs
    }

    /// A push's life when `expiresIn` is not given: a day, as before options.
    public static let defaultExpiresIn = 86_400
    /// The longest `expiresIn`: FCM's 28 days (APNs keeps a push about 30).
    public static let maxExpiresIn = 28 * 86_400
    /// The most buttons: what Android and a browser's notification show.
    public static let maxActions = 4
    /// The longest identifier (thread, category, channel, action id), visible ASCII.
    public static let maxIdentifier = 64
    /// The longest text (subtitle, sound, a button's title), in characters (Unicode scalars).
    public static let maxText = 256
    /// The largest fixed badge.
    public static let maxBadge = 99_999
    /// The longest localization key or argument, in bytes of UTF-8.
    public static let maxLocalizationBytes = 256
    /// The most `locArgs`.
    public static let maxLocArgs = 10

    /// Whether no option is set.
    public var isEmpty: Bool { self == PushOptions() }

    /// Every option within the platforms' limits, for a push in `mode`; the error names the field
    /// (`options.relevanceScore`, `badge`): a 400 for a value out of range, a 422 for a combination
    /// that is wrong (a visible option on a silent push, a button id twice).
    public func validate(mode: PushMode) throws {
        // Out of range (400, as the API's schema says) or, for what only the combination makes
        // wrong (a button id twice, a visible option on a silent push), unprocessable (422).
        func bad(_ field: String, _ why: String) -> CoreError { CoreError(.invalid, "\(field) \(why)") }
        func conflicting(_ field: String, _ why: String) -> CoreError { CoreError(.unprocessable, "\(field) \(why)") }
        func identifier(_ value: String?, _ field: String) throws {
            guard let value else { return }
            guard !value.isEmpty, value.utf8.count <= Self.maxIdentifier, value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw bad("options.\(field)", "must be 1 to \(Self.maxIdentifier) visible ASCII characters (no spaces)")
            }
        }
        func text(_ value: String?, _ field: String, allowEmpty: Bool = false) throws {
            guard let value else { return }
            guard allowEmpty || !value.isEmpty, value.unicodeScalars.count <= Self.maxText,
                  !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw bad("options.\(field)", "must be \(allowEmpty ? 0 : 1) to \(Self.maxText) characters with no control characters")
            }
        }
        func localization(_ value: String?, _ field: String, allowEmpty: Bool = false) throws {
            guard let value else { return }
            guard allowEmpty || !value.isEmpty, value.utf8.count <= Self.maxLocalizationBytes else {
                throw bad("options.\(field)", "must be \(allowEmpty ? 0 : 1) to \(Self.maxLocalizationBytes) bytes of UTF-8 (got \(value.utf8.count))")
            }
        }
        try identifier(threadId, "threadId")
        try identifier(category, "category")
        try identifier(androidChannelId, "androidChannelId")
        try text(subtitle, "subtitle")
        try text(sound, "sound", allowEmpty: true)
        if let relevanceScore, !(relevanceScore >= 0 && relevanceScore <= 1) {
            throw bad("options.relevanceScore", "must be between 0 and 1 (got \(relevanceScore))")
        }
        if let expiresIn, !(0...Self.maxExpiresIn).contains(expiresIn) {
            throw bad("options.expiresIn", "must be 0 to \(Self.maxExpiresIn) seconds (28 days, FCM's longest; got \(expiresIn))")
        }
        if let actions {
            guard actions.count <= Self.maxActions else { throw bad("options.actions", "has \(actions.count) buttons; at most \(Self.maxActions)") }
            for (index, action) in actions.enumerated() {
                try identifier(action.id, "actions[\(index)].id")
                try text(action.title, "actions[\(index)].title")
            }
            if Set(actions.map(\.id)).count != actions.count { throw conflicting("options.actions", "names a button id twice") }
        }
        try localization(titleLocKey, "titleLocKey")
        try localization(locKey, "locKey")
        if let locArgs {
            guard locArgs.count <= Self.maxLocArgs else { throw bad("options.locArgs", "has \(locArgs.count) arguments; at most \(Self.maxLocArgs)") }
            for (index, argument) in locArgs.enumerated() { try localization(argument, "locArgs[\(index)]", allowEmpty: true) }
            // The arguments fill the `locKey` string's format specifiers: alone, they mean nothing.
            if locKey == nil { throw conflicting("options.locArgs", "fills the format of options.locKey, which is not given") }
        }
        if case .count(let number)? = badge, !(0...Self.maxBadge).contains(number) {
            throw bad("badge", "must be \"unread\" or 0 to \(Self.maxBadge) (got \(number))")
        }
        guard mode == .silent else { return }
        // A background push is `content-available` alone (Apple drops one with visible keys) at priority 5.
        let visible: [(String, Bool)] = [
            ("threadId", threadId != nil), ("category", category != nil), ("subtitle", subtitle != nil), ("sound", sound != nil),
            ("interruptionLevel", interruptionLevel != nil), ("relevanceScore", relevanceScore != nil),
            ("androidChannelId", androidChannelId != nil), ("actions", actions != nil),
            ("titleLocKey", titleLocKey != nil), ("locKey", locKey != nil), ("locArgs", locArgs != nil),
        ]
        if let (field, _) = visible.first(where: \.1) {
            throw conflicting("options.\(field)", "applies to alert pushes, and this one is silent: send it with \"mode\":\"alert\"")
        }
        if badge != nil { throw conflicting("badge", "applies to alert pushes, and this one is silent: send it with \"mode\":\"alert\"") }
        if priority == .high { throw conflicting("options.priority", "must be normal for a silent push (APNs requires priority 5 for background pushes)") }
    }

    /// The JSON stored with a notification or campaign, badge included; nil when no option is set.
    public var stored: String? {
        guard !isEmpty else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try! encoder.encode(Stored(options: self, badge: badge)), as: UTF8.self)
    }

    /// Reads the stored JSON (nil or unreadable: no options).
    public init(stored: String?) {
        guard let stored, let read = try? JSONDecoder().decode(Stored.self, from: Data(stored.utf8)) else {
            self = PushOptions()
            return
        }
        self = read.options
        badge = read.badge
    }

    /// The APNs priority of a push in `mode`: 10 for an alert unless `normal`, 5 for a silent push.
    public func apnsPriority(_ mode: PushMode) -> String {
        mode == .silent || priority == .normal ? "5" : "10"
    }

    /// Seconds the push lives.
    public var lifetime: Int { expiresIn ?? Self.defaultExpiresIn }
}
