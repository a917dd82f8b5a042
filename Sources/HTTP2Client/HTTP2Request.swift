import NIOHPACK

/// A request ready for HTTP/2: its HPACK header block, encoded once and sent as is on every
/// stream, and its body.
///
/// The block uses no dynamic table and no Huffman coding, so that it means the same on every
/// stream of every connection: fields that are whole entries of the static table are indexed
/// (`:method GET`, `:scheme https`, `:path /`…), the others are literals without indexing, with an
/// indexed name when the static table has the name.
public struct HTTP2Request: Sendable {
    /// The HPACK header block: pseudo-headers, then the headers, then `content-length` when there
    /// is a body.
    public let headerBlock: [UInt8]
    /// The body, sent in DATA frames; nil when there is none (or it is empty), and the HEADERS
    /// frame then ends the stream.
    public let body: [UInt8]?

    /// Encodes the request. Header names are lowercased; the connection-specific headers HTTP/2
    /// forbids (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`,
    /// and `te` unless it is `trailers`) are dropped, as is `content-length` (the body's length is
    /// sent instead when there is a body, even an empty one). `host` is dropped too: it names
    /// the `:authority` when `authority` is empty.
    public init(method: String, scheme: String, authority: String, path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
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

    /// Appends one field: indexed when the static table has it whole, else a literal without
    /// indexing (RFC 7541 §6.2.2), its name indexed when the static table has the name.
    private static func appendField(_ name: String, _ value: String, to block: inout [UInt8]) {
        if let index = HPACKWire.staticIndex(name: name, value: value) {
            HPACKWire.appendInteger(index, prefixBits: 7, pattern: 0x80, to: &block)
            return
        }
        HPACKWire.appendLiteral(name, value, prefixBits: 4, pattern: 0x00, to: &block)
    }
}

/// What happened to a stream, reported by `HTTP2ClientSession.receive`. Every stream opened is
/// reported exactly once, unless the connection fails first.
public enum HTTP2Event: Equatable, Sendable {
    /// The stream's response ended (END_STREAM seen); `status` is that of its final (non-1xx)
    /// HEADERS.
    case response(stream: UInt32, status: Int)
    /// The stream ended without a response: the peer reset it (RST_STREAM, with the peer's code),
    /// it was above a GOAWAY's last-stream-id (REFUSED_STREAM: the server did not process it), or
    /// its response was malformed and we reset it (RST_STREAM sent, with our code).
    case reset(stream: UInt32, code: UInt32)
    /// The stream's response ended, kept whole (a session made with a `responseBodyLimit`).
    case answer(HTTP2Response)
    /// The response's body grew past the session's `responseBodyLimit`: we reset the stream (CANCEL).
    case tooLarge(stream: UInt32)
}

/// A response kept whole: its final HEADERS' fields and its body.
public struct HTTP2Response: Equatable, Sendable {
    /// The stream it answered.
    public var stream: UInt32
    /// Its final (non-1xx) `:status`.
    public var status: Int
    /// Its final HEADERS' fields, `:status` among them (trailers are not kept).
    public var headers: HPACKHeaders
    /// Its body, at most the session's `responseBodyLimit` bytes.
    public var body: [UInt8]
}

/// A connection error: the peer broke HTTP/2 (or HPACK) and the connection cannot go on.
public struct HTTP2ProtocolError: Error, CustomStringConvertible {
    /// The RFC 9113 error code a GOAWAY would carry.
    public let code: UInt32
    /// The code's name and what was wrong, in words.
    public let description: String

    /// An error with `code`, described in `words`.
    public init(_ code: UInt32, _ words: String) {
        self.code = code
        description = "\(HTTP2Wire.ErrorCode.name(code)): \(words)"
    }
}
