import Foundation

/// A URL RichPush calls on a user's behalf (a Web Push endpoint, later a webhook), read strictly and
/// once, so that the host checked is the host connected to and the target written is the one read.
///
/// Only `https` and `http`; printable ASCII only (no spaces or line breaks to smuggle into the
/// request line); no user name or password (`https://push.example@10.0.0.1/` is a classic
/// trick); the host a name of letters, digits, `-` and `.` (IDNs in punycode) or an IP literal.
public struct OutboundURL: Sendable, Equatable {
    /// `https` or `http`.
    public let scheme: String
    /// Lowercase, without a trailing dot; an IPv6 literal without its brackets.
    public let host: String
    /// The port given, else the scheme's (443 or 80).
    public let port: Int
    /// Path and query as written, at least `/`; the fragment is dropped.
    public let target: String

    /// The longest URL read.
    public static let maxLength = 4096

    /// Whether the connection is TLS.
    public var isHTTPS: Bool { scheme == "https" }

    /// Whether the host is an address rather than a name (see `PublicAddress.looksLikeIPAddress`).
    public var hostIsIPAddress: Bool { PublicAddress.looksLikeIPAddress(host: host) }

    /// The `Host` header: the host (bracketed when IPv6), with the port when it is not the scheme's.
    public var authority: String {
        let shown = host.contains(":") ? "[\(host)]" : host
        return port == (isHTTPS ? 443 : 80) ? shown : "\(shown):\(port)"
    }

    /// Reads `text`; a `CoreError` (422) says what is wrong with it.
    public init(_ text: String) throws {
        let shown = "'\(text.prefix(80))'"
        guard text.utf8.count <= Self.maxLength else { throw Self.refusal("is over \(Self.maxLength) bytes") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw Self.refusal("\(shown) holds spaces, control or non-ASCII characters")
        }
        guard let separator = text.range(of: "://") else { throw Self.refusal("\(shown) is not an absolute URL") }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { throw Self.refusal("\(shown) is not an https URL") }
        let rest = text[separator.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = rest[authorityEnd...]
        if let hash = target.firstIndex(of: "#") { target = target[..<hash] }
        guard !authority.contains("@") else { throw Self.refusal("\(shown) carries a user name or password") }

        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw Self.refusal("\(shown) has an unclosed '['") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Self.refusal("\(shown) has something after its IPv6 address") }
                portText = after.dropFirst()
            }
            guard PublicAddress.ipv6Bytes(host) != nil else { throw Self.refusal("\(shown) has a malformed IPv6 address") }
        } else {
            if let colon = authority.firstIndex(of: ":") {
                host = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            } else {
                host = authority
            }
            if host.hasSuffix(".") { host = host.dropLast() }
            let labels = host.split(separator: ".", omittingEmptySubsequences: false)
            guard !host.isEmpty, host.utf8.count <= 253,
                  labels.allSatisfy({ (1...63).contains($0.utf8.count) && !$0.hasPrefix("-") && !$0.hasSuffix("-") }),
                  host.utf8.allSatisfy({ Self.isNameByte($0) }) else {
                throw Self.refusal("\(shown) has no valid host name (letters, digits, '-' and '.'; punycode for other scripts)")
            }
        }
        var port = scheme == "https" ? 443 : 80
        if let portText, !portText.isEmpty {
            guard portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let number = Int(portText), (1...65535).contains(number) else {
                throw Self.refusal("\(shown) has no valid port (1 to 65535)")
            }
            port = number
        }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        if target.isEmpty {
            self.target = "/"
        } else if target.hasPrefix("?") {
            self.target = "/" + String(target)
        } else {
            self.target = String(target)
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x2E
    }

    private static func refusal(_ what: String) -> CoreError {
        CoreError(.unprocessable, "the URL \(what)")
    }
}
