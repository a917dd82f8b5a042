import Foundation

/// How values read and travel between the client and the server: the small rules several parts
/// of the library share.
enum Wire {
    /// Whether a JSON number is really `true` or `false` (Foundation reads both as `NSNumber`).
    static func isBool(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }

    /// An RFC 3339 (ISO 8601) time, with or without fractional seconds (up to 19 digits of them
    /// with `Z`, 14 with an offset).
    /// Longer texts are refused unread: on Linux, Foundation's formatter (ICU) dies of a division by
    /// zero (SIGFPE) on 35 or more digits of fraction, and would take the app with it.
    static func date(rfc3339 text: String) -> Date? {
        guard text.utf8.count <= 40 else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// RFC 3986's unreserved characters (A-Z, a-z, 0-9 and `_ - . ~`): safe in a URL path as they are.
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}
