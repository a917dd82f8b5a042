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
///
/// Besides pushes to device tokens (`POST /3/device/{token}`, Live Activities' among them) it
/// serves, on the same listener, Apple's channel management API (`/1/apps/{bundleId}/channels`
/// and `/all-channels`, which Apple serves on a host of its own) and broadcast pushes
/// (`POST /4/broadcasts/apps/{bundleId}`). It plays the iPhones behind the tokens for Live
/// Activities: what a phone does with each accepted live-activity push is in `phoneEvents` and
/// `phoneActivities`, and at `GET /sandbox/phone`.
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

        /// Creates a configuration from the provider key in PEM: its public half, or the `.p8`
        /// private key itself.
        public init(teamID: String, keyID: String, publicKeyPEM: String, tlsCertificatePEM: String, tlsKeyPEM: String) throws {
            let key: P256.Signing.PublicKey
            if let publicKey = try? P256.Signing.PublicKey(pemRepresentation: publicKeyPEM) {
                key = publicKey
            } else {
                key = try P256.Signing.PrivateKey(pemRepresentation: publicKeyPEM).publicKey
            }
            self.init(teamID: teamID, keyID: keyID, publicKey: key, tlsCertificatePEM: tlsCertificatePEM, tlsKeyPEM: tlsKeyPEM)
        }
    }

    /// A push the sandbox accepted.
    public struct AcceptedPush: Sendable {
        /// The device token; for a broadcast, the channel id.
        public var token: String
        /// The request's `apns-*` headers and `content-type`.
        public var headers: [String: String]
        public var payload: Data
        /// The `apns-id` answered; for a broadcast, the `apns-request-id`.
        public var apnsID: String
        /// Whether it was broadcast on a channel (`POST /4/broadcasts/apps/{bundleId}`).
        var isBroadcast = false
    }

    struct Failure {
        var status: Int
        var reason: String
        var remaining: Int
    }

    /// A broadcast channel, as channel management made it.
    struct BroadcastChannel {
        var bundleID: String
        var messageStoragePolicy: Int
        /// Creation order, for `all-channels`.
        var sequence: Int
    }

    struct State {
        var accepted: [AcceptedPush] = []
        var acceptedCount = 0
        var failures: [String: Failure] = [:]
        var tokensValidAfter: Date = .distantPast
        var tokensSeen = Set<String>()
        /// Per connection: the provider token in use and when it was first seen there. Apple
        /// scopes the update rule to a connection: two clients (or nodes) with tokens of their
        /// own, each on its own connection, are both served.
        var currentTokens: [ObjectIdentifier: (jwt: String, since: Date)] = [:]
        /// The phones behind the tokens (Live Activities).
        var phones: Phones
        /// Broadcast channels by id (base64).
        var channels: [String: BroadcastChannel] = [:]
        var channelsMade = 0
    }

    public let configuration: Configuration
    let state: NIOLockedValueBox<State>
    private let log: NIOLockedValueBox<FileHandle?>
    /// Keep at most this many accepted pushes in memory (the count is always exact), and about as many phone activities and events.
    private let keep: Int

    /// Creates a sandbox; nothing listens until `application()` runs.
    public init(_ configuration: Configuration, keepAccepted: Int = 100_000) throws {
        self.configuration = configuration
        self.keep = keepAccepted
        self.state = NIOLockedValueBox(State(phones: Phones(keep: keepAccepted)))
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

    /// What the phones did with each accepted live-activity push, oldest first (about the most
    /// recent `keepAccepted`): one event for a push to a device token, one per subscribed activity for a
    /// broadcast.
    public var phoneEvents: [PhoneEvent] { state.withLockedValue { $0.phones.events } }
    /// The Live Activities the phones show or showed, oldest first.
    public var phoneActivities: [PhoneActivity] { state.withLockedValue { $0.phones.activities } }

    /// The broadcast channels that exist now (made and not deleted), by id.
    public var channelIDs: Set<String> { state.withLockedValue { Set($0.channels.keys) } }

    /// The Live Activities started by pushes to `pushToStartToken`, oldest first.
    public func phoneActivities(pushToStartToken: String) -> [PhoneActivity] {
        state.withLockedValue { $0.phones.activities(pushToStartToken: pushToStartToken) }
    }

    // MARK: serving

    /// The Hummingbird application serving HTTP/2 over TLS, with or without ALPN (never HTTP/1.1, as Apple).
    public func application(logger: Logger = Logger(label: "apns-sandbox"),
                            onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }) throws -> some ApplicationProtocol {
        let router = Router(context: SandboxRequestContext.self)
        router.post("/3/device/:token") { request, context in try await self.handle(request, context: context) }
        router.post("/3/device") { _, _ in Self.answer(400, "MissingDeviceToken") }
        router.get("/3/device/:token") { _, _ in Self.answer(405, "MethodNotAllowed") }
        // Channel management (Apple: api-manage-broadcast(.sandbox).push.apple.com:2196/2195) and
        // broadcasts, on this same listener.
        router.post("/1/apps/:bundle/channels") { request, context in
            try await self.manage(request, context: context) { self.createChannel(bundleID: $0, headers: $1, body: $2) }
        }
        router.get("/1/apps/:bundle/channels") { request, context in
            try await self.manage(request, context: context) { bundle, headers, _ in self.readChannel(bundleID: bundle, headers: headers) }
        }
        router.delete("/1/apps/:bundle/channels") { request, context in
            try await self.manage(request, context: context) { bundle, headers, _ in self.deleteChannel(bundleID: bundle, headers: headers) }
        }
        router.get("/1/apps/:bundle/all-channels") { request, context in
            try await self.manage(request, context: context) { bundle, _, _ in self.allChannels(bundleID: bundle) }
        }
        router.post("/4/broadcasts/apps/:bundle") { request, context in try await self.handleBroadcast(request, context: context) }
        router.get("/4/broadcasts/apps/:bundle") { _, _ in Self.answer(405, "MethodNotAllowed") }
        // The test's window onto the phones: no provider token needed.
        router.get("/sandbox/phone") { request, _ in self.phoneView(activity: request.uri.queryParameters.get("activity").map { String($0) }) }
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
        trackConnection(context)
        switch verdict(request: request, token: token, body: Data(body.readableBytesView), connection: context.connection.map(ObjectIdentifier.init)) {
        case .reject(let status, let reason, let timestamp):
            return Self.answer(status, reason, timestamp: timestamp, apnsID: request.headers[HTTPField.Name("apns-id")!])
        case .accept(let push):
            record(push)
            return Response(status: .ok, headers: [HTTPField.Name("apns-id")!: push.apnsID])
        }
    }

    /// Forgets a connection's provider token when it closes (its identifier may be reused).
    func trackConnection(_ context: SandboxRequestContext) {
        guard let connection = context.connection else { return }
        let id = ObjectIdentifier(connection)
        let new = state.withLockedValue { $0.currentTokens[id] == nil }
        if new {
            connection.closeFuture.whenComplete { [state] _ in _ = state.withLockedValue { $0.currentTokens.removeValue(forKey: id) } }
        }
    }

    enum Verdict {
        case accept(AcceptedPush)
        case reject(Int, String, timestamp: Date?)
    }

    /// Apple's checks, in Apple's order of precedence as far as it is documented.
    func verdict(request: Request, token: String, body: Data, connection: ObjectIdentifier? = nil, now: Date = Date()) -> Verdict {
        verdict(headers: Self.fields(request.headers), token: token, body: body, connection: connection, now: now)
    }

    /// `verdict(request:…)` on the request's headers (names in lowercase).
    func verdict(headers: [String: String], token: String, body: Data, connection: ObjectIdentifier? = nil, now: Date = Date()) -> Verdict {
        if let refusal = authorizationRefusal(headers, connection: connection, now: now) {
            return .reject(refusal.status, refusal.reason, timestamp: nil)
        }
        let verdict = pushVerdict(headers: headers, token: token, body: body, now: now)
        if case .accept = verdict { noteProviderToken(headers) }
        return verdict
    }

    /// nil when the provider token is acceptable on this connection, else Apple's status and reason.
    func authorizationRefusal(_ headers: [String: String], connection: ObjectIdentifier?, now: Date) -> (status: Int, reason: String)? {
        guard let authorization = headers["authorization"] else { return (403, "MissingProviderToken") }
        guard authorization.lowercased().hasPrefix("bearer ") else { return (403, "InvalidProviderToken") }
        let jwt = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        if let reason = checkProviderToken(jwt, now: now) { return (403, reason) }
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
        if tooSoon { return (429, "TooManyProviderTokenUpdates") }
        return nil
    }

    /// Counts the request's provider token among those seen on accepted requests.
    func noteProviderToken(_ headers: [String: String]) {
        guard let authorization = headers["authorization"] else { return }
        let jwt = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        _ = state.withLockedValue { $0.tokensSeen.insert(jwt) }
    }

    /// Apple's checks of a push to a device token once its provider token passed: the token, topic,
    /// push type, priority and the other headers, the payload, and failures asked for.
    func pushVerdict(headers: [String: String], token: String, body: Data, now: Date = Date()) -> Verdict {
        func header(_ name: String) -> String? { headers[name] }
        // Device token: 32 bytes of hex today; Apple may lengthen them, so any even hex of 64+.
        guard token.count >= 64, token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else { return .reject(400, "BadDeviceToken", timestamp: nil) }
        guard let topic = header("apns-topic"), !topic.isEmpty else { return .reject(400, "MissingTopic", timestamp: nil) }
        let pushType = header("apns-push-type") ?? "alert"
        // A Live Activity's topic is the app's bundle id with a suffix; the app's checks are of the bundle id.
        var bundleID = topic
        if pushType == "liveactivity" {
            guard topic.hasSuffix(Self.liveActivityTopicSuffix), topic.count > Self.liveActivityTopicSuffix.count else {
                return .reject(400, "TopicDisallowed", timestamp: nil)
            }
            bundleID = String(topic.dropLast(Self.liveActivityTopicSuffix.count))
        }
        if let topics = configuration.topics, !topics.contains(bundleID) { return .reject(400, "TopicDisallowed", timestamp: nil) }
        // A device token of the app is not a Live Activity's token: a push under the activity topic to it is refused.
        if let owner = configuration.deviceTopics[token.lowercased()], owner != topic { return .reject(400, "DeviceTokenNotForTopic", timestamp: nil) }
        let validTypes = ["alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "widgets"]
        guard validTypes.contains(pushType) else { return .reject(400, "InvalidPushType", timestamp: nil) }
        let priority = header("apns-priority") ?? "10"
        guard ["1", "5", "10"].contains(priority) else { return .reject(400, "BadPriority", timestamp: nil) }
        if pushType == "background" && priority != "5" { return .reject(400, "BadPriority", timestamp: nil) }
        if pushType == "liveactivity" && priority == "1" { return .reject(400, "BadPriority", timestamp: nil) }
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
            guard let fields = aps as? [String: Any], APSRules.refusal(fields, liveActivity: pushType == "liveactivity") == nil else {
                return .reject(400, "BadPayload", timestamp: nil)
            }
            if pushType == "liveactivity", APSRules.liveActivityRefusal(fields) != nil { return .reject(400, "BadPayload", timestamp: nil) }
        }
        if let injected = injectedFailure(token, now: now) { return injected }
        // Echoed exactly as sent (clients match answers by it), or a new one in lowercase, as Apple.
        let apnsID = header("apns-id") ?? UUID().uuidString.lowercased()
        return .accept(AcceptedPush(token: token, headers: Self.recordedHeaders(headers), payload: body, apnsID: apnsID))
    }

    /// The topic suffix of a Live Activity's push: the app's bundle id, then this.
    static let liveActivityTopicSuffix = ".push-type.liveactivity"

    /// What an accepted push keeps of its headers: `apns-*` and `content-type`.
    static func recordedHeaders(_ headers: [String: String]) -> [String: String] {
        headers.filter { $0.key.hasPrefix("apns-") || $0.key == "content-type" }
    }

    /// A request's headers by lowercase name; a repeated one's values joined by ", ".
    static func fields(_ headers: HTTPFields) -> [String: String] {
        var fields: [String: String] = [:]
        for field in headers {
            let name = field.name.canonicalName
            fields[name] = fields[name].map { "\($0), \(field.value)" } ?? field.value
        }
        return fields
    }

    /// The failure `fail(token:)` asked for `key` (a device token or a channel id), counted down; nil when none is left.
    func injectedFailure(_ key: String, now: Date) -> Verdict? {
        let injected: Failure? = state.withLockedValue { state in
            guard var failure = state.failures[key], failure.remaining > 0 else { return nil }
            failure.remaining -= 1
            state.failures[key] = failure
            return failure
        }
        return injected.map { .reject($0.status, $0.reason, timestamp: $0.status == 410 ? now : nil) }
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

    /// Keeps an accepted push and plays it on the phones (a live-activity push); appends it to the log.
    func record(_ push: AcceptedPush) {
        let played = state.withLockedValue { state -> [PhoneEvent]? in
            state.acceptedCount += 1
            state.accepted.append(push)
            if state.accepted.count > keep { state.accepted.removeFirst(state.accepted.count - keep) }
            let channels = state.channels
            return state.phones.receive(push) { channels[$0] != nil }
        }
        log.withLockedValue { handle in
            guard let handle else { return }
            let payload = (try? JSONSerialization.jsonObject(with: push.payload)) ?? [:]
            // `at`: when it was accepted (Unix seconds), for measuring a paced campaign's spread.
            var line: [String: Any] = ["token": push.token, "headers": push.headers, "payload": payload, "at": Date().timeIntervalSince1970]
            // What the phones did with a live-activity push.
            if let played { line["phone"] = Phones.logObjects(played) }
            if var data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys, .withoutEscapingSlashes]) {
                data.append(0x0A)
                handle.write(data)
            }
        }
    }

    /// `GET /sandbox/phone`: the phone view as JSON.
    func phoneView(activity: String? = nil) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: phoneViewJSON(activity: activity))))
    }

    /// The phone view: `{"activities":[…],"events":[…]}`, keys as `PhoneActivity`'s and
    /// `PhoneEvent`'s property names, null for nil; with `activity`, only that one's (`?activity=la_…`,
    /// its `richpushActivity`).
    func phoneViewJSON(activity: String? = nil) -> Data {
        let object = state.withLockedValue { $0.phones.viewObject(activity: activity) }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
    }

    static func answer(_ status: Int, _ reason: String, timestamp: Date? = nil, apnsID: String? = nil) -> Response {
        let data = reasonBody(reason, timestamp: timestamp)
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
