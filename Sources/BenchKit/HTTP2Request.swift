/// A request ready for HTTP/2: its HPACK header block, encoded once and sent as is on every
/// stream, and its body.
///
/// The block uses no dynamic table and no Huffman coding, so that it means the same on every
/// stream of every connection: fields that are whole entries of the static table are indexed
/// (`:method GET`, `:scheme https`, `:path /`…), the others are literals without indexing, with an
/// indexed name when the static table has the name.
struct HTTP2Request: Sendable {
    /// The HPACK header block: pseudo-headers, then the headers, then `content-length` when there
    /// is a body.
    let headerBlock: [UInt8]
    /// The body, sent in DATA frames; nil when there is none (or it is empty), and the HEADERS
    /// frame then ends the stream.
    let body: [UInt8]?

    /// Encodes the request. Header names are lowercased; the connection-specific headers HTTP/2
    /// forbids (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`,
    /// and `te` unless it is `trailers`) are dropped, as is `content-length` (the body's length is
    /// sent instead when there is a body, even an empty one). `host` is dropped too: it names
    /// the `:authority` when `authority` is empty.
    init(method: String, scheme: String, authority: String, path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        var authority = authority
        var fields: [(String, String)] = []
        fields.reserveCapacity(headers.count + 1)
        for (rawName, value) in headers {
            let name = rawName.lowercased()
            switch name {
            case "host":
                if authority.isEmpty { authority = value }
            case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "content-length":
                continue
            case "te":
                if value.lowercased() == "trailers" { fields.append((name, "trailers")) }
            default:
                fields.append((name, value))
            }
        }
        if let body { fields.append(("content-length", String(body.count))) }

        var block: [UInt8] = []
        block.reserveCapacity(256)
        Self.appendField(":method", method, to: &block)
        Self.appendField(":scheme", scheme, to: &block)
        if !authority.isEmpty { Self.appendField(":authority", authority, to: &block) }
        Self.appendField(":path", path, to: &block)
        for (name, value) in fields { Self.appendField(name, value, to: &block) }
        headerBlock = block
        self.body = body?.isEmpty == false ? body : nil
    }

    /// The names of the HPACK static table (RFC 7541 Appendix A), by index; index 0 is unused.
    private static let staticTableNames: [String] = [
        "", ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme",
        ":status", ":status", ":status", ":status", ":status", ":status", ":status",
        "accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept",
        "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
        "content-disposition", "content-encoding", "content-language", "content-length",
        "content-location", "content-range", "content-type", "cookie", "date", "etag", "expect",
        "expires", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range",
        "if-unmodified-since", "last-modified", "link", "location", "max-forwards",
        "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh", "retry-after",
        "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent",
        "vary", "via", "www-authenticate",
    ]

    /// The index of the static table entry that is exactly `name: value`, if one is.
    private static func staticIndex(name: String, value: String) -> Int? {
        switch (name, value) {
        case (":method", "GET"): 2
        case (":method", "POST"): 3
        case (":path", "/"): 4
        case (":path", "/index.html"): 5
        case (":scheme", "http"): 6
        case (":scheme", "https"): 7
        case ("accept-encoding", "gzip, deflate"): 16
        default: nil
        }
    }

    /// Appends one field: indexed when the static table has it whole, else a literal without
    /// indexing (RFC 7541 §6.2.2), its name indexed when the static table has the name.
    private static func appendField(_ name: String, _ value: String, to block: inout [UInt8]) {
        if let index = staticIndex(name: name, value: value) {
            appendInteger(index, prefixBits: 7, pattern: 0x80, to: &block)
            return
        }
        if let index = staticTableNames.firstIndex(of: name), index > 0 {
            appendInteger(index, prefixBits: 4, pattern: 0x00, to: &block)
        } else {
            block.append(0x00)
            appendString(name, to: &block)
        }
        appendString(value, to: &block)
    }

    /// Appends a string literal, not Huffman-coded: its length (7-bit prefix, H = 0), then its bytes.
    private static func appendString(_ string: String, to block: inout [UInt8]) {
        appendInteger(string.utf8.count, prefixBits: 7, pattern: 0x00, to: &block)
        block.append(contentsOf: string.utf8)
    }

    /// Appends an HPACK integer (RFC 7541 §5.1) with an `prefixBits`-bit prefix, the first byte's
    /// upper bits set from `pattern`.
    private static func appendInteger(_ value: Int, prefixBits: Int, pattern: UInt8, to block: inout [UInt8]) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            block.append(pattern | UInt8(value))
            return
        }
        block.append(pattern | UInt8(limit))
        var rest = value - limit
        while rest >= 0x80 {
            block.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        block.append(UInt8(rest))
    }
}

/// What happened to a stream, reported by `HTTP2ClientSession.receive`. Every stream opened is
/// reported exactly once, unless the connection fails first.
enum HTTP2Event: Equatable, Sendable {
    /// The stream's response ended (END_STREAM seen); `status` is that of its final (non-1xx)
    /// HEADERS.
    case response(stream: UInt32, status: Int)
    /// The stream ended without a response: the peer reset it (RST_STREAM, with the peer's code),
    /// it was above a GOAWAY's last-stream-id (REFUSED_STREAM: the server did not process it), or
    /// its response was malformed and we reset it (RST_STREAM sent, with our code).
    case reset(stream: UInt32, code: UInt32)
}

/// A connection error: the peer broke HTTP/2 (or HPACK) and the connection cannot go on.
struct HTTP2ProtocolError: Error, CustomStringConvertible {
    /// The RFC 9113 error code a GOAWAY would carry.
    let code: UInt32
    /// The code's name and what was wrong, in words.
    let description: String

    /// An error with `code`, described in `words`.
    init(_ code: UInt32, _ words: String) {
        self.code = code
        description = "\(HTTP2Wire.ErrorCode.name(code)): \(words)"
    }
}
