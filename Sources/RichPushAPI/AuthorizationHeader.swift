import Foundation

/// An `Authorization` header read strictly, once, by the one parser every check uses (the
/// cache, the session check, Basic's decoding): RFC 7235's `auth-scheme SP token68`, with
/// exactly one space, a scheme of `Basic` or `Bearer` in any case, and token68 credentials
/// (`A–Z a–z 0–9 - . _ ~ + /`, then `=` padding alone). The field's surrounding white space
/// is not part of its value (RFC 9110 §5.5) and is ignored; any other spelling (a tab, two
/// spaces, a comma, a second scheme, an empty token) is no credential at all.
///
/// Two parsers that disagreed on a spelling let a session token pass as Basic credentials and
/// mint a new session; with one parser a header has one meaning everywhere.
struct AuthorizationHeader: Sendable, Equatable {
    /// The two schemes RichPush takes.
    enum Scheme: Sendable, Equatable {
        /// `Basic base64(user:password)`.
        case basic
        /// `Bearer <session token>`.
        case bearer
    }

    /// Which scheme the header names.
    let scheme: Scheme
    /// The token68 after the space, as sent.
    let credentials: Substring

    /// Parses `header`; nil for anything that is not exactly one scheme, one space and a token68.
    init?(_ header: String) {
        let bytes = header.utf8
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start = bytes.index(after: start) }
        while start < end {
            let last = bytes.index(before: end)
            guard bytes[last] == 0x20 || bytes[last] == 0x09 else { break }
            end = last
        }
        guard let space = bytes[start..<end].firstIndex(of: 0x20) else { return nil }
        let schemeBytes = bytes[start..<space]
        let credentialsStart = bytes.index(after: space)
        guard credentialsStart < end, Self.isToken68(bytes[credentialsStart..<end]) else { return nil }
        if Self.equalsIgnoringCase(schemeBytes, "basic") {
            scheme = .basic
        } else if Self.equalsIgnoringCase(schemeBytes, "bearer") {
            scheme = .bearer
        } else {
            return nil
        }
        credentials = header[credentialsStart..<end]
    }

    /// The session token of a `Bearer` header.
    var bearerToken: String? {
        scheme == .bearer ? String(credentials) : nil
    }

    /// The user name and password of a `Basic` header whose credentials decode as base64 of
    /// UTF-8 `user:password`.
    var basic: (user: String, password: String)? {
        guard scheme == .basic, let data = Data(base64Encoded: String(credentials)),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
    static func isToken68(_ bytes: Substring.UTF8View) -> Bool {
        var sawPadding = false
        var sawBody = false
        for byte in bytes {
            switch byte {
            case 0x3D:  // "="
                sawPadding = true
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                if sawPadding { return false }
                sawBody = true
            default:
                return false
            }
        }
        return sawBody
    }

    private static func equalsIgnoringCase(_ bytes: Substring.UTF8View, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            zip(bytes, expected).allSatisfy { a, b in (a | 0x20) == b }
        }
    }
}
