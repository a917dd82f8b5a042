import Crypto
import Foundation
import MediaStore
@testable import RichPushCore
import Testing

/// Payload URLs are signed by `PrefixedHMAC`, this project's HMAC-SHA-256 over swift-crypto's
/// SHA-256: its codes must be exactly swift-crypto's `HMAC<SHA256>`'s, or every payload URL
/// issued before it (or by a node without it) would stop working.
@Suite("HMAC for payload URLs")
struct PrefixedHMACTests {
    static func reference(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    static func prefixed(key: [UInt8], prefix: [UInt8], _ message: [UInt8]) -> [UInt8] {
        let hmac = PrefixedHMAC(key: SymmetricKey(data: key), prefix: prefix)
        return message.withUnsafeBytes { Array(hmac.code($0)) }
    }

    @Test("RFC 4231 test case 1, and swift-crypto's HMAC for keys shorter than, as long as and longer than the block, any prefix and message")
    func matchesHMAC() {
        // RFC 4231 §4.2: key 0x0b x 20, "Hi There".
        let rfc = Self.prefixed(key: [UInt8](repeating: 0x0B, count: 20), prefix: [], Array("Hi There".utf8))
        #expect(rfc.map { String(format: "%02x", $0) }.joined() == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        var generator = SystemRandomNumberGenerator()
        for keyLength in [0, 1, 20, 32, 63, 64, 65, 100, 200] {
            for (prefixLength, messageLength) in [(0, 0), (0, 48), (20, 48), (20, 0), (64, 64), (100, 1000)] {
                let key = (0..<keyLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let prefix = (0..<prefixLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let message = (0..<messageLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
                #expect(Self.prefixed(key: key, prefix: prefix, message) == Self.reference(key: key, prefix + message),
                        "key \(keyLength), prefix \(prefixLength), message \(messageLength) bytes")
            }
        }
    }

    @Test("a payload URL's signature is the first 16 bytes of HMAC-SHA-256 over the domain label and the signed claims, as swift-crypto computes it")
    func tokenSignature() throws {
        let secret = String(repeating: "k", count: 40)
        let key = try PayloadKey(secret: secret)
        let links = PayloadLinks(key: key, baseURL: "https://push.example.com", lifetime: 600)
        let payload = MediaID(hashing: Array("logo".utf8))
        let token = links.token(notification: 7, payload: payload, expires: 1_800_000_000)
        let bytes = try #require(Base64URL.decodeBytes(token))
        #expect(bytes.count == 64)
        let signed = Array(bytes[..<48])
        // The claims' layout, made here on its own: the id and the expiry big-endian, then the digest.
        let layout = withUnsafeBytes(of: Int64(7).bigEndian, Array.init) + withUnsafeBytes(of: Int64(1_800_000_000).bigEndian, Array.init)
            + Array(SHA256.hash(data: Array("logo".utf8)))
        #expect(signed == layout)
        // A whole URL is the base, /p/ and the same token, whether signed alone or by a batch's signer.
        let now = Date(timeIntervalSince1970: 1_800_000_000 - 600)
        #expect(links.url(notification: 7, payload: payload, now: now) == "https://push.example.com/p/" + token)
        #expect(links.signer(payload: payload, now: now).url(notification: 7) == "https://push.example.com/p/" + token)
        let expected = Self.reference(key: key.key.withUnsafeBytes { Array($0) }, PayloadLinks.domain + signed).prefix(16)
        #expect(Array(bytes[48...]) == Array(expected))
        // The claims read back, from a String and from a Substring of a longer URI.
        let uri = "/p/" + token + "?x"
        for claims in [PayloadLinks.claims(token), PayloadLinks.claims(uri.dropFirst(3).prefix(PayloadLinks.tokenLength))] {
            let claims = try #require(claims)
            #expect(claims.notification == 7 && claims.expires == 1_800_000_000 && claims.payload == payload && links.isAuthentic(claims))
        }
    }

    @Test("base64url of 0 to 70 bytes is Foundation's base64 with - and _ and no padding, from a sequence and into a buffer")
    func base64URL() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected, "\(length) bytes")
            var out = [UInt8](repeating: 0, count: expected.utf8.count + 3)
            let written = bytes.withUnsafeBufferPointer { input in out.withUnsafeMutableBufferPointer { Base64URL.encode(input, into: $0) } }
            #expect(written == expected.utf8.count && String(decoding: out.prefix(written), as: UTF8.self) == expected, "\(length) bytes")
        }
    }
}
