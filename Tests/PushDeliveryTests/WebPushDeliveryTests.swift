import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import PushDelivery
import RichPushCore
import PushTestSupport
import Testing
import PushSandboxes

/// The Web Push sender against the local push service, which checks what real ones check.
@Suite("Web Push delivery through the sandbox (SPEC §12)")
struct WebPushDeliveryTests {
    func withSandbox(_ body: @Sendable (WebPushSandbox, VAPID, WebPushClient, String) async throws -> Void) async throws {
        let sandbox = WebPushSandbox()
        try await serving([(sandbox, "")]) { origin in
            let vapid = try VAPID(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com")
            try await using(try WebPushClient(vapid: vapid, allowPrivateEndpoints: true), shutdown: { try await $0.shutdown() }) { sender in
                try await body(sandbox, vapid, sender, origin)
            }
        }
    }

    @Test("a message is encrypted, signed, accepted and decrypted as sent, with its TTL, urgency and topic")
    func delivered() async throws {
        try await withSandbox { sandbox, vapid, sender, _ in
            let subscription = try sandbox.subscribe(applicationServerKey: vapid.publicKey)
            let message = Array(#"{"richId":"7","richMessage":"Hello","richType":"img","richUrl":"http://x/p/t","title":"T"}"#.utf8)
            let outcome = await sender.send(message, to: subscription, ttl: 600, urgency: .high, topic: "campaign-7")
            guard case .sent(let id) = outcome else { Issue.record("\(outcome)"); return }
            #expect(id?.contains("/message/") == true)
            let accepted = try #require(sandbox.accepted.first)
            #expect(accepted.plaintext == message && accepted.ttl == 600 && accepted.urgency == "high" && accepted.topic == "campaign-7")
            guard case .sent = await sender.send(message, to: subscription) else { Issue.record("a second message failed"); return }
            #expect(sandbox.acceptedCount == 2)
        }
    }

    @Test("404 and 410 prune the subscription; 413 and 403 fail it; 429 and 5xx are retried after Retry-After; too large never leaves")
    func errors() async throws {
        try await withSandbox { sandbox, vapid, sender, origin in
            let subscription = try sandbox.subscribe(applicationServerKey: vapid.publicKey)
            let message = Array("hi".utf8)
            sandbox.fail(subscription, status: 429, retryAfter: 7)
            #expect(await sender.send(message, to: subscription) == .retry(reason: "429 scripted failure", after: 7))
            sandbox.fail(subscription, status: 503)
            guard case .retry(_, nil) = await sender.send(message, to: subscription) else { Issue.record("503 is not retried"); return }
            sandbox.fail(subscription, status: 413)
            guard case .failed(_, false) = await sender.send(message, to: subscription) else { Issue.record("413 is not a failure"); return }
            guard case .failed(let reason, false) = await sender.send([UInt8](repeating: 1, count: 3994), to: subscription) else {
                Issue.record("an oversized message was not refused"); return
            }
            #expect(reason.contains("3993"))

            // Signed with a key the browser did not subscribe with: 403, and the subscription stays.
            let stranger = try WebPushClient(vapid: try VAPID(key: P256.Signing.PrivateKey(), subject: "https://example.com"), allowPrivateEndpoints: true)
            guard case .failed(let refusal, false) = await stranger.send(message, to: subscription) else { Issue.record("a foreign key was accepted"); return }
            #expect(refusal.hasPrefix("403"))
            try await stranger.shutdown()

            let unknown = try WebPushSubscription(endpoint: "\(origin)/push/nobody", p256dh: subscription.p256dh, auth: subscription.auth)
            guard case .failed(_, true) = await sender.send(message, to: unknown) else { Issue.record("404 does not prune"); return }
            sandbox.unsubscribe(subscription)
            guard case .failed(let gone, true) = await sender.send(message, to: subscription) else { Issue.record("410 does not prune"); return }
            #expect(gone.hasPrefix("410"))
            #expect(sandbox.acceptedCount == 0)
        }
    }

    @Test("the sandbox refuses what a push service refuses: no TTL, a bad Urgency, another coding, an expired or misaddressed token, a changed body")
    func sandboxChecks() async throws {
        try await withSandbox { sandbox, vapid, _, _ in
            let subscription = try sandbox.subscribe(applicationServerKey: vapid.publicKey)
            // Shut down however the checks end: a client left running is a fatal error at its deinit.
            try await using(HTTPClient(eventLoopGroupProvider: .singleton), shutdown: { try await $0.shutdown() }) { http in
                func post(_ change: (inout [String: String], inout [UInt8]) -> Void) async throws -> (Int, String) {
                    var headers = ["authorization": try vapid.authorization(for: subscription.origin), "ttl": "60",
                                   "content-encoding": "aes128gcm"]
                    var body = try WebPushEncryption.encrypt(Array("x".utf8), for: subscription)
                    change(&headers, &body)
                    var request = HTTPClientRequest(url: subscription.endpoint)
                    request.method = .POST
                    for (name, value) in headers { request.headers.add(name: name, value: value) }
                    request.body = .bytes(ByteBuffer(bytes: body))
                    let response = try await http.execute(request, timeout: .seconds(30)) // a loaded machine, browsers included
                    return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 4096)))
                }
                #expect(try await post { _, _ in }.0 == 201)
                #expect(try await post { h, _ in h["ttl"] = nil }.0 == 400)
                #expect(try await post { h, _ in h["urgency"] = "urgent" }.0 == 400)
                #expect(try await post { h, _ in h["content-encoding"] = "aesgcm" }.0 == 415)
                #expect(try await post { _, b in b[90] ^= 1 }.0 == 400)
                #expect(try await post { _, b in b += [UInt8](repeating: 0, count: 4096) }.0 == 413)
                #expect(try await post { h, _ in h["authorization"] = nil }.0 == 401)
                // (A fresh signer: the first one would reuse its valid token.)
                let expired = try VAPID(key: vapid.key, subject: vapid.subject).authorization(for: subscription.origin, now: Date().addingTimeInterval(-13 * 3600))
                #expect(try await post { h, _ in h["authorization"] = expired }.0 == 403)
                let elsewhere = try vapid.authorization(for: "https://push.example.net")
                #expect(try await post { h, _ in h["authorization"] = elsewhere }.0 == 403)
                #expect(sandbox.acceptedCount == 1)
            }
        }
    }
}
