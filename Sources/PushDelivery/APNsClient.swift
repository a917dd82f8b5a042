import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
import NIOHPACK
import NIOHTTP1
import NIOSSL
import RichPushCore

/// Where APNs is: Apple's two environments, or any `https://host:port` (the sandbox).
public enum APNsEnvironment: Sendable, Equatable {
    case production
    case sandbox
    case custom(String)

    /// Parses `sandbox`, `production`, or an `https://` URL.
    public init(_ text: String) throws {
        switch text.lowercased() {
        case "production": self = .production
        case "sandbox", "development": self = .sandbox
        default:
            guard let url = URL(string: text), url.scheme == "https", url.host != nil else {
                throw PushError.configuration("--apns-env must be sandbox, production or https://host:port, got '\(text)'")
            }
            self = .custom(text.hasSuffix("/") ? String(text.dropLast()) : text)
        }
    }

    /// The base URL.
    public var baseURL: String {
        switch self {
        case .production: "https://api.push.apple.com"
        case .sandbox: "https://api.sandbox.push.apple.com"
        case .custom(let url): url
        }
    }

    /// Where broadcast channels are made and deleted (docs/api.md#live-activities): Apple's
    /// channel management hosts; a custom URL (the sandbox) serves both.
    public var channelManagementURL: String {
        switch self {
        case .production: "https://api-manage-broadcast.push.apple.com:2196"
        case .sandbox: "https://api-manage-broadcast.sandbox.push.apple.com:2195"
        case .custom(let url): url
        }
    }
}

/// The TLS every outgoing push connection uses: the system's roots plus `--push-ca`.
enum PushTLS {
    /// An HTTP/1.1 and HTTP/2 client for a push service or token endpoint: the system roots and
    /// `extraRoots` trusted, connect and read bounded.
    static func httpClient(extraRoots: [String], connectTimeout: TimeAmount, readTimeout: TimeAmount) throws -> HTTPClient {
        var configuration = HTTPClient.Configuration(tlsConfiguration: try configuration(extraRoots: extraRoots))
        configuration.timeout = .init(connect: connectTimeout, read: readTimeout)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// A client configuration trusting the system roots and the PEM files `extraRoots`.
    static func configuration(extraRoots: [String]) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if !extraRoots.isEmpty {
            var roots: [NIOSSLCertificate] = []
            for path in extraRoots {
                do { roots += try NIOSSLCertificate.fromPEMFile(path) } catch {
                    throw PushError.configuration("--push-ca \(path): not a PEM certificate file (\(error))")
                }
            }
            tls.additionalTrustRoots = [.certificates(roots)]
        }
        return tls
    }
}

/// Sends alert and background pushes to APNs over HTTP/2 with token authentication.
///
/// One long-lived HTTP/2 connection carries every push as a stream (Apple treats connection
/// churn as abuse); `HTTP2PushClient` writes them as frames, many per flush.
public final class APNsClient: Sendable {
    private let http: HTTP2PushClient
    /// The channel management host's connection, made on first use.
    private let management: NIOLockedValueBox<HTTP2PushClient?> = NIOLockedValueBox(nil)
    private let tls: TLSConfiguration
    private let tokens: APNsTokenManager
    private let environment: APNsEnvironment
    private let topic: String

    /// Creates a client; `extraRoots` (PEM files) are trusted in addition to the system's.
    public init(credentials: APNsCredentials, topic: String, environment: APNsEnvironment, extraRoots: [String] = [],
                tokens: APNsTokenManager? = nil) throws {
        guard let url = URL(string: environment.baseURL), let host = url.host else {
            throw PushError.configuration("--apns-env: cannot read a host from '\(environment.baseURL)'")
        }
        self.tls = try PushTLS.configuration(extraRoots: extraRoots)
        self.http = try HTTP2PushClient(host: host, port: url.port ?? 443, tls: tls)
        self.tokens = tokens ?? APNsTokenManager(credentials: credentials)
        self.environment = environment
        self.topic = topic
    }

    /// Closes the connections.
    public func shutdown() async throws {
        await http.shutdown()
        if let management = management.withLockedValue({ $0 }) { await management.shutdown() }
    }

    /// Sends one push. `pushID` is sent as `apns-id` and reused on retries; `collapseID`, as
    /// `apns-collapse-id`, makes the device show one alert for every push that carries it.
    public func send(token deviceToken: String, payload: Data, mode: PushMode = .silent, pushID: String,
                     expiration: Date, collapseID: String? = nil, priority: String? = nil) async -> (DeliveryOutcome, timestamp: Date?) {
        await withCheckedContinuation { continuation in
            start(token: deviceToken, payload: payload, mode: mode, pushID: pushID, expiration: expiration, collapseID: collapseID,
                  priority: priority) { outcome, timestamp in
                continuation.resume(returning: (outcome, timestamp))
            }
        }
    }

    /// `send` without a task: `completion` gets the outcome (and Apple's timestamp on a 410),
    /// called once on the connection's event loop. `priority` is `apns-priority` (the mode's
    /// when nil); an `expiration` at 1970's start is sent as 0, Apple's "now or never".
    ///
    /// A Live Activity's push (`liveActivity`) goes as `apns-push-type: liveactivity` under the
    /// topic `<bundle id>.push-type.liveactivity`; with `channelID`, as the broadcast on that
    /// channel (`POST /4/broadcasts/apps/<bundle id>`, `apns-channel-id`, `apns-request-id`).
    public func start(token deviceToken: String, payload: Data, mode: PushMode = .silent, pushID: String, expiration: Date,
                      collapseID: String? = nil, priority: String? = nil, liveActivity: Bool = false, channelID: String? = nil,
                      completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        let jwt: String, authorization: String
        do { (jwt, authorization) = try tokens.authorization() } catch {
            completion(.failed(reason: "cannot sign the provider token: \(error)", prune: false), nil)
            return
        }
        var headers = [
            ("authorization", authorization),
            ("apns-topic", liveActivity ? topic + ".push-type.liveactivity" : topic),
            ("apns-push-type", liveActivity ? "liveactivity" : mode.apnsPushType),
            ("apns-priority", priority ?? mode.apnsPriority),
            ("apns-expiration", String(Int(expiration.timeIntervalSince1970))),
            (channelID == nil ? "apns-id" : "apns-request-id", pushID),
            ("content-type", "application/json"),
        ]
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        var path = "/3/device/\(deviceToken)"
        if let channelID {
            headers.removeAll { $0.0 == "apns-topic" }
            headers.append(("apns-channel-id", channelID))
            path = "/4/broadcasts/apps/\(topic)"
        }
        let tokens = self.tokens
        http.execute(path: path, headers: headers, body: ByteBuffer(data: payload), unindexed: Self.unindexed) { result in
            let (outcome, timestamp) = Self.outcome(of: result, jwt: jwt, tokens: tokens)
            completion(outcome, timestamp)
        }
    }

    /// The channel management host's connection.
    private func managementClient() throws -> HTTP2PushClient {
        try management.withLockedValue { client in
            if let client { return client }
            guard let url = URL(string: environment.channelManagementURL), let host = url.host else {
                throw PushError.configuration("cannot read a host from '\(environment.channelManagementURL)'")
            }
            let made = try HTTP2PushClient(host: host, port: url.port ?? 443, tls: tls)
            client = made
            return made
        }
    }

    /// Makes a broadcast channel for Live Activities (iOS 18) through APNs' channel management
    /// API, its pushes kept for devices offline (`message-storage-policy` 1); returns its id.
    public func createChannel() async throws -> String {
        let response = try await manage(method: "POST", path: "/1/apps/\(topic)/channels", channel: nil,
                                        body: Data(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8))
        guard response.status == 201 || response.status == 200, let id = response.headers.first(name: "apns-channel-id"), !id.isEmpty else {
            throw PushError.transport("APNs refused to make a broadcast channel: \(Self.reason(response))")
        }
        return id
    }

    /// Deletes broadcast channel `id`; one APNs no longer knows counts as deleted.
    public func deleteChannel(_ id: String) async throws {
        let response = try await manage(method: "DELETE", path: "/1/apps/\(topic)/channels", channel: id, body: nil)
        guard response.status == 204 || response.status == 200 || response.status == 404 || response.status == 410 else {
            throw PushError.transport("APNs refused to delete broadcast channel \(id): \(Self.reason(response))")
        }
    }

    private func manage(method: String, path: String, channel: String?, body: Data?) async throws -> PushHTTPResponse {
        let jwt = try tokens.token()
        var headers = [("authorization", "bearer \(jwt)"), ("apns-request-id", UUID().uuidString.lowercased())]
        if let channel { headers.append(("apns-channel-id", channel)) }
        if body != nil { headers.append(("content-type", "application/json")) }
        do {
            return try await managementClient().execute(method: method, path: path, headers: headers, body: body.map { ByteBuffer(data: $0) },
                                                        timeout: .seconds(10))
        } catch let error as PushHTTPError {
            throw PushError.transport("APNs channel management: \(error.reason)")
        } catch let error as PushError {
            throw error
        } catch {
            throw PushError.transport("APNs channel management: connection failed: \(ConnectionWords.clean("\(error)"))")
        }
    }

    private static func reason(_ response: PushHTTPResponse) -> String {
        let json = (try? JSONSerialization.jsonObject(with: Data(buffer: response.body))) as? [String: Any]
        return "\(response.status) \(json?["reason"] as? String ?? "")".trimmingCharacters(in: .whitespaces)
    }

    /// The headers whose values change from push to push: sent without entering HPACK's table.
    /// (A campaign's pushes share their `apns-expiration`, and mostly their `content-length`:
    /// those are indexed, and cost APNs an index to decode instead of a literal.) An alert's
    /// `apns-collapse-id` names its notification, one per recipient in a campaign: indexed, it
    /// evicted an entry a push and pushed the provider token out of the table every 60 or so.
    private static let unindexed: Set<String> = [":path", "apns-id", "apns-collapse-id"]

    /// What an answer means for the push.
    private static func outcome(of result: Result<PushHTTPResponse, any Error>, jwt: String, tokens: APNsTokenManager) -> (DeliveryOutcome, Date?) {
        let response: PushHTTPResponse
        switch result {
        case .success(let answer): response = answer
        case .failure(let error):
            // In words, never the TLS library's (a refused certificate names --push-ca).
            let reason = (error as? PushHTTPError)?.reason ?? "connection failed: \(ConnectionWords.clean("\(error)"))"
            return (.retry(reason: reason, after: nil), nil)
        }
        let status = response.status
        if status == 200 { return (.sent(id: response.headers.first(name: "apns-id") ?? response.headers.first(name: "apns-request-id")), nil) }
        let json = (try? JSONSerialization.jsonObject(with: Data(buffer: response.body))) as? [String: Any]
        let reason = json?["reason"] as? String ?? "HTTP \(status)"
        let timestamp = (json?["timestamp"] as? Double).map { Date(timeIntervalSince1970: $0 / 1000) }
        if status == 403 && reason == "ExpiredProviderToken" {
            tokens.invalidate(jwt)
            return (.retry(reason: reason, after: 0), nil)
        }
        return (classify(status: status, reason: reason, retryAfter: response.headers.first(name: "retry-after")), timestamp)
    }

    /// Apple's documented statuses: what to do with each.
    static func classify(status: Int, reason: String, retryAfter: String?) -> DeliveryOutcome {
        switch (status, reason) {
        case (410, _):
            return .failed(reason: "410 \(reason)", prune: true)
        case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            // Also what every device answers when --apns-env or --apns-topic is wrong: never a reason to delete registrations.
            return .failed(reason: "400 \(reason)", prune: false)
        case (429, _), (500, _), (503, _):
            return .retry(reason: "\(status) \(reason)", after: retryAfter.flatMap(Double.init))
        default:
            return .failed(reason: "\(status) \(reason)", prune: false)
        }
    }
}
