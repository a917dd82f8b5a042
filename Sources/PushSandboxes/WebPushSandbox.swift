import Crypto
import Foundation
import Hummingbird
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import PushDelivery
import RichPushCore

/// A local Web Push service (RFC 8030) for development and tests: it hands out subscriptions as
/// a browser's push service would, and checks every message as the real ones do.
///
/// Each message must carry a VAPID `Authorization` (RFC 8292) whose ES256 signature verifies
/// against its `k`, whose `k` is the key the subscription was made with, whose `aud` is this
/// service's origin, whose `exp` is in the future and at most 24 h away and whose `sub` is a
/// `mailto:` or `https:` URI; a `TTL`, a valid `Urgency`, `Content-Encoding: aes128gcm`, at most
/// 4,096 bytes, and a body that decrypts (RFC 8291) with the subscription's private key.
public final class WebPushSandbox: PushStandIn {
    /// A message that passed every check, decrypted.
    public struct AcceptedMessage: Sendable {
        public var subscriptionID: String
        public var plaintext: [UInt8]
        public var ttl: Int
        public var urgency: String
        public var topic: String?
        public var messageID: String
    }

    private struct Subscriber {
        var key: P256.KeyAgreement.PrivateKey
        var auth: [UInt8]
        /// The VAPID public key (uncompressed point) the browser subscribed with.
        var applicationServerKey: [UInt8]
        /// Scripted answers, used before any check (tests of error handling): status, Retry-After.
        var failures: [(status: Int, retryAfter: Int?)] = []
        var gone = false
    }

    private struct State {
        var subscribers: [String: Subscriber] = [:]
    }

    private let state = NIOLockedValueBox(State())
    private let origin = NIOLockedValueBox("http://127.0.0.1")
    private let recorded: AcceptedMessages<AcceptedMessage>

    /// `keepAccepted` bounds the messages kept for `accepted` (the count keeps going).
    public init(keepAccepted: Int = 100_000, logLine: (@Sendable (String) -> Void)? = nil) {
        recorded = AcceptedMessages(keep: keepAccepted, logLine: logLine)
    }

    /// Where this service is reached (`http://127.0.0.1:<port>`); subscriptions' endpoints start with it.
    public func bound(origin: String) { self.origin.withLockedValue { $0 = origin } }

    /// A new subscription for an application server's VAPID public key, as a browser's
    /// `pushManager.subscribe({applicationServerKey})` makes one.
    public func subscribe(applicationServerKey: String) throws -> WebPushSubscription {
        guard let key = Base64URL.decodeBytes(applicationServerKey), key.count == 65,
              (try? P256.Signing.PublicKey(x963Representation: key)) != nil else {
            throw WebPushError("applicationServerKey must be an uncompressed P-256 point, base64url")
        }
        let id = Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
        let subscriber = Subscriber(key: P256.KeyAgreement.PrivateKey(), auth: (0..<16).map { _ in UInt8.random(in: 0...255) },
                                    applicationServerKey: key)
        state.withLockedValue { $0.subscribers[id] = subscriber }
        return try WebPushSubscription(endpoint: "\(origin.withLockedValue { $0 })/push/\(id)",
                                       p256dh: Array(subscriber.key.publicKey.x963Representation), auth: subscriber.auth)
    }

    /// The next `times` messages to `subscription` get `status` (with `Retry-After` when given).
    public func fail(_ subscription: WebPushSubscription, status: Int, retryAfter: Int? = nil, times: Int = 1) {
        let id = Self.id(subscription)
        state.withLockedValue { $0.subscribers[id]?.failures += Array(repeating: (status, retryAfter), count: times) }
    }

    /// The browser unsubscribed: messages get 410 from now on.
    public func unsubscribe(_ subscription: WebPushSubscription) {
        let id = Self.id(subscription)
        state.withLockedValue { $0.subscribers[id]?.gone = true }
    }

    public var accepted: [AcceptedMessage] { recorded.all }
    public var acceptedCount: Int { recorded.count }

    static func id(_ subscription: WebPushSubscription) -> String {
        String(subscription.endpoint.split(separator: "/").last ?? "")
    }

    /// Adds `POST /subscribe` and `POST /push/{id}` under `prefix` (bind the origin with the prefix too).
    public func addRoutes(to router: Router<BasicRequestContext>, at prefix: String = "") {
        let router = router.group(RouterPath(prefix))
        // What a browser's pushManager.subscribe does, for development: {"applicationServerKey"} → a PushSubscription.
        router.post("subscribe") { [self] request, _ -> Response in
            let body = try await request.body.collect(upTo: 16 * 1024)
            guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                  let key = object["applicationServerKey"] as? String, let subscription = try? subscribe(applicationServerKey: key) else {
                return Self.answer(400, "send {\"applicationServerKey\":\"<the VAPID public key, base64url>\"} (GET /api/webpush/key on RichPush)")
            }
            return Response(status: .created, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: subscription.handle)))
        }
        router.post("push/:id") { [self] request, context -> Response in
            let id = try context.parameters.require("id")
            let body = try await request.body.collect(upTo: 64 * 1024)
            return verdict(id: id, headers: request.headers, body: Array(body.readableBytesView))
        }
    }

    /// Checks one message; the response a push service would give.
    func verdict(id: String, headers: HTTPFields, body: [UInt8], now: Date = Date()) -> Response {
        func header(_ name: String) -> String? { headers[HTTPField.Name(name)!] }
        let scripted: (subscriber: Subscriber?, failure: (status: Int, retryAfter: Int?)?) = state.withLockedValue { state in
            guard var subscriber = state.subscribers[id] else { return (nil, nil) }
            let failure = subscriber.failures.isEmpty ? nil : subscriber.failures.removeFirst()
            state.subscribers[id] = subscriber
            return (subscriber, failure)
        }
        guard let subscriber = scripted.subscriber else { return Self.answer(404, "no such subscription") }
        if let failure = scripted.failure {
            return Self.answer(failure.status, "scripted failure", retryAfter: failure.retryAfter)
        }
        if subscriber.gone { return Self.answer(410, "the subscription has expired or been unsubscribed") }
        if let problem = checkVAPID(header("authorization"), subscriber: subscriber, now: now) { return Self.answer(problem.0, problem.1) }
        guard let ttlText = header("ttl"), let ttl = Int(ttlText), ttl >= 0 else { return Self.answer(400, "TTL is missing or not a whole number") }
        let urgency = header("urgency") ?? "normal"
        guard ["very-low", "low", "normal", "high"].contains(urgency) else { return Self.answer(400, "Urgency '\(urgency)' is not very-low, low, normal or high") }
        let topic = header("topic")
        if let topic, topic.count > 32 || !topic.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
            return Self.answer(400, "Topic must be at most 32 base64url characters")
        }
        guard header("content-encoding")?.lowercased() == "aes128gcm" else { return Self.answer(415, "Content-Encoding must be aes128gcm") }
        guard body.count <= 4096 else { return Self.answer(413, "the body is \(body.count) bytes, over 4096") }
        let plaintext: [UInt8]
        do {
            plaintext = try WebPushEncryption.decrypt(body, receiverKey: subscriber.key, auth: subscriber.auth)
        } catch {
            return Self.answer(400, "the body does not decrypt for this subscription: \(error)")
        }
        let messageID = UUID().uuidString.lowercased()
        let message = AcceptedMessage(subscriptionID: id, plaintext: plaintext, ttl: ttl, urgency: urgency, topic: topic, messageID: messageID)
        recorded.record(message) {
            ["subscription": id, "ttl": ttl, "urgency": urgency, "message": messageID, "payload": String(decoding: plaintext, as: UTF8.self)]
        }
        var response = Response(status: .created)
        response.headers[.location] = "\(origin.withLockedValue { $0 })/message/\(messageID)"
        return response
    }

    /// RFC 8292 §3: nil when the header is good, else the status and why.
    private func checkVAPID(_ authorization: String?, subscriber: Subscriber, now: Date) -> (Int, String)? {
        guard let authorization, authorization.lowercased().hasPrefix("vapid ") else {
            return (401, "Authorization must be 'vapid t=<JWT>, k=<key>'")
        }
        var parameters: [String: String] = [:]
        for part in authorization.dropFirst(6).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2 { parameters[pair[0].lowercased()] = String(pair[1]) }
        }
        guard let token = parameters["t"], let keyText = parameters["k"], let key = Base64URL.decodeBytes(keyText),
              let publicKey = try? P256.Signing.PublicKey(x963Representation: key) else {
            return (401, "the vapid Authorization needs t (a JWT) and k (the P-256 public key, base64url)")
        }
        guard key == subscriber.applicationServerKey else {
            return (403, "k is not the applicationServerKey this subscription was made with")
        }
        guard let parts = CompactJWT.parse(token), parts.algorithm == "ES256",
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parts.signature),
              publicKey.isValidSignature(signature, for: parts.signingInput) else {
            return (403, "the VAPID token is not an ES256 JWT signed by k")
        }
        let claims = parts.claims
        // The origin: scheme, host and port of where the service is bound, without its path.
        let audience = URL(string: origin.withLockedValue { $0 }).map { url in
            "\(url.scheme ?? "http")://\(url.host ?? "")" + (url.port.map { ":\($0)" } ?? "")
        }
        guard claims["aud"] as? String == audience else { return (403, "aud must be this push service's origin, \(audience ?? "")") }
        guard let exp = claims["exp"] as? Double, exp > now.timeIntervalSince1970, exp <= now.timeIntervalSince1970 + 24 * 3600 else {
            return (403, "exp must be in the future and at most 24 hours away")
        }
        guard let sub = claims["sub"] as? String, sub.hasPrefix("mailto:") || sub.hasPrefix("https://") else {
            return (403, "sub must be a mailto: or https: URI")
        }
        return nil
    }

    static func answer(_ status: Int, _ reason: String, retryAfter: Int? = nil) -> Response {
        var response = Response(status: .init(code: status), headers: [.contentType: "text/plain; charset=utf-8"],
                                body: .init(byteBuffer: ByteBuffer(string: reason)))
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }
}
