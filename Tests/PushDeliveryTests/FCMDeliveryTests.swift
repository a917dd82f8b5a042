import CryptoExtras
import Foundation
import Hummingbird
import HummingbirdTesting
import PushDelivery
import PushSandboxes
import RichPushCore
import PushTestSupport
import Testing

/// The FCM HTTP v1 sender against the local FCM, which checks what Google checks.
@Suite("FCM delivery through the sandbox (SPEC §12)")
struct FCMDeliveryTests {
    func withSandbox(key: _RSA.Signing.PrivateKey = FCMAuthTests.key,
                     _ body: @Sendable (FCMSandbox, FCMClient) async throws -> Void) async throws {
        let sandbox = FCMSandbox(account: .init(projectID: "rich-push-test", clientEmail: "sender@rich-push-test.iam.gserviceaccount.com",
                                                publicKey: FCMAuthTests.key.publicKey))
        try await serving([(sandbox, "")]) { origin in
            let account = try FCMServiceAccount(json: FCMAuthTests.accountJSON(tokenURI: sandbox.tokenURI, key: key.pkcs8PEMRepresentation))
            try await using(try FCMClient(account: account, endpoint: origin), shutdown: { try await $0.shutdown() }) { sender in
                try await body(sandbox, sender)
            }
        }
    }

    @Test("an alert message carries data and a notification with the image; one access token serves many messages")
    func delivered() async throws {
        try await withSandbox { sandbox, sender in
            let token = sandbox.register()
            let data = ["richId": "9", "richMessage": "Sale", "richType": "img", "richUrl": "https://rp.example/p/t"]
            let body = FCMClient.message(token: token, data: data, notification: (title: "Hi", body: "Sale", image: "https://rp.example/p/t"))
            guard case .sent(let name) = await sender.send(body) else { Issue.record("not sent"); return }
            #expect(name?.hasPrefix("projects/rich-push-test/messages/") == true)
            let accepted = try #require(sandbox.accepted.first)
            #expect(accepted.token == token && accepted.data == data)
            #expect(accepted.notification == ["title": "Hi", "body": "Sale", "image": "https://rp.example/p/t"])
            guard case .sent = await sender.send(FCMClient.message(token: token, data: data, notification: nil)) else { Issue.record("silent not sent"); return }
            #expect(sandbox.accepted.last?.notification == nil && sandbox.exchanges == 1)
        }
    }

    @Test("Google's error model: UNREGISTERED prunes, INVALID_ARGUMENT fails, QUOTA_EXCEEDED and 5xx retry after Retry-After, a 401 renews the token once")
    func errors() async throws {
        try await withSandbox { sandbox, sender in
            let token = sandbox.register()
            let body = FCMClient.message(token: token, data: ["richId": "1"], notification: nil)
            sandbox.fail(token, status: 429, code: "QUOTA_EXCEEDED", retryAfter: 30)
            guard case .retry(let quota, 30) = await sender.send(body) else { Issue.record("429 is not retried after 30 s"); return }
            #expect(quota.contains("QUOTA_EXCEEDED"))
            sandbox.fail(token, status: 503, code: "UNAVAILABLE")
            guard case .retry(_, nil) = await sender.send(body) else { Issue.record("503 is not retried"); return }
            guard case .failed(let invalid, false) = await sender.send(FCMClient.message(token: "not-a-token", data: [:], notification: nil)) else {
                Issue.record("an unknown token is not INVALID_ARGUMENT"); return
            }
            #expect(invalid.contains("INVALID_ARGUMENT"))
            guard case .failed(let reserved, false) = await sender.send(FCMClient.message(token: token, data: ["from": "x"], notification: nil)) else {
                Issue.record("a reserved data key was accepted"); return
            }
            #expect(reserved.contains("reserved"))
            sandbox.revokeAccessTokens()
            guard case .sent = await sender.send(body) else { Issue.record("a revoked access token was not renewed"); return }
            #expect(sandbox.exchanges == 2)
            sandbox.unregister(token)
            guard case .failed(let gone, true) = await sender.send(body) else { Issue.record("UNREGISTERED does not prune"); return }
            #expect(gone.contains("UNREGISTERED"))
        }
    }

    @Test("an assertion signed with another key buys no token: the push is retried later, saying why")
    func wrongKey() async throws {
        try await withSandbox(key: try _RSA.Signing.PrivateKey(keySize: .bits2048)) { sandbox, sender in
            let token = sandbox.register()
            guard case .retry(let reason, _) = await sender.send(FCMClient.message(token: token, data: [:], notification: nil)) else {
                Issue.record("sent with a foreign key"); return
            }
            #expect(reason.contains("invalid_grant") && sandbox.acceptedCount == 0 && sandbox.exchanges == 0)
        }
    }
}
