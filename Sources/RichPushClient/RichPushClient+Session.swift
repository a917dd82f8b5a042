import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

extension RichPushClient {
    /// A device session (docs/api.md#admins-imported-accounts-and-device-sessions): a token that stands for the user's password until it expires or is revoked.
    ///
    /// Keep the token in the keychain, shared with the extension through an access group, instead of the password.
    public struct Session: Sendable, Equatable {
        /// The bearer token; the server keeps only a hash of it, so it cannot be shown again.
        public var token: String
        /// When the server stops accepting the token.
        public var expires: Date

        /// Creates a session from its parts.
        public init(token: String, expires: Date) {
            self.token = token
            self.expires = expires
        }

        /// Reads the server's answer to `POST /api/sessions`, `{"token","expires"}`.
        ///
        /// `expires` is ISO 8601 with or without fractional seconds (`2027-02-20T10:00:00Z`,
        /// `2027-02-20T10:00:00.123Z`).
        /// - Throws: `RichPushClientError` of kind `.invalidResponse` when either field is missing or malformed.
        public init(json: Data) throws {
            guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
                  let token = object["token"] as? String, !token.isEmpty, let expires = object["expires"] as? String else {
                throw RichPushClientError.invalidResponse("a new session should be a JSON object {\"token\",\"expires\"}")
            }
            guard let date = Wire.date(rfc3339: expires) else {
                throw RichPushClientError.invalidResponse("the session's expiry \"\(expires.prefix(40))\" is not an ISO 8601 date")
            }
            self.init(token: token, expires: date)
        }

    }

    /// Exchanges a user's password for a device session: `POST /api/sessions` with Basic credentials.
    ///
    /// The client's own credentials are not used. Pass `session.token` to `with(credentials: .bearer(_))`.
    /// - Throws: `RichPushClientError`: `.http(status: 401)` for a wrong user or password,
    ///   `.transport`, or `.invalidResponse`; `CancellationError` when the task is cancelled.
    public func createSession(user: String, password: String, timeout: TimeInterval = 25) async throws -> Session {
        var request = Self.request("POST", endpoint("api/sessions"), credentials: .basic(user: user, password: password),
                                   accept: "application/json", timeout: timeout)
        request.httpBody = Data()
        let reply = try await exchange(request, .json(accepting: 200...201), timeout: timeout)
        return try Session(json: reply.body)
    }

    /// Revokes the session whose token the client sends: `DELETE /api/sessions/current`.
    ///
    /// Call it on sign-out; the token stops working everywhere at once.
    /// - Throws: `RichPushClientError` (`.http(status: 401)` when the token was already dead),
    ///   or `CancellationError`.
    public func revokeSession(timeout: TimeInterval = 25) async throws {
        let request = Self.request("DELETE", endpoint("api/sessions/current"), credentials: credentials,
                                   accept: "application/json", timeout: timeout)
        _ = try await exchange(request, .json(accepting: 200...299), timeout: timeout)
    }
}
