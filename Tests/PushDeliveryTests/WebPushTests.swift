import Crypto
import Foundation
import PushDelivery
@testable import RichPushCore
import PushTestSupport
import RichPushTestSupport
import Testing

/// RFC 8291 encryption and RFC 8292 VAPID, checked against the RFC's own example and against
/// PyPI's `http_ece` and `py_vapid`, which nobody here wrote.
@Suite("Web Push: aes128gcm and VAPID (SPEC §12)")
struct WebPushTests {
    func bytes(_ base64url: String) -> [UInt8] { WebPushSubscription.base64URL(base64url)! }

    /// Whether the Python peers are installed (.ci/run installs them; elsewhere the peer checks are skipped).
    static let peers: Bool = {
        let found = (try? runCapturing("/usr/bin/env", ["python3", "-c", "import http_ece, py_vapid"]))?.status == 0
        if !found && ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] == "1" { return true } // fail loudly below
        return found
    }()

    @Test("RFC 8291 Appendix A: the same keys and salt give the RFC's message byte for byte, and it decrypts back")
    func rfcExample() throws {
        let subscription = try WebPushSubscription(
            endpoint: "https://push.example.net/push/JzLQ3raZJfFBR0aqvOMsLrt54w4rJUsV",
            p256dh: bytes("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"),
            auth: bytes("BTBZMqHH6r4Tts7J_aSIgg"))
        let sender = try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"))
        let body = try WebPushEncryption.encrypt(Array("When I grow up, I want to be a watermelon".utf8), for: subscription,
                                                 senderKey: sender, salt: bytes("DGv6ra1nlYgDCS1FRnbzlw"))
        #expect(Base64URL.encode(body) == "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
        let receiver = try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"))
        #expect(String(decoding: try WebPushEncryption.decrypt(body, receiverKey: receiver, auth: subscription.auth), as: UTF8.self)
                == "When I grow up, I want to be a watermelon")
        var tampered = body
        tampered[100] ^= 1
        #expect(throws: (any Error).self) { try WebPushEncryption.decrypt(tampered, receiverKey: receiver, auth: subscription.auth) }
    }

    @Test("3,993 bytes fit one 4,096-byte record; 3,994 are refused before anything is made")
    func limit() throws {
        let receiver = P256.KeyAgreement.PrivateKey()
        let subscription = try WebPushSubscription(endpoint: "https://fcm.googleapis.com/fcm/send/abc",
                                                   p256dh: Array(receiver.publicKey.x963Representation), auth: Array(repeating: 7, count: 16))
        let full = try WebPushEncryption.encrypt([UInt8](repeating: 0x41, count: 3993), for: subscription)
        #expect(full.count == 4096)
        #expect(try WebPushEncryption.decrypt(full, receiverKey: receiver, auth: subscription.auth) == [UInt8](repeating: 0x41, count: 3993))
        #expect(throws: PushError.self) { try WebPushEncryption.encrypt([UInt8](repeating: 0x41, count: 3994), for: subscription) }
    }

    @Test("a subscription is checked whole: https endpoint, a point on P-256, a 16-byte secret; one spelling is stored")
    func subscriptions() throws {
        let point = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        let auth = Array(repeating: UInt8(1), count: 16)
        let text = #"{"endpoint":"https://updates.push.services.mozilla.com/wpush/v2/gAAA","expirationTime":null,"keys":{"auth":"\#(Base64URL.encode(auth))","p256dh":"\#(Base64URL.encode(point))"}}"#
        let parsed = try WebPushSubscription(jsonText: text)
        #expect(parsed.p256dh == point && parsed.auth == auth && parsed.origin == "https://updates.push.services.mozilla.com")
        #expect(try WebPushSubscription(jsonText: parsed.handle) == parsed)
        #expect(!parsed.handle.contains("expirationTime"))
        var offCurve = point
        offCurve[64] ^= 1
        let refused: [(String, [UInt8], [UInt8])] = [
            ("http://push.example/x", point, auth), ("ftp://push.example/x", point, auth), ("not a url", point, auth),
            ("http://127.evil.example/x", point, auth), ("http://localhost.evil/x", point, auth),
            ("https://push.example/x", offCurve, auth), ("https://push.example/x", Array(point.prefix(33)), auth),
            ("https://push.example/x", point, Array(auth.prefix(15))),
        ]
        for (endpoint, p256dh, secret) in refused {
            #expect(throws: CoreError.self, "\(endpoint)") { try WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: secret) }
        }
        #expect(throws: Never.self) { try WebPushSubscription(endpoint: "http://127.0.0.1:9/push/1", p256dh: point, auth: auth) } // a local stand-in
        #expect(throws: CoreError.self) { try WebPushSubscription(jsonText: #"{"endpoint":"https://push.example/x"}"#) }
    }

    @Test("VAPID: an ES256 token for the push service's origin, reused until an hour before it expires")
    func vapid() throws {
        let vapid = try VAPID(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com")
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let header = try vapid.authorization(for: "https://push.example.net", now: now)
        #expect(header.hasPrefix("vapid t=") && header.hasSuffix(",k=\(vapid.publicKey)"))
        let token = String(header.dropFirst(8).prefix { $0 != "," })
        let parts = token.split(separator: ".")
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(bytes(String(parts[1])))) as? [String: Any])
        #expect(claims["aud"] as? String == "https://push.example.net" && claims["sub"] as? String == "mailto:ops@example.com")
        #expect(claims["exp"] as? Int == 1_800_000_000 + 12 * 3600)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: bytes(String(parts[2])))
        #expect(vapid.key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(try vapid.authorization(for: "https://push.example.net", now: now.addingTimeInterval(10 * 3600)) == header)
        #expect(try vapid.authorization(for: "https://push.example.net", now: now.addingTimeInterval(11.5 * 3600)) != header)
        #expect(try vapid.authorization(for: "https://other.example", now: now) != header)
        #expect(throws: PushError.self) { try VAPID(key: P256.Signing.PrivateKey(), subject: "ops@example.com") }
    }

    @Test("http_ece decrypts what RichPush encrypts, and py_vapid verifies its Authorization header")
    func peers() async throws {
        guard Self.peers else { return }
        let receiver = P256.KeyAgreement.PrivateKey()
        let auth = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let subscription = try WebPushSubscription(endpoint: "https://push.example.net/p/1", p256dh: Array(receiver.publicKey.x963Representation), auth: auth)
        let message = #"{"richId":"42","richMessage":"Ünïcode ✓","richType":"img","richUrl":"https://rp.example/p/abc","title":"Hi"}"#
        let body = try WebPushEncryption.encrypt(Array(message.utf8), for: subscription)
        let vapid = try VAPID(key: P256.Signing.PrivateKey(), subject: "https://example.com/contact")
        let header = try vapid.authorization(for: subscription.origin)
        let script = """
            import base64, http_ece, py_vapid, sys
            from cryptography.hazmat.primitives.asymmetric import ec
            def b(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
            key = ec.derive_private_key(int.from_bytes(b("\(Base64URL.encode(receiver.rawRepresentation))"), "big"), ec.SECP256R1())
            plain = http_ece.decrypt(b("\(Base64URL.encode(body))"), private_key=key, auth_secret=b("\(Base64URL.encode(auth))"), version="aes128gcm")
            sys.stdout.write(plain.decode("utf-8") + "\\n")
            print("vapid", py_vapid.Vapid02.verify("\(header)"))
            """
        let (status, output) = try await python(script)
        #expect(status == 0, "\(output)")
        #expect(output.contains(message), "\(output)")
        #expect(output.contains("vapid True"), "\(output)")
    }
}
