import Foundation

/// How a notification reaches the device (docs/api.md#alert-pushes-and-payload-urls).
public enum PushMode: String, Sendable, Codable, CaseIterable {
    /// An alert push with `mutable-content`: a Notification Service Extension fetches the image
    /// through `richUrl` and shows it. What today's phones show as a rich notification.
    case alert
    /// The tutorial's background push (docs/api.md#http-api); the app fetches the payload when it runs.
    case silent

    /// The `apns-push-type` header.
    public var apnsPushType: String { self == .alert ? "alert" : "background" }
    /// The `apns-priority` header (Apple requires 5 for background pushes).
    public var apnsPriority: String { self == .alert ? "10" : "5" }

    /// Reads the name in any case (`"Alert"`), as the HTTP API always has.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let mode = PushMode(rawValue: text.lowercased()) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text.prefix(40))' is not alert or silent")
        }
        self = mode
    }
}

/// The alert push of docs/api.md#alert-pushes-and-payload-urls, keys in the order the docs write them:
///
///     {"aps":{"alert":{"title":"<title>","body":"<message>"},"mutable-content":1,"sound":"default"},
///      "richId":"<id>","richMessage":"<message>","richType":"img","richUrl":"<payload url>"}
///
/// `"title"` is left out when there is none. Strings are quoted as a JSON encoder quotes them. `aps`
/// is `APS.alertPush`'s, written by `APS`: options (docs/api.md#options-badges-and-paced-sends) add `subtitle` to the alert, and
/// `thread-id`, `category`, `interruption-level`, `relevance-score` and a fixed `badge` to `aps`
/// after `sound` (which they may change or, when empty, leave out); buttons travel as
/// `richActions` for the app (an iOS category's buttons are the app's own). An unread-count badge
/// is set per device at send time (`settingBadge`).
public struct AlertPush: Sendable, Equatable {
    public let richId: String
    public let title: String?
    public let richMessage: String
    public let richType: String
    public let richUrl: String
    public let options: PushOptions

    /// Creates the push for notification `id`.
    public init(id: Int64, title: String?, message: String, richType: String, richUrl: String, options: PushOptions = PushOptions()) {
        self.richId = String(id)
        self.title = title
        self.richMessage = message
        self.richType = richType
        self.richUrl = richUrl
        self.options = options
    }

    /// The JSON bytes.
    public func encoded() -> Data {
        Template(title: title, message: richMessage, richType: richType, options: options).encoded(richId: richId, richUrl: richUrl)
    }

    /// The push's `aps`: the alert, its options and a fixed badge (an unread count is added per device).
    public var aps: APS {
        Self.aps(title: title, message: richMessage, options: options)
    }

    static func aps(title: String?, message: String, options: PushOptions) -> APS {
        var fixedBadge: Int?
        if case .count(let badge)? = options.badge { fixedBadge = badge }
        return APS.alertPush(title: title, body: message, options: options, badge: fixedBadge)
    }

    /// An alert push's JSON around the two things that differ from one recipient to the next of
    /// the same words (their notification's id and payload URL): written once for a campaign's
    /// words in each locale, and each recipient's push is three strings joined with those two
    /// (issue #51: `aps` and the quoted words were written again for every recipient).
    /// `AlertPush.encoded()` is made through it, so the two cannot differ.
    public struct Template: Sendable {
        /// `{"aps":…,"richId":`
        private let head: String
        /// `,"richMessage":…,"richType":…,"richUrl":`
        private let middle: String
        /// `,"richActions":[…]}` or `}`
        private let tail: String

        /// The template for `title`, `message`, `richType` and `options`.
        public init(title: String?, message: String, richType: String, options: PushOptions) {
            head = "{\"aps\":\(AlertPush.aps(title: title, message: message, options: options).json),\"richId\":"
            middle = ",\"richMessage\":\(AlertPush.quote(message)),\"richType\":\(AlertPush.quote(richType)),\"richUrl\":"
            if let actions = options.actions, !actions.isEmpty {
                tail = ",\"richActions\":\(AlertPush.actions(actions))}"
            } else {
                tail = "}"
            }
        }

        /// The push of notification `richId` (its id as text) with `richUrl`.
        public func encoded(richId: String, richUrl: String) -> Data {
            Data((head + AlertPush.quote(richId) + middle + AlertPush.quote(richUrl) + tail).utf8)
        }
    }

    /// `payload` (an APNs push RichPush made, which begins `{"aps":{`) with `aps.badge` set to
    /// `badge`: the unread count of its recipient at send time (docs/api.md#options-badges-and-paced-sends).
    public static func settingBadge(_ payload: Data, to badge: Int) -> Data {
        let prefix = Data("{\"aps\":{".utf8)
        guard payload.starts(with: prefix) else { return payload }
        return prefix + Data((APS.name(APS.Key.badge) + "\(badge),").utf8) + payload.dropFirst(prefix.count)
    }

    /// `[{"id":…,"title":…}]`.
    static func actions(_ actions: [PushOptions.Action]) -> String {
        "[" + actions.map { "{\"id\":\(quote($0.id)),\"title\":\(quote($0.title))}" }.joined(separator: ",") + "]"
    }

    /// A JSON string literal, byte for byte as `JSONEncoder` writes it (slashes unescaped, like
    /// the silent push): `"` and `\` escaped, control characters as `\b \f \n \r \t` or
    /// `\u00xx`, everything else as it is. Written here because a campaign quotes six strings
    /// for each of its pushes, and a `JSONEncoder` for each cost 7% of `serve`'s CPU in a profile.
    static func quote(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else { return "\"" + text + "\"" }
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count + 16)
        out.append(0x22)
        for byte in text.utf8 {
            switch byte {
            case 0x22, 0x5C: out += [0x5C, byte]
            case 0x08: out += [0x5C, UInt8(ascii: "b")]
            case 0x0C: out += [0x5C, UInt8(ascii: "f")]
            case 0x0A: out += [0x5C, UInt8(ascii: "n")]
            case 0x0D: out += [0x5C, UInt8(ascii: "r")]
            case 0x09: out += [0x5C, UInt8(ascii: "t")]
            case 0..<0x20: out += [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        out.append(0x22)
        return String(decoding: out, as: UTF8.self)
    }
}
