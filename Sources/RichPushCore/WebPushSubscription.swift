import Crypto
import Foundation

/// A browser's `PushSubscription` (W3C Push API): the push service URL a message is POSTed to,
/// and the keys RFC 8291 encrypts it for. It is the `handle` of a `web` registration (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).
public struct WebPushSubscription: Sendable, Equatable {
    /// The push service's URL for this subscription (https; http only on loopback, for stand-ins).
    /// It is a URL a user chose: where it may point (https on 443 to a name whose every address is
    /// public, see `PublicAddress` and `OutboundURL`) is checked when it is registered and again at
    /// every send, not here.
    public let endpoint: String
    /// The browser's ECDH public key: an uncompressed P-256 point, 65 bytes.
    public let p256dh: [UInt8]
    /// The browser's authentication secret, 16 bytes.
    public let auth: [UInt8]

    /// The longest endpoint accepted (browsers' are under 500 bytes).
    public static let maxEndpointLength = 2048

    /// Checks every part: an absolute https URL, a point on P-256, a 16-byte secret.
    public init(endpoint: String, p256dh: [UInt8], auth: [UInt8]) throws {
        guard endpoint.utf8.count <= Self.maxEndpointLength, Loopback.isSecureOrLoopback(endpoint) else {
            throw CoreError(.invalid, "the subscription's endpoint must be an https URL of at most \(Self.maxEndpointLength) bytes, got '\(endpoint.prefix(80))'")
        }
        guard p256dh.count == 65, p256dh.first == 0x04, (try? P256.KeyAgreement.PublicKey(x963Representation: p256dh)) != nil else {
            throw CoreError(.invalid, "keys.p256dh must be an uncompressed P-256 public key (65 bytes, base64url)")
        }
        guard auth.count == 16 else { throw CoreError(.invalid, "keys.auth must be 16 bytes (base64url), got \(auth.count)") }
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    /// Reads `{"endpoint","keys":{"p256dh","auth"}}` (`expirationTime` and other keys are ignored),
    /// as a browser's `subscription.toJSON()` gives it.
    public init(json object: [String: Any]) throws {
        guard let endpoint = object["endpoint"] as? String else {
            throw CoreError(.invalid, "a web handle is a PushSubscription {\"endpoint\",\"keys\":{\"p256dh\",\"auth\"}}: \"endpoint\" is missing")
        }
        guard let keys = object["keys"] as? [String: Any], let p256dh = keys["p256dh"] as? String, let auth = keys["auth"] as? String else {
            throw CoreError(.invalid, "a web handle is a PushSubscription {\"endpoint\",\"keys\":{\"p256dh\",\"auth\"}}: keys.p256dh or keys.auth is missing")
        }
        guard let point = Self.base64URL(p256dh), let secret = Self.base64URL(auth) else {
            throw CoreError(.invalid, "keys.p256dh and keys.auth must be base64url")
        }
        try self.init(endpoint: endpoint, p256dh: point, auth: secret)
    }

    /// Reads the JSON text of a PushSubscription.
    public init(jsonText: String) throws {
        guard jsonText.utf8.count <= 4096, let object = try? JSONSerialization.jsonObject(with: Data(jsonText.utf8)) as? [String: Any] else {
            throw CoreError(.invalid, "a web handle is a PushSubscription as JSON: {\"endpoint\",\"keys\":{\"p256dh\",\"auth\"}}")
        }
        try self.init(json: object)
    }

    /// The stored form, one spelling per subscription: `{"endpoint":…,"keys":{"auth":…,"p256dh":…}}`.
    public var handle: String {
        let object: [String: Any] = ["endpoint": endpoint, "keys": ["p256dh": Base64URL.encode(p256dh), "auth": Base64URL.encode(auth)]]
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    /// The push service's origin (`https://host[:port]`): a VAPID token's audience.
    public var origin: String {
        guard let url = URL(string: endpoint), let scheme = url.scheme, let host = url.host else { return endpoint }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return url.port.map { "\(scheme)://\(shownHost):\($0)" } ?? "\(scheme)://\(shownHost)"
    }

    /// base64url with or without padding (browsers send it without; some libraries pad).
    static func base64URL(_ text: String) -> [UInt8]? {
        let trimmed = text.hasSuffix("==") ? String(text.dropLast(2)) : text.hasSuffix("=") ? String(text.dropLast()) : text
        return Base64URL.decodeBytes(trimmed)
    }
}
