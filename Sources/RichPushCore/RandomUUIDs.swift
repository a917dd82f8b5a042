#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Random (version 4) UUIDs, many from one draw of the system's random generator.
///
/// Foundation's `UUID()` on Linux opens `/dev/urandom`, reads 16 bytes and closes it, each time:
/// three system calls and a path look-up for every push queued (about 3% of `serve`'s CPU in a
/// campaign, issue #51). Here the device stays open, and a batch's ids take one read of it.
public enum RandomUUIDs {
    /// `count` new UUIDs, spelled as `UUID().uuidString` spells them.
    public static func strings(_ count: Int) -> [String] {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count * 16)
        fill(&bytes)
        return (0..<count).map { index in
            let b = index * 16
            // Version 4 (random) in the high nibble of byte 6, RFC 9562's variant in byte 8.
            let uuid: uuid_t = (bytes[b], bytes[b + 1], bytes[b + 2], bytes[b + 3], bytes[b + 4], bytes[b + 5],
                                (bytes[b + 6] & 0x0F) | 0x40, bytes[b + 7], (bytes[b + 8] & 0x3F) | 0x80, bytes[b + 9],
                                bytes[b + 10], bytes[b + 11], bytes[b + 12], bytes[b + 13], bytes[b + 14], bytes[b + 15])
            return UUID(uuid: uuid).uuidString
        }
    }

    /// One new UUID, spelled as `UUID().uuidString` spells it.
    public static func string() -> String { strings(1)[0] }

    /// `/dev/urandom`, opened once for the process (-1 when it cannot be).
    private static let urandom: Int32 = open("/dev/urandom", O_RDONLY | O_CLOEXEC)

    /// Fills `bytes` from the system's cryptographic random generator: one read of `/dev/urandom`
    /// (kept open), or the standard library's generator where that fails.
    private static func fill(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            if urandom >= 0 {
                while offset < buffer.count {
                    let got = read(urandom, base + offset, buffer.count - offset)
                    if got > 0 {
                        offset += got
                    } else if got < 0 && errno == EINTR {
                        continue
                    } else {
                        break
                    }
                }
            }
            var generator = SystemRandomNumberGenerator()
            while offset < buffer.count {
                buffer[offset] = UInt8.random(in: .min ... .max, using: &generator)
                offset += 1
            }
        }
    }
}
