import APNsSandbox
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PushDelivery
import RichPushCore
@testable import RichPushAPI
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import ServiceLifecycle
import Testing

/// A plain TCP listener on loopback that counts the connections it accepts and answers nothing:
/// the "internal service" a subscription must never reach.
final class ConnectionCounter: Sendable {
    let channel: any Channel
    private let accepted: NIOLockedValueBox<Int>

    private init(channel: any Channel, accepted: NIOLockedValueBox<Int>) {
        self.channel = channel
        self.accepted = accepted
    }

    var port: Int { channel.localAddress?.port ?? 0 }
    var count: Int { accepted.withLockedValue { $0 } }

    static func start() async throws -> ConnectionCounter {
        let accepted = NIOLockedValueBox(0)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                accepted.withLockedValue { $0 += 1 }
                return child.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return ConnectionCounter(channel: channel, accepted: accepted)
    }

    func stop() async {
        try? await channel.close().get()
    }
}

/// Serves `router` on a free loopback port (over TLS when `tls` is given) while `body` runs with the port.
func servingRouter(_ router: Router<BasicRequestContext>, tls: TLSConfiguration? = nil, _ body: @Sendable (Int) async throws -> Void) async throws {
    let port = NIOLockedValueBox<Int?>(nil)
    var logger = Logger(label: "push-endpoint")
    logger.logLevel = .warning
    let app = Application(router: router, server: try tls.map { try .tls(.http1(), tlsConfiguration: $0) } ?? .http1(),
                          configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { channel in port.withLockedValue { $0 = channel.localAddress?.port } }, logger: logger)
    let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        do {
            let number = try await boundPort(port)
            try await body(number)
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
}

/// SSRF through Web Push subscriptions: an endpoint is a URL a user chose, and RichPush POSTs to it.
@Suite("Web Push endpoints reach public addresses only (SSRF)")
struct PushEndpointSSRFTests {
    static let point = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
    static let auth = [UInt8](repeating: 1, count: 16)
    static var keys: String { #"{"p256dh":"\#(Base64URL.encode(point))","auth":"\#(Base64URL.encode(auth))"}"# }

    static func handle(_ endpoint: String) -> String { #"{"endpoint":"\#(endpoint)","keys":\#(keys)}"# }

    func register(_ s: TestServer, _ endpoint: String) async throws -> (TestResponse, String) {
        let (_, created) = try await s.json(.post, "/api/register")
        let id = try #require((created as? [String: Any])?["registrationId"] as? String)
        let (response, _) = try await s.json(.put, "/api/register/\(id)", body: #"{"platform":"web","handle":\#(Self.handle(endpoint))}"#)
        return (response, response.detail)
    }

    @Test("registering an endpoint over http, on another port, at an IP address or at a name that resolves to loopback or not at all is 422, saying why")
    func registrationRefused() async throws {
        let service = try await ConnectionCounter.start()
        try await TestServer.run { s in
            let refused: [(String, String)] = [
                ("http://127.0.0.1:\(service.port)/internal?x=1", "must be an https:// URL"),
                ("https://10.0.0.1/push/1", "IP address 10.0.0.1, a private address"),
                ("https://[::ffff:127.0.0.1]/push/1", "IP address ::ffff:127.0.0.1, a loopback address"),
                ("https://[::1]/push/1", "IP address ::1"),
                ("https://169.254.169.254/latest/meta-data", "link-local"),
                ("https://2130706433/push/1", "IP address 2130706433"),
                ("https://localhost:8443/push/1", "must use port 443, not 8443"),
                ("https://localhost:\(service.port)/push/1", "must use port 443"),
                ("https://localhost/push/1", "resolves to"),
                ("https://nosuch.invalid/push/1", "resolve"),
            ]
            for (endpoint, words) in refused {
                let (response, detail) = try await register(s, endpoint)
                #expect(response.status == .unprocessableContent, "\(endpoint): \(response.status)")
                #expect(detail.contains(words), "\(endpoint): \(detail)")
            }
            // localhost names the loopback interface whichever address comes first.
            let (_, localhost) = try await register(s, "https://localhost/push/1")
            #expect(localhost.contains("loopback") && localhost.contains("public addresses"), "\(localhost)")
            let store = try await s.openStoreAgain()
            defer { store.close() }
            #expect(try await store.registrations.list(for: "alice").allSatisfy { $0.platform == nil })
            // A malformed subscription is still 400, before any lookup.
            let (_, created) = try await s.json(.post, "/api/register")
            let id = try #require((created as? [String: Any])?["registrationId"] as? String)
            let (bad, _) = try await s.json(.put, "/api/register/\(id)",
                                            body: #"{"platform":"web","handle":{"endpoint":"https://10.0.0.1/","keys":{"p256dh":"BBBB","auth":"AAAA"}}}"#)
            #expect(bad.status == .badRequest)
        }
        // With --allow-private-push-endpoints (local stand-ins), the same endpoint is taken.
        try await TestServer.run({ $0.allowPrivatePushEndpoints = true }) { s in
            let (response, detail) = try await register(s, "http://127.0.0.1:\(service.port)/internal?x=1")
            #expect(response.status == .ok, "\(detail)")
        }
        #expect(service.count == 0, "registration connected to the endpoint")
        await service.stop()
    }

    @Test("a subscription at a private address that got into the store is never connected to: its push fails saying why, and the subscription goes")
    func deliveryRefused() async throws {
        let service = try await ConnectionCounter.start()
        let vapid = try VAPID(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com")
        // As serve sends without --allow-private-push-endpoints.
        let web = WebPushProvider(client: try WebPushClient(vapid: vapid))
        try await TestServer.run(provider: PlatformRouter(["web": web])) { s in
            // As a registration made while private endpoints were allowed, before a restart without the flag.
            let store = try await s.openStoreAgain()
            defer { store.close() }
            let registration = try await store.registrations.create(for: "alice")
            _ = try await store.registrations.update(id: registration.id, for: "alice", with: DeviceRegistration(
                platform: "web", handle: Self.handle("http://127.0.0.1:\(service.port)/internal?x=1"), tags: []))
            let (created, _) = try await s.json(.post, "/api/notifications", body: #""hello""#)
            #expect(created.status == .created)
            #expect(try await eventually(within: 30) { try await store.registrations.list(for: "alice").isEmpty })
            let delivery = try #require(try await store.deliveries.list().first)
            #expect(delivery.state == .failed && delivery.reason?.contains("https://") == true, "\(String(describing: delivery.reason))")
        }
        #expect(service.count == 0, "the push connected to the private endpoint")

        // With http and any port allowed but not private addresses, the address check alone stops
        // it: a name resolving to loopback, IP literals in every spelling.
        var policy = OutboundPolicy(allowPrivate: false)
        policy.allowPlainHTTP = true
        policy.allowAnyPort = true
        let sender = try WebPushClient(vapid: vapid, policy: policy)
        // A name that resolves to a private address fails the push but keeps the subscription (split-horizon
        // DNS may answer so for a real service); an IP literal can never be sent to, so it goes.
        for (endpoint, words, pruned) in [("http://localhost:\(service.port)/push/1", "resolves to", false),
                                          ("https://localhost:\(service.port)/push/1", "loopback", false),
                                          ("http://127.0.0.1:\(service.port)/push/1", "IP address 127.0.0.1", true),
                                          ("https://[::ffff:127.0.0.1]:\(service.port)/push/1", "IPv4-mapped", true)] {
            let subscription = try WebPushSubscription(endpoint: endpoint, p256dh: Self.point, auth: Self.auth)
            let outcome = await sender.send(Array("hi".utf8), to: subscription)
            guard case .failed(let reason, pruned) = outcome else { Issue.record("\(endpoint): \(outcome)"); continue }
            #expect(reason.contains(words) && reason.contains("public addresses"), "\(endpoint): \(reason)")
        }
        #expect(service.count == 0, "a push connected to a loopback endpoint")
        await service.stop()
    }

    @Test("a push service that does not answer within the deadline is retried, not waited on")
    func deadline() async throws {
        let silent = try await ConnectionCounter.start()
        var policy = OutboundPolicy(allowPrivate: true)
        policy.deadline = .seconds(1)
        let sender = try WebPushClient(vapid: try VAPID(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com"), policy: policy)
        let subscription = try WebPushSubscription(endpoint: "http://127.0.0.1:\(silent.port)/push/1", p256dh: Self.point, auth: Self.auth)
        let outcome = await sender.send(Array("hi".utf8), to: subscription)
        guard case .retry(let reason, nil) = outcome else { Issue.record("\(outcome)"); await silent.stop(); return }
        #expect(reason.contains("did not answer within 1 s"), "\(reason)")
        #expect(silent.count == 1)
        await silent.stop()
    }

    @Test("a redirect is an answer, never followed, over http and https (certificate checked against the host name); an answer's body is read up to 16 KiB")
    func redirectsNotFollowed() async throws {
        let elsewhere = try await ConnectionCounter.start()
        @Sendable func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.post("push/:id") { _, _ -> Response in
                Response(status: .temporaryRedirect, headers: [.location: "http://127.0.0.1:\(elsewhere.port)/stolen"])
            }
            router.post("big") { _, _ -> Response in
                Response(status: .internalServerError, body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "x"), count: 1 << 20)))
            }
            return router
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (certificate, key) = try APNsSandbox.selfSignedCertificate(commonName: "push service stand-in")
        let caPath = dir.appendingPathComponent("ca.pem").path
        try certificate.write(toFile: caPath, atomically: true, encoding: .utf8)
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(certificate.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem)))
        // Generous limits: the whole suite shares two cores, and this is not about speed.
        var generous = OutboundPolicy(allowPrivate: true)
        generous.connectTimeout = .seconds(30)
        generous.deadline = .seconds(60)
        let policy = generous
        let vapid = try VAPID(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com")
        let sender = try WebPushClient(vapid: vapid, extraRoots: [caPath], policy: policy)

        try await servingRouter(router()) { port in
            let subscription = try WebPushSubscription(endpoint: "http://127.0.0.1:\(port)/push/1", p256dh: Self.point, auth: Self.auth)
            let outcome = await sender.send(Array("hi".utf8), to: subscription)
            guard case .failed(let reason, false) = outcome else { Issue.record("\(outcome)"); return }
            #expect(reason.hasPrefix("307") && reason.contains("does not follow"), "\(reason)")

            let client = try OutboundHTTPClient(policy: policy)
            let answer = try await client.post("http://127.0.0.1:\(port)/big", headers: HTTPHeaders(), body: ByteBuffer(string: "x"))
            #expect(answer.status == .internalServerError && answer.body.readableBytes == 16 * 1024 && answer.truncated)
        }
        try await servingRouter(router(), tls: tls) { port in
            let subscription = try WebPushSubscription(endpoint: "https://localhost:\(port)/push/1", p256dh: Self.point, auth: Self.auth)
            let outcome = await sender.send(Array("hi".utf8), to: subscription)
            guard case .failed(let reason, false) = outcome else { Issue.record("\(outcome)"); return }
            #expect(reason.hasPrefix("307") && reason.contains("does not follow"), "\(reason)")
            // Without the stand-in's root, the certificate is refused and nothing is sent.
            let untrusting = try WebPushClient(vapid: vapid, policy: policy)
            guard case .retry = await untrusting.send(Array("hi".utf8), to: subscription) else { Issue.record("an untrusted certificate was accepted"); return }
        }
        #expect(elsewhere.count == 0, "a redirect was followed")
        await elsewhere.stop()
    }
}
