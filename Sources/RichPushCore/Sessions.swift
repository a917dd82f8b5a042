import Crypto
import Foundation
import SQLEngine

/// A device session: a bearer token that stands for a user's password until it expires or is
/// revoked (docs/api.md#admins-imported-accounts-and-device-sessions).
public struct Session: Sendable, Equatable {
    /// The token, shown once; only its SHA-256 is stored.
    public var token: String
    public var username: String
    public var expires: Date
}

/// Who a bearer token belongs to.
public struct SessionOwner: Sendable, Equatable {
    public var username: String
    public var admin: Bool
    public var expires: Date

    /// Creates an owner.
    public init(username: String, admin: Bool, expires: Date) {
        self.username = username
        self.admin = admin
        self.expires = expires
    }
}

/// Bearer sessions. A token is 32 random bytes (base64url, prefixed `rps_`); the table keeps
/// only its SHA-256, so a copy of the database grants nothing. Checking one is a hash and an
/// indexed lookup, not a bcrypt.
public struct SessionStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// Creates a session for `username`, valid for `lifetime` seconds. With `audit`, records it as
    /// a console sign-in (`console.signin`: who and from where, never the token).
    public func create(for username: String, lifetime: TimeInterval, now: Date = Date(), audit: AuditActor? = nil) async throws -> Session {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &random) }
        let token = "rps_" + Base64URL.encode(bytes)
        let expires = Date(timeIntervalSince1970: (now.timeIntervalSince1970 + lifetime).rounded(.down))
        try await database.write { db in
            try db.execute(sql: "DELETE FROM sessions WHERE expiresAt < ?", arguments: [now.timeIntervalSince1970 - 86_400])
            try db.execute(sql: "INSERT INTO sessions (tokenHash, username, createdAt, expiresAt) VALUES (?, ?, ?, ?)",
                           arguments: [Self.hash(token), username, now.timeIntervalSince1970, expires.timeIntervalSince1970])
            try Audit.record(db, audit, "console.signin", target: "user:\(username)")
        }
        return Session(token: token, username: username, expires: expires)
    }

    /// The owner of `token` while it is valid and their account exists; nil otherwise.
    public func owner(of token: String, now: Date = Date()) async throws -> SessionOwner? {
        guard token.hasPrefix("rps_"), token.utf8.count < 100 else { return nil }
        return try await database.read { db in
            try SQLRow.fetchOne(db, sql: """
                SELECT s.username, s.expiresAt, u.admin FROM sessions s JOIN users u ON u.name = s.username
                WHERE s.tokenHash = ? AND s.expiresAt > ?
                """, arguments: [Self.hash(token), now.timeIntervalSince1970]).map {
                SessionOwner(username: $0["username"], admin: $0["admin"], expires: Date(timeIntervalSince1970: $0["expiresAt"]))
            }
        }
    }

    /// The newest valid sessions, at most `limit`: the hash of each token and its owner.
    public func active(limit: Int, now: Date = Date()) async throws -> [(tokenHash: Data, owner: SessionOwner)] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: """
                SELECT s.tokenHash, s.username, s.expiresAt, u.admin FROM sessions s JOIN users u ON u.name = s.username
                WHERE s.expiresAt > ? ORDER BY s.createdAt DESC LIMIT ?
                """, arguments: [now.timeIntervalSince1970, limit]).map {
                ($0["tokenHash"], SessionOwner(username: $0["username"], admin: $0["admin"], expires: Date(timeIntervalSince1970: $0["expiresAt"])))
            }
        }
    }

    /// Revokes one token; false when it was not a session.
    @discardableResult
    public func revoke(_ token: String) async throws -> Bool {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM sessions WHERE tokenHash = ?", arguments: [Self.hash(token)])
            guard db.changesCount > 0 else { return false }
            try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'sessionsEpoch'")
            try db.notify(DataChange.users.rawValue)
            return true
        }
    }

    /// Revokes every session of `username` inside the caller's transaction.
    static func revokeAll(_ db: SQLConnection, username: String) throws {
        try db.execute(sql: "DELETE FROM sessions WHERE username = ?", arguments: [username])
        try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'sessionsEpoch'")
        try db.notify(DataChange.users.rawValue)
    }

    static func hash(_ token: String) -> Data {
        Data(SHA256.hash(data: Data(token.utf8)))
    }
}
