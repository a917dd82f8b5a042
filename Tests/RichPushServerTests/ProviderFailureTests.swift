import APNsSandbox
import Crypto
import CryptoExtras
import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import PushDelivery
import PushSandboxes
import PushTestSupport
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

/// Issue #49, no silent dead ends: a push provider that fails its TLS, credential, topic or
/// address checks says so once, at error level with the fix; `/ready` names it (`apns:default`);
/// and each of its pushes' reason (what `richpush deliveries` prints) is that sentence, never a
/// library's description or a path of the machine that built it.
@Suite("A push provider failing as a whole: said once with its fix, on /ready and in each push's reason")
struct ProviderFailureTests {
    static let token = String(repeating: "ab", count: 32)

    // MARK: through the server, on real sockets

    @Test("serve without --push-ca before the APNs sandbox: every push's reason is the --push-ca sentence (no path, no BoringSSL), /ready names apns:default, the log says it once for all the pushes; once trusted, they are sent and /ready is ready again")
    func untrustedCertificate() async throws {
        try await RunningSandbox.with { apns in
            // As `serve --apns-env https://127.0.0.1:PORT` without `--push-ca apns-sandbox-cert.pem`.
            let untrusting = try APNsClient(credentials: apns.credentials, topic: RunningSandbox.topic,
                                            environment: .custom("https://127.0.0.1:\(apns.port)"))
            let provider = TrustSwitch(untrusted: APNsProvider(client: untrusting), trusted: APNsProvider(client: try apns.client()))
            let log = CapturedLog()
            try await Self.serve(provider: PlatformRouter(["apns": provider]), logger: log.logger) { s in
                try await Self.register(s, platform: "apns", handle: "\"\(Self.token)\"")
                for _ in 0..<3 {
                    #expect(try await s.json(.post, "/api/notifications", body: #""hi""#).0.status == .created)
                }
                // Each push tried at least twice: six sends or more, refused the same way.
                #expect(try await eventually(within: 30) {
                    let rows = try await s.data.deliveries.list()
                    return rows.count == 3 && rows.allSatisfy { $0.attempts >= 2 }
                })
                let sentence = "the push service's certificate is not trusted (127.0.0.1:\(apns.port)): pass its CA with --push-ca FILE (the sandbox prints it)"
                for row in try await s.data.deliveries.list() {
                    let reason = row.reason ?? ""
                    #expect(row.state == .pending)
                    #expect(reason == "retrying: \(sentence)", "\(reason)")
                    #expect(!reason.contains("/") && !reason.contains("BoringSSL") && !reason.contains("errno") && !reason.contains(".cc"), "\(reason)")
                }
                let (ready, body) = try await s.json(.get, "/ready", as: nil)
                #expect(ready.status == .serviceUnavailable && ready.headers[.retryAfter] == "5")
                let answer = body as? [String: Any]
                #expect(answer?["status"] as? String == "unready")
                // After the database and the blobs, should a loaded machine make their probes slow.
                #expect((answer?["failing"] as? [String])?.last == "apns:default", "\(String(describing: answer))")
                #expect(try await s.request(.get, "/health", as: nil).status == .ok)

                let errors = log.lines.filter { $0["provider"] == "apns:default" && $0["level"] == "error" }
                #expect(errors.count == 1, "\(errors)")
                #expect(errors.first?["msg"] == "apns pushes of app default fail: \(sentence)", "\(errors)")
                #expect(errors.first?["cause"] == "tls")
                #expect(!log.lines.contains { $0["msg"] == "push failed" }, "a line per push")
                #expect(apns.sandbox.acceptedCount == 0)

                // The CA given (serve restarted with --push-ca): the pending pushes go, /ready is ready, the log says it ended.
                provider.trust()
                #expect(try await eventually(within: 30) {
                    let rows = try await s.data.deliveries.list()
                    return rows.count == 3 && rows.allSatisfy { $0.state == .sent }
                })
                #expect(apns.sandbox.acceptedCount == 3)
                #expect(try await eventually(within: 30) {
                    let (ready, body) = try await s.json(.get, "/ready", as: nil)
                    return ready.status == .ok && (body as? [String: Any])?["failing"] == nil
                })
                #expect(log.lines.contains { $0["provider"] == "apns:default" && $0["level"] == "notice" && $0["msg"]?.contains("sent again") == true },
                        "\(log.lines)")
                #expect(log.lines.filter { $0["provider"] == "apns:default" && $0["level"] == "error" }.count == 1)
            }
        }
    }

    /// A mistake in serve's APNs flags, made against the sandbox.
    enum APNsMistake: String, CaseIterable, Sendable {
        case keyID, topic, address
    }

    @Test("a wrong --apns-key-id, a topic the key's team may not push to, nothing listening at --apns-env: each push's reason names the flag to fix, the log says it once, /ready names apns:default",
          arguments: APNsMistake.allCases)
    func apnsMistakes(mistake: APNsMistake) async throws {
        try await RunningSandbox.with { apns in
            let sandbox = APNsEnvironment.custom("https://127.0.0.1:\(apns.port)")
            let client: APNsClient
            let expected: (state: Delivery.State, reason: String, cause: String)
            switch mistake {
            case .keyID:
                client = try APNsClient(credentials: APNsCredentials(key: apns.key, keyID: "WRONGKEY01", teamID: RunningSandbox.teamID),
                                        topic: RunningSandbox.topic, environment: sandbox, extraRoots: [apns.certificatePath])
                expected = (.failed, "APNs refused the provider token (403 InvalidProviderToken): check --apns-key-id and --apns-team-id, and that --apns-key is that key's .p8 file", "auth")
            case .topic:
                client = try APNsClient(credentials: apns.credentials, topic: "com.example.other", environment: sandbox, extraRoots: [apns.certificatePath])
                expected = (.failed, "APNs refused the topic (400 TopicDisallowed): check --apns-topic (the app's bundle id, of the key's team)", "topic")
            case .address:
                let nobody = freePort()
                client = try APNsClient(credentials: apns.credentials, topic: RunningSandbox.topic, environment: .custom("https://127.0.0.1:\(nobody)"),
                                        extraRoots: [apns.certificatePath])
                expected = (.pending, "retrying: nothing listens at 127.0.0.1:\(nobody) (connection refused): start the push service there, or correct --apns-env", "unreachable")
            }
            let log = CapturedLog()
            try await Self.serve(provider: PlatformRouter(["apns": APNsProvider(client: client)]), logger: log.logger) { s in
                try await Self.register(s, platform: "apns", handle: "\"\(Self.token)\"")
                for _ in 0..<3 {
                    #expect(try await s.json(.post, "/api/notifications", body: #""hi""#).0.status == .created)
                }
                let settled = try await eventually(within: 30) {
                    let rows = try await s.data.deliveries.list()
                    return rows.count == 3 && rows.allSatisfy { $0.attempts >= 1 && $0.state == expected.state && $0.reason == expected.reason }
                }
                let rows = try await s.data.deliveries.list()
                #expect(settled, "\(rows.map { "\($0.state) \($0.reason ?? "")" })")
                let (ready, body) = try await s.json(.get, "/ready", as: nil)
                #expect(ready.status == .serviceUnavailable)
                #expect(((body as? [String: Any])?["failing"] as? [String])?.last == "apns:default", "\(String(describing: body))")
                let errors = log.lines.filter { $0["provider"] == "apns:default" && $0["level"] == "error" }
                #expect(errors.count == 1 && errors.first?["cause"] == expected.cause, "\(errors)")
                let fix = expected.reason.replacingOccurrences(of: "retrying: ", with: "")
                #expect(errors.first?["msg"] == "apns pushes of app default fail: \(fix)", "\(errors)")
                #expect(!log.lines.contains { $0["msg"] == "push failed" }, "a line per push")
                #expect(apns.sandbox.acceptedCount == 0)
            }
        }
    }

    @Test("an FCM service account whose key Google does not know: the pushes wait, their reason names --fcm-service-account, the log says it once, /ready names fcm:default")
    func fcmAccountRefused() async throws {
        let fcm = FCMSandbox(account: .init(projectID: "rich-push-test", clientEmail: "sender@rich-push-test.iam.gserviceaccount.com",
                                            publicKey: FCMFixtures.key.publicKey))
        try await serving([(fcm, "fcm")]) { origin in
            let stranger = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI, key: stranger.pkcs8PEMRepresentation))
            let provider = PlatformRouter(["fcm": FCMProvider(client: try FCMClient(account: account, endpoint: "\(origin)/fcm"))])
            let log = CapturedLog()
            try await Self.serve(provider: provider, logger: log.logger) { s in
                try await Self.register(s, platform: "fcm", handle: "\"\(fcm.register())\"")
                for _ in 0..<2 {
                    #expect(try await s.json(.post, "/api/notifications", body: #""hi""#).0.status == .created)
                }
                let expected = "retrying: Google refused the FCM service account's assertion (400 invalid_grant): check --fcm-service-account (a current key of the app's Firebase project)"
                let settled = try await eventually(within: 30) {
                    let rows = try await s.data.deliveries.list()
                    return rows.count == 2 && rows.allSatisfy { $0.attempts >= 2 && $0.state == .pending && $0.reason == expected }
                }
                let rows = try await s.data.deliveries.list()
                #expect(settled, "\(rows.map { $0.reason ?? "" })")
                let (ready, body) = try await s.json(.get, "/ready", as: nil)
                #expect(ready.status == .serviceUnavailable)
                #expect(((body as? [String: Any])?["failing"] as? [String])?.last == "fcm:default", "\(String(describing: body))")
                let errors = log.lines.filter { $0["provider"] == "fcm:default" && $0["level"] == "error" }
                #expect(errors.count == 1 && errors.first?["cause"] == "auth", "\(errors)")
                #expect(fcm.acceptedCount == 0)
            }
        }
    }

    // MARK: the pieces

    @Test("what counts as a provider's failure: its TLS, credentials, topic and address, said with the flag (or the --apps field) to fix; never a device's answer, an expired token or a Web Push endpoint")
    func classification() {
        func classify(_ platform: String, _ reason: String, app: String = AppName.default) -> ProviderFailure? {
            ProviderFailure.classify(platform: platform, app: app, reason: reason)
        }
        #expect(classify("apns", "403 InvalidProviderToken")?.cause == .authentication)
        #expect(classify("apns", "403 InvalidProviderToken", app: "shop")?.sentence
                == "APNs refused the provider token (403 InvalidProviderToken): check apns.keyId and apns.teamId of app shop in the --apps file, and that apns.key is that key's .p8 file")
        #expect(classify("apns", "400 BadTopic")?.cause == .topic)
        #expect(classify("apns", "400 TopicDisallowed", app: "shop")?.sentence.contains("apns.topic of app shop in the --apps file") == true)
        #expect(classify("apns", "400 MissingTopic")?.cause == .topic)
        for own in ["400 BadDeviceToken", "400 DeviceTokenNotForTopic", "410 Unregistered", "403 ExpiredProviderToken", "429 TooManyRequests",
                    "413 PayloadTooLarge", "connection failed: no answer in time"] {
            #expect(classify("apns", own) == nil, "\(own)")
        }
        #expect(classify("fcm", "401 UNAUTHENTICATED: Request had invalid authentication credentials.")?.sentence.hasPrefix("FCM refused the service account (401 UNAUTHENTICATED): check --fcm-service-account") == true)
        #expect(classify("fcm", "403 PERMISSION_DENIED: the FCM API is not enabled")?.cause == .authentication)
        #expect(classify("fcm", "403 SENDER_ID_MISMATCH: the token is another project's") == nil)
        #expect(classify("fcm", "404 UNREGISTERED: gone") == nil)
        #expect(classify("notificationhubs", "401 <Error><Detail>bad signature</Detail></Error>")?.sentence.contains("--anh-connection-string") == true)
        let untrusted = "the push service's certificate is not trusted (fcm.example:443): pass its CA with --push-ca FILE (the sandbox prints it)"
        #expect(classify("fcm", untrusted) == ProviderFailure(cause: .untrustedCertificate, sentence: untrusted))
        #expect(classify("apns", "nothing listens at 127.0.0.1:9 (connection refused): start the push service there, or correct its address", app: "shop")?.sentence
                == "nothing listens at 127.0.0.1:9 (connection refused): start the push service there, or correct apns.env of app shop in the --apps file")
        // A subscription names a host its user chose: never the server's failure.
        #expect(classify("web", untrusted) == nil)
        #expect(classify("web", "nothing listens at push.example:443 (connection refused): start the push service there, or correct its address") == nil)
    }

    @Test("a library's description loses its build paths, errno and BoringSSL's error stack; URLs are kept")
    func cleaning() {
        let raw = "connection error: handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at /work/main/.build/checkouts/swift-nio-ssl/Sources/CNIOBoringSSL/ssl/handshake.cc:320]))"
        let cleaned = ConnectionWords.clean(raw)
        #expect(!cleaned.contains("/") && !cleaned.contains("handshake.cc") && cleaned.contains("CERTIFICATE_VERIFY_FAILED"), "\(cleaned)")
        #expect(ConnectionWords.clean("connect(descriptor:addr:size:): Connection refused (errno: 111)") == "connect(descriptor:addr:size:): Connection refused")
        #expect(ConnectionWords.clean("cannot read /root/secrets/key.pem today") == "cannot read … today")
        #expect(ConnectionWords.clean("307 Moved: a redirect to https://push.example/a/b, which RichPush does not follow")
                == "307 Moved: a redirect to https://push.example/a/b, which RichPush does not follow")
        #expect(ConnectionWords.clean("410 Unregistered") == "410 Unregistered")
        #expect(ConnectionWords.clean("400 <Error><Detail>bad tag</Detail></Error>") == "400 <Error><Detail>bad tag</Detail></Error>")
    }

    @Test("the log: once when a provider starts failing, once an hour while it lasts, a notice when it ends; a cause back within a minute waits for the minute")
    func logOnce() {
        let now = NIOLockedValueBox(Date(timeIntervalSince1970: 1_000_000))
        let health = ProviderHealth(clock: { now.withLockedValue { $0 } })
        let tls = ProviderFailure(cause: .untrustedCertificate, sentence: "the push service's certificate is not trusted (x:1): pass its CA with --push-ca FILE")
        func failed(_ app: String = "default") -> (platform: String, app: String, observation: ProviderHealth.Observation) { ("apns", app, .failed(tls)) }
        func sent(_ app: String = "default") -> (platform: String, app: String, observation: ProviderHealth.Observation) { ("apns", app, .sent) }
        func advance(_ seconds: TimeInterval) { now.withLockedValue { $0 = $0.addingTimeInterval(seconds) } }

        #expect(health.observe([failed(), failed(), failed()]).map(\.kind) == [.failing])
        #expect(health.failing == ["apns:default"] && health.failure(of: "apns:default") == tls)
        advance(600)
        #expect(health.observe([failed()]).isEmpty)
        // Another app's provider is its own.
        #expect(health.observe([failed("shop")]).map(\.provider) == ["apns:shop"])
        #expect(health.failing == ["apns:default", "apns:shop"])
        advance(3000)
        let reminder = health.observe([failed()])
        #expect(reminder.map(\.kind) == [.stillFailing] && reminder.first?.sends == 5)
        let ended = health.observe([sent(), sent()])
        #expect(ended.map(\.kind) == [.recovered] && ended.first?.sends == 5)
        #expect(health.failing == ["apns:shop"])
        // Back within a minute of the last line: counted, said once the minute is over.
        advance(10)
        #expect(health.observe([failed()]).isEmpty && health.failing == ["apns:default", "apns:shop"])
        advance(60)
        #expect(health.observe([failed()]).map(\.kind) == [.failing])
        // Ended before it was said: nothing to say it ended.
        _ = health.observe([sent(), sent("shop")])
        advance(1)
        #expect(health.observe([failed()]).isEmpty)
        #expect(health.observe([sent()]).isEmpty && health.failing.isEmpty)
    }

    // MARK: helpers

    /// A live server whose push dispatcher logs to `logger`, with retries quick and never given
    /// up on within a test.
    static func serve(provider: any PushProvider, logger: Logger, _ body: @Sendable (TestServer) async throws -> Void) async throws {
        try await TestServer.run(provider: provider, dispatcherLogger: logger, maxAttempts: 10_000, body)
    }

    /// Registers a device of alice's.
    static func register(_ s: TestServer, platform: String, handle: String) async throws {
        let (_, created) = try await s.json(.post, "/api/register")
        let id = try #require((created as? [String: Any])?["registrationId"] as? String)
        let (response, object) = try await s.json(.put, "/api/register/\(id)", body: #"{"platform":"\#(platform)","handle":\#(handle)}"#)
        #expect(response.status == .ok, "\(String(describing: object))")
    }
}

/// Log lines, each as its JSON fields, and a logger writing them (RichPushLogHandler's JSON format).
struct CapturedLog: Sendable {
    private let captured = NIOLockedValueBox<[[String: String]]>([])

    var logger: Logger {
        let captured = self.captured
        var logger = Logger(label: "richpush") { label in
            RichPushLogHandler(label: label, level: .info, format: .json) { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return }
                captured.withLockedValue { $0.append(object.mapValues { "\($0)" }) }
            }
        }
        logger.logLevel = .info
        return logger
    }

    var lines: [[String: String]] { captured.withLockedValue { $0 } }
}

/// Sends through `untrusted` until `trust()`, then through `trusted`: serve started without
/// `--push-ca`, then again with it (the pending pushes wait in the outbox meanwhile).
final class TrustSwitch: PushProvider {
    let untrusted: APNsProvider
    let trusted: APNsProvider
    private let isTrusted = NIOLockedValueBox(false)

    init(untrusted: APNsProvider, trusted: APNsProvider) {
        self.untrusted = untrusted
        self.trusted = trusted
    }

    func trust() { isTrusted.withLockedValue { $0 = true } }

    private var current: APNsProvider { isTrusted.withLockedValue { $0 } ? trusted : untrusted }

    var addressing: DeliveryAddressing { .perDevice }
    var platform: String { "apns" }

    func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        await current.deliver(job)
    }

    func start(_ job: DeliveryJob, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        current.start(job, completion: completion)
    }

    func shutdown() async {
        await untrusted.shutdown()
        await trusted.shutdown()
    }
}
