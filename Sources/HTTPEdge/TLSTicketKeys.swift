import CNIOBoringSSL
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import ServiceLifecycle

/// `serve --tls-ticket-keys FILE` (issue #51): the keys TLS session tickets are encrypted with,
/// shared by every node, so that a session one node made resumes on any other (TLS 1.3 PSK
/// resumption and TLS 1.2 tickets). Without them BoringSSL makes a random key per process, and a
/// phone that meets another node behind the same name does a full handshake.
///
/// The file holds one key a line, the base64 of 80 random bytes laid out as nginx's
/// `ssl_session_ticket_key`: a 16-byte name (in clear in every ticket), a 32-byte HMAC-SHA256 key
/// and a 32-byte AES-256-CBC key; blank lines and `#` comments are skipped. The first key
/// encrypts new tickets and every key opens them: a ticket under a later key is accepted and
/// renewed under the first, and one under a key no longer in the file gets a full handshake.
///
/// swift-nio-ssl has no API for ticket keys: `install(on:)` reaches the context's `SSL_CTX` and
/// sets BoringSSL's ticket key callback, which finds the keys in the context's ex_data.
public final class TLSTicketKeys: Sendable {
    /// Bytes of one key: name, HMAC key, AES key.
    static let keyLength = 80
    /// What a key line is and how to make one, for the errors.
    static let howToMake = "a key is 80 random bytes in base64 on one line: openssl rand 80 | base64 -w0"

    /// The file, as given.
    public let path: String
    /// The keys in use, `keyLength` bytes each, the encrypting one first. Read for every ticket
    /// made or opened: taking the array is a retain, never a copy or an allocation.
    private let material: NIOLockedValueBox<[UInt8]>
    /// The file as it was when last read; nil when it could not be looked at.
    private let stamp: NIOLockedValueBox<FileStamp?>

    /// The keys of the file at `path`; throws `TLSTicketKeysError` naming the file, the line
    /// and what is wrong with it.
    public init(path: String) throws {
        self.path = path
        // Before the read: a change made while it reads is seen by the next look.
        let stamp = FileStamp(path)
        let keys = try TLSTicketKeys.read(path)
        material = NIOLockedValueBox(keys)
        self.stamp = NIOLockedValueBox(stamp)
    }

    /// How many keys are in use.
    public var count: Int { material.withLockedValue { $0.count / Self.keyLength } }

    /// The file, the number of keys and the encrypting key's name (public: every ticket
    /// carries it), for the log: nodes that log the same name share their tickets.
    public var metadata: Logger.Metadata {
        let (count, name) = material.withLockedValue { keys in
            (keys.count / Self.keyLength, keys.prefix(16).map { String(format: "%02x", $0) }.joined())
        }
        return ["file": .string(path), "keys": "\(count)", "encrypting": .string(name)]
    }

    /// The keys of the file at `path`, one after the other.
    static func read(_ path: String) throws -> [UInt8] {
        var directory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &directory) else {
            throw TLSTicketKeysError("cannot read \(path): the file does not exist")
        }
        guard !directory.boolValue else { throw TLSTicketKeysError("cannot read \(path): it is a directory, not a file") }
        guard let data = FileManager.default.contents(atPath: path) else { throw TLSTicketKeysError("cannot read \(path): permission denied") }
        return try parse(String(decoding: data, as: UTF8.self), path: path)
    }

    /// The keys of `text`, the file `path` holds.
    static func parse(_ text: String, path: String) throws -> [UInt8] {
        var keys: [UInt8] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let key = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if key.isEmpty || key.hasPrefix("#") { continue }
            guard let bytes = Data(base64Encoded: key) else {
                throw TLSTicketKeysError("\(path) line \(index + 1): not base64 (\(howToMake))")
            }
            guard bytes.count == keyLength else {
                // openssl's own base64 (`openssl rand -base64 80`) breaks lines at 64 characters.
                let wrapped = bytes.count == 48 ? ", a key broken over two lines by openssl's base64" : ""
                throw TLSTicketKeysError("\(path) line \(index + 1): \(bytes.count) bytes instead of \(keyLength)\(wrapped) (\(howToMake))")
            }
            keys.append(contentsOf: bytes)
        }
        guard !keys.isEmpty else { throw TLSTicketKeysError("\(path) holds no key (\(howToMake))") }
        return keys
    }

    /// What a look at the file found.
    public enum Reload: Equatable, Sendable {
        /// The file is as it was: nothing was read.
        case unchanged
        /// The file changed and its keys are in use.
        case reloaded
        /// The file changed and cannot be read or holds a bad line (said here): the keys in use stay.
        case failed(String)
    }

    /// Reads the file again if its modification time, size or inode changed since it was last
    /// read (a file renamed over it is another inode; symbolic links are followed, as a
    /// Kubernetes secret's are swapped).
    public func reloadIfChanged() -> Reload {
        let now = FileStamp(path)
        let before = stamp.withLockedValue { stamp in
            defer { stamp = now }
            return stamp
        }
        guard now != before else { return .unchanged }
        do {
            let keys = try Self.read(path)
            material.withLockedValue { $0 = keys }
            return .reloaded
        } catch {
            return .failed("\(error)")
        }
    }

    /// The ex_data slot of an `SSL_CTX` that holds its keys, retained, and released when the
    /// context is freed (a connection holds its context until it is done).
    static let exDataIndex: Int32 = SSL_CTX_get_ex_new_index(0, nil, nil, nil, { _, pointer, _, _, _, _ in
        if let pointer { Unmanaged<TLSTicketKeys>.fromOpaque(pointer).release() }
    })

    /// Makes `context` encrypt the session tickets it issues with the first key, and open them
    /// with any; before `context` serves its first connection.
    func install(on context: NIOSSLContext) throws {
        guard let sslContext = Mirror(reflecting: context).children.first(where: { $0.label == "sslContext" })?.value as? OpaquePointer else {
            throw TLSTicketKeysError("--tls-ticket-keys is not available with this swift-nio-ssl: its NIOSSLContext no longer keeps the BoringSSL context in sslContext")
        }
        let index = Self.exDataIndex
        guard index >= 0 else { throw TLSTicketKeysError("--tls-ticket-keys: BoringSSL has no ex_data slot left for the keys") }
        let retained = Unmanaged.passRetained(self).toOpaque()
        guard SSL_CTX_set_ex_data(sslContext, index, retained) == 1 else {
            Unmanaged<TLSTicketKeys>.fromOpaque(retained).release()
            throw TLSTicketKeysError("--tls-ticket-keys: BoringSSL did not take the keys (SSL_CTX_set_ex_data)")
        }
        // Once per ticket made or opened, on the connection's event loop: no allocation, and
        // never an error to the client (0 makes no ticket, or a full handshake).
        _ = SSL_CTX_set_tlsext_ticket_key_cb(sslContext, { ssl, keyName, iv, cipher, hmac, encrypt in
            guard let ssl, let keyName, let iv, let cipher, let hmac, let owner = SSL_get_SSL_CTX(ssl),
                  let stored = SSL_CTX_get_ex_data(owner, TLSTicketKeys.exDataIndex) else { return 0 }
            let material = Unmanaged<TLSTicketKeys>.fromOpaque(stored).takeUnretainedValue().material.withLockedValue { $0 }
            return material.withUnsafeBufferPointer { keys -> Int32 in
                guard let first = keys.baseAddress, keys.count >= TLSTicketKeys.keyLength else { return 0 }
                if encrypt != 0 {
                    // The first key's name, a fresh IV (AES-CBC's 16 bytes), the first key's keys.
                    keyName.update(from: first, count: 16)
                    guard RAND_bytes(iv, 16) == 1,
                          EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nil, first + 48, iv) == 1,
                          HMAC_Init_ex(hmac, first + 16, 32, EVP_sha256(), nil) == 1 else { return 0 }
                    return 1
                }
                for offset in stride(from: 0, to: keys.count, by: TLSTicketKeys.keyLength) where CRYPTO_memcmp(first + offset, keyName, 16) == 0 {
                    let key = first + offset
                    guard HMAC_Init_ex(hmac, key + 16, 32, EVP_sha256(), nil) == 1,
                          EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nil, key + 48, iv) == 1 else { return 0 }
                    // 2: a key after the first opened it, so BoringSSL issues a new ticket under the first.
                    return offset == 0 ? 1 : 2
                }
                return 0
            }
        })
    }
}

/// Looks at the `--tls-ticket-keys` file every `interval` (10 s) and takes its keys when it
/// changed; a file that cannot be read or holds a bad line is logged with what is wrong, and the
/// keys in use stay.
public struct TLSTicketKeysReloader: Service {
    let keys: TLSTicketKeys
    let interval: Duration
    let logger: Logger

    /// Looks at `keys`' file every `interval`, logging to `logger`.
    public init(keys: TLSTicketKeys, interval: Duration, logger: Logger) {
        self.keys = keys
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        // The pause ends at a graceful shutdown too.
        while (try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }) != nil && !Task.isShuttingDownGracefully {
            switch keys.reloadIfChanged() {
            case .unchanged:
                break
            case .reloaded:
                logger.notice("reloaded the TLS session ticket keys", metadata: keys.metadata)
            case .failed(let problem):
                logger.error("cannot reload the TLS session ticket keys: the keys in use stay",
                             metadata: ["error": .string(problem), "file": .string(keys.path), "keys": "\(keys.count)"])
            }
        }
    }
}

/// `--tls-ticket-keys`' file cannot be read, or a line of it is not a key.
public struct TLSTicketKeysError: Error, CustomStringConvertible {
    /// What is wrong, naming the file and the line.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// What tells that a file changed: its modification time, size and inode, of the file a
/// symbolic link leads to.
struct FileStamp: Equatable, Sendable {
    let modified: Date
    let size: UInt64
    let inode: UInt64

    /// The file at `path` now; nil when it cannot be looked at.
    init?(_ path: String) {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: resolved),
              let modified = attributes[.modificationDate] as? Date,
              let size = (attributes[.size] as? NSNumber)?.uint64Value else { return nil }
        self.modified = modified
        self.size = size
        inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }
}
