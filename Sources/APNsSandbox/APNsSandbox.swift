import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdHTTP2
import HummingbirdTLS
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SwiftASN1
import X509

/// A local stand-in for Apple's push service: APNs' HTTP/2 provider API over TLS, checking what
/// Apple checks and answering with Apple's status codes and reasons.
///
/// Used by the tests and by `richpush apns-sandbox`. It keeps every accepted push (and appends
/// it to a JSON-lines log when asked), and can be told to make chosen device tokens fail.
public final class APNsSandbox: Sendable {
    /// How the sandbox is set up.
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 2197
        /// The team id a provider token must carry as `iss`.
        public var teamID: String
        /// The key id a provider token must carry as `kid`.
        public var keyID: String
        /// The public half of the provider's `.p8` key, which signatures are checked against.
        public var publicKey: P256.Signing.PublicKey
        /// TLS certificate chain and key (PEM).
        public var tlsCertificatePEM: String
        public var tlsKeyPEM: String
        /// Appends each accepted push as `{"token","headers","payload"}` when set.
        public var logPath: String?
        /// Apple refuses provider tokens older than an hour.
        public var maxTokenAge: TimeInterval = 3600
        /// The topics (bundle ids) the key may push to; nil accepts any, as a key for every app
        /// of the team does. Another topic is 400 TopicDisallowed.
        public var topics: Set<String>?
        /// Device tokens whose app is known (token → its topic): a push to one of them under
        /// another topic is 400 DeviceTokenNotForTopic, as Apple answers a token of another app.
        /// Tokens not listed are taken under any allowed topic.
        public var deviceTopics: [String: String] = [:]
        /// Apple refuses a provider token renewed sooner than this after the last one
        /// (429 TooManyProviderTokenUpdates); 0 turns the check off (benchmarks where two clients sign).
        public var minTokenUpdateInterval: TimeInterval = 20 * 60
        /// How long each answer takes (the round trip to Apple, for tests that need pushes in
        /// flight); a push is accepted when its answer is sent.
        public var responseDelay: Duration = .zero

        /// Creates a configuration.
        public init(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey, tlsCertificatePEM: String, tlsKeyPEM: String) {
            self.teamID = teamID
            self.keyID = keyID
            self.publicKey = publicKey
            self.tlsCertificatePEM = tlsCertificatePEM
            self.tlsKeyPEM = tlsKeyPEM
        }
    }

    /// A push the sandbox accepted.
    public struct AcceptedPush: Sendable {
        public var token: String
        public var headers: [String: String]
        public var payload: Data
        public var apnsID: String
    }

    private struct Failure {
        var status: Int
        var reason: String
        var remaining: Int
    }

    private struct State {
        var accepted: [AcceptedPush] = []
        var acceptedCount = 0
        var failures: [String: Failure] = [:]
        var tokensValidAfter: Date = .distantPast
        var tokensSeen = Set<String>()
        /// Per connection: the provider token in use and when it was first seen there. Apple
        /// scopes the update rule to a connection: two clients (or nodes) with tokens of their
        /// own, each on its own connection, are both served.
        var currentTokens: [ObjectIdentifier: (jwt: String, since: Date)] = [:]
    }

    public let configuration: Configuration
    private let state = NIOLockedValueBox(State())
    private let log: NIOLockedValueBox<FileHandle?>
    /// Keep at most this many accepted pushes in memory (the count is always exact).
    private let keep: Int

    /// Creates a sandbox; nothing listens until `application()` runs.
    public init(_ configuration: Configuration, keepAccepted: Int = 100_000) throws {
        self.configuration = configuration
        self.keep = keepAccepted
        var handle: FileHandle?
        if let path = configuration.logPath {
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle?.seekToEnd()
        }
        self.log = NIOLockedValueBox(handle)
    }

    // MARK: control (tests and the CLI)

    /// Makes pushes to `token` fail `times` times with `status` and Apple's `reason`.
    public func fail(token: String, status: Int, reason: String, times: Int = .max) {
        state.withLockedValue { $0.failures[token.lowercased()] = Failure(status: status, reason: reason, remaining: times) }
    }

    /// Treats every provider token issued before `date` as expired (403 ExpiredProviderToken).
    public func expireProviderTokens(issuedBefore date: Date) {
        state.withLockedValue {
            $0.tokensValidAfter = date
            $0.currentTokens.removeAll() // an expired token may be replaced at once
        }
    }

    /// Pushes accepted so far (the most recent `keepAccepted`).
    public var accepted: [AcceptedPush] { state.withLockedValue { $0.accepted } }
    /// How many pushes were accepted.
    public var acceptedCount: Int { state.withLockedValue { $0.acceptedCount } }
    /// Distinct provider tokens (JWTs) seen on accepted requests.
    public var providerTokensSeen: Int { state.withLockedValue { $0.tokensSeen.count } }

    // MARK: serving

    /// The Hummingbird application serving HTTP/2 over TLS, with or without ALPN (never HTTP/1.1, as Apple).
    public func application(logger: Logger = Logger(label: "apns-sandbox"),
                            onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }) throws -> some ApplicationProtocol {
        let router = Router(context: SandboxRequestContext.self)
        router.post("/3/device/:token") { request, context in try await self.handle(request, context: context) }
        router.post("/3/device") { _, _ in Self.answer(400, "MissingDeviceToken") }
        router.get("/3/device/:token") { _, _ in Self.answer(405, "MethodNotAllowed") }
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(configuration.tlsCertificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuration.tlsKeyPEM.utf8), format: .pem)))
        // HTTP/2 only, as Apple: offered by ALPN, and spoken with prior knowledge to clients that
        // offer no ALPN at all (aioapns connects that way).
        tls.applicationProtocols = ["h2"]
        return Application(
            router: router,
            // A response without a body ends on its HEADERS frame, as Apple's 200 does (no DATA frame).
            server: try .tls(.plaintextHTTP2(configuration: .init(streamConfiguration: .init(additionalChannelHandlers: [InstallEndOnHeaders()]))),
                             tlsConfiguration: tls),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: onServerRunning,
            logger: logger)
    }

    private func handle(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let token = try context.parameters.require("token").lowercased()
        let body = try await request.body.collect(upTo: 64 * 1024)
        if configuration.responseDelay > .zero { try await Task.sleep(for: configuration.responseDelay) }
        if let connection = context.connection {
            // Forget the connection's token when it closes (its identifier may be reused).
            let id = ObjectIdentifier(connection)
            let new = state.withLockedValue { $0.currentTokens[id] == nil }
            if new {
                connection.closeFuture.whenComplete { [state] _ in _ = state.withLockedValue { $0.currentTokens.removeValue(forKey: id) } }
            }
        }
        switch verdict(request: request, token: token, body: Data(body.readableBytesView), connection: context.connection.map(ObjectIdentifier.init)) {
        case .reject(let status, let reason, let timestamp):
            return Self.answer(status, reason, timestamp: timestamp, apnsID: request.headers[HTTPField.Name("apns-id")!])
        case .accept(let push):
            record(push)
            return Response(status: .ok, headers: [HTTPField.Name("apns-id")!: push.apnsID])
        }
    }

    enum Verdict {
        case accept(AcceptedPush)
        case reject(Int, String, timestamp: Date?)
    }

    /// Apple's checks, in Apple's order of precedence as far as it is documented.
    func verdict(request: Request, token: String, body: Data, connection: ObjectIdentifier? = nil, now: Date = Date()) -> Verdict {
        let headers = request.headers
        func header(_ name: String) -> String? { headers[HTTPField.Name(name)!] }
        // Provider token.
        guard let authorization = header("authorization") else { return .reject(403, "MissingProviderToken", timestamp: nil) }
        guard authorization.lowercased().hasPrefix("bearer ") else { return .reject(403, "InvalidProviderToken", timestamp: nil) }
        let jwt = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        switch checkProviderToken(jwt, now: now) {
        case .some(let reason): return .reject(403, reason, timestamp: nil)
        case .none: break
        }
        // A new provider token on a connection sooner than the interval after its last one is refused.
        let key = connection ?? ObjectIdentifier(Self.self)
        let tooSoon = state.withLockedValue { state -> Bool in
            if let current = state.currentTokens[key], current.jwt != jwt {
                if now.timeIntervalSince(current.since) < configuration.minTokenUpdateInterval { return true }
                state.currentTokens[key] = (jwt, now)
            } else if state.currentTokens[key] == nil {
                state.currentTokens[key] = (jwt, now)
            }
            return false
        }
        if tooSoon { return .reject(429, "TooManyProviderTokenUpdates", timestamp: nil) }
        // Device token: 32 bytes of hex today; Apple may lengthen them, so any even hex of 64+.
        guard token.count >= 64, token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else { return .reject(400, "BadDeviceToken", timestamp: nil) }
        guard let topic = header("apns-topic"), !topic.isEmpty else { return .reject(400, "MissingTopic", timestamp: nil) }
        if let topics = configuration.topics, !topics.contains(topic) { return .reject(400, "TopicDisallowed", timestamp: nil) }
        if let owner = configuration.deviceTopics[token.lowercased()], owner != topic { return .reject(400, "DeviceTokenNotForTopic", timestamp: nil) }
        let pushType = header("apns-push-type") ?? "alert"
        let validTypes = ["alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "widgets"]
        guard validTypes.contains(pushType) else { return .reject(400, "InvalidPushType", timestamp: nil) }
        let priority = header("apns-priority") ?? "10"
        guard ["1", "5", "10"].contains(priority) else { return .reject(400, "BadPriority", timestamp: nil) }
        if pushType == "background" && priority != "5" { return .reject(400, "BadPriority", timestamp: nil) }
        if let id = header("apns-id"), UUID(uuidString: id) == nil { return .reject(400, "BadMessageId", timestamp: nil) }
        if let expiration = header("apns-expiration") {
            // 0 is "now or never"; any other moment must be ahead (a push whose life ended is not stored or sent).
            guard let stamp = Int(expiration), stamp >= 0 else { return .reject(400, "BadExpirationDate", timestamp: nil) }
            if stamp != 0 && Double(stamp) < now.timeIntervalSince1970 - 1 { return .reject(400, "BadExpirationDate", timestamp: nil) }
        }
        if let collapse = header("apns-collapse-id"), collapse.utf8.count > 64 { return .reject(400, "BadCollapseId", timestamp: nil) }
        // Payload.
        if body.isEmpty { return .reject(400, "PayloadEmpty", timestamp: nil) }
        if body.count > 4096 { return .reject(413, "PayloadTooLarge", timestamp: nil) }
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any], object["aps"] is [String: Any] else {
            return .reject(400, "BadPayload", timestamp: nil)
        }
        if pushType == "background", ((object["aps"] as? [String: Any])?["content-available"] as? Int) != 1 {
            return .reject(400, "BadPayload", timestamp: nil)
        }
        if let aps = object["aps"] {
            guard let fields = aps as? [String: Any], APSRules.refusal(fields) == nil else { return .reject(400, "BadPayload", timestamp: nil) }
        }
        // Injected failures for chosen tokens.
        let injected: Failure? = state.withLockedValue { state in
            guard var failure = state.failures[token], failure.remaining > 0 else { return nil }
            failure.remaining -= 1
            state.failures[token] = failure
            return failure
        }
        if let injected {
            return .reject(injected.status, injected.reason, timestamp: injected.status == 410 ? now : nil)
        }
        var recorded: [String: String] = [:]
        for field in headers where field.name.canonicalName.hasPrefix("apns-") || field.name == .contentType {
            recorded[field.name.canonicalName] = field.value
        }
        // Echoed exactly as sent (clients match answers by it), or a new one in lowercase, as Apple.
        let apnsID = header("apns-id") ?? UUID().uuidString.lowercased()
        _ = state.withLockedValue { $0.tokensSeen.insert(jwt) }
        return .accept(AcceptedPush(token: token, headers: recorded, payload: body, apnsID: apnsID))
    }

    /// nil when the JWT is acceptable, else Apple's reason.
    func checkProviderToken(_ jwt: String, now: Date) -> String? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerData = Self.base64URL(parts[0]), let claimsData = Self.base64URL(parts[1]), let signatureData = Self.base64URL(parts[2]),
              let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any]
        else { return "InvalidProviderToken" }
        guard header["alg"] as? String == "ES256" else { return "InvalidProviderToken" }
        guard header["kid"] as? String == configuration.keyID else { return "InvalidProviderToken" }
        guard claims["iss"] as? String == configuration.teamID else { return "InvalidProviderToken" }
        guard let iat = (claims["iat"] as? NSNumber)?.doubleValue else { return "InvalidProviderToken" }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
              configuration.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return "InvalidProviderToken" }
        let issued = Date(timeIntervalSince1970: iat)
        if issued > now.addingTimeInterval(60) { return "InvalidProviderToken" }
        if now.timeIntervalSince(issued) > configuration.maxTokenAge { return "ExpiredProviderToken" }
        if issued < state.withLockedValue({ $0.tokensValidAfter }) { return "ExpiredProviderToken" }
        return nil
    }

    private func record(_ push: AcceptedPush) {
        state.withLockedValue { state in
            state.acceptedCount += 1
            state.accepted.append(push)
            if state.accepted.count > keep { state.accepted.removeFirst(state.accepted.count - keep) }
        }
        log.withLockedValue { handle in
            guard let handle else { return }
            let payload = (try? JSONSerialization.jsonObject(with: push.payload)) ?? [:]
            // `at`: when it was accepted (Unix seconds), for measuring a paced campaign's spread.
            let line: [String: Any] = ["token": push.token, "headers": push.headers, "payload": payload, "at": Date().timeIntervalSince1970]
            if var data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys, .withoutEscapingSlashes]) {
                data.append(0x0A)
                handle.write(data)
            }
        }
    }

    static func answer(_ status: Int, _ reason: String, timestamp: Date? = nil, apnsID: String? = nil) -> Response {
        var object: [String: Any] = ["reason": reason]
        if let timestamp { object["timestamp"] = Int64(timestamp.timeIntervalSince1970 * 1000) }
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        var headers: HTTPFields = [.contentType: "application/json"]
        headers[HTTPField.Name("apns-id")!] = apnsID ?? UUID().uuidString.lowercased()
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func base64URL(_ text: Substring) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)
    }

    // MARK: certificates

    /// A self-signed certificate for `localhost` and 127.0.0.1 (PEM chain and key), for a sandbox
    /// nobody handed a certificate; clients trust it with `--push-ca`.
    public static func selfSignedCertificate(commonName: String = "RichPush APNs sandbox") throws -> (certificatePEM: String, keyPEM: String) {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(365 * 24 * 3600),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
            },
            issuerPrivateKey: .init(key))
        return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
    }
}

/// The sandbox's request context: the connection a request came on (an HTTP/2 stream's parent),
/// which Apple's provider-token rules are scoped to.
struct SandboxRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The TCP (TLS) connection; nil where the source names none.
    let connection: (any Channel)?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        connection = source.channel.parent ?? source.channel
    }
}
