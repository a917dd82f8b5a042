import Crypto
import Foundation

/// A media id: the SHA-256 of the stored bytes as 64 lowercase hex digits.
///
/// Only validated values exist, so a `MediaID` is safe to use in a file path.
public struct MediaID: Sendable, Hashable, Codable, CustomStringConvertible, Comparable {
    /// The 64 lowercase hex digits.
    public let hex: String

    /// Validates `string` as 64 hex digits (either case); nil otherwise.
    ///
    /// Not generic on purpose: it runs for every media request and must stay specialised.
    public init?(_ string: String) {
        guard string.utf8.count == 64 else { return nil }
        // Ids in URLs and file names are lowercase already: keep the string as it is.
        if string.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) {
            self.hex = string
            return
        }
        var lower = [UInt8]()
        lower.reserveCapacity(64)
        for c in string.utf8 {
            guard Self.isHex(c) else { return nil }
            lower.append(c >= 0x41 && c <= 0x46 ? c + 0x20 : c)
        }
        self.hex = String(decoding: lower, as: UTF8.self)
    }

    /// Takes `bytes` as an id when they are exactly 64 lowercase hex digits; nil otherwise
    /// (uppercase digits too: `init?(_:)` takes those). A request's path is checked here in
    /// place, without a string made for the check.
    public init?(lowercaseHex bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 64 else { return nil }
        for byte in bytes where !((byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66)) { return nil }
        self.hex = String(decoding: bytes, as: UTF8.self)
    }

    /// Validates a substring (a path component, a file name) as 64 hex digits.
    public init?(_ string: Substring) {
        self.init(String(string))
    }

    /// The id of `bytes`.
    public init(hashing bytes: some DataProtocol) {
        self.init(digest: SHA256.hash(data: bytes))
    }

    /// The id of a finished digest.
    public init(digest: SHA256.Digest) {
        self.init(digestBytes: digest)
    }

    /// The id of 32 raw digest bytes.
    public init(digestBytes: some Sequence<UInt8>) {
        self.init(hexOf: digestBytes)
    }

    /// The id of 32 raw digest bytes in an array. (Concrete, as the slice's: from another
    /// module a generic call runs unspecialized, and a payload URL's check makes one per fetch.)
    public init(digestBytes: [UInt8]) {
        self.init(hexOf: digestBytes)
    }

    /// The id of 32 raw digest bytes in part of an array.
    public init(digestBytes: ArraySlice<UInt8>) {
        self.init(hexOf: digestBytes)
    }

    private init(hexOf digestBytes: some Sequence<UInt8>) {
        let table = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in digestBytes {
            out.append(table[Int(byte >> 4)])
            out.append(table[Int(byte & 0x0F)])
        }
        self.hex = String(decoding: out, as: UTF8.self)
    }

    public init(from decoder: any Decoder) throws {
        let string = try decoder.singleValueContainer().decode(String.self)
        guard let id = MediaID(string) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a 64-hex media id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    public var description: String { hex }

    /// The 32 digest bytes.
    /// (Read in place from the string's UTF-8: a payload URL signs them for every push of a campaign.)
    public var digestBytes: [UInt8] {
        @inline(__always) func nibble(_ c: UInt8) -> UInt8 { c <= 0x39 ? c &- 0x30 : c &- 0x61 &+ 10 }
        var hex = self.hex
        return hex.withUTF8 { digits in
            [UInt8](unsafeUninitializedCapacity: digits.count / 2) { bytes, count in
                for i in 0..<(digits.count / 2) { bytes[i] = nibble(digits[2 * i]) << 4 | nibble(digits[2 * i + 1]) }
                count = digits.count / 2
            }
        }
    }

    public static func < (lhs: MediaID, rhs: MediaID) -> Bool { lhs.hex < rhs.hex }

    private static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
    }
}
