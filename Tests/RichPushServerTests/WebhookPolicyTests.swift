import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import PushDelivery
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

/// What a webhook receiver stand-in took, by route: each POST's arrival and its events' ids, and
/// when each answer went.
final class WebhookReceipts: Sendable {
    struct Post: Sendable {
        var at: ContinuousClock.Instant
        var ids: [Int]
    }

    private let postsByRoute = NIOLockedValueBox<[String: [Post]]>([:])
    private let answersByRoute = NIOLockedValueBox<[String: [ContinuousClock.Instant]]>([:])

    /// Records a POST to `route` with `body` (one event, or `{"events":[…]}`); how many `route` has had.
    @discardableResult
    func took(_ route: String, _ body: ByteBuffer) -> Int {
        let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        let events = (object?["events"] as? [[String: Any]]) ?? object.map { [$0] } ?? []
        let post = Post(at: .now, ids: events.compactMap { $0["id"] as? Int })
        return postsByRoute.withLockedValue { posts in
            posts[route, default: []].append(post)
            return posts[route]?.count ?? 0
        }
    }

    /// Records that `route` answered a POST.
    func answered(_ route: String) {
        answersByRoute.withLockedValue { $0[route, default: []].append(.now) }
    }

    func posts(_ route: String) -> [Post] { postsByRoute.withLockedValue { $0[route] ?? [] } }
    func answers(_ route: String) -> [ContinuousClock.Instant] { answersByRoute.withLockedValue { $0[route] ?? [] } }
    /// The ids `route` was sent, in order, each once.
    func ids(_ route: String) -> [Int] {
        var seen = Set<Int>()
        return posts(route).flatMap(\.ids).filter { seen.insert($0).inserted }
    }
}

/// Webhook receivers on loopback: `/fast` answers at once; `/slow` holds its first POST for
/// `stall` and answers the others at once; `/moved` redirects to `elsewhere`.
func webhookReceivers(_ receipts: WebhookReceipts, stall: Duration = .seconds(10), elsewhere: String = "http://127.0.0.1:9/") -> Router<BasicRequestContext> {
    let router = Router()
    router.post("fast") { request, _ -> Response in
        receipts.took("fast", try await request.body.collect(upTo: 1 << 20))
        receipts.answered("fast")
        return Response(status: .noContent)
    }
    router.post("slow") { request, _ -> Response in
        if receipts.took("slow", try await request.body.collect(upTo: 1 << 20)) == 1 {
            try await Task.sleep(for: stall)
        }
        receipts.answered("slow")
        return Response(status: .noContent)
    }
    router.post("moved") { request, _ -> Response in
        receipts.took("moved", try await request.body.collect(upTo: 1 << 20))
        return Response(status: .temporaryRedirect, headers: [.location: elsewhere])
    }
    return router
}

/// docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: webhook URLs go through the outbound policy of Web Push endpoints, and each webhook
/// is delivered on its own, so that one slow receiver does not hold the others' events.
@Suite("Webhooks: the outbound policy, and each delivered on its own (SPEC §24)")
struct WebhookPolicyTests {
    /// A live server whose webhook dispatcher looks every 100 ms and backs off 0.2 s, with a
    /// provider that answers every push; `allowPrivate` is `--allow-private-webhooks`.
    static func serve(allowPrivate: Bool, _ body: @Sendable (TestServer) async throws -> Void) async throws {
        try await TestServer.run({ configuration in
            configuration.webhookInterval = .milliseconds(100)
            configuration.webhookBackoff = 0.2
            configuration.allowPrivateWebhooks = allowPrivate
        }, provider: AnsweringProvider(), body)
    }

    static let secret = "whsec_policy_0123456789abcdef"

    /// One `sent` event for every webhook: a notification to alice's device, through the test's provider.
    func notify(_ s: TestServer) async throws {
        let (created, _) = try await s.json(.post, "/api/notifications", body: #""hello""#)
        #expect(created.status == .created)
    }

    @Test("without --allow-private-webhooks a webhook at a loopback address, by IP or by a name that resolves there, is never connected to and says why, naming the flag; with it, a loopback receiver gets its events")
    func privateReceivers() async throws {
        let service = try await ConnectionCounter.start()
        try await Self.serve(allowPrivate: false) { s in
            #expect(!s.configuration.allowPrivateWebhooks)
            let webhooks = WebhookStore(database: s.database)
            // As one added while private receivers were allowed (or by another node's operator), before a restart without the flag.
            let byAddress = try await webhooks.add(url: "http://127.0.0.1:\(service.port)/hook", events: [.sent], secret: Self.secret, allowPrivate: true)
            // A name passes the store's rules; where it resolves is checked at each delivery.
            let byName = try await webhooks.add(url: "https://localhost:\(service.port)/hook", events: [.sent], secret: Self.secret)
            _ = try await s.registerDevice(String(repeating: "5a", count: 32))
            try await notify(s)
            #expect(try await eventually(within: 30) {
                try await webhooks.list().allSatisfy { ($0.id == byAddress || $0.id == byName) && $0.attempts > 0 }
            })
            let listed = try await webhooks.list()
            let address = try #require(listed.first { $0.id == byAddress })
            let name = try #require(listed.first { $0.id == byName })
            #expect(address.lastError?.contains("must be an https:// URL") == true && address.lastError?.contains("--allow-private-webhooks") == true,
                    "\(String(describing: address.lastError))")
            #expect(name.lastError?.contains("resolves to") == true && name.lastError?.contains("public addresses") == true
                    && name.lastError?.contains("--allow-private-webhooks") == true, "\(String(describing: name.lastError))")
            #expect(address.delivered == 0 && name.delivered == 0)
        }
        #expect(service.count == 0, "a webhook connected to a loopback address")
        await service.stop()

        // With the flag, the same kind of receiver takes its events.
        let receipts = WebhookReceipts()
        try await servingRouter(webhookReceivers(receipts)) { port in
            try await Self.serve(allowPrivate: true) { s in
                let webhooks = WebhookStore(database: s.database)
                let hook = try await webhooks.add(url: "http://127.0.0.1:\(port)/fast", events: [.sent], secret: Self.secret, allowPrivate: true)
                _ = try await s.registerDevice(String(repeating: "5a", count: 32))
                try await notify(s)
                #expect(try await eventually(within: 30) { receipts.ids("fast").count == 1 })
                #expect(try await eventually(within: 10) { try await webhooks.list().first { $0.id == hook }?.delivered == 1 })
            }
        }
    }

    @Test("a receiver that holds its POST 10 s delays no other webhook: the other, added after it, gets each event while the slow one still holds its first; the slow one then gets everything, in order")
    func slowReceiverHoldsOnlyItsOwn() async throws {
        let receipts = WebhookReceipts()
        try await servingRouter(webhookReceivers(receipts, stall: .seconds(10))) { port in
            try await Self.serve(allowPrivate: true) { s in
                let webhooks = WebhookStore(database: s.database)
                // The slow one first: a lower id, which the queue used to serve first, and wait on.
                let slow = try await webhooks.add(url: "http://127.0.0.1:\(port)/slow", events: [.sent], secret: Self.secret, allowPrivate: true)
                let fast = try await webhooks.add(url: "http://127.0.0.1:\(port)/fast", events: [.sent], secret: Self.secret, allowPrivate: true)
                _ = try await s.registerDevice(String(repeating: "5a", count: 32))
                try await notify(s)
                #expect(try await eventually(within: 30) { !receipts.posts("slow").isEmpty && !receipts.posts("fast").isEmpty },
                        "slow: \(receipts.posts("slow").count) posts, fast: \(receipts.posts("fast").count)")
                let held = try #require(receipts.posts("slow").first).at
                let first = try #require(receipts.posts("fast").first).at
                // Generous: the fast one has its event within a second or so of the slow one's stall; 10 s when it waits behind it.
                #expect(first - held < .seconds(5), "the fast receiver got its event \(first - held) after the slow one began to hold its own")

                // Traffic goes on: the fast receiver takes the next event too, still before the slow one has answered its first.
                try await notify(s)
                #expect(try await eventually(within: 30) { receipts.ids("fast").count == 2 }, "\(receipts.ids("fast"))")
                let second = try #require(receipts.posts("fast").last).at
                let slowAnswer = receipts.answers("slow").first
                #expect(slowAnswer.map { second < $0 } ?? true, "the fast receiver waited for the slow one")

                // The slow one loses nothing: once it answers, both events arrive, in order.
                #expect(try await eventually(within: 40) { try await webhooks.list().first { $0.id == slow }?.delivered == 2 })
                #expect(receipts.ids("slow") == receipts.ids("fast"), "slow \(receipts.ids("slow")), fast \(receipts.ids("fast"))")
                let listed = try await webhooks.list()
                #expect(listed.first { $0.id == fast }?.delivered == 2 && listed.allSatisfy { $0.lastError == nil }, "\(listed)")
            }
        }
    }

    @Test("a redirect from a receiver is never followed: the delivery fails saying so, the place it points to is never connected to, and the events wait for a 2xx")
    func redirectNotFollowed() async throws {
        let elsewhere = try await ConnectionCounter.start()
        let receipts = WebhookReceipts()
        try await servingRouter(webhookReceivers(receipts, elsewhere: "http://127.0.0.1:\(elsewhere.port)/stolen")) { port in
            try await Self.serve(allowPrivate: true) { s in
                let webhooks = WebhookStore(database: s.database)
                let hook = try await webhooks.add(url: "http://127.0.0.1:\(port)/moved", events: [.sent], secret: Self.secret, allowPrivate: true)
                _ = try await s.registerDevice(String(repeating: "5a", count: 32))
                try await notify(s)
                #expect(try await eventually(within: 30) { try await webhooks.list().first { $0.id == hook }?.lastError != nil })
                let state = try #require(try await webhooks.list().first { $0.id == hook })
                #expect(state.lastError?.contains("307") == true && state.lastError?.contains("does not follow") == true,
                        "\(String(describing: state.lastError))")
                #expect(state.delivered == 0 && !receipts.posts("moved").isEmpty)
            }
        }
        #expect(elsewhere.count == 0, "a redirect was followed")
        await elsewhere.stop()
    }
}
