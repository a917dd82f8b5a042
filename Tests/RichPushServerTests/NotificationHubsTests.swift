import PushTestSupport
import RichPushTestSupport
import NIOSSL
import HummingbirdTLS
import APNsSandbox
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import PushDelivery
import Resilience
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import ServiceLifecycle
import Testing

/// A local stand-in for a Notification Hub: it checks the SAS signature as the service does
/// (HMAC-SHA256 with the key's UTF-8 bytes over the URL-encoded resource URI, a new line and
/// the expiry), the expiry itself, and the headers of a send; it records what it accepts.
final class HubStandIn: Sendable {
    struct Call: Sendable {
        var method: String
        var path: String
        var headers: [String: String]
        var body: Data
    }

    let keyName = "DefaultFullSharedAccessSignature"
    let key = "c2VjcmV0LWtleS1mb3ItdGVzdHM="
    let calls = NIOLockedValueBox<[Call]>([])

    /// nil when the Authorization header is a valid SAS token for `resource`, else why not.
    func checkSAS(_ header: String?, resource: String) -> String? {
        guard let header, header.hasPrefix("SharedAccessSignature ") else { return "missing SAS token" }
        var fields: [String: String] = [:]
        for pair in header.dropFirst("SharedAccessSignature ".count).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { fields[String(kv[0])] = String(kv[1]) }
        }
        guard let sr = fields["sr"], let sig = fields["sig"]?.removingPercentEncoding, let se = fields["se"], let expiry = Double(se) else {
            return "malformed SAS token"
        }
        guard fields["skn"] == keyName else { return "unknown key name" }
        guard sr == Self.encodeURIComponent(resource.lowercased()).lowercased() else { return "wrong resource \(sr)" }
        guard expiry > Date().timeIntervalSince1970 else { return "expired" }
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(sr)\n\(se)".utf8), using: SymmetricKey(data: Data(key.utf8)))
        guard Data(mac).base64EncodedString() == sig else { return "bad signature" }
        return nil
    }

    /// JavaScript's encodeURIComponent, written here independently of the client's.
    static func encodeURIComponent(_ text: String) -> String {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()".utf8)
        return text.utf8.map { unreserved.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0) }.joined()
    }

    /// A connection string for the stand-in at `base` (`http(s)://127.0.0.1:<port>/`), with `key` or the right one.
    func connectionString(_ base: String, key: String? = nil) -> String {
        "Endpoint=\(base);SharedAccessKeyName=\(keyName);SharedAccessKey=\(key ?? self.key)"
    }

    /// Runs a stand-in (over TLS when `tls` is given), calls `body` with it and its base URL, and
    /// stops it whatever `body` does.
    static func run(tls: TLSConfiguration? = nil, _ body: @Sendable (HubStandIn, String) async throws -> Void) async throws {
        let hub = HubStandIn()
        let port = NIOLockedValueBox<Int?>(nil)
        let group = ServiceGroup(configuration: .init(services: [try hub.application(port: port, tls: tls)], logger: Logger(label: "hub")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            do {
                let number = try await boundPort(port)
                try await body(hub, "\(tls == nil ? "http" : "https")://127.0.0.1:\(number)/")
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    func application(port: NIOLockedValueBox<Int?>, tls: TLSConfiguration? = nil) throws -> some ApplicationProtocol {
        let router = Router()
        let scheme = tls == nil ? "http" : "https"
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, context in
            let body = try await request.body.collect(upTo: 1 << 20)
            let hubURL = "\(scheme)://127.0.0.1:\(port.withLockedValue { $0 } ?? 0)/hub1"
            if let problem = self.checkSAS(request.headers[.authorization], resource: hubURL) {
                return Response(status: .unauthorized, body: .init(byteBuffer: ByteBuffer(string: "<Error><Detail>\(problem)</Detail></Error>")))
            }
            guard request.uri.queryParameters.get("api-version") == NotificationHubsClient.apiVersion else { return Response(status: .badRequest) }
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value } // lowercase: names are case-insensitive
            self.calls.withLockedValue { $0.append(Call(method: request.method.rawValue, path: request.uri.path, headers: headers, body: Data(body.readableBytesView))) }
            return Response(status: request.method == .post ? .created : .ok)
        }
        router.post("/hub1/messages", use: handler)
        router.put("/hub1/installations/:id", use: handler)
        router.delete("/hub1/installations/:id", use: handler)
        var logger = Logger(label: "hub")
        logger.logLevel = .warning
        return Application(router: router, server: try tls.map { try .tls(.http1(), tlsConfiguration: $0) } ?? .http1(),
                           configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                           onServerRunning: { channel in port.withLockedValue { $0 = channel.localAddress?.port } }, logger: logger)
    }
}

@Suite("Notification Hubs through a local stand-in that checks the SAS signature")
struct NotificationHubsTests {
    @Test("connection strings parse, sb:// becomes https://")
    func connectionString() throws {
        let c = try NotificationHubsConnection("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Full;SharedAccessKey=abc=")
        #expect(c.endpoint == "https://ns.servicebus.windows.net" && c.keyName == "Full" && c.key == "abc=")
        #expect(throws: PushError.self) { try NotificationHubsConnection("Endpoint=ftp://x;SharedAccessKeyName=a;SharedAccessKey=b") }
        // http:// is for loopback only: a key sent in the clear to another host is refused.
        for host in ["127.0.0.1:9000", "localhost", "[::1]:80", "127.0.0.2"] {
            #expect(try NotificationHubsConnection("Endpoint=http://\(host)/;SharedAccessKeyName=a;SharedAccessKey=b").endpoint == "http://\(host)")
        }
        for host in ["ns.servicebus.windows.net", "10.0.0.5", "localhost.example.com", "127.0.0.1.nip.io", "127.evil.com"] {
            #expect(throws: PushError.self) { try NotificationHubsConnection("Endpoint=http://\(host)/;SharedAccessKeyName=a;SharedAccessKey=b") }
        }
    }

    @Test("registrations are mirrored as installations; a notification is one tagged apple send; a wrong key fails with the hub's detail")
    func mirrorAndSend() async throws {
        try await HubStandIn.run { hub, base in
            let endpoint = hub.connectionString(base)
            let client = try NotificationHubsClient(connection: try NotificationHubsConnection(endpoint), hub: "hub1")
            try await TestServer.run(provider: NotificationHubsProvider(client: client), mirror: client) { s in
                let id = try await s.registerDevice(tokenA, tags: ["news"])
                let installation = try #require(hub.calls.withLockedValue { $0.first })
                #expect(installation.method == "PUT" && installation.path == "/hub1/installations/\(id)")
                let body = try JSONSerialization.jsonObject(with: installation.body) as? [String: Any]
                #expect(body?["pushChannel"] as? String == tokenA)
                #expect(body?["platform"] as? String == "apns")
                #expect(body?["tags"] as? [String] == ["username:alice", "news"])

                let (_, object) = try await s.json(.post, "/api/notifications")
                let nid = try #require((object as? [String: Any])?["id"] as? Int)
                #expect(try await eventually { hub.calls.withLockedValue { $0.count } == 2 })
                let send = try #require(hub.calls.withLockedValue { $0.last })
                #expect(send.method == "POST" && send.path == "/hub1/messages/")
                #expect(send.headers["servicebusnotification-format"] == "apple")
                #expect(send.headers["servicebusnotification-tags"] == "username:alice")
                #expect(send.headers["apns-push-type"] == "background")
                #expect(send.headers["apns-priority"] == "5")
                #expect(String(decoding: send.body, as: UTF8.self).contains("\"richId\":\"\(nid)\""))
                #expect(try await eventually { try await DeliveryStore(database: s.database).list(notification: Int64(nid)).first?.state == .sent })
                #expect(try await DeliveryStore(database: s.database).list(notification: Int64(nid)).map(\.target) == ["username:alice"])

                // Queued per device by another process (as `richpush notify` does): sent to the installation.
                let queued = try await NotificationStore(database: s.database).create(
                    for: "alice", draft: NotificationDraft(message: "from the CLI"), defaultImage: "logo.png", addressing: .perDevice)
                #expect(try await eventually { hub.calls.withLockedValue { $0.count } == 3 })
                let direct = try #require(hub.calls.withLockedValue { $0.last })
                #expect(direct.headers["servicebusnotification-tags"] == "$InstallationId:{\(id)}")
                #expect(try await eventually {
                    try await DeliveryStore(database: s.database).list(notification: queued.notification.id).first?.state == .sent
                })
            }
            let wrong = hub.connectionString(base, key: "wrong")
            let bad = try NotificationHubsClient(connection: try NotificationHubsConnection(wrong), hub: "hub1")
            let outcome = await bad.send(payload: Data("{}".utf8), tag: "username:alice")
            #expect(outcome == .failed(reason: "401 <Error><Detail>bad signature</Detail></Error>", prune: false))
            try await bad.shutdown()
        }
    }

    @Test("a campaign through the hub reaches the devices APNs would: installations for a tag expression, username tags for everyone; alert headers")
    func campaigns() async throws {
        try await HubStandIn.run { hub, base in
            let endpoint = hub.connectionString(base)
            let client = try NotificationHubsClient(connection: try NotificationHubsConnection(endpoint), hub: "hub1")
            try await TestServer.run(provider: NotificationHubsProvider(client: client), mirror: client) { s in
                let alice1 = try await s.registerDevice(tokenA, as: "alice", tags: ["news"])
                _ = try await s.registerDevice(tokenB, as: "alice", tags: ["sports"])
                let bob = try await s.registerDevice(String(repeating: "c", count: 64), as: "bob", tags: ["news"])
                let sends: @Sendable () -> [HubStandIn.Call] = { hub.calls.withLockedValue { $0.filter { $0.method == "POST" } } }

                let (tagged, body) = try await s.campaign(#"{"audience":{"tags":"news"},"title":"Hi"}"#)
                #expect(tagged.status == .accepted && body["devices"] as? Int == 2)
                #expect(try await eventually { sends().count == 2 })
                #expect(Set(sends().map { $0.headers["servicebusnotification-tags"] ?? "" }) == ["$InstallationId:{\(alice1)}", "$InstallationId:{\(bob)}"])
                #expect(sends().allSatisfy { $0.headers["apns-push-type"] == "alert" && $0.headers["apns-priority"] == "10" })
                #expect(sends().allSatisfy { String(decoding: $0.body, as: UTF8.self).contains("\"mutable-content\":1") })

                let (everyone, all) = try await s.campaign(#"{"audience":{"all":true},"mode":"silent"}"#)
                #expect(everyone.status == .accepted && all["recipients"] as? Int == 3 && all["devices"] as? Int == 3)
                #expect(try await eventually { sends().count == 4 })
                // One send per user with a device (root has none): the hub fans out to every installation with the tag.
                #expect(Set(sends().dropFirst(2).map { $0.headers["servicebusnotification-tags"] ?? "" }) == ["username:alice", "username:bob"])
                #expect(sends().dropFirst(2).allSatisfy { $0.headers["apns-push-type"] == "background" })
                let id = try #require(all["id"] as? Int)
                #expect(try await eventually { try await s.campaignStatus(id)["status"] as? String == "done" })
                #expect(try await s.campaignStatus(id)["sent"] as? Int == 2)

                // users rm in another process: bob's installation is removed from the hub too.
                try await UserStore(database: s.database).remove(name: "bob")
                #expect(try await eventually {
                    hub.calls.withLockedValue { $0.contains { $0.method == "DELETE" && $0.path == "/hub1/installations/\(bob)" } }
                })
                #expect(try await eventually { try await RegistrationStore(database: s.database).pendingMirrorDeletions().isEmpty })
            }
        }
    }

    @Test("SPEC §18: an app through a hub beside an app sent directly: only the hub app's registrations reach the hub (APNs only), its pushes go there by user tag, the other app's never do")
    func hubApp() async throws {
        try await HubStandIn.run { hub, base in
            let client = try NotificationHubsClient(connection: try NotificationHubsConnection(hub.connectionString(base)), hub: "hub1")
            let direct = AnsweringProvider()
            let router = AppRouter(["default": PlatformRouter(["apns": direct]), "legacy": NotificationHubsProvider(client: client)])
            #expect(router.addressing == DeliveryAddressing(tagApps: ["legacy"]))
            #expect(router.platforms == ["apns", "legacy/*"])
            try await TestServer.run({ $0.apps = ["legacy": AppProfile(hub: true)] }, provider: router,
                                     mirror: AppMirrors(mirrors: ["legacy": client])) { s in
                func register(_ token: String, app: String, platform: String = "apns") async throws -> (Int, String) {
                    let (_, created) = try await s.json(.post, "/api/register")
                    let id = try #require((created as? [String: Any])?["registrationId"] as? String)
                    let (response, _) = try await s.json(.put, "/api/register/\(id)", body: #"{"Platform":"\#(platform)","Handle":"\#(token)","app":"\#(app)"}"#)
                    return (Int(response.status.code), id)
                }
                #expect(try await register(tokenA, app: "default").0 == 200)
                #expect(hub.calls.withLockedValue { $0.isEmpty }, "a device of the direct app reached the hub")
                let (status, legacy) = try await register(tokenB, app: "legacy")
                #expect(status == 200)
                #expect(hub.calls.withLockedValue { $0.map(\.path) } == ["/hub1/installations/\(legacy)"])
                #expect(try await register(String(repeating: "f", count: 40), app: "legacy", platform: "fcm").0 == 422)

                let (created, _) = try await s.json(.post, "/api/notifications", body: #"{"message":"both apps"}"#)
                #expect(created.status == .created)
                #expect(try await eventually { hub.calls.withLockedValue { $0.contains { $0.method == "POST" } } && direct.sent.withLockedValue { !$0.isEmpty } })
                try await Task.sleep(for: .milliseconds(300))
                #expect(direct.sent.withLockedValue { $0 } == [tokenA])
                let sends = hub.calls.withLockedValue { $0.filter { $0.method == "POST" } }
                #expect(sends.count == 1 && sends.first?.headers["servicebusnotification-tags"] == "username:alice")

                // One app only: the hub gets nothing.
                let (only, _) = try await s.json(.post, "/api/notifications", body: #"{"message":"direct only","app":"default"}"#)
                #expect(only.status == .created)
                #expect(try await eventually { direct.sent.withLockedValue { $0.count } == 2 })
                #expect(hub.calls.withLockedValue { $0.filter { $0.method == "POST" }.count } == 1)
                #expect(try await s.json(.post, "/api/notifications", body: #"{"app":"nope"}"#).0.status == .unprocessableContent)

                #expect(try await s.json(.delete, "/api/register/\(legacy)").0.status == .ok)
                #expect(try await eventually { hub.calls.withLockedValue { $0.contains { $0.method == "DELETE" && $0.path == "/hub1/installations/\(legacy)" } } })
            }
        }
    }

    @Test("--push-ca applies to the hub too: an https hub whose certificate only --push-ca vouches for is reached with it, refused without")
    func pushCA() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (certificate, key) = try APNsSandbox.selfSignedCertificate(commonName: "hub stand-in")
        let caPath = dir.appendingPathComponent("hub-ca.pem").path
        try certificate.write(toFile: caPath, atomically: true, encoding: .utf8)
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(certificate.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem)))
        try await HubStandIn.run(tls: tls) { hub, base in
            let endpoint = hub.connectionString(base)
            // Generous timeouts: the whole suite shares two cores, and this is not about speed.
            let trusting = try NotificationHubsClient(connection: try NotificationHubsConnection(endpoint), hub: "hub1", extraRoots: [caPath],
                                                      connectTimeout: .seconds(60), readTimeout: .seconds(60), mirrorDeadline: .seconds(60))
            #expect(try await trusting.upsertInstallation(id: "r1", deviceToken: tokenA, tags: ["username:alice"]) == .sent(id: nil))
            let plain = try NotificationHubsClient(connection: try NotificationHubsConnection(endpoint), hub: "hub1",
                                                   connectTimeout: .seconds(60), readTimeout: .seconds(60), mirrorDeadline: .seconds(60))
            let refused = await #expect(throws: DependencyUnavailable.self) {
                try await plain.upsertInstallation(id: "r2", deviceToken: tokenA, tags: ["username:alice"])
            }
            try await trusting.shutdown()
            try await plain.shutdown()
            #expect(refused?.reason.hasPrefix("connection failed") == true)
            #expect(refused?.dependency == .hub)
            #expect(hub.calls.withLockedValue { $0.map(\.path) } == ["/hub1/installations/r1"])
            #expect(throws: PushError.self) { try NotificationHubsClient(connection: try NotificationHubsConnection(endpoint), hub: "hub1", extraRoots: ["/nonexistent.pem"]) }
        }
    }

    @Test("the hub down or stalled: a registration is saved and answered 503 naming the hub (never its address), with Retry-After, within the mirror's deadline; the next is refused by the breaker untried",
          arguments: [FaultProxy.Mode.down, .stall])
    func hubUnavailable(mode: FaultProxy.Mode) async throws {
        // The proxy stands for a hub that is gone or frozen (its SAS checks are not reached: nothing is forwarded).
        let proxy = try FaultProxy(targetPort: freePort())
        defer { proxy.stop() }
        proxy.set(mode)
        // A cooldown longer than the test: under a loaded suite, seconds may pass between the two PUTs,
        // and the second must meet the breaker still open (the cooldowns themselves are CircuitBreakerTests').
        let client = try NotificationHubsClient(
            connection: try NotificationHubsConnection("Endpoint=http://127.0.0.1:\(proxy.port)/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0"), hub: "hub1",
            breaker: CircuitBreaker(.hub, firstCooldown: .seconds(600), maxCooldown: .seconds(600)))
        try await TestServer.run(provider: NotificationHubsProvider(client: client), mirror: client) { s in
            let (created, object) = try await s.json(.post, "/api/register")
            #expect(created.status == .ok)
            let id = try #require((object as? [String: Any])?["registrationId"] as? String)
            let body = "{\"Platform\":\"apns\",\"Handle\":\"\(tokenA)\",\"Tags\":[]}"
            let start = ContinuousClock.now
            let (refused, problem) = try await s.json(.put, "/api/register/\(id)", body: body)
            // An answer, not a hang: the mirror call's deadline is 4 s (a hang guard here; the time is not the point).
            #expect(ContinuousClock.now - start < .seconds(40))
            #expect(refused.status == .serviceUnavailable)
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1)
            let detail = (problem as? [String: Any])?["detail"] as? String ?? ""
            #expect(detail.contains("is saved, but the notification hub is not answering"), "\(detail)")
            #expect(!detail.contains("127.0.0.1"))
            #expect(client.breaker.isOpen)
            let refusals = client.breaker.refusals
            #expect(try await s.json(.put, "/api/register/\(id)", body: body).0.status == .serviceUnavailable)
            #expect(client.breaker.refusals == refusals + 1, "the second mirror call was tried, not refused")
        } // the server shuts the client down with its provider
    }
}
