import Foundation

/// The silent push of docs/api.md#http-api, byte for byte the tutorial's shape, as a JSON encoder writes it
/// (sorted keys, slashes unescaped):
///
///     {"aps":{"content-available":1,"sound":""},"richId":"<id>","richMessage":"<message>","richType":"img"}
public struct SilentPush: Sendable, Equatable, Encodable {
    /// APNs' limit for a notification payload, in bytes.
    public static let maxBytes = 4096

    /// `content-available` and an empty `sound`, the tutorial's.
    let aps = APS.silentPush
    /// The notification id in decimal (the device app reads it with `intValue`).
    public let richId: String
    /// The message the device shows.
    public let richMessage: String
    /// The developer-defined type, `img` for images.
    public let richType: String

    /// Creates the push for notification `id`.
    public init(id: Int64, message: String, richType: String) {
        self.richId = String(id)
        self.richMessage = message
        self.richType = richType
    }

    /// The JSON bytes, keys in the tutorial's order (which is also sorted order).
    ///
    /// Written by hand with the alert push's quoting (a silent campaign encodes one per recipient):
    /// the same bytes as `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` gives.
    public func encoded() -> Data {
        Data(("{\"aps\":\(aps.json),\"richId\":\(AlertPush.quote(richId))," +
              "\"richMessage\":\(AlertPush.quote(richMessage)),\"richType\":\(AlertPush.quote(richType))}").utf8)
    }
}
