import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RichPushCore
import ServiceLifecycle

/// Delivers the event queue to webhooks (SPEC §20): a batch of up to 100 events per POST (one
/// event is sent as itself, several as `{"events":[…]}`), signed with `X-RichPush-Signature`;
/// the cursor moves only on 2xx, so every event arrives at least once, in order. A receiver that
/// fails or stalls is tried again with backoff, for 24 h; meanwhile it holds only its own queue:
/// pushes never wait for it. Each batch is leased by one node.
public struct WebhookDispatcher: Service {
    let webhooks: WebhookStore
    let http: HTTPClient
    let interval: Duration
    let backoffBase: Double
    let logger: Logger
    /// This process's mark on the webhooks it leases.
    private let holder = Int64.random(in: 1 ... .max)

    /// A dispatcher looking for due batches every `interval`; `extraRoots` (`--push-ca`) are trusted besides the system's.
    public init(webhooks: WebhookStore, extraRoots: [String] = [], interval: Duration = .milliseconds(500), backoffBase: Double = 1,
                logger: Logger) throws {
        self.webhooks = webhooks
        // A receiver gets 5 s to accept the connection and 10 s to answer; never a redirect.
        var configuration = HTTPClient.Configuration(tlsConfiguration: try PushTLS.configuration(extraRoots: extraRoots))
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(10))
        configuration.redirectConfiguration = .disallow
        self.http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.interval = interval
        self.backoffBase = backoffBase
        self.logger = logger
    }

    public func run() async throws {
        var compacted = ContinuousClock.now
        // A cancelled task (the service group stopping on another service's failure) ends too:
        // its sleeps would return at once, and the loop would spin.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            if ContinuousClock.now - compacted > .seconds(60) {
                // Events every webhook has taken go.
                compacted = .now
                do { try await webhooks.compact() } catch { logger.warning("cannot compact the webhook queue", metadata: ["error": "\(error)"]) }
            }
            var busy = false
            do {
                busy = try await deliverOne()
            } catch {
                logger.error("cannot read the webhook queue", metadata: ["error": "\(error)"])
            }
            if !busy { try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) } }
        }
        try? await http.shutdown()
    }

    /// Delivers one due batch, if any; whether there was one.
    public func deliverOne() async throws -> Bool {
        guard let (webhook, secret, events) = try await webhooks.claim(holder: holder) else { return false }
        let object: Any
        if events.count == 1 {
            object = events[0].json
        } else {
            let list: [[String: Any]] = events.map { $0.json }
            object = ["events": list] as [String: Any]
        }
        let body = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        var request = HTTPClientRequest(url: webhook.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "RichPush webhooks")
        request.headers.add(name: "X-RichPush-Signature", value: WebhookSignature.header(body: body, secret: secret, time: Int(Date().timeIntervalSince1970)))
        request.body = .bytes(ByteBuffer(bytes: body))
        let failure: String?
        do {
            let response = try await http.execute(request, timeout: .seconds(15))
            _ = try? await response.body.collect(upTo: 16 * 1024)
            failure = (200..<300).contains(Int(response.status.code)) ? nil : "HTTP \(response.status.code)"
        } catch {
            failure = "\(error)"
        }
        if let failure {
            logger.warning("a webhook did not take its events; trying again later", metadata: ["webhook": "\(webhook.id)", "error": "\(failure)",
                                                                                               "attempts": "\(webhook.attempts + 1)"])
            try await webhooks.failed(webhook.id, attempts: webhook.attempts, error: failure, backoffBase: backoffBase)
        } else {
            try await webhooks.delivered(webhook.id, through: events.last!.id, count: events.count)
        }
        return failure == nil
    }
}
