import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Resilience
import RichPushCore

/// A parsed Notification Hubs connection string.
public struct NotificationHubsConnection: Sendable, Equatable {
    /// `https://<namespace>.servicebus.windows.net` (from `sb://`), or an `http(s)://` endpoint as written.
    public let endpoint: String
    public let keyName: String
    public let key: String

    /// Parses `Endpoint=sb://…/;SharedAccessKeyName=…;SharedAccessKey=…`.
    public init(_ text: String) throws {
        var fields: [String: String] = [:]
        for part in text.split(separator: ";") where !part.isEmpty {
            guard let eq = part.firstIndex(of: "=") else { continue }
            fields[part[..<eq].trimmingCharacters(in: .whitespaces).lowercased()] = String(part[part.index(after: eq)...])
        }
        guard var endpoint = fields["endpoint"], let keyName = fields["sharedaccesskeyname"], let key = fields["sharedaccesskey"] else {
            throw PushError.configuration("--anh-connection-string needs Endpoint=sb://…;SharedAccessKeyName=…;SharedAccessKey=…")
        }
        if endpoint.hasPrefix("sb://") { endpoint = "https://" + endpoint.dropFirst(5) }
        guard endpoint.hasPrefix("https://") || endpoint.hasPrefix("http://") else {
            throw PushError.configuration("the connection string's Endpoint must be sb://, https:// or http://, got '\(endpoint)'")
        }
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        // Plain http:// only where nothing can listen in: the loopback interface (a stand-in, a local proxy).
        if endpoint.hasPrefix("http://") {
            guard Loopback.isSecureOrLoopback(endpoint) else {
                throw PushError.configuration("the connection string's Endpoint may be http:// only on loopback (127.0.0.1, localhost, ::1); use sb:// or https://, got '\(endpoint)'")
            }
        }
        self.endpoint = endpoint
        self.keyName = keyName
        self.key = key
    }

    /// A SAS token for `resource`, valid until `expiry`, as Microsoft documents it: HMAC-SHA256
    /// keyed with the key's UTF-8 bytes over the URL-encoded, lowercased resource URI, a new line,
    /// and the expiry in seconds.
    public func sasToken(resource: String, expiry: Date) -> String {
        let target = Self.encode(resource.lowercased()).lowercased()
        let se = String(Int(expiry.timeIntervalSince1970))
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(target)\n\(se)".utf8), using: SymmetricKey(data: Data(key.utf8)))
        let signature = Data(mac).base64EncodedString()
        return "SharedAccessSignature sr=\(target)&sig=\(Self.encode(signature))&se=\(se)&skn=\(keyName)"
    }

    /// `encodeURIComponent`.
    static func encode(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'()")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

/// Sends through Azure Notification Hubs' REST API and mirrors device registrations into the hub.
public final class NotificationHubsClient: Sendable {
    /// The REST API version used for every call.
    public static let apiVersion = "2015-01"
    private let connection: NotificationHubsConnection
    private let hub: String
    private let http: HTTPClient
    /// Refuses calls at once while the hub cannot be reached (a send is then retried later, a
    /// registration's mirror call is a 503).
    public let breaker: CircuitBreaker
    /// The deadline of calls a request waits for (mirroring a registration): docs/operations.md#when-a-dependency-fails's 5 s.
    private let mirrorDeadline: TimeAmount

    /// Creates a client for `hub`; `extraRoots` (PEM files, `--push-ca`) are trusted in addition to
    /// the system's. A connection that takes longer than `connectTimeout` to open, or an answer
    /// longer than `readTimeout`, is a retryable failure. A registration's mirror call, which a
    /// request waits for, gets `mirrorDeadline` in all. `breaker` guards the hub (its cooldowns
    /// are the defaults unless a test needs them longer than a loaded machine's pauses).
    public init(connection: NotificationHubsConnection, hub: String, extraRoots: [String] = [],
                connectTimeout: TimeAmount = .seconds(4), readTimeout: TimeAmount = .seconds(30),
                mirrorDeadline: TimeAmount = .seconds(4), breaker: CircuitBreaker = CircuitBreaker(.hub)) throws {
        precondition(breaker.dependency == .hub, "a notification hub's breaker guards the hub")
        self.breaker = breaker
        self.connection = connection
        self.hub = hub
        self.mirrorDeadline = mirrorDeadline
        self.http = try PushTLS.httpClient(extraRoots: extraRoots, connectTimeout: connectTimeout, readTimeout: readTimeout)
    }

    /// Closes the connections.
    public func shutdown() async throws {
        try await http.shutdown()
    }

    private var hubURL: String { "\(connection.endpoint)/\(hub)" }

    private func request(_ method: HTTPMethod, _ path: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: "\(hubURL)/\(path)?api-version=\(Self.apiVersion)")
        request.method = method
        request.headers.add(name: "authorization", value: connection.sasToken(resource: hubURL, expiry: Date().addingTimeInterval(3600)))
        return request
    }

    /// Sends an Apple-native notification (alert or background) to every device matching `tag`;
    /// `priority` is `apns-priority` (the mode's when nil), `expiry` the hub's
    /// `ServiceBusNotification-Apns-Expiry` (docs/api.md#options-badges-and-paced-sends).
    public func send(payload: Data, mode: PushMode = .silent, tag: String, priority: String? = nil, expiry: Date? = nil) async -> DeliveryOutcome {
        var request = request(.POST, "messages/")
        request.headers.add(name: "content-type", value: "application/json;charset=utf-8")
        request.headers.add(name: "ServiceBusNotification-Format", value: "apple")
        request.headers.add(name: "ServiceBusNotification-Tags", value: tag)
        request.headers.add(name: "apns-push-type", value: mode.apnsPushType)
        request.headers.add(name: "apns-priority", value: priority ?? mode.apnsPriority)
        if let expiry { request.headers.add(name: "ServiceBusNotification-Apns-Expiry", value: expiry.formatted(.iso8601)) }
        request.body = .bytes(ByteBuffer(data: payload))
        return await execute(request)
    }

    /// Creates or replaces the installation of a device (`PUT installations/{id}`); throws
    /// `DependencyUnavailable` when the hub cannot be reached within the mirror deadline.
    public func upsertInstallation(id: String, deviceToken: String, tags: [String]) async throws(DependencyUnavailable) -> DeliveryOutcome {
        var request = request(.PUT, "installations/\(id)")
        request.headers.add(name: "content-type", value: "application/json")
        let body: [String: Any] = ["installationId": id, "platform": "apns", "pushChannel": deviceToken, "tags": tags]
        request.body = .bytes(ByteBuffer(data: try! JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])))
        return try await perform(request, timeout: mirrorDeadline)
    }

    /// Deletes the installation of a device; throws `DependencyUnavailable` as `upsertInstallation` does.
    public func deleteInstallation(id: String) async throws(DependencyUnavailable) -> DeliveryOutcome {
        try await perform(request(.DELETE, "installations/\(id)"), timeout: mirrorDeadline)
    }

    /// A send's call: an unreachable hub is a retry later.
    private func execute(_ request: HTTPClientRequest) async -> DeliveryOutcome {
        do {
            return try await perform(request, timeout: .seconds(30))
        } catch {
            return .retry(reason: error.description, after: Double(error.retryAfter))
        }
    }

    /// One call through the breaker: the hub's answer as an outcome, or `DependencyUnavailable`
    /// when it could not be reached (refused at once while the breaker is open).
    private func perform(_ request: HTTPClientRequest, timeout: TimeAmount) async throws(DependencyUnavailable) -> DeliveryOutcome {
        let probe: Bool
        do {
            probe = try breaker.admit()
        } catch let error as DependencyUnavailable {
            throw error
        } catch {
            throw DependencyUnavailable(.hub, reason: "\(error)")
        }
        do {
            let response = try await http.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: 64 * 1024)
            breaker.record(.answered, probe: probe)
            let status = Int(response.status.code)
            let detail = String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines).prefix(300)
            switch status {
            case 200, 201, 204:
                return .sent(id: response.headers.first(name: "Location"))
            case 429, 500...599:
                return .retry(reason: "\(status) \(detail)", after: response.headers.first(name: "retry-after").flatMap(Double.init))
            default:
                return .failed(reason: "\(status) \(detail.isEmpty ? response.status.reasonPhrase : String(detail))", prune: false)
            }
        } catch is CancellationError {
            breaker.record(.abandoned, probe: probe)
            throw DependencyUnavailable(.hub, reason: "the call was cancelled")
        } catch {
            breaker.record(.unreachable("\(error)"), probe: probe)
            throw breaker.unavailable("connection failed: \(error)")
        }
    }
}
