import Foundation

/// base64url without padding (RFC 4648 §5).
public enum Base64URL {
    /// Encodes bytes, in one pass (a campaign makes a payload URL per recipient: Foundation's
    /// base64 and three `replacingOccurrences` were 11% of queueing's CPU).
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let input = Array(bytes)
        let count = input.count / 3 * 4 + (input.count % 3 == 0 ? 0 : input.count % 3 + 1)
        guard count > 0 else { return "" }
        return input.withUnsafeBufferPointer { input in
            String(unsafeUninitializedCapacity: count) { encode(input, into: $0) }
        }
    }

    /// Encodes `input` into `output` (room for `input.count / 3 * 4` characters, and 2 or 3 more
    /// for a last partial group); returns the characters written. For a buffer made by the caller,
    /// as a payload URL's token is.
    public static func encode(_ input: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let count = input.count / 3 * 4 + (input.count % 3 == 0 ? 0 : input.count % 3 + 1)
        precondition(output.count >= count, "no room for \(count) characters")
        return alphabet.withUnsafeBufferPointer { alphabet in
            var o = 0
            for i in stride(from: 0, to: input.count, by: 3) {
                // Three bytes (zeros past the end) make four characters; the last group's are cut to `count`.
                let n = UInt32(input[i]) << 16 | UInt32(i + 1 < input.count ? input[i + 1] : 0) << 8
                    | UInt32(i + 2 < input.count ? input[i + 2] : 0)
                for shift in stride(from: 18, through: 0, by: -6) where o < count {
                    output[o] = alphabet[Int(n >> UInt32(shift) & 63)]
                    o += 1
                }
            }
            return count
        }
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The 6-bit value of one base64url character.
    public static func value(of c: UInt8) -> UInt8? {
        switch c {
        case 0x41...0x5A: c - 0x41
        case 0x61...0x7A: c - 0x61 + 26
        case 0x30...0x39: c - 0x30 + 52
        case 0x2D: 62
        case 0x5F: 63
        default: nil
        }
    }

    /// Decodes text; nil when it is not base64url.
    public static func decode(_ text: some StringProtocol) -> Data? {
        decodeBytes(text).map { Data($0) }
    }

    /// Decodes text without padding; nil when it is not base64url. (It runs for every payload
    /// URL the event loop answers: one pass, no intermediate strings.)
    public static func decodeBytes(_ text: some StringProtocol) -> [UInt8]? {
        // Over the bytes in place when the text is contiguous (a Substring of a request's URI is).
        if let decoded = text.utf8.withContiguousStorageIfAvailable({ decodeBytes(utf8: $0) }) { return decoded }
        return decodeBytes(utf8: text.utf8)
    }

    /// Decodes base64url text given as UTF-8 bytes.
    static func decodeBytes(utf8: some Collection<UInt8>) -> [UInt8]? {
        guard utf8.count % 4 != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for c in utf8 {
            guard let v = value(of: c) else { return nil }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        return out
    }
}
