import Foundation

/// A RichPush notification as a device receives it, read from any of the shapes the server sends.
///
/// - docs/api.md#http-api's silent push, `{"aps":{"content-available":1,"sound":""},"richId":"7","richMessage":"…","richType":"img"}`:
///   the app fetches the payload itself, through the API, with the user's credentials.
/// - docs/api.md#alert-pushes-and-payload-urls's alert push, `{"aps":{"alert":{"title":"…","body":"…"},"mutable-content":1,…},"richId":"7",…,"richUrl":"https://host/p/<token>"}`:
///   a Notification Service Extension fetches `richUrl` with no credentials and attaches the image.
/// - The flat string map of FCM data messages and Web Push bodies, `{"richId":"7","richMessage":"…","richType":"img","richUrl":"…","title":"…"}`.
/// - SPEC §26's retraction, a background push naming the notifications the server took back by the
///   collapse identifiers they were sent with: `{"aps":{"content-available":1},"richpushRetract":"rp-12"}`,
///   FCM's data `{"richpushRetract":"rp-12,rp-15"}` (coalesced), or a Web Push message that also carries
///   `richId`, `richMessage` and `title` for the browser to show in place of the old one. It reads as
///   `Kind.retraction`; `RichPushClient.handleRetraction(_:remover:)` removes what it names.
/// - SPEC §25's Live Activity as Android and browsers get it: FCM's data
///   `{"richpushActivity":"la_…","event":"update","contentState":"<JSON text>","title","body"}`, or a
///   Web Push message with `contentState` as an object (and `dismissAt` on `end`). It reads as
///   `Kind.liveActivity`, with `liveActivity` saying which activity, which event and its content state.
///   (iOS hands ActivityKit's pushes to the system, not to the app: they never come here.)
///
/// A changed notification sent again carries `"richUpdate":true` (`"1"` or `"true"` in FCM's strings), read as `isUpdate`.
///
/// Only `richId` (or, for a retraction, `richpushRetract`; for a Live Activity, `richpushActivity`) is
/// required: a push without one is not RichPush's (`RichPushClientError.Kind.notRichPush`), so an app
/// can hand every push it gets to `init(userInfo:)` and act on the ones that parse.
public struct RichPushMessage: Sendable, Equatable {
    /// How the push asks to be shown.
    public enum Kind: Sendable, Equatable {
        /// Nothing is shown by the system; the app fetches the payload in the background and decides.
        case silent
        /// The system shows title and body, after a Notification Service Extension attached the image.
        case alert
        /// The server took back the notifications in `retractedIdentifiers`: remove them from what the device shows.
        case retraction
        /// A Live Activity started, changed or ended (`liveActivity`); it names no notification, so `id` is 0.
        case liveActivity
    }

    /// The most identifiers one `richpushRetract` value may list.
    public static let maxRetractedIdentifiers = 100
    /// The longest `richpushRetract` value read, in UTF-8 bytes.
    public static let maxRetractValueBytes = 4096

    /// The notification id, `richId` (a decimal string in every shape the server sends); for a
    /// retraction, the first retracted notification's.
    public var id: Int64
    /// The text to show: `richMessage`, else the alert's body, else empty.
    public var message: String
    /// The developer-defined payload type, `richType`; `img` (the server's default) when absent.
    public var richType: String
    /// The alert's title, or the flat shape's `title`; nil when absent or empty.
    public var title: String?
    /// The capability URL of the payload (`richUrl`); nil for a silent push, which is fetched through the API.
    public var payloadURL: URL?
    /// Whether the push is silent, an alert or a retraction.
    public var kind: Kind
    /// docs/api.md#options-badges-and-paced-sends's options as the device sees them: the alert's subtitle, `aps.thread-id`,
    /// `aps.category` and the badge (`aps.badge`, or the flat shape's `badgeCount`); nil when absent.
    public var subtitle: String? = nil
    public var threadID: String? = nil
    public var category: String? = nil
    public var badge: Int? = nil
    /// The buttons (`richActions` in an APNs push and FCM data, `actions` in a Web Push message), in order.
    public var actions: [Action] = []
    /// For a retraction, the collapse identifiers (`rp-<notification id>`) of the notifications taken back,
    /// in the push's order without repeats; empty for every other kind.
    ///
    /// Each is what the original push was sent with: APNs' `apns-collapse-id`, which iOS makes the
    /// delivered `UNNotificationRequest`'s identifier, and FCM's notification `tag`.
    public var retractedIdentifiers: [String] = []
    /// Whether the push replaces a notification sent before with changed content (`richUpdate`).
    public var isUpdate = false
    /// For a `.liveActivity`, the activity, the event and its content state; nil for every other kind.
    public var liveActivity: LiveActivity? = nil

    /// The notification ids of `retractedIdentifiers`, in the same order; an identifier that is not
    /// `rp-<notification id>` (possible only in a message built by hand) is left out.
    public var retractedNotificationIDs: [Int64] {
        retractedIdentifiers.compactMap { Self.notificationID(retracted: $0) }
    }

    /// A button: `id` is what the app is told was tapped.
    public struct Action: Sendable, Equatable {
        public var id: String
        public var title: String

        /// Creates a button.
        public init(id: String, title: String) {
            self.id = id
            self.title = title
        }
    }

    /// Creates a message from its parts, for tests and for apps that keep messages of their own.
    public init(id: Int64, message: String, richType: String = "img", title: String? = nil, payloadURL: URL? = nil, kind: Kind) {
        self.id = id
        self.message = message
        self.richType = richType
        self.title = title
        self.payloadURL = payloadURL
        self.kind = kind
    }

    /// Reads a push's `userInfo` (APNs) or data map (FCM, Web Push).
    ///
    /// `richId` may be a decimal string or a number. A push with `richpushRetract` is a `.retraction`
    /// whatever else it carries; its `id` is the first retracted notification's, and `richId`, which
    /// only the Web Push shape sends, is checked but not required. Else a push with `richpushActivity`
    /// is a `.liveActivity` (its `title` and `body` are `title` and `message`; `id` is 0). Otherwise,
    /// with an `aps` dictionary the kind is `.alert` when it has an `alert`, else `.silent`; the flat shape, which has no `aps`,
    /// is `.alert` when it carries a `title` or a `notification` block and `.silent` otherwise.
    /// - Throws: `RichPushClientError` of kind `.notRichPush` when `richId` is missing (and there is no
    ///   `richpushRetract` or `richpushActivity`) or not a non-negative integer, `richUrl` is present but not an http(s) URL,
    ///   or `richpushRetract` is not a string of 1 to `maxRetractedIdentifiers` comma-separated
    ///   `rp-<notification id>`s within `maxRetractValueBytes`; or `richpushActivity` is there but is
    ///   not an activity id, `event` is not `start`, `update` or `end`, or `contentState` is not a JSON
    ///   object (or its text).
    public init(userInfo: [AnyHashable: Any]) throws {
        let retracted = try Self.present(userInfo["richpushRetract"]).map { try Self.retraction($0) }
        let activity = try Self.present(userInfo["richpushActivity"]).map { try LiveActivity(id: $0, fields: userInfo) }
        let rawID = Self.present(userInfo["richId"])
        guard rawID != nil || retracted != nil || activity != nil else {
            throw RichPushClientError.notRichPush("it has no richId")
        }
        let aps = Self.dictionary(userInfo["aps"])
        let alert = aps?["alert"]
        let alertFields = Self.dictionary(alert)

        let title = Self.nonEmpty(alertFields?["title"] as? String) ?? Self.nonEmpty(userInfo["title"] as? String)
        let kind: Kind
        if retracted != nil {
            kind = .retraction
        } else if activity != nil {
            kind = .liveActivity
        } else if let aps {
            kind = aps["alert"] == nil ? .silent : .alert
        } else {
            kind = title != nil || userInfo["notification"] != nil ? .alert : .silent
        }
        let richID = try rawID.map { try Self.identifier($0) }
        // A retraction's first id, or richId; 0 for a Live Activity's, which names no notification.
        let id = retracted?.first ?? richID ?? 0
        let payloadURL = try Self.payloadURL(userInfo["richUrl"])
        let activityBody = activity == nil ? nil : userInfo["body"] as? String
        let message = userInfo["richMessage"] as? String ?? alertFields?["body"] as? String ?? alert as? String ?? activityBody ?? ""
        self.init(id: id, message: message, richType: Self.nonEmpty(userInfo["richType"] as? String) ?? "img",
                  title: title, payloadURL: payloadURL, kind: kind)
        subtitle = Self.nonEmpty(alertFields?["subtitle"] as? String) ?? Self.nonEmpty(userInfo["subtitle"] as? String)
        threadID = Self.nonEmpty(aps?["thread-id"] as? String)
        category = Self.nonEmpty(aps?["category"] as? String)
        badge = Self.count(aps?["badge"]) ?? Self.count(userInfo["badgeCount"])
        actions = Self.actions(userInfo["richActions"] ?? userInfo["actions"])
        retractedIdentifiers = retracted?.identifiers ?? []
        isUpdate = Self.flag(userInfo["richUpdate"])
        liveActivity = retracted == nil ? activity : nil
    }

    /// The identifiers of a `richpushRetract` value, without repeats, and the first one's notification id.
    ///
    /// The value is bounded before it is split, and every part must be `rp-` and a notification id
    /// in canonical decimal: the server writes `rp-\(id)`, so any other spelling (`rp-012`, a space,
    /// an empty part) names no delivered notification and marks the push as not the server's.
    private static func retraction(_ value: Any) throws -> (identifiers: [String], first: Int64) {
        guard let text = value as? String else { throw RichPushClientError.notRichPush("richpushRetract is not a string") }
        guard !text.isEmpty else { throw RichPushClientError.notRichPush("richpushRetract is empty") }
        guard text.utf8.count <= maxRetractValueBytes else {
            throw RichPushClientError.notRichPush("richpushRetract is \(text.utf8.count) bytes, more than \(maxRetractValueBytes)")
        }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= maxRetractedIdentifiers else {
            throw RichPushClientError.notRichPush("richpushRetract lists \(parts.count) identifiers, more than \(maxRetractedIdentifiers)")
        }
        var identifiers: [String] = []
        var ids: [Int64] = []
        var seen = Set<Substring>()
        for part in parts {
            guard let id = notificationID(retracted: part) else {
                throw RichPushClientError.notRichPush("richpushRetract \"\(part.prefix(40))\" is not rp-<notification id>")
            }
            if seen.insert(part).inserted {
                identifiers.append(String(part))
                ids.append(id)
            }
        }
        guard let first = ids.first else { throw RichPushClientError.notRichPush("richpushRetract is empty") }
        return (identifiers, first)
    }

    /// The notification id of `rp-<id>` with `id` in canonical decimal (no sign, no leading zero), else nil.
    private static func notificationID(retracted identifier: some StringProtocol) -> Int64? {
        let utf8 = Array(identifier.utf8)
        let prefix = Array("rp-".utf8)
        guard utf8.count > prefix.count, utf8.count <= prefix.count + 19, utf8.starts(with: prefix) else { return nil }
        let digits = utf8[prefix.count...]
        guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              digits.count == 1 || digits.first != UInt8(ascii: "0") else { return nil }
        return Int64(String(decoding: digits, as: UTF8.self))
    }

    /// A flag: `true` (not the number 1: JSON's booleans read as NSNumber too), or FCM's strings `"1"` and `"true"`.
    private static func flag(_ value: Any?) -> Bool {
        if let text = value as? String { return text == "1" || text == "true" }
        if let number = value as? NSNumber { return Wire.isBool(number) && number.boolValue }
        return value as? Bool ?? false
    }

    /// The value, or nil when it is absent or JSON's null.
    static func present(_ value: Any?) -> Any? {
        guard let value, !(value is NSNull) else { return nil }
        return value
    }

    /// A non-negative whole number, whether a number or (FCM's data map) its decimal string.
    private static func count(_ value: Any?) -> Int? {
        if let text = value as? String { return Int(text).flatMap { $0 >= 0 ? $0 : nil } }
        // JSON's true and false read as NSNumber too: a badge is a number, not a flag.
        guard let number = value as? NSNumber, !Wire.isBool(number),
              number.doubleValue == number.doubleValue.rounded(), number.intValue >= 0 else { return nil }
        return number.intValue
    }

    /// Buttons from `[{"id","title"}]` or the Notifications API's `[{"action","title"}]`, given as
    /// an array or (FCM's data map holds strings only) as its JSON text; what does not read is left out.
    private static func actions(_ value: Any?) -> [Action] {
        var list = value
        if let text = value as? String { list = try? JSONSerialization.jsonObject(with: Data(text.utf8)) }
        guard let items = list as? [Any] else { return [] }
        return items.compactMap { item in
            guard let fields = dictionary(item), let id = nonEmpty((fields["id"] ?? fields["action"]) as? String),
                  let title = fields["title"] as? String else { return nil }
            return Action(id: id, title: title)
        }
    }

    /// Reads a push from its JSON text: an APNs payload or a flat data object.
    /// - Throws: `RichPushClientError` of kind `.notRichPush` when the bytes are not a JSON object
    ///   or `init(userInfo:)` refuses them.
    public init(json: Data) throws {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: json)
        } catch {
            throw RichPushClientError.notRichPush("the push is not JSON (\(error.localizedDescription))")
        }
        guard let fields = object as? [String: Any] else {
            throw RichPushClientError.notRichPush("the push is JSON but not an object")
        }
        try self.init(userInfo: Dictionary(uniqueKeysWithValues: fields.map { (AnyHashable($0.key), $0.value) }))
    }

    private static func identifier(_ value: Any) throws -> Int64 {
        if let text = value as? String {
            guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  let id = Int64(text) else {
                throw RichPushClientError.notRichPush("richId \"\(text.prefix(40))\" is not a decimal notification id")
            }
            return id
        }
        let number: Int64? = if let exact = value as? Int64 {
            exact
        } else if let int = value as? Int {
            Int64(int)
        } else if let double = value as? Double {
            Int64(exactly: double)
        } else if let object = value as? NSNumber, Double(object.int64Value) == object.doubleValue {
            object.int64Value
        } else {
            nil
        }
        guard let number, number >= 0 else {
            throw RichPushClientError.notRichPush("richId \(String(describing: value).prefix(40)) is not a notification id")
        }
        return number
    }

    private static func payloadURL(_ value: Any?) throws -> URL? {
        guard let value, !(value is NSNull) else { return nil }
        guard let text = value as? String else { throw RichPushClientError.notRichPush("richUrl is not a string") }
        if text.isEmpty { return nil }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = url.host, !host.isEmpty else {
            throw RichPushClientError.notRichPush("richUrl \"\(text.prefix(80))\" is not an http(s) URL")
        }
        return url
    }

    /// A nested dictionary, whether it arrived as a Swift `[String: Any]` or a bridged `NSDictionary`.
    static func dictionary(_ value: Any?) -> [String: Any]? {
        if let fields = value as? [String: Any] { return fields }
        guard let fields = value as? [AnyHashable: Any] else { return nil }
        let named: [(String, Any)] = fields.compactMap { entry in (entry.key.base as? String).map { ($0, entry.value) } }
        return Dictionary(named, uniquingKeysWith: { first, _ in first })
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}
