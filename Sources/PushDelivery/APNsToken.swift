import Crypto
import Foundation
import NIOConcurrencyHelpers
import RichPushCore

/// The credentials of APNs token authentication: the `.p8` key, its key id and the team id.
public struct APNsCredentials: Sendable {
    /// The signing key (ES256, P-256).
    public let key: P256.Signing.PrivateKey
    /// The 10-character key id from Apple, sent as the JWT's `kid`.
    public let keyID: String
    /// The 10-character team id, sent as the JWT's `iss`.
    public let teamID: String

    /// Loads a `.p8` (PKCS#8 PEM) file as Apple hands it out.
    public init(p8 path: String, keyID: String, teamID: String) throws {
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        do {
            self.init(key: try P256.Signing.PrivateKey(pemRepresentation: pem), keyID: keyID, teamID: teamID)
        } catch {
            throw PushError.configuration("\(path) is not a PKCS#8 P-256 private key (an APNs AuthKey_<KID>.p8): \(error)")
        }
    }

    /// Uses a key already in memory.
    public init(key: P256.Signing.PrivateKey, keyID: String, teamID: String) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
    }

    /// A signed provider token issued at `date`: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}`.
    public func makeToken(issuedAt date: Date) throws -> String {
        try CompactJWT.make(header: ["alg": "ES256", "kid": keyID], claims: ["iss": teamID, "iat": Int(date.timeIntervalSince1970)]) {
            try key.signature(for: $0).rawRepresentation
        }
    }
}

/// Issues the provider token and reuses it: Apple refuses tokens older than an hour and answers
/// 429 TooManyProviderTokenUpdates to a provider that makes new ones too often.
///
/// A lock, not an actor: every push asks for the token, and the answer is almost always the one
/// already made, so a hop to an actor would cost more than the lookup.
public final class APNsTokenManager: Sendable {
    private let credentials: APNsCredentials
    private let lifetime: TimeInterval
    private let now: @Sendable () -> Date
    private let state = NIOLockedValueBox(State())

    private struct State {
        var current: (token: String, authorization: String, issuedAt: Date)?
        var issued = 0
    }

    /// Creates a manager that renews the token after `lifetime` (50 minutes: inside Apple's 20–60).
    public init(credentials: APNsCredentials, lifetime: TimeInterval = 50 * 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.credentials = credentials
        self.lifetime = lifetime
        self.now = now
    }

    /// How many tokens were issued (for tests and metrics).
    public var issued: Int {
        state.withLockedValue { $0.issued }
    }

    /// The current token, renewed when it has reached its lifetime (signed under the lock, so
    /// pushes that arrive together share one new token).
    public func token() throws -> String {
        try authorization().token
    }

    /// The current token, and its `authorization` header's value (`bearer <token>`, made once
    /// per token, not once per push).
    public func authorization() throws -> (token: String, header: String) {
        let date = now()
        return try state.withLockedValue { state in
            if let current = state.current, date.timeIntervalSince(current.issuedAt) < lifetime { return (current.token, current.authorization) }
            let token = try credentials.makeToken(issuedAt: date)
            let header = "bearer " + token
            state.current = (token, header, date)
            state.issued += 1
            return (token, header)
        }
    }

    /// Drops `token` after Apple called it expired, so the next call issues a new one. A token
    /// already replaced by another request is left alone (one renewal per expiry, not one per push).
    public func invalidate(_ token: String) {
        state.withLockedValue { state in
            if state.current?.token == token { state.current = nil }
        }
    }
}
