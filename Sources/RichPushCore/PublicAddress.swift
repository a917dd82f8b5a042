import Foundation

/// Whether an IP address is one RichPush may call on a user's behalf (a Web Push endpoint, later a
/// webhook): public unicast only, so that a URL a user chose cannot reach this host, its network
/// or a cloud's metadata service (server-side request forgery).
///
/// The blocks refused are IANA's special-purpose registries (RFC 6890 and successors). An IPv6
/// address that carries an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16`) is judged by the IPv4 address it carries; IPv6 outside `2000::/3` is refused, as
/// no global unicast is allocated there.
public enum PublicAddress {
    /// Why `bytes` (4 bytes for IPv4, 16 for IPv6, network order) is not public, e.g. "a private
    /// address (10.0.0.0/8)"; nil when it is public.
    public static func refusal(for bytes: [UInt8]) -> String? {
        switch bytes.count {
        case 4: return ipv4Refusal(bytes)
        case 16: return ipv6Refusal(bytes)
        default: return "not an IP address"
        }
    }

    /// Whether `literal` (an IPv4 dotted quad or an IPv6 address, brackets allowed) is a public address;
    /// false for anything that is not an IP address.
    public static func isPublic(_ literal: String) -> Bool {
        guard let bytes = Self.bytes(of: literal) else { return false }
        return refusal(for: bytes) == nil
    }

    /// The address `text` spells: 4 bytes for a strict dotted quad (no leading zeros), 16 for an
    /// IPv6 address (`[…]` allowed, no zone); nil for anything else.
    public static func bytes(of text: String) -> [UInt8]? {
        var text = Substring(text)
        if text.hasPrefix("[") && text.hasSuffix("]") { text = text.dropFirst().dropLast() }
        if let v4 = ipv4Bytes(text) { return v4 }
        return text.contains(":") ? ipv6Bytes(text) : nil
    }

    /// Whether a URL's host is an address rather than a name: an IP literal, or a host that ends in
    /// a number (`2130706433`, `0x7f.1`, `127.1`), which resolvers read as IPv4 (WHATWG URL's
    /// "ends in a number").
    public static func looksLikeIPAddress(host: String) -> Bool {
        if Self.bytes(of: host) != nil { return true }
        var host = Substring(host)
        if host.hasSuffix(".") { host = host.dropLast() }
        guard let last = host.split(separator: ".", omittingEmptySubsequences: false).last, !last.isEmpty else { return false }
        if last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return true }
        let lower = last.lowercased()
        return lower.hasPrefix("0x") && lower.dropFirst(2).utf8.allSatisfy(isHexDigit)
    }

    // MARK: parsing

    /// A dotted quad of decimal numbers 0 to 255 without leading zeros.
    static func ipv4Bytes(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.utf8.count), part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  part.utf8.count == 1 || part.utf8.first != 0x30, let value = UInt8(part) else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    /// RFC 4291 §2.2 text: eight groups of 1 to 4 hex digits, one `::` for a run of zero groups, an
    /// IPv4 dotted quad as the last 32 bits. Zones (`%eth0`) are not accepted.
    static func ipv6Bytes(_ text: Substring) -> [UInt8]? {
        guard (2...45).contains(text.utf8.count), !text.contains("%") else { return nil }
        var halves: [Substring] = []
        if let gap = text.range(of: "::") {
            halves = [text[..<gap.lowerBound], text[gap.upperBound...]]
            guard !halves[1].contains("::") else { return nil }
        } else {
            halves = [text]
        }
        func groups(_ part: Substring, ipv4Tail: Bool) -> [UInt8]? {
            if part.isEmpty { return [] }
            var bytes: [UInt8] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if ipv4Tail && index == pieces.count - 1 && piece.contains(".") {
                    guard let v4 = ipv4Bytes(piece) else { return nil }
                    bytes += v4
                } else {
                    guard (1...4).contains(piece.utf8.count), piece.utf8.allSatisfy(isHexDigit),
                          let value = UInt16(piece, radix: 16) else { return nil }
                    bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
                }
            }
            return bytes
        }
        if halves.count == 1 {
            guard let bytes = groups(halves[0], ipv4Tail: true), bytes.count == 16 else { return nil }
            return bytes
        }
        guard let head = groups(halves[0], ipv4Tail: false), let tail = groups(halves[1], ipv4Tail: true),
              head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }

    // MARK: blocks

    /// IPv4 special-purpose blocks: network, prefix length, what it is. The broadcast address comes
    /// before 240/4, which holds it, so that it is named.
    private static let ipv4Blocks: [(network: UInt32, bits: Int, what: String)] = [
        (0x0000_0000, 8, "a \"this network\" address (0.0.0.0/8)"),
        (0x0A00_0000, 8, "a private address (10.0.0.0/8)"),
        (0x6440_0000, 10, "a carrier-grade NAT address (100.64.0.0/10)"),
        (0x7F00_0000, 8, "a loopback address (127.0.0.0/8)"),
        (0xA9FE_0000, 16, "a link-local address (169.254.0.0/16, where clouds keep their metadata service)"),
        (0xAC10_0000, 12, "a private address (172.16.0.0/12)"),
        (0xC000_0000, 24, "an IETF protocol address (192.0.0.0/24)"),
        (0xC000_0200, 24, "a documentation address (192.0.2.0/24)"),
        (0xC0A8_0000, 16, "a private address (192.168.0.0/16)"),
        (0xC612_0000, 15, "a benchmarking address (198.18.0.0/15)"),
        (0xC633_6400, 24, "a documentation address (198.51.100.0/24)"),
        (0xCB00_7100, 24, "a documentation address (203.0.113.0/24)"),
        (0xE000_0000, 4, "a multicast address (224.0.0.0/4)"),
        (0xFFFF_FFFF, 32, "the broadcast address (255.255.255.255)"),
        (0xF000_0000, 4, "a reserved address (240.0.0.0/4)"),
    ]

    private static func ipv4Refusal(_ bytes: [UInt8]) -> String? {
        let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        for block in ipv4Blocks {
            let mask: UInt32 = block.bits == 0 ? 0 : UInt32.max << UInt32(32 - block.bits)
            if value & mask == block.network { return block.what }
        }
        return nil
    }

    /// IPv6 special-purpose blocks that carry no IPv4 address: prefix bytes, prefix length, what it is.
    private static let ipv6Blocks: [(prefix: [UInt8], bits: Int, what: String)] = [
        ([0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01], 48, "a local-use NAT64 address (64:ff9b:1::/48)"),
        ([0x01, 0x00, 0, 0, 0, 0, 0, 0], 64, "a discard-only address (100::/64)"),
        ([0x20, 0x01, 0x00, 0x00], 32, "a Teredo address (2001::/32)"),
        ([0x20, 0x01, 0x00, 0x02, 0x00, 0x00], 48, "a benchmarking address (2001:2::/48)"),
        ([0x20, 0x01, 0x00, 0x10], 28, "an ORCHID address (2001:10::/28)"),
        ([0x20, 0x01, 0x00, 0x20], 28, "an ORCHIDv2 address (2001:20::/28)"),
        ([0x20, 0x01, 0x0D, 0xB8], 32, "a documentation address (2001:db8::/32)"),
        ([0x3F, 0xFF, 0x00], 20, "a documentation address (3fff::/20)"),
        ([0xFC], 7, "a unique local (private) address (fc00::/7)"),
        ([0xFE, 0x80], 10, "a link-local address (fe80::/10)"),
        ([0xFE, 0xC0], 10, "a site-local address (fec0::/10)"),
        ([0xFF], 8, "a multicast address (ff00::/8)"),
    ]

    private static func ipv6Refusal(_ bytes: [UInt8]) -> String? {
        let first96Zero = bytes[0..<12].allSatisfy { $0 == 0 }
        if first96Zero && bytes[12..<15].allSatisfy({ $0 == 0 }) && bytes[15] <= 1 {
            return bytes[15] == 0 ? "the unspecified address (::)" : "the loopback address (::1)"
        }
        let v4 = Array(bytes[12..<16])
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return ipv4Refusal(v4).map { "\($0), as an IPv4-mapped IPv6 address (::ffff:0:0/96)" }
        }
        if first96Zero { return "an IPv4-compatible IPv6 address (::/96, deprecated)" }
        if bytes[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] {
            return ipv4Refusal(v4).map { "\($0), behind the NAT64 prefix 64:ff9b::/96" }
        }
        if bytes[0] == 0x20 && bytes[1] == 0x02 {
            return ipv4Refusal(Array(bytes[2..<6])).map { "\($0), inside a 6to4 address (2002::/16)" }
        }
        for block in ipv6Blocks where matches(bytes, block.prefix, bits: block.bits) { return block.what }
        if bytes[0] & 0xE0 != 0x20 { return "not a global unicast address (outside 2000::/3)" }
        return nil
    }

    private static func matches(_ bytes: [UInt8], _ prefix: [UInt8], bits: Int) -> Bool {
        var remaining = bits
        for (index, byte) in prefix.enumerated() where remaining > 0 {
            let take = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if bytes[index] & mask != byte & mask { return false }
            remaining -= take
        }
        return true
    }
}
