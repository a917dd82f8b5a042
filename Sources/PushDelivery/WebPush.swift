import Crypto
import Foundation
import NIOConcurrencyHelpers
import RichPushCore

/// RFC 8291 message encryption for Web Push, in RFC 8188's `aes128gcm` content coding, one record.
///
/// Each message gets a fresh ECDH key pair and salt, so the cost is one P-256 key generation and
/// one ECDH per message: what one subscriber costs (see BENCHMARKS.md).
public enum WebPushEncryption {
    /// The record size written in the header: the push service's 4,096-byte limit.
    public static let recordSize = 4096
    /// What fits in one record (3,993 bytes).
    public static let maxPlaintext = PushContent.webPushMaxBytes

    /// Encrypts `plaintext` for `subscription`. The header carries `salt`, the record size and
    /// the sender's public key; the single record is the plaintext, the last-record delimiter 0x02,
    /// sealed with AES-128-GCM.
    public static func encrypt(_ plaintext: some Collection<UInt8>, for subscription: WebPushSubscription,
                               senderKey: P256.KeyAgreement.PrivateKey = .init(),
                               salt: [UInt8] = (0..<16).map { _ in UInt8.random(in: .min ... .max) }) throws -> [UInt8] {
        guard plaintext.count <= maxPlaintext else {
            throw PushError.configuration("a Web Push message holds at most \(maxPlaintext) bytes, this one is \(plaintext.count)")
        }
        let receiver = try P256.KeyAgreement.PublicKey(x963Representation: subscription.p256dh)
        let senderPublic = [UInt8](senderKey.publicKey.x963Representation)
        let (key, nonce) = try contentKeys(secret: senderKey.sharedSecretFromKeyAgreement(with: receiver), auth: subscription.auth,
                                           receiverPublic: subscription.p256dh, senderPublic: senderPublic, salt: salt)
        let sealed = try AES.GCM.seal(Array(plaintext) + [0x02], using: key, nonce: nonce)
        var body = salt
        body += withUnsafeBytes(of: UInt32(recordSize).bigEndian, Array.init)
        body.append(UInt8(senderPublic.count))
        body += senderPublic
        body += sealed.ciphertext
        body += sealed.tag
        return body
    }

    /// Decrypts a body made by `encrypt` with the receiver's private key and secret (what a
    /// browser does; the Web Push stand-in does it to check every message).
    public static func decrypt(_ body: [UInt8], receiverKey: P256.KeyAgreement.PrivateKey, auth: [UInt8]) throws -> [UInt8] {
        guard body.count >= 21 else { throw WebPushError("the body is shorter than an aes128gcm header") }
        let salt = Array(body[0..<16])
        let recordSize = Int(body[16]) << 24 | Int(body[17]) << 16 | Int(body[18]) << 8 | Int(body[19])
        let idLength = Int(body[20])
        guard idLength == 65, body.count >= 21 + idLength + 17 else { throw WebPushError("the key id must be the sender's 65-byte P-256 key") }
        let senderPublic = Array(body[21..<86])
        let record = body[86...]
        guard record.count <= recordSize, recordSize >= 18 else { throw WebPushError("a Web Push body is one record of at most \(recordSize) bytes") }
        let sender = try P256.KeyAgreement.PublicKey(x963Representation: senderPublic)
        let receiverPublic = [UInt8](receiverKey.publicKey.x963Representation)
        let (key, nonce) = try contentKeys(secret: receiverKey.sharedSecretFromKeyAgreement(with: sender), auth: auth,
                                           receiverPublic: receiverPublic, senderPublic: senderPublic, salt: salt)
        let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: record.dropLast(16), tag: record.suffix(16))
        let padded = try AES.GCM.open(box, using: key)
        // The last record ends with 0x02 and then zero padding.
        guard let delimiter = padded.lastIndex(where: { $0 != 0 }), padded[delimiter] == 0x02 else {
            throw WebPushError("the record does not end with the last-record delimiter")
        }
        return [UInt8](padded[..<delimiter])
    }

    /// RFC 8291 §3.3-3.4 and RFC 8188 §2.2: the content encryption key and nonce.
    static func contentKeys(secret: SharedSecret, auth: [UInt8], receiverPublic: [UInt8], senderPublic: [UInt8],
                            salt: [UInt8]) throws -> (SymmetricKey, AES.GCM.Nonce) {
        let keyInfo = Array("WebPush: info".utf8) + [0] + receiverPublic + senderPublic
        let ikm = secret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: auth, sharedInfo: keyInfo, outputByteCount: 32)
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: ikm, salt: salt)
        let key = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonce = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        return (key, try AES.GCM.Nonce(data: nonce.withUnsafeBytes { Array($0) }))
    }
}

/// A Web Push body or header that does not hold up.
public struct WebPushError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// RFC 8292 VAPID: the application server's identity, sent with every message as
/// `Authorization: vapid t=<ES256 JWT>,k=<public key>`.
///
/// A token names one push service (its origin) and is reused until an hour before it expires;
/// push services refuse tokens valid for more than 24 hours, so each lives 12.
public final class VAPID: Sendable {
    /// The signing key (P-256), whose public half browsers subscribed with.
    public let key: P256.Signing.PrivateKey
    /// `mailto:` or `https:` contact for the push service's operators.
    public let subject: String
    private let tokens = NIOLockedValueBox<[String: (token: String, expires: Int)]>([:])
    static let lifetime = 12 * 3600

    /// Checks the subject (RFC 8292 §2.1: a `mailto:` or `https:` URI).
    public init(key: P256.Signing.PrivateKey, subject: String) throws {
        guard subject.hasPrefix("mailto:") && subject.count > 7 || subject.hasPrefix("https://") && subject.count > 8 else {
            throw PushError.configuration("--vapid-subject must be a mailto: or https: URI, got '\(subject.prefix(80))'")
        }
        self.key = key
        self.subject = subject
    }

    /// Reads a PEM (PKCS#8 or SEC1) P-256 key, as `openssl ecparam -genkey -name prime256v1` or `npx web-push generate-vapid-keys` give.
    public convenience init(pem path: String, subject: String) throws {
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
            throw PushError.configuration("\(path) is not a P-256 private key in PEM")
        }
        try self.init(key: key, subject: subject)
    }

    /// The public key as browsers take it for `applicationServerKey`: uncompressed point, base64url.
    public var publicKey: String { Base64URL.encode(key.publicKey.x963Representation) }

    /// The `Authorization` value for a message to `audience` (the push service's origin).
    public func authorization(for audience: String, now: Date = Date()) throws -> String {
        let seconds = Int(now.timeIntervalSince1970)
        if let cached = tokens.withLockedValue({ $0[audience] }), cached.expires - seconds > 3600 {
            return "vapid t=\(cached.token),k=\(publicKey)"
        }
        let expires = seconds + Self.lifetime
        let token = try CompactJWT.make(header: ["typ": "JWT", "alg": "ES256"], claims: ["aud": audience, "exp": expires, "sub": subject]) {
            try key.signature(for: $0).rawRepresentation
        }
        tokens.withLockedValue { cache in
            if cache.count > 1000 { cache.removeAll() } // audiences are a handful of push services
            cache[audience] = (token, expires)
        }
        return "vapid t=\(token),k=\(publicKey)"
    }
}
