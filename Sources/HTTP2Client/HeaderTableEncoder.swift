/// One header field of a request, and whether the connection's HPACK dynamic table should keep it.
public struct HTTP2HeaderField: Sendable {
    /// The field's name, lowercase.
    public var name: String
    /// The field's value.
    public var value: String
    /// Whether the field is added to the dynamic table (RFC 7541 §6.2.1), so that the next request
    /// with the same field sends an index of a byte or two. Say so for fields most requests repeat
    /// (a provider token, a topic); a field that differs every time (a device's path, a request id)
    /// would only push the repeated ones out of the table, and is sent as a literal never indexed.
    public var indexed: Bool

    /// A field, `indexed` or not. The name must be lowercase and not one HTTP/2 forbids
    /// (`connection` and the like) nor `content-length`, which the session adds (checked in debug builds).
    public init(_ name: String, _ value: String, indexed: Bool) {
        assert(!name.utf8.contains { (0x41...0x5A).contains($0) }, "HTTP/2 field names are lowercase: \(name)")
        assert(!["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "content-length", "host"].contains(name),
               "\(name) is not a field to send on an HTTP/2 stream")
        self.name = name
        self.value = value
        self.indexed = indexed
    }
}

/// The encoder's side of a connection's HPACK dynamic table (RFC 7541 §2.3.2, §4): which fields it
/// holds, so that a field sent before is sent again as an index. Only the fields asked for are
/// added; names are indexed from the static table only.
///
/// The table starts at the 4,096 bytes every HTTP/2 peer allows (SETTINGS_HEADER_TABLE_SIZE's
/// default) or at `capacity` when that is smaller; when the peer's setting changes, the size we use
/// follows it and the change is signalled at the start of the next header block, as RFC 7541 §4.2
/// requires (the smallest size in between, then the final one).
struct HeaderTableEncoder: Sendable {
    /// The most we ever use, whatever the peer allows.
    let configured: Int
    /// The size we use now: `configured`, or less when the peer allows less.
    private(set) var capacity: Int
    /// The fields in the table, oldest first: the newest is dynamic index 62.
    private var entries: [Entry] = []
    /// The table's size by RFC 7541 §4.1: each entry's name and value bytes plus 32.
    private(set) var size = 0
    /// Size updates to send at the start of the next block: the smallest since the last block, then the last.
    private var pendingMinimum: Int?
    private var pendingFinal: Int?

    /// A field in the table, with its lengths (compared first: most fields differ in them).
    private struct Entry: Sendable {
        var name: String
        var value: String
        var nameCount: Int
        var valueCount: Int
        /// Its size by RFC 7541 §4.1.
        var size: Int { nameCount + valueCount + 32 }
    }

    /// The size every peer allows before its SETTINGS say otherwise.
    static let defaultPeerSize = 4_096

    /// An encoder that uses at most `capacity` bytes of table (0: none; the first block then says
    /// so, so that a peer may lower its setting without our answer).
    init(capacity: Int) {
        configured = max(0, capacity)
        self.capacity = min(configured, Self.defaultPeerSize)
        if self.capacity != Self.defaultPeerSize { pendingFinal = self.capacity }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the most we may use from now on.
    mutating func peerAllows(_ limit: Int) {
        let size = min(configured, limit)
        guard size != capacity || pendingFinal != nil else { return }
        if size < capacity { evict(toFit: 0, within: size) }
        pendingMinimum = min(pendingMinimum ?? pendingFinal ?? size, size)
        pendingFinal = size
        capacity = size
    }

    /// Appends `fields` as one header block's representations (after any size update owed).
    mutating func encode(_ fields: some Sequence<HTTP2HeaderField>, into block: inout [UInt8]) {
        beginBlock(into: &block)
        for field in fields { append(field.name, field.value, indexed: field.indexed, into: &block) }
    }

    /// Appends the dynamic table size updates owed, if any: due at the start of a header block.
    mutating func beginBlock(into block: inout [UInt8]) {
        guard let final = pendingFinal else { return }
        if let minimum = pendingMinimum, minimum < final { HPACKWire.appendInteger(minimum, prefixBits: 5, pattern: 0x20, to: &block) }
        HPACKWire.appendInteger(final, prefixBits: 5, pattern: 0x20, to: &block)
        pendingMinimum = nil
        pendingFinal = nil
    }

    /// Appends one field: an index when the static or dynamic table has it whole; else a literal,
    /// its name indexed when the static table has the name, added to the table when `indexed`.
    mutating func append(_ name: String, _ value: String, indexed: Bool, into block: inout [UInt8]) {
        if let index = HPACKWire.staticIndex(name: name, value: value) {
            HPACKWire.appendInteger(index, prefixBits: 7, pattern: 0x80, to: &block)
            return
        }
        let nameCount = name.utf8.count, valueCount = value.utf8.count
        if indexed, let position = entries.lastIndex(where: {
            $0.nameCount == nameCount && $0.valueCount == valueCount && $0.name == name && $0.value == value
        }) {
            HPACKWire.appendInteger(HPACKWire.staticTableNames.count + (entries.count - 1 - position), prefixBits: 7, pattern: 0x80, to: &block)
            return
        }
        let entrySize = nameCount + valueCount + 32
        let adding = indexed && entrySize <= capacity
        // With incremental indexing (01, 6-bit name index), or never indexed (0001, 4-bit).
        if adding {
            HPACKWire.appendLiteral(name, value, prefixBits: 6, pattern: 0x40, to: &block)
        } else {
            HPACKWire.appendLiteral(name, value, prefixBits: 4, pattern: 0x10, to: &block)
        }
        if adding {
            evict(toFit: entrySize, within: capacity)
            entries.append(Entry(name: name, value: value, nameCount: nameCount, valueCount: valueCount))
            size += entrySize
        }
    }

    /// Drops the oldest entries until `incoming` more bytes fit in `limit`.
    private mutating func evict(toFit incoming: Int, within limit: Int) {
        var dropped = 0
        while size + incoming > limit, dropped < entries.count {
            size -= entries[dropped].size
            dropped += 1
        }
        if dropped > 0 { entries.removeFirst(dropped) }
    }
}

/// HPACK's static table and its integer and string representations (RFC 7541 §5, Appendix A).
enum HPACKWire {
    /// The names of the static table, by index; index 0 is unused.
    static let staticTableNames: [String] = [
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
    static func staticIndex(name: String, value: String) -> Int? {
        // Only pseudo-fields and accept-encoding are whole entries we send: most names stop here.
        guard let first = name.utf8.first, first == UInt8(ascii: ":") || first == UInt8(ascii: "a") else { return nil }
        return switch (name, value) {
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

    /// Each name of the static table and its first index.
    private static let staticNameIndices: [String: Int] = {
        var indices: [String: Int] = [:]
        for (index, name) in staticTableNames.enumerated().dropFirst() where indices[name] == nil { indices[name] = index }
        return indices
    }()

    /// The first static table index with `name`, if any.
    static func staticNameIndex(_ name: String) -> Int? {
        staticNameIndices[name]
    }

    /// Appends a literal field (RFC 7541 §6.2): `pattern` and the name's static index in a
    /// `prefixBits`-bit prefix (or 0 and the name as a string when the table has no such name),
    /// then the value.
    static func appendLiteral(_ name: String, _ value: String, prefixBits: Int, pattern: UInt8, to block: inout [UInt8]) {
        if let nameIndex = staticNameIndex(name) {
            appendInteger(nameIndex, prefixBits: prefixBits, pattern: pattern, to: &block)
        } else {
            block.append(pattern)
            appendString(name, to: &block)
        }
        appendString(value, to: &block)
    }

    /// Appends a string literal, not Huffman-coded: its length (7-bit prefix, H = 0), then its bytes.
    static func appendString(_ string: String, to block: inout [UInt8]) {
        appendInteger(string.utf8.count, prefixBits: 7, pattern: 0x00, to: &block)
        block.append(contentsOf: string.utf8)
    }

    /// Appends an HPACK integer (RFC 7541 §5.1) with a `prefixBits`-bit prefix, the first byte's
    /// upper bits set from `pattern`.
    static func appendInteger(_ value: Int, prefixBits: Int, pattern: UInt8, to block: inout [UInt8]) {
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
