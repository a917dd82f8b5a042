import Crypto
import Foundation
import MediaStore
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// The server key that signs payload URLs (docs/api.md#alert-pushes-and-payload-urls): 32 random bytes kept in
/// `<data>/payload.key` (mode 0600, created on first use), or given by `RICHPUSH_PAYLOAD_KEY`.
///
/// A key file is re-read when it changes, so `richpush keys rotate` takes effect in running
/// servers within the time they take to look (`reloadIfChanged`).
public final class PayloadKey: Sendable {
    private struct Loaded {
        var key: SymmetricKey
        var stamp: [Int]?
        /// HMAC-SHA-256 with this key, fed the payload URLs' domain label once: each signature
        /// or check copies it (a fetch storm checks thousands a second on the event loop).
        var keyed: PrefixedHMAC

        init(key: SymmetricKey, stamp: [Int]?) {
            self.key = key
            self.stamp = stamp
            keyed = PrefixedHMAC(key: key, prefix: PayloadLinks.domain)
        }
    }
    private let path: String?
    private let settings: SettingsStore?
    private let loaded: NIOLockedValueBox<Loaded>

    /// A fixed key (from the environment): at least 32 bytes of text.
    public init(secret: String) throws {
        guard secret.utf8.count >= 32 else {
            throw CoreError(.invalid, "RICHPUSH_PAYLOAD_KEY must be at least 32 characters (e.g. `openssl rand -hex 32`)")
        }
        path = nil
        settings = nil
        loaded = NIOLockedValueBox(Loaded(key: SymmetricKey(data: SHA256.hash(data: Data(secret.utf8))), stamp: nil))
    }

    /// The key kept in the database's settings (`payloadKey`), created when missing: every
    /// node on a shared database signs with the same key.
    public init(settings: SettingsStore) async throws {
        self.path = nil
        self.settings = settings
        try await settings.setIfMissing(Self.settingsKey, Self.newKeyHex())
        loaded = NIOLockedValueBox(try await Self.read(settings))
    }

    /// The key file of `directory`, created when missing.
    public init(directory: DataDirectory) throws {
        let path = Self.path(directory)
        self.path = path
        self.settings = nil
        try Self.createIfMissing(path)
        loaded = NIOLockedValueBox(try Self.read(path))
    }

    /// The key from `RICHPUSH_PAYLOAD_KEY` (or the file `RICHPUSH_PAYLOAD_KEY_FILE` names) when
    /// set, else `directory`'s key file.
    public static func configured(directory: DataDirectory, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PayloadKey {
        if let secret = try SecretEnvironment.value("RICHPUSH_PAYLOAD_KEY", in: environment) { return try PayloadKey(secret: secret) }
        return try PayloadKey(directory: directory)
    }

    /// The current key.
    public var key: SymmetricKey { loaded.withLockedValue { $0.key } }

    /// HMAC-SHA-256 keyed with the current key, the domain label already fed to it.
    var keyedMAC: PrefixedHMAC { loaded.withLockedValue { $0.keyed } }

    /// Re-reads the key file when it was replaced; returns whether the key changed.
    @discardableResult
    public func reloadIfChanged() async throws -> Bool {
        if let settings {
            let fresh = try await Self.read(settings)
            return loaded.withLockedValue { loaded in
                guard loaded.stamp != fresh.stamp else { return false }
                loaded = fresh
                return true
            }
        }
        guard let path else { return false }
        let stamp = Self.stamp(path)
        guard stamp != loaded.withLockedValue({ $0.stamp }) else { return false }
        let fresh = try Self.read(path)
        loaded.withLockedValue { $0 = fresh }
        return true
    }

    /// Replaces the key file of `directory` with a new random key: every URL signed before stops working.
    public static func rotate(directory: DataDirectory) throws {
        try directory.prepare()
        let path = Self.path(directory)
        let tmp = "\(directory.tmpPath)/\(getpid()).payload-key"
        try writeNewKey(tmp)
        guard Glibc.rename(tmp, path) == 0 else { throw CoreError(.invalid, "cannot replace \(path): \(String(cString: strerror(errno)))") }
        syncDirectory(directory.root.path)
    }

    /// Replaces the database's key with a new random key: every URL signed before stops working.
    public static func rotate(settings: SettingsStore) async throws {
        try await settings.set(settingsKey, newKeyHex(), notify: .users)
    }

    static let settingsKey = "payloadKey"

    /// The key file of `directory` as its 64 hex digits (for copying it to another store).
    static func storedHex(directory: DataDirectory) throws -> String {
        try read(path(directory)).key.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    private static func read(_ settings: SettingsStore) async throws -> Loaded {
        guard let hex = try await settings.value(settingsKey), hex.count == 64, let bytes = hexBytes(hex) else {
            throw CoreError(.invalid, "the database's payload key is missing or malformed; `richpush keys rotate` writes a new one")
        }
        // The stamp tells one key from another without keeping it twice.
        return Loaded(key: SymmetricKey(data: bytes), stamp: Array(SHA256.hash(data: bytes)).prefix(8).map(Int.init))
    }

    private static func newKeyHex() -> String {
        var random = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &random)) }.joined()
    }

    static func path(_ directory: DataDirectory) -> String { directory.root.appendingPathComponent("payload.key").path }

    private static func createIfMissing(_ path: String) throws {
        if access(path, F_OK) == 0 { return }
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let tmp = "\(path).\(getpid()).new"
        try writeNewKey(tmp)
        defer { unlink(tmp) }
        // link() fails when another process created the key first: theirs is kept.
        if link(tmp, path) != 0 && errno != EEXIST {
            throw CoreError(.invalid, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        syncDirectory(directory)
    }

    private static func writeNewKey(_ path: String) throws {
        let hex = newKeyHex() + "\n"
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CoreError(.invalid, "cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array(hex.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            unlink(path)
            throw CoreError(.invalid, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    private static func read(_ path: String) throws -> Loaded {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CoreError(.invalid, "cannot read the payload key \(path)")
        }
        let hex = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard hex.count == 64, let bytes = hexBytes(hex) else {
            throw CoreError(.invalid, "\(path) is not a payload key (64 hex digits); `richpush keys rotate` writes a new one")
        }
        return Loaded(key: SymmetricKey(data: bytes), stamp: stamp(path))
    }

    private static func stamp(_ path: String) -> [Int]? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return [Int(st.st_ino), Int(st.st_size), Int(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec)]
    }

    private static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    private static func hexBytes(_ hex: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = hex.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let h = hexValue(high), let l = hexValue(low) else { return nil }
            bytes.append(h << 4 | l)
        }
        return bytes
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        case 0x41...0x46: c - 0x41 + 10
        default: nil
        }
    }
}

/// Capability URLs for payloads, `<public url>/p/<token>` (docs/api.md#alert-pushes-and-payload-urls).
///
/// The token is base64url of the notification id (8 bytes), the expiry (8 bytes, seconds), the
/// payload's SHA-256 (32 bytes) and the first 16 bytes of HMAC-SHA-256 over a domain label and
/// those three. It needs no credentials and names one notification, and so its one recipient,
/// and that notification's image. It stops working when it expires or the key changes. Because
/// it carries everything needed to answer, a server can check it and serve the image from
/// memory without reading the database.
public struct PayloadLinks: Sendable {
    /// The signing key.
    public let key: PayloadKey
    /// How long a URL works, in seconds.
    public let lifetime: TimeInterval
    private let base: @Sendable () -> String

    /// Creates the signer for URLs under `baseURL`.
    public init(key: PayloadKey, baseURL: String, lifetime: TimeInterval) {
        let trimmed = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.init(key: key, lifetime: lifetime, baseURL: { trimmed })
    }

    /// Creates the signer with a base URL known only later (a server on a port picked at start).
    public init(key: PayloadKey, lifetime: TimeInterval, baseURL: @escaping @Sendable () -> String) {
        self.key = key
        self.lifetime = lifetime
        self.base = baseURL
    }

    /// The base URL devices reach the server at, without a trailing slash.
    public var baseURL: String { base() }

    /// The URL of notification `id`'s payload.
    public func url(notification id: Int64, payload: MediaID, now: Date = Date()) -> String {
        signer(payload: payload, now: now).url(notification: id)
    }

    /// The token part of a URL.
    public func token(notification id: Int64, payload: MediaID, expires: Int64) -> String {
        Signer(prefix: "", mac: key.keyedMAC, digest: Array(payload.digestBytes), expires: expires).url(notification: id)
    }

    /// A signer of the URLs of `payload`'s notifications made at `now`: the base URL, the key and
    /// the image's digest looked up once (a campaign's queueing signs a URL per recipient).
    public func signer(payload: MediaID, now: Date) -> Signer {
        Signer(prefix: baseURL + "/p/", mac: key.keyedMAC, digest: Array(payload.digestBytes),
               expires: Int64(now.timeIntervalSince1970 + lifetime))
    }

    /// Signs the payload URLs of one image's notifications, all with one expiry: each URL is
    /// made in one buffer, without the arrays and interpolation of a URL made alone.
    public struct Signer: Sendable {
        let prefix: String
        let mac: PrefixedHMAC
        /// The image's SHA-256 (32 bytes).
        let digest: [UInt8]
        let expires: Int64

        /// The URL of notification `id`'s payload.
        public func url(notification id: Int64) -> String {
            // The token's 64 bytes: the id, the expiry, the digest, and 16 bytes of the MAC of those 48.
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { token in
                for i in 0..<8 {
                    token[i] = UInt8(truncatingIfNeeded: id >> ((7 - i) * 8))
                    token[8 + i] = UInt8(truncatingIfNeeded: expires >> ((7 - i) * 8))
                }
                for i in 0..<32 { token[16 + i] = digest[i] }
                mac.code(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: token[..<48]))).withUnsafeBytes { code in
                    for i in 0..<16 { token[48 + i] = code[i] }
                }
                var prefix = prefix
                return prefix.withUTF8 { head in
                    String(unsafeUninitializedCapacity: head.count + PayloadLinks.tokenLength) { out in
                        _ = out.initialize(fromContentsOf: head)
                        return head.count + Base64URL.encode(UnsafeBufferPointer(token), into: UnsafeMutableBufferPointer(rebasing: out[head.count...]))
                    }
                }
            }
        }
    }

    /// A token's claims before its signature is checked.
    public struct Claims: Sendable, Equatable {
        public var notification: Int64
        public var expires: Int64
        public var payload: MediaID
        fileprivate var mac: [UInt8]
        /// The signed bytes as they came in the token.
        fileprivate var signed: [UInt8]
    }

    /// Characters in a token.
    public static let tokenLength = 86

    /// Splits a token; nil when it cannot be one (the caller answers 404).
    public static func claims(_ token: some StringProtocol) -> Claims? {
        claims(String(token))
    }

    /// Splits a token given as part of a request's URI (the fast path's case). Concrete, as the
    /// `String` one, so that a call from another module is not a generic one.
    public static func claims(_ token: Substring) -> Claims? {
        var token = token
        return token.withUTF8 { claims(utf8: $0) }
    }

    /// Splits a token.
    public static func claims(_ token: String) -> Claims? {
        var token = token
        return token.withUTF8 { claims(utf8: $0) }
    }

    private static func claims(utf8 token: UnsafeBufferPointer<UInt8>) -> Claims? {
        guard token.count == tokenLength,
              // One spelling per token: the last character's unused bits must be zero.
              let value = Base64URL.value(of: token[tokenLength - 1]), value & 0x0F == 0,
              let bytes = Base64URL.decodeBytes(utf8: token), bytes.count == 64 else { return nil }
        let id = bytes[0..<8].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        let expires = bytes[8..<16].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        guard id > 0 else { return nil }
        return Claims(notification: id, expires: expires, payload: MediaID(digestBytes: bytes[16..<48]), mac: Array(bytes[48...]),
                      signed: Array(bytes[..<48]))
    }

    /// True when `claims` were signed with the current key (compared in constant time).
    public func isAuthentic(_ claims: Claims) -> Bool {
        let expected = mac(claims.signed)
        return claims.mac.count == expected.count && zip(expected, claims.mac).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    static let domain = Array("richpush-payload-v2\0".utf8)

    private func mac(_ signed: [UInt8]) -> [UInt8] {
        let code = signed.withUnsafeBytes { key.keyedMAC.code($0) }
        return code.withUnsafeBytes { Array($0.prefix(16)) }
    }
}
