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
            case titleLocKey = "title-loc-key"
            case locKey = "loc-key"
            case locArgs = "loc-args"
        }

        /// The first line, bold.
        public var title: String?
        /// The line under the title (`options.subtitle`).
        public var subtitle: String?
        /// The message.
        public var body: String
        /// A key of the app's localized strings shown as the title instead (`options.titleLocKey`).
        public var titleLocKey: String?
        /// A key of the app's localized strings shown as the body instead (`options.locKey`).
        public var locKey: String?
        /// The values of the `locKey` string's format specifiers (`options.locArgs`).
        public var locArgs: [String]?

        /// Creates an alert; what is nil is left out.
        public init(title: String? = nil, subtitle: String? = nil, body: String, titleLocKey: String? = nil, locKey: String? = nil,
                    locArgs: [String]? = nil) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
            self.titleLocKey = titleLocKey
            self.locKey = locKey
            self.locArgs = locArgs
        }

        /// A field's value: a string, or the arguments' list.
        enum Value {
            case text(String)
            case texts([String])
        }

        /// The fields that are set, in `Key`'s order: what every form below is made from.
        var fields: [(Key, Value)] {
            var out: [(Key, Value)] = []
            if let title { out.append((.title, .text(title))) }
            if let subtitle { out.append((.subtitle, .text(subtitle))) }
            out.append((.body, .text(body)))
            if let titleLocKey { out.append((.titleLocKey, .text(titleLocKey))) }
            if let locKey { out.append((.locKey, .text(locKey))) }
            if let locArgs { out.append((.locArgs, .texts(locArgs))) }
            return out
        }

        /// The JSON text, keys in `Key`'s order.
        public var json: String {
            "{" + fields.map { key, value in
                let text = switch value {
                case .text(let text): AlertPush.quote(text)
                case .texts(let texts): "[" + texts.map(AlertPush.quote).joined(separator: ",") + "]"
                }
                return APS.name(key) + text
            }.joined(separator: ",") + "}"
        }

        /// The dictionary `JSONSerialization` writes.
        public var dictionary: [String: Any] {
            Dictionary(uniqueKeysWithValues: fields.map { key, value -> (String, Any) in
                switch value {
                case .text(let text): (key.rawValue, text)
                case .texts(let texts): (key.rawValue, texts)
                }
            })
        }

        /// Writes the fields that are set.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            for (key, value) in fields {
                switch value {
                case .text(let text): try container.encode(text, forKey: key)
                case .texts(let texts): try container.encode(texts, forKey: key)
                }
            }
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

    /// The `aps` of an alert push (docs/api.md#alert-pushes-and-payload-urls, §22): the alert (`title`, `options.subtitle`, `body`,
    /// and the device-side localization keys `options.titleLocKey`, `locKey` and `locArgs`, docs/api.md#templates-and-localization-keys),
    /// `mutable-content` for the Notification Service Extension, `options.sound` (`default` when not
    /// given, none when empty), the options' `thread-id`, `category`, `interruption-level` and
    /// `relevance-score`, and `badge`, which the caller resolves (a fixed one, or an unread count).
    public static func alertPush(title: String?, body: String, options: PushOptions, badge: Int?) -> APS {
        let sound = options.sound ?? "default"
        let alert = Alert(title: title, subtitle: options.subtitle, body: body, titleLocKey: options.titleLocKey, locKey: options.locKey,
                          locArgs: options.locArgs)
        return APS(alert: alert, mutableContent: true,
                   sound: sound.isEmpty ? nil : sound, threadId: options.threadId, category: options.category,
                   interruptionLevel: options.interruptionLevel, relevanceScore: options.relevanceScore, badge: badge)
    }

    /// The tutorial's background push (docs/api.md#http-api): `content-available` and an empty `sound`.
    public static let silentPush = APS(contentAvailable: true, sound: "")

    /// A background push as Apple asks for one: `content-available` alone (FCM's data messages to iOS devices).
    public static let background = APS(contentAvailable: true)

    /// A field's value, as each form writes it.
    enum Field {
        case text(String)
        case number(Double)
        case integer(Int)
        case alert(Alert)
    }

    /// The fields that are set, in `Key`'s order (a flag as the integer 1): what `json`,
    /// `dictionary` and `Encodable` are all made from, so the three cannot say different things.
    var fields: [(Key, Field)] {
        var out: [(Key, Field)] = []
        if let alert { out.append((.alert, .alert(alert))) }
        if contentAvailable { out.append((.contentAvailable, .integer(1))) }
        if mutableContent { out.append((.mutableContent, .integer(1))) }
        if let sound { out.append((.sound, .text(sound))) }
        if let threadId { out.append((.threadId, .text(threadId))) }
        if let category { out.append((.category, .text(category))) }
        if let interruptionLevel { out.append((.interruptionLevel, .text(interruptionLevel.rawValue))) }
        if let relevanceScore { out.append((.relevanceScore, .number(relevanceScore))) }
        if let badge { out.append((.badge, .integer(badge))) }
        return out
    }

    /// The JSON text, keys in `Key`'s order.
    ///
    /// Written by hand with `AlertPush.quote` (a campaign writes one per recipient).
    public var json: String {
        "{" + fields.map { key, value in
            let text = switch value {
            case .text(let text): AlertPush.quote(text)
            case .number(let number): Self.number(number)
            case .integer(let integer): String(integer)
            case .alert(let alert): alert.json
            }
            return Self.name(key) + text
        }.joined(separator: ",") + "}"
    }

    /// The dictionary `JSONSerialization` writes: flags as the number 1, the score a `Double`, the badge an `Int`.
    public var dictionary: [String: Any] {
        Dictionary(uniqueKeysWithValues: fields.map { key, value -> (String, Any) in
            switch value {
            case .text(let text): (key.rawValue, text)
            case .number(let number): (key.rawValue, number)
            case .integer(let integer): (key.rawValue, integer)
            case .alert(let alert): (key.rawValue, alert.dictionary)
            }
        })
    }

    /// Writes the fields that are set, flags as the number 1.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (key, value) in fields {
            switch value {
            case .text(let text): try container.encode(text, forKey: key)
            case .number(let number): try container.encode(number, forKey: key)
            case .integer(let integer): try container.encode(integer, forKey: key)
            case .alert(let alert): try container.encode(alert, forKey: key)
            }
        }
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
