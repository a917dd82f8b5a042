#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// Random (version 4) UUIDs, many from one draw of the system's random generator.
///
/// Foundation's `UUID()` on Linux opens `/dev/urandom`, reads 16 bytes and closes it, each time:
/// three system calls and a path look-up for every push queued (about 5% of the database
/// threads' CPU in a campaign, issue #51). Here the device stays open, and a batch's ids take
/// one read of it.
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

    /// `/dev/urandom` as it was opened: its descriptor, and what it was then, so that a
    /// descriptor closed behind our back and reused for another file is never read as random.
    private struct Device {
        var descriptor: Int32 = -1
        var device: UInt64 = 0
        var inode: UInt64 = 0

        /// Whether `descriptor` is still the character device that was opened.
        var isIntact: Bool {
            var now = stat()
            return descriptor >= 0 && fstat(descriptor, &now) == 0 && (now.st_mode & S_IFMT) == S_IFCHR
                && UInt64(now.st_rdev) == device && UInt64(now.st_ino) == inode
        }

        /// Opens the device (on a descriptor above the standard three); false when it cannot be.
        mutating func reopen() -> Bool {
            var opened = openURandom()
            guard opened >= 0 else { return false }
            if opened < 3 { // a process started with a standard stream closed: stay clear of them
                let moved = fcntl(opened, F_DUPFD_CLOEXEC, 3)
                close(opened)
                guard moved >= 0 else { return false }
                opened = moved
            }
            var status = stat()
            guard fstat(opened, &status) == 0, (status.st_mode & S_IFMT) == S_IFCHR else {
                close(opened)
                return false
            }
            (descriptor, device, inode) = (opened, UInt64(status.st_rdev), UInt64(status.st_ino))
            return true
        }

        /// Fills `buffer` from the device; false (with the device forgotten) when it cannot.
        mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Bool {
            if !isIntact {
                descriptor = -1 // not closed: the number may be another file's by now
                guard reopen() else { return false }
            }
            var offset = 0
            while offset < buffer.count {
                let got = readBytes(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if got > 0 {
                    offset += got
                } else if got < 0 && errno == EINTR {
                    continue
                } else {
                    descriptor = -1
                    return false
                }
            }
            return true
        }
    }

    private static let device = Mutex(Device())

    private static func openURandom() -> Int32 { open("/dev/urandom", O_RDONLY | O_CLOEXEC) }

    private static func readBytes(_ descriptor: Int32, _ into: UnsafeMutableRawPointer, _ count: Int) -> Int { read(descriptor, into, count) }

    /// Fills `bytes` from the system's cryptographic random generator: one read of
    /// `/dev/urandom` (kept open, checked before each read), or the standard library's
    /// generator, eight bytes a call, where that fails.
    private static func fill(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            guard buffer.count > 0, !device.withLock({ $0.read(into: buffer) }) else { return }
            var generator = SystemRandomNumberGenerator()
            var offset = 0
            while offset < buffer.count {
                let word = generator.next()
                withUnsafeBytes(of: word) { wordBytes in
                    for byte in wordBytes where offset < buffer.count {
                        buffer[offset] = byte
                        offset += 1
                    }
                }
            }
        }
    }
}
