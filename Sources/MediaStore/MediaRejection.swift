/// Why an image was refused: one of the three classes of docs/configuration.md#the-media-store and a reason naming what was wrong.
public struct MediaRejection: Error, Sendable, Equatable, CustomStringConvertible {
    /// The rejection classes, spelled as they appear in CLI output and JSON.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// A recognised non-PNG/JPEG type, or not an image at all.
        case unsupported
        /// Bytes, pixels or a side over a limit.
        case tooLarge = "too_large"
        /// Everything else: truncated, damaged, or any decoder warning.
        case corrupt
    }

    /// The class of the rejection.
    public let kind: Kind
    /// One line a person can act on, e.g. `image/webp is not accepted; send PNG, JPEG or GIF`.
    public let reason: String

    /// Creates a rejection of `kind` with a one-line `reason`.
    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public var description: String { "\(kind.rawValue): \(reason)" }
}

/// An error of the store itself (I/O, database, bad identifiers), as opposed to a refused image.
public struct MediaStoreError: Error, Sendable, CustomStringConvertible {
    private enum Code: Sendable {
        case notFound, invalidName, io, inUse, nameTaken, encode, busy
    }

    private let code: Code
    /// What went wrong, in words a person can act on (an operator: it may name server paths).
    public let message: String
    /// The `errno` of a failed file-system call.
    public let errno: Int32?

    private init(_ code: Code, _ message: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    /// No media has this id or name.
    public static func notFound(_ key: String) -> Self { .init(.notFound, "no media with id or name '\(key)'") }
    /// The name cannot be used (empty, too long, control characters, or 64 hex).
    public static func invalidName(_ name: String, _ why: String) -> Self {
        .init(.invalidName, "invalid media name '\(name)': \(why)")
    }
    /// A file-system call failed.
    public static func io(_ what: String, path: String, errno: Int32) -> Self {
        .init(.io, "\(what) \(path): \(String(cString: strerror(errno)))", errno: errno)
    }
    /// The blob is still referenced and cannot be removed.
    public static func inUse(_ id: String, _ count: Int) -> Self {
        .init(.inUse, "media \(id) is used by \(count) notification(s); it cannot be removed")
    }

    /// The name already names other bytes (names are shared by every user: moving one is deliberate).
    public static func nameTaken(_ name: String, by id: String) -> Self {
        .init(.nameTaken, "media name '\(name)' already names \(id); remove it first (richpush media rm '\(name)') or choose another name")
    }

    /// An encoder refused the pixels.
    public static func encode(_ reason: String) -> Self { .init(.encode, "cannot encode the image: \(reason)") }

    /// Too many variants are being made at once; the caller may try again shortly.
    public static func busy(_ what: String) -> Self { .init(.busy, what) }

    /// True when a file-system call failed (the message names server paths: for the log).
    public var isIO: Bool { code == .io }
    /// True when a write failed because the disk (or the quota) is full.
    public var isOutOfSpace: Bool { errno == ENOSPC || errno == EDQUOT }
    /// True when the store refused work it has no room for now (try again shortly).
    public var isBusy: Bool { code == .busy }
    /// True when no media matched the id or name.
    public var isNotFound: Bool { code == .notFound }
    /// True when the name is taken by other bytes.
    public var isNameTaken: Bool { code == .nameTaken }
    /// True when the blob is referenced.
    public var isInUse: Bool { code == .inUse }

    public var description: String { message }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
