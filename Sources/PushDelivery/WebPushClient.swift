import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RichPushCore

/// Sends Web Push messages (RFC 8030): each body encrypted for its subscription (RFC 8291) and
/// signed for with VAPID (RFC 8292), POSTed to the subscription's endpoint.
public final class WebPushClient: Sendable {
    /// RFC 8030 §5.3: how urgently the push service should wake the device.
    public enum Urgency: String, Sendable {
        case veryLow = "very-low", low, normal, high
    }

    public let vapid: VAPID
    private let http: HTTPClient

    /// `extraRoots` (PEM files, `--push-ca`) are trusted beside the system's roots.
    public init(vapid: VAPID, extraRoots: [String] = [], connectTimeout: TimeAmount = .seconds(10), readTimeout: TimeAmount = .seconds(30)) throws {
        self.vapid = vapid
        self.http = try PushTLS.httpClient(extraRoots: extraRoots, connectTimeout: connectTimeout, readTimeout: readTimeout)
    }

    /// Closes the connections.
    public func shutdown() async throws {
        try await http.shutdown()
    }

    /// Sends one message. A message too large is refused before anything is sent; 404 and 410
    /// (the subscription is gone) prune it; 429 and 5xx are retried, after `Retry-After` when given.
    public func send(_ plaintext: [UInt8], to subscription: WebPushSubscription, ttl: Int = 24 * 3600,
                     urgency: Urgency = .normal, topic: String? = nil) async -> DeliveryOutcome {
        guard plaintext.count <= WebPushEncryption.maxPlaintext else {
            return .failed(reason: "the message is \(plaintext.count) bytes, over Web Push's \(WebPushEncryption.maxPlaintext)", prune: false)
        }
        var request = HTTPClientRequest(url: subscription.endpoint)
        request.method = .POST
        do {
            request.headers.add(name: "authorization", value: try vapid.authorization(for: subscription.origin))
            request.body = .bytes(ByteBuffer(bytes: try WebPushEncryption.encrypt(plaintext, for: subscription)))
        } catch {
            return .failed(reason: "cannot encrypt or sign the message: \(error)", prune: false)
        }
        request.headers.add(name: "content-encoding", value: "aes128gcm")
        request.headers.add(name: "content-type", value: "application/octet-stream")
        request.headers.add(name: "ttl", value: String(max(0, ttl)))
        request.headers.add(name: "urgency", value: urgency.rawValue)
        if let topic { request.headers.add(name: "topic", value: topic) }
        do {
            let response = try await http.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 16 * 1024)
            let status = Int(response.status.code)
            let detail = String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines).prefix(300)
            let reason = "\(status) \(detail.isEmpty ? response.status.reasonPhrase : String(detail))"
            switch status {
            case 200...202:
                return .sent(id: response.headers.first(name: "location"))
            case 404, 410:
                return .failed(reason: reason, prune: true)
            case 429, 500...599:
                return .retry(reason: reason, after: response.headers.first(name: "retry-after").flatMap(Double.init))
            default:
                return .failed(reason: reason, prune: false)
            }
        } catch {
            return .retry(reason: "\(subscription.origin): \(error)", after: nil)
        }
    }
}
