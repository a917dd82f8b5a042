import Foundation

/// What a push says whatever the platform: the fields of FCM's `data` and of Web Push's message
/// (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push). APNs takes the exact bytes stored with the notification instead.
public struct PushContent: Sendable, Equatable {
    /// The notification id (`richId`).
    public var id: Int64
    public var message: String
    public var title: String?
    public var richType: String
    /// The signed payload URL; nil where the notification was made without a payload key.
    public var richUrl: String?
    /// The notification's options (docs/api.md#options-badges-and-paced-sends).
    public var options = PushOptions()
    /// The badge this device's push carries: a fixed one, or the recipient's unread count at send time.
    public var badge: Int?
    /// The push replaces what the device shows of this notification with its changed content
    /// (docs/api.md#change-or-take-back-what-was-sent); `quiet`: without a sound.
    public var isUpdate = false
    public var quiet = false
    /// The push takes these notifications back instead: FCM's data carries only their collapse
    /// ids (`richpushRetract`), a browser shows `message` in place of what it showed.
    public var retracted: [Int64]?

    /// The most a Web Push message may hold: one 4,096-byte aes128gcm record less its 86-byte
    /// header, 16-byte tag and 1-byte padding delimiter.
    public static let webPushMaxBytes = 4096 - 86 - 16 - 1

    /// Creates the content.
    public init(id: Int64, message: String, title: String?, richType: String, richUrl: String?, options: PushOptions = PushOptions()) {
        self.options = options
        if case .count(let fixed)? = options.badge { badge = fixed }
        self.id = id
        self.message = message
        self.title = title
        self.richType = richType
        self.richUrl = richUrl
    }

    /// `richId`, `richMessage`, `richType` and `richUrl`, all strings, as FCM's `data` must be.
    public var fcmData: [String: String] {
        if let retracted { return ["richpushRetract": Self.retractValue(retracted)] }
        var data = ["richId": String(id), "richMessage": message, "richType": richType]
        if let richUrl { data["richUrl"] = richUrl }
        if let actions = options.actions, !actions.isEmpty { data["richActions"] = AlertPush.actions(actions) }
        if isUpdate { data["richUpdate"] = "1" }
        return data
    }

    /// `{"richId","richMessage","richType","richUrl","title"}`, the plaintext of a Web Push message;
    /// with options, `subtitle`, `actions` in the Notifications API's shape (`[{"action","title"}]`,
    /// for `showNotification`) and `badgeCount` (for `navigator.setAppBadge`).
    public var webPushPlaintext: Data {
        var object: [String: Any] = ["richId": String(id), "richMessage": message, "richType": richType]
        if let retracted {
            object["richpushRetract"] = Self.retractValue(retracted)
            if let title { object["title"] = title }
            return try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        }
        if isUpdate {
            object["richUpdate"] = true
            if quiet { object["silent"] = true }
        }
        if let richUrl { object["richUrl"] = richUrl }
        if let title { object["title"] = title }
        if let subtitle = options.subtitle { object["subtitle"] = subtitle }
        if let actions = options.actions, !actions.isEmpty { object["actions"] = actions.map { ["action": $0.id, "title": $0.title] } }
        if let badge { object["badgeCount"] = badge }
        return try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// `richpushRetract`'s value: the collapse ids of the notifications taken back, comma-separated.
    public static func retractValue(_ ids: [Int64]) -> String {
        ids.map { "rp-\($0)" }.joined(separator: ",")
    }

    /// The APNs push that takes `ids` back: a background push with nothing but their collapse ids,
    /// `{"aps":{"content-available":1},"richpushRetract":"rp-12"}`.
    public static func retractPush(_ ids: [Int64]) -> Data {
        Data(#"{"aps":{"content-available":1},"richpushRetract":"\#(retractValue(ids))"}"#.utf8)
    }
}
