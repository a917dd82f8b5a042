import Foundation

/// How a notification reaches the device (SPEC §11).
public enum PushMode: String, Sendable, Codable, CaseIterable {
    /// An alert push with `mutable-content`: a Notification Service Extension fetches the image
    /// through `richUrl` and shows it. What today's phones show as a rich notification.
    case alert
    /// The tutorial's background push (SPEC §6); the app fetches the payload when it runs.
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

/// The alert push of SPEC §11, keys in the order the SPEC writes them:
///
///     {"aps":{"alert":{"title":"<title>","body":"<message>"},"mutable-content":1,"sound":"default"},
///      "richId":"<id>","richMessage":"<message>","richType":"img","richUrl":"<payload url>"}
///
/// `"title"` is left out when there is none. Strings are escaped by a JSON encoder.
public struct AlertPush: Sendable, Equatable {
    public let richId: String
    public let title: String?
    public let richMessage: String
    public let richType: String
    public let richUrl: String

    /// Creates the push for notification `id`.
    public init(id: Int64, title: String?, message: String, richType: String, richUrl: String) {
        self.richId = String(id)
        self.title = title
        self.richMessage = message
        self.richType = richType
        self.richUrl = richUrl
    }

    /// The JSON bytes.
    public func encoded() -> Data {
        let message = Self.quote(richMessage)
        var alert = "{"
        if let title { alert += "\"title\":\(Self.quote(title))," }
        alert += "\"body\":\(message)}"
        let json = "{\"aps\":{\"alert\":\(alert),\"mutable-content\":1,\"sound\":\"default\"},\"richId\":\(Self.quote(richId))," +
            "\"richMessage\":\(message),\"richType\":\(Self.quote(richType)),\"richUrl\":\(Self.quote(richUrl))}"
        return Data(json.utf8)
    }

    /// A JSON string literal, as `JSONEncoder` writes it (slashes unescaped, like the silent push).
    static func quote(_ text: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return String(decoding: try! encoder.encode(text), as: UTF8.self)
    }
}
