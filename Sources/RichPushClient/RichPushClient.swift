import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

/// The device side of RichPush's HTTP API: device sessions, and payload downloads that a
/// Notification Service Extension can afford.
///
/// Every request runs through its own `URLSession` with a delegate, so a payload streams to disk
/// as it arrives (never whole in memory: an extension has about 24 MB) and each refusal (status,
/// size, type, magic bytes) is decided here, with the transfer cancelled at once and no partial
/// file left behind. It depends on Foundation alone, so an app and its extensions can share it.
public final class RichPushClient: Sendable {
    /// How the client proves who it is to the API.
    public enum Credentials: Sendable, Equatable {
        /// HTTP Basic with a user name and password, as the tutorial's device app sends them.
        case basic(user: String, password: String)
        /// A device session's token (`Authorization: Bearer <token>`), from `createSession`.
        case bearer(String)

        var headerValue: String {
            switch self {
            case .basic(let user, let password): "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            case .bearer(let token): "Bearer \(token)"
            }
        }
    }

    /// The server, e.g. `https://push.example.com`; API paths are appended to it.
    public let baseURL: URL
    /// What the client sends to the API; nil sends nothing (enough for a payload URL).
    public let credentials: Credentials?
    /// The device's registration id (`POST /api/register`'s `registrationId`), which the Live
    /// Activity calls name the device by; nil until the app gives it.
    public let registration: String?
    private let configuration: ConfigurationBox

    /// Creates a client of the server at `baseURL`.
    ///
    /// `configuration` is copied; whatever it says, each request gets the per-call timeout and runs
    /// without a URL cache or stored credentials (payloads are private, credentials are explicit).
    public init(baseURL: URL, credentials: Credentials? = nil, registration: String? = nil, configuration: URLSessionConfiguration = .ephemeral) {
        self.baseURL = baseURL
        self.credentials = credentials
        self.registration = registration
        self.configuration = ConfigurationBox(configuration)
    }

    private init(baseURL: URL, credentials: Credentials?, registration: String?, box: ConfigurationBox) {
        self.baseURL = baseURL
        self.credentials = credentials
        self.registration = registration
        self.configuration = box
    }

    /// The same client sending other credentials, e.g. `.bearer(session.token)` after `createSession`.
    public func with(credentials: Credentials?) -> RichPushClient {
        RichPushClient(baseURL: baseURL, credentials: credentials, registration: registration, box: configuration)
    }

    /// The same client naming the device by `registration` (`POST /api/register`'s `registrationId`).
    public func with(registration: String?) -> RichPushClient {
        RichPushClient(baseURL: baseURL, credentials: credentials, registration: registration, box: configuration)
    }

    func endpoint(_ path: String) -> URL { baseURL.appendingPathComponent(path) }

    static func request(_ method: String, _ url: URL, credentials: Credentials?, accept: String, timeout: TimeInterval) -> URLRequest {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        request.setValue(accept, forHTTPHeaderField: "Accept")
        if let credentials { request.setValue(credentials.headerValue, forHTTPHeaderField: "Authorization") }
        return request
    }

    func exchange(_ request: URLRequest, _ mode: Transfer.Mode, timeout: TimeInterval) async throws -> Transfer.Reply {
        let transfer = Transfer(mode: mode, timeout: timeout)
        let configuration = self.configuration
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Transfer.Reply, any Error>) in
                transfer.start(request, configuration: configuration, continuation: continuation)
            }
        } onCancel: {
            transfer.cancel()
        }
    }
}
