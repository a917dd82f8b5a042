import AsyncHTTPClient
import CryptoExtras
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import PushDelivery
import RichPushCore
import PushTestSupport
import RichPushTestSupport
import Testing

/// FCM HTTP v1's OAuth: the service account's RS256 assertion and the access tokens it buys.
@Suite("FCM service account and access tokens (SPEC §12)")
struct FCMAuthTests {
    static var key: _RSA.Signing.PrivateKey { FCMFixtures.key }

    static func accountJSON(tokenURI: String, key: String = FCMFixtures.key.pkcs8PEMRepresentation) -> Data {
        FCMFixtures.accountJSON(tokenURI: tokenURI, key: key)
    }

    /// The claims of a JWT whose RS256 signature `key` verifies; nil otherwise.
    static func verifiedClaims(_ jwt: String, key: _RSA.Signing.PublicKey) -> [String: Any]? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              (try? JSONSerialization.jsonObject(with: header) as? [String: Any])?["alg"] as? String == "RS256",
              key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: Data("\(parts[0]).\(parts[1])".utf8),
                                   padding: .insecurePKCS1v1_5) else { return nil }
        return try? JSONSerialization.jsonObject(with: claims) as? [String: Any]
    }

    @Test("the assertion is RS256 over iss, scope, aud, iat and exp an hour later; Python's cryptography verifies it too")
    func assertion() async throws {
        let account = try FCMServiceAccount(json: Self.accountJSON(tokenURI: "https://oauth2.googleapis.com/token"))
        #expect(account.projectID == "rich-push-test")
        let jwt = try account.assertion(now: Date(timeIntervalSince1970: 1_800_000_000))
        let claims = try #require(Self.verifiedClaims(jwt, key: Self.key.publicKey))
        #expect(claims["iss"] as? String == "sender@rich-push-test.iam.gserviceaccount.com")
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(claims["iat"] as? Int == 1_800_000_000 && claims["exp"] as? Int == 1_800_003_600)
        #expect(Self.verifiedClaims(jwt, key: try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey) == nil)

        guard (try? runCapturing("/usr/bin/env", ["python3", "-c", "import cryptography"]))?.status == 0 else { return }
        let parts = jwt.split(separator: ".")
        let script = """
            import base64
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import padding
            def b(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
            key = serialization.load_pem_public_key(\"\"\"\(Self.key.publicKey.pemRepresentation)\"\"\".encode())
            key.verify(b("\(parts[2])"), b"\(parts[0]).\(parts[1])", padding.PKCS1v15(), hashes.SHA256())
            print("verified")
            """
        let (status, output) = try await python(script)
        #expect(status == 0 && output.contains("verified"), "\(output)")
    }

    @Test("key files that cannot work are refused saying why")
    func badAccounts() throws {
        #expect(throws: PushError.self) { try FCMServiceAccount(json: Data("[]".utf8)) }
        #expect(throws: PushError.self) { try FCMServiceAccount(json: Self.accountJSON(tokenURI: "https://x", key: "not a key")) }
        #expect(throws: PushError.self) { try FCMServiceAccount(json: Self.accountJSON(tokenURI: "http://oauth.example/token")) }
        var object = try #require(try JSONSerialization.jsonObject(with: Self.accountJSON(tokenURI: "https://x")) as? [String: Any])
        object["project_id"] = nil
        #expect(throws: PushError.self) { try FCMServiceAccount(json: try JSONSerialization.data(withJSONObject: object)) }
    }

    @Test("a token is exchanged once for concurrent callers, reused until 5 minutes before expiry, and a refusal is an error naming the endpoint")
    func tokens() async throws {
        let exchanges = NIOLockedValueBox(0)
        let refuse = NIOLockedValueBox(false)
        let router = Router()
        // A token endpoint that checks what Google's does: the grant type, the signature, issuer, audience, scope and lifetime.
        router.post("token") { request, _ -> Response in
            let form = String(buffer: try await request.body.collect(upTo: 64 * 1024))
            let fields = Dictionary(form.split(separator: "&").map { pair -> (String, String) in
                let kv = pair.split(separator: "=", maxSplits: 1)
                return (String(kv[0]), kv.count > 1 ? String(kv[1]).removingPercentEncoding ?? "" : "")
            }, uniquingKeysWith: { a, _ in a })
            guard !refuse.withLockedValue({ $0 }), fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer",
                  let jwt = fields["assertion"], let claims = Self.verifiedClaims(jwt, key: Self.key.publicKey),
                  claims["iss"] as? String == "sender@rich-push-test.iam.gserviceaccount.com",
                  claims["scope"] as? String == FCMServiceAccount.scope, (claims["aud"] as? String)?.hasSuffix("/token") == true,
                  let iat = claims["iat"] as? Int, let exp = claims["exp"] as? Int, exp - iat <= 3600 else {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_grant"}"#)))
            }
            let n = exchanges.withLockedValue { $0 += 1; return $0 }
            try await Task.sleep(for: .milliseconds(50)) // long enough for concurrent callers to pile up
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: #"{"access_token":"ya29.token\#(n)","expires_in":600,"token_type":"Bearer"}"#)))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let port = try #require(client.port)
            let account = try FCMServiceAccount(json: Self.accountJSON(tokenURI: "http://127.0.0.1:\(port)/token"))
            // Shut down however the checks end: a client left running is a fatal error at its deinit.
            try await using(HTTPClient(eventLoopGroupProvider: .singleton), shutdown: { try await $0.shutdown() }) { http in
                let manager = FCMTokenManager(account: account, http: http)
                let start = Date()
                let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<8 { group.addTask { try await manager.token(now: start) } }
                    return try await group.reduce(into: [String]()) { $0.append($1) }
                }
                #expect(Set(tokens) == ["ya29.token1"] && exchanges.withLockedValue { $0 } == 1)
                #expect(try await manager.token(now: start.addingTimeInterval(290)) == "ya29.token1") // 310 s left
                #expect(try await manager.token(now: start.addingTimeInterval(310)) == "ya29.token2") // 290 s left: renewed
                // A push refused with an older token does not drop the newer one; one refused with it does.
                await manager.invalidate("ya29.token1")
                #expect(try await manager.token(now: start.addingTimeInterval(320)) == "ya29.token2" && exchanges.withLockedValue { $0 } == 2)
                await manager.invalidate("ya29.token2")
                refuse.withLockedValue { $0 = true }
                await #expect { try await manager.token(now: start.addingTimeInterval(320)) } throws: { error in
                    "\(error)".contains("127.0.0.1:\(port)/token") && "\(error)".contains("invalid_grant")
                }
            }
        }
    }
}
