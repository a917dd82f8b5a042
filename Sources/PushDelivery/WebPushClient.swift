import Foundation
import NIOCore
import NIOHTTP1
import RichPushCore

/// Sends Web Push messages (RFC 8030): each body encrypted for its subscription (RFC 8291) and
/// signed for with VAPID (RFC 8292), POSTed to the subscription's endpoint.
///
/// An endpoint is a URL a user chose, so every send goes through `OutboundHTTPClient`: https on
/// port 443 to a name whose every address is public, connected to the address checked, a short
/// deadline, no redirect followed (unless private endpoints are allowed, for local stand-ins).
public final class WebPushClient: Sendable {
    /// RFC 8030 §5.3: how urgently the push service should wake the device.
    public enum Urgency: String, Sendable {
        case veryLow = "very-low", low, normal, high
    }

    public let vapid: VAPID
    private let http: OutboundHTTPClient

    /// `extraRoots` (PEM files, `--push-ca`) are trusted beside the system's roots;
    /// `allowPrivateEndpoints` (`--allow-private-push-endpoints`) lets endpoints be http, on any
    /// port, at private and loopback addresses: for local stand-ins, never in production.
    public convenience init(vapid: VAPID, extraRoots: [String] = [], allowPrivateEndpoints: Bool = false) throws {
        try self.init(vapid: vapid, extraRoots: extraRoots, policy: OutboundPolicy(allowPrivate: allowPrivateEndpoints))
    }

    /// A client under `policy` (its timeouts, limits and which rules are lifted).
    public init(vapid: VAPID, extraRoots: [String] = [], policy: OutboundPolicy) throws {
        self.vapid = vapid
        self.http = try OutboundHTTPClient(policy: policy, extraRoots: extraRoots)
    }

    /// Nothing to close: each message has a connection of its own.
    public func shutdown() async throws {}

    /// Sends one message. A message too large is refused before anything is sent; 404 and 410
    /// (the subscription is gone) prune it; 429 and 5xx are retried, after `Retry-After` when given;
    /// a 3xx fails it (never followed). An endpoint the policy refuses (a non-public address, http,
    /// another port) is never connected to and prunes the subscription; a timeout is retried.
    public func send(_ plaintext: [UInt8], to subscription: WebPushSubscription, ttl: Int = 24 * 3600,
                     urgency: Urgency = .normal, topic: String? = nil) async -> DeliveryOutcome {
        guard plaintext.count <= WebPushEncryption.maxPlaintext else {
            return .failed(reason: "the message is \(plaintext.count) bytes, over Web Push's \(WebPushEncryption.maxPlaintext)", prune: false)
        }
        var headers = HTTPHeaders()
        let body: ByteBuffer
        do {
            headers.add(name: "authorization", value: try vapid.authorization(for: subscription.origin))
            body = ByteBuffer(bytes: try WebPushEncryption.encrypt(plaintext, for: subscription))
        } catch {
            return .failed(reason: "cannot encrypt or sign the message: \(error)", prune: false)
        }
        headers.add(name: "content-encoding", value: "aes128gcm")
        headers.add(name: "content-type", value: "application/octet-stream")
        headers.add(name: "ttl", value: String(max(0, ttl)))
        headers.add(name: "urgency", value: urgency.rawValue)
        if let topic { headers.add(name: "topic", value: topic) }
        do {
            let response = try await http.post(subscription.endpoint, headers: headers, body: body)
            let status = Int(response.status.code)
            let detail = String(buffer: response.body).trimmingCharacters(in: .whitespacesAndNewlines).prefix(300)
            let reason = "\(status) \(detail.isEmpty ? response.status.reasonPhrase : String(detail))"
            switch status {
            case 200...202:
                return .sent(id: response.headers.first(name: "location"))
            case 300...399:
                // A push service does not redirect; following one would let an endpoint send us anywhere.
                let target = response.headers.first(name: "location").map { " to \($0.prefix(200))" } ?? ""
                return .failed(reason: "\(reason): a redirect\(target), which RichPush does not follow", prune: false)
            case 404, 410:
                return .failed(reason: reason, prune: true)
            case 429, 500...599:
                return .retry(reason: reason, after: response.headers.first(name: "retry-after").flatMap(Double.init))
            default:
                return .failed(reason: reason, prune: false)
            }
        } catch let error as OutboundError where error.isRefusal {
            // The URL itself can never be sent to (http, another port, an IP address): prune it. A
            // name that resolves to a private address fails the push but keeps the subscription:
            // split-horizon DNS or a private endpoint of a cloud may answer so for a real service.
            return .failed(reason: error.message, prune: error.refusesTheURL)
        } catch {
            return .retry(reason: "\(subscription.origin): \(ConnectionWords.clean("\(error)"))", after: nil)
        }
    }
}
