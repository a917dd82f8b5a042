import HummingbirdCore
import HTTPTypes
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address. IPv4 addresses are kept as IPv4-mapped IPv6 (`::ffff:a.b.c.d`), so
/// `10.0.0.1` and `::ffff:10.0.0.1` (how a dual-stack socket names an IPv4 peer) are one address.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// The first and last 64 of the 128 bits.
    public let high: UInt64, low: UInt64

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses `a.b.c.d` or an IPv6 address in any of its spellings; nil for anything else
    /// (no zone ids, ports, brackets or white space).
    public init?(_ text: some StringProtocol) {
        let string = String(text)
        guard !string.isEmpty, string.utf8.count <= 64 else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, string, &v4) == 1 {
            self.init(high: 0, low: 0xffff_0000_0000 | UInt64(UInt32(bigEndian: v4.s_addr)))
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, string, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        guard bytes.count == 16 else { return nil }
        self.init(high: bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }, low: bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }

    /// Parses an `X-Forwarded-For` entry: an address, `[IPv6]`, `[IPv6]:port` or `IPv4:port`
    /// (some proxies add the port).
    init?(forwarded entry: Substring) {
        if entry.hasPrefix("[") {
            guard let close = entry.firstIndex(of: "]") else { return nil }
            let rest = entry[entry.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            self.init(entry[entry.index(after: entry.startIndex)..<close])
        } else if entry.utf8.contains(UInt8(ascii: ".")), let colon = entry.firstIndex(of: ":"), !entry[entry.index(after: colon)...].utf8.contains(UInt8(ascii: ":")) {
            guard entry[entry.index(after: colon)...].allSatisfy(\.isNumber) else { return nil }
            self.init(entry[..<colon])
        } else {
            self.init(entry)
        }
    }

    /// The IPv4 address, when this is one.
    public var ipv4: UInt32? {
        high == 0 && low >> 32 == 0xffff ? UInt32(truncatingIfNeeded: low) : nil
    }

    /// `a.b.c.d` for IPv4, else the RFC 5952 form (lower case, the longest run of zero groups as `::`).
    public var description: String {
        if let v4 = ipv4 { return "\(v4 >> 24).\(v4 >> 16 & 255).\(v4 >> 8 & 255).\(v4 & 255)" }
        let groups = (0..<8).map { i -> UInt16 in
            let word = i < 4 ? high : low
            return UInt16(truncatingIfNeeded: word >> (48 - 16 * UInt64(i % 4)))
        }
        // The longest run of two or more zero groups (the first of equal runs) becomes `::`.
        var (bestStart, bestLength, start, length) = (-1, 0, 0, 0)
        for (i, group) in groups.enumerated() {
            if group == 0 {
                if length == 0 { start = i }
                length += 1
                if length > bestLength { (bestStart, bestLength) = (start, length) }
            } else {
                length = 0
            }
        }
        let hex = groups.map { String($0, radix: 16) }
        guard bestLength >= 2 else { return hex.joined(separator: ":") }
        let head = hex[..<bestStart].joined(separator: ":")
        let tail = hex[(bestStart + bestLength)...].joined(separator: ":")
        return "\(head)::\(tail)"
    }
}

/// A block of addresses, `10.0.0.0/8` or `fd00::/8`; a bare address is a block of one.
/// IPv4 blocks also hold the IPv4-mapped IPv6 spellings of their addresses.
public struct CIDR: Sendable, Hashable, CustomStringConvertible {
    /// The first address of the block.
    let network: IPAddress
    /// Leading bits that are fixed, counted over 128 bits (an IPv4 `/8` is 104).
    let prefix: Int

    /// Parses `ADDRESS/BITS` or `ADDRESS`; nil when either part is malformed (BITS up to 32 for
    /// IPv4, 128 for IPv6, digits only). Bits past the prefix are ignored, as nginx does.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        let v4Text = parts[0].utf8.contains(UInt8(ascii: ".")) && !parts[0].utf8.contains(UInt8(ascii: ":"))
        let width = v4Text ? 32 : 128
        var bits = width
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].count <= 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int(parts[1]), value <= width else { return nil }
            bits = value
        }
        prefix = bits + (128 - width)
        network = IPAddress(high: Self.masked(address.high, bits: prefix), low: Self.masked(address.low, bits: prefix - 64))
    }

    /// Whether `address` (an IPv4 or IPv6 address) is in the block; false when it is not an address.
    public func contains(_ address: String) -> Bool {
        IPAddress(address).map { contains($0) } ?? false
    }

    /// Whether `address` is in the block.
    func contains(_ address: IPAddress) -> Bool {
        Self.masked(address.high, bits: prefix) == network.high && Self.masked(address.low, bits: prefix - 64) == network.low
    }

    /// The first `bits` bits of `word` (all for 64 or more, none for 0 or less).
    private static func masked(_ word: UInt64, bits: Int) -> UInt64 {
        if bits <= 0 { return 0 }
        if bits >= 64 { return word }
        return word & ~(UInt64.max >> UInt64(bits))
    }

    /// `network/bits`, in the family it was written in.
    public var description: String {
        network.ipv4 != nil && prefix >= 96 ? "\(network)/\(prefix - 96)" : "\(network)/\(prefix)"
    }
}

/// Who a request comes from (`serve --trusted-proxy`): the TCP peer, unless the peer is a
/// trusted proxy; then the right-most `X-Forwarded-For` address that is not itself a trusted
/// proxy. Entries left of it are whatever the client wrote, so they are never believed.
///
/// Every use of the client's address goes through here: the sign-in throttle, the access log
/// and the console's `Secure` cookie (`X-Forwarded-Proto`, believed from trusted proxies only).
public struct ClientAddressResolver: Sendable {
    /// The blocks whose addresses are proxies that tell the truth about their clients.
    public let trustedProxies: [CIDR]

    /// `X-Forwarded-For`.
    public static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
    /// `X-Forwarded-Proto`.
    public static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!

    /// A resolver trusting `trustedProxies` (none: the TCP peer is always the client).
    public init(trustedProxies: [CIDR]) {
        self.trustedProxies = trustedProxies
    }

    /// Whether `address` (as `SocketAddress.ipAddress` writes it) is a trusted proxy.
    public func isTrusted(_ address: String?) -> Bool {
        guard !trustedProxies.isEmpty, let address, let parsed = IPAddress(address) else { return false }
        return isTrusted(parsed)
    }

    private func isTrusted(_ address: IPAddress) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    /// The client's address, given the TCP peer's and the `X-Forwarded-For` field values in
    /// the order they came. Walking the addresses right to left from a trusted peer, the first
    /// that is not a trusted proxy is the client; a malformed entry stops the walk at the last
    /// trusted hop (it cannot be told from a forgery).
    public func client(peer: String?, forwardedFor values: [String]) -> String? {
        guard !values.isEmpty, isTrusted(peer) else { return peer }
        var client = peer
        for value in values.reversed() {
            for entry in value.split(separator: ",").reversed() {
                let trimmed = entry.trimmingWhitespace
                if trimmed.isEmpty { continue }
                guard let address = IPAddress(forwarded: trimmed) else { return client }
                client = address.description
                if !isTrusted(address) { return client }
            }
        }
        return client
    }

    /// The scheme a trusted proxy says the client used (`X-Forwarded-Proto`, lower case; of a
    /// list, the first, nearest the client); nil when the peer is not a trusted proxy.
    public func forwardedProto(peer: String?, values: [String]) -> String? {
        guard let first = values.first, isTrusted(peer) else { return nil }
        let scheme = first.split(separator: ",", omittingEmptySubsequences: false).first?.trimmingWhitespace.lowercased()
        return scheme?.isEmpty == false ? scheme : nil
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingWhitespace: Substring {
        let start = firstIndex { $0 != " " && $0 != "\t" } ?? endIndex
        let end = lastIndex { $0 != " " && $0 != "\t" }.map { index(after: $0) } ?? start
        return self[start..<Swift.max(start, end)]
    }
}

