import AsyncHTTPClient
import Foundation
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
    private let tokens: APNsTokenManager
    private let environment: APNsEnvironment
    private let topic: String

    /// Creates a client; `extraRoots` (PEM files) are trusted in addition to the system's.
    public init(credentials: APNsCredentials, topic: String, environment: APNsEnvironment, extraRoots: [String] = [],
                tokens: APNsTokenManager? = nil) throws {
        guard let url = URL(string: environment.baseURL), let host = url.host else {
            throw PushError.configuration("--apns-env: cannot read a host from '\(environment.baseURL)'")
        }
        self.http = try HTTP2PushClient(host: host, port: url.port ?? 443, tls: try PushTLS.configuration(extraRoots: extraRoots))
        self.tokens = tokens ?? APNsTokenManager(credentials: credentials)
        self.environment = environment
        self.topic = topic
    }

    /// Closes the connections.
    public func shutdown() async throws {
        await http.shutdown()
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
    public func start(token deviceToken: String, payload: Data, mode: PushMode = .silent, pushID: String, expiration: Date,
                      collapseID: String? = nil, priority: String? = nil, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        let jwt: String
        do { jwt = try tokens.token() } catch {
            completion(.failed(reason: "cannot sign the provider token: \(error)", prune: false), nil)
            return
        }
        var headers = [
            ("authorization", "bearer \(jwt)"),
            ("apns-topic", topic),
            ("apns-push-type", mode.apnsPushType),
            ("apns-priority", priority ?? mode.apnsPriority),
            ("apns-expiration", String(Int(expiration.timeIntervalSince1970))),
            ("apns-id", pushID),
            ("content-type", "application/json"),
        ]
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        let tokens = self.tokens
        http.execute(path: "/3/device/\(deviceToken)", headers: headers, body: ByteBuffer(data: payload), unindexed: Self.unindexed) { result in
            let (outcome, timestamp) = Self.outcome(of: result, jwt: jwt, tokens: tokens)
            completion(outcome, timestamp)
        }
    }

    /// The headers whose values change from push to push: sent without entering HPACK's table.
    private static let unindexed: Set<String> = [":path", "apns-id", "apns-expiration"]

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
        if status == 200 { return (.sent(id: response.headers.first(name: "apns-id")), nil) }
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
