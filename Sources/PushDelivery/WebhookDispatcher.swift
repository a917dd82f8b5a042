import Foundation
import Telemetry
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import RichPushCore
import ServiceLifecycle

extension OutboundPolicy {
    /// The rules for webhook URLs (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks), those of Web Push endpoints but for the port: https
    /// to a host name whose every address is public, connected to an address checked, no redirect
    /// followed; a receiver may listen on any port. 5 s to connect and 15 s for the whole call, as
    /// a receiver had before. `allowPrivate` (`--allow-private-webhooks`) lifts the address and
    /// scheme rules, for a receiver on this machine or a private network.
    /// `overrideHint` names the flag where it applies: `serve` for deliveries, `webhooks add` there.
    public static func webhooks(allowPrivate: Bool, overrideHint: String = "serve " + WebhookStore.allowPrivateFlag) -> OutboundPolicy {
        var policy = OutboundPolicy(allowPrivate: allowPrivate, subject: "the webhook", overrideHint: overrideHint)
        policy.allowAnyPort = true
        policy.connectTimeout = .seconds(5)
        policy.deadline = .seconds(15)
        return policy
    }
}

/// Delivers the event queue to webhooks (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks, §24): a batch of up to 100 events per POST (one
/// event is sent as itself, several as `{"events":[…]}`), signed with `X-RichPush-Signature`;
/// the cursor moves only on 2xx, so every event arrives at least once, in order.
///
/// Every POST goes through `OutboundHTTPClient` under `OutboundPolicy.webhooks`: the host is
/// resolved at each delivery and refused unless every address is public, the connection goes to
/// an address checked, and a redirect is an answer (a failure), never followed.
///
/// Webhooks are delivered independently: up to `concurrency` at once, each batch leased by one
/// node (`WebhookStore.claim`), so a receiver that stalls holds only its own queue: neither the
/// pushes nor another webhook's events wait for it. A receiver that fails or stalls is tried
/// again with backoff, for 24 h.
public struct WebhookDispatcher: Service {
    let webhooks: WebhookStore
    let http: OutboundHTTPClient
    let interval: Duration
    let backoffBase: Double
    let concurrency: Int
    let logger: Logger
    /// This process's mark on the webhooks it leases.
    private let holder = Int64.random(in: 1 ... .max)

    /// A dispatcher looking for due batches every `interval`; `extraRoots` (`--push-ca`) are
    /// trusted besides the system's; `allowPrivate` (`--allow-private-webhooks`) lets receivers be
    /// http and at loopback or private addresses.
    public init(webhooks: WebhookStore, extraRoots: [String] = [], allowPrivate: Bool = false, interval: Duration = .milliseconds(500),
                backoffBase: Double = 1, concurrency: Int = 16, logger: Logger) throws {
        try self.init(webhooks: webhooks, policy: .webhooks(allowPrivate: allowPrivate), extraRoots: extraRoots, interval: interval,
                      backoffBase: backoffBase, concurrency: concurrency, logger: logger)
    }

    /// A dispatcher under `policy` (its timeouts, and which rules are lifted), delivering to up to
    /// `concurrency` webhooks at once.
    public init(webhooks: WebhookStore, policy: OutboundPolicy, extraRoots: [String] = [], interval: Duration = .milliseconds(500),
                backoffBase: Double = 1, concurrency: Int = 16, logger: Logger) throws {
        self.webhooks = webhooks
        self.http = try OutboundHTTPClient(policy: policy, extraRoots: extraRoots)
        self.interval = interval
        self.backoffBase = backoffBase
        self.concurrency = max(1, concurrency)
        self.logger = logger
    }

    /// A batch leased to this node: the webhook, its secret, its events in order.
    typealias Batch = (webhook: Webhook, secret: String, events: [DeliveryEvent])

    public func run() async throws {
        // Deliveries in flight: each holds one webhook's lease until its receiver answers.
        let running = NIOLockedValueBox(0)
        await withDiscardingTaskGroup { group in
            var compacted = ContinuousClock.now
            // A cancelled task (the service group stopping on another service's failure) ends too:
            // its sleeps would return at once, and the loop would spin.
            while !Task.isShuttingDownGracefully, !Task.isCancelled {
                if ContinuousClock.now - compacted > .seconds(60) {
                    // Events every webhook has taken go.
                    compacted = .now
                    do { try await webhooks.compact() } catch { logger.warning("cannot compact the webhook queue", metadata: ["error": "\(error)"]) }
                }
                // Every free slot takes a due batch: a webhook whose receiver is slow holds one slot, not the queue.
                while running.withLockedValue({ $0 }) < concurrency, !Task.isShuttingDownGracefully {
                    let claimed: Batch?
                    do {
                        claimed = try await webhooks.claim(holder: holder)
                    } catch {
                        logger.error("cannot read the webhook queue", metadata: ["error": "\(error)"])
                        break
                    }
                    guard let batch = claimed else { break }
                    running.withLockedValue { $0 += 1 }
                    group.addTask {
                        await work(from: batch)
                        running.withLockedValue { $0 -= 1 }
                    }
                }
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            }
            // Deliveries under way finish (each within the policy's deadline); their leases end with them.
        }
    }

    /// Delivers `batch`, then whatever batch is due next (of any webhook) while there is one: a
    /// slot freed by a receiver that answered serves the next webhook at once, without waiting
    /// for the next look at the queue.
    private func work(from batch: Batch) async {
        var next: Batch? = batch
        while let current = next {
            do {
                try await deliver(current)
            } catch {
                logger.error("cannot record a webhook delivery", metadata: ["webhook": "\(current.webhook.id)", "error": "\(error)"])
                return
            }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
            do {
                next = try await webhooks.claim(holder: holder)
            } catch {
                logger.error("cannot read the webhook queue", metadata: ["error": "\(error)"])
                return
            }
        }
    }

    /// Delivers one due batch, if any; whether there was one and its receiver took it.
    public func deliverOne() async throws -> Bool {
        guard let batch = try await webhooks.claim(holder: holder) else { return false }
        return try await deliver(batch)
    }

    /// POSTs `batch` to its webhook and records the outcome: the cursor moves on a 2xx; anything
    /// else (a refusal by the policy, a redirect, no answer within the deadline) is retried after
    /// a backoff. Whether the receiver took it.
    ///
    /// While tracing is on it is a span (docs/operations.md#traces) of the trace of the request
    /// that made the first of its events' campaigns, and the POST carries `traceparent`.
    @discardableResult
    private func deliver(_ batch: Batch) async throws -> Bool {
        guard Telemetry.isTracing else { return try await post(batch) }
        let campaigns = Array(Set(batch.events.compactMap(\.campaign))).sorted()
        let parents = campaigns.isEmpty ? [:] : try await webhooks.traceparents(of: campaigns)
        let parent = campaigns.lazy.compactMap { parents[$0] }.first.flatMap { Telemetry.context(traceparent: $0) }
        return try await Telemetry.traced("webhook delivery", ofKind: .client, parent: parent) { span in
            span?.attributes["webhook.id"] = Int(batch.webhook.id)
            span?.attributes["webhook.events"] = batch.events.count
            let taken = try await post(batch)
            span?.attributes["webhook.delivered"] = taken
            if !taken { span?.setStatus(SpanStatus(code: .error)) }
            return taken
        }
    }

    private func post(_ batch: Batch) async throws -> Bool {
        let (webhook, secret, events) = batch
        let object: Any
        if events.count == 1 {
            object = events[0].json
        } else {
            let list: [[String: Any]] = events.map { $0.json }
            object = ["events": list] as [String: Any]
        }
        let body = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "User-Agent", value: "RichPush webhooks")
        headers.add(name: "X-RichPush-Signature", value: WebhookSignature.header(body: body, secret: secret, time: Int(Date().timeIntervalSince1970)))
        for (name, value) in Telemetry.propagationHeaders() { headers.add(name: name, value: value) }
        let failure: String?
        do {
            let response = try await http.post(webhook.url, headers: headers, body: ByteBuffer(bytes: body))
            let status = Int(response.status.code)
            switch status {
            case 200..<300:
                failure = nil
            case 300..<400:
                // Following one would let a receiver send the events, signed, anywhere (an internal address included).
                let target = response.headers.first(name: "location").map { " to \($0.prefix(200))" } ?? ""
                failure = "HTTP \(status): a redirect\(target), which RichPush does not follow"
            default:
                failure = "HTTP \(status)"
            }
        } catch let error as OutboundError {
            failure = error.message
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
