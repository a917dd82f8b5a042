import Crypto
import Foundation
import SQLEngine

/// What an API key may do (docs/api.md#apps-and-api-keys).
public enum APIKeyScope: String, Sendable, CaseIterable, Codable {
    /// Create campaigns and notifications (for its app only, when bound to one).
    case send
    /// Read campaigns, deliveries and stats.
    case read
    /// Everything an admin account may do.
    case admin

    /// Whether a key of this scope may do what `needed` allows: `admin` covers both others.
    public func covers(_ needed: APIKeyScope) -> Bool {
        self == needed || self == .admin
    }
}

/// One API key as `api-keys list` shows it (never the key: only its hash is kept).
public struct APIKey: Sendable, Equatable {
    /// The name it was added under, unique.
    public var name: String
    public var scope: APIKeyScope
    /// The app it is bound to; nil for every app.
    public var app: String?
    public var createdAt: Date
    /// When a server last saw it (recorded in batches, so up to a few seconds late).
    public var lastUsedAt: Date?

    /// Creates a key's description.
    public init(name: String, scope: APIKeyScope, app: String?, createdAt: Date, lastUsedAt: Date?) {
        self.name = name
        self.scope = scope
        self.app = app
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}

/// Apps' names (docs/api.md#apps-and-api-keys): the names of `serve --apps` and of registrations' `"app"`.
public enum AppName {
    /// The app the section 7 and 12 flags configure, and that registrations made before apps belong to.
    public static let `default` = "default"

    /// 1 to 64 of a-z 0-9 . _ -, starting with a letter or digit.
    public static func validate(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789._-")
        guard (1...64).contains(name.count), name.allSatisfy(allowed.contains), name.first.map({ $0.isLetter || $0.isNumber }) == true else {
            throw CoreError(.invalid, "invalid app name '\(name.prefix(80))': use 1 to 64 of a-z 0-9 . _ -, starting with a letter or digit")
        }
    }
}

/// API keys for servers that call RichPush (docs/api.md#apps-and-api-keys): `rpk_` and 32 random bytes in base64url,
/// shown once; the table keeps the SHA-256 of the key, so a copy of the database grants nothing.
/// Removing a key moves the sessions epoch, so every server drops it from its cache within its
/// epoch watcher's interval.
public struct APIKeyStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// The prefix every API key starts with.
    public static let prefix = "rpk_"

    /// Adds a key named `name` and returns it: the only time it is seen. 409 when the name is taken.
    /// `audit` records who did (`apikey.add`, with its scope and app; never the key).
    public func add(name: String, scope: APIKeyScope, app: String?, now: Date = Date(), audit: AuditActor? = nil) async throws -> String {
        try Self.validateName(name)
        if let app { try AppName.validate(app) }
        var random = SystemRandomNumberGenerator()
        let key = Self.prefix + Base64URL.encode((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &random) })
        try await database.write { db in
            guard try Int.fetchOne(db, sql: "SELECT 1 FROM api_keys WHERE name = ?", arguments: [name]) == nil else {
                throw CoreError(.conflict, "an API key named \(name) exists; remove it first with `richpush api-keys rm \(name)`")
            }
            try db.execute(sql: "INSERT INTO api_keys (name, hash, scope, app, createdAt) VALUES (?, ?, ?, ?, ?)",
                           arguments: [name, Self.hash(key), scope.rawValue, app, now.timeIntervalSince1970])
            try Audit.record(db, audit, "apikey.add", target: "apikey:\(name)",
                             detail: ["scope": .string(scope.rawValue), "app": app.map(JSONValue.string) ?? .null])
        }
        return key
    }

    /// Every key, by name.
    public func list() async throws -> [APIKey] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT name, scope, app, createdAt, lastUsedAt FROM api_keys ORDER BY name").map(Self.key)
        }
    }

    /// Removes key `name` (404 when there is none) and moves the sessions epoch: every server
    /// drops its cached credentials of bearer tokens and looks the key up again, finding nothing.
    /// `audit` records who did (`apikey.remove`).
    public func remove(name: String, audit: AuditActor? = nil) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM api_keys WHERE name = ?", arguments: [name])
            guard db.changesCount > 0 else { throw CoreError(.notFound, "no API key named \(name)") }
            // Its Idempotency-Keys end with it: a key added later under the same name starts afresh (docs/security.md).
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE owner = ?", arguments: ["key:\(name)"])
            try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'sessionsEpoch'")
            try db.notify(DataChange.users.rawValue)
            try Audit.record(db, audit, "apikey.remove", target: "apikey:\(name)")
        }
    }

    /// The key `token` is, or nil when it is not one (a malformed token is not looked up).
    public func find(token: String) async throws -> APIKey? {
        guard token.hasPrefix(Self.prefix), token.utf8.count < 100 else { return nil }
        return try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT name, scope, app, createdAt, lastUsedAt FROM api_keys WHERE hash = ?",
                                arguments: [Self.hash(token)]).map(Self.key)
        }
    }

    /// Records when keys were last used: one statement for a batch, never earlier than what is stored.
    public func recordUse(_ uses: [String: Date]) async throws {
        guard !uses.isEmpty else { return }
        try await database.write { db in
            for (name, at) in uses.sorted(by: { $0.key < $1.key }) {
                try db.execute(sql: "UPDATE api_keys SET lastUsedAt = ? WHERE name = ? AND (lastUsedAt IS NULL OR lastUsedAt < ?)",
                               arguments: [at.timeIntervalSince1970, name, at.timeIntervalSince1970])
            }
        }
    }

    /// A key's name: 1 to 64 of A-Z a-z 0-9 _ . -.
    public static func validateName(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
        guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else {
            throw CoreError(.invalid, "invalid API key name '\(name.prefix(80))': use 1 to 64 of A-Z a-z 0-9 _ . -")
        }
    }

    static func hash(_ token: String) -> Data {
        Data(SHA256.hash(data: Data(token.utf8)))
    }

    private static func key(_ row: SQLRow) -> APIKey {
        APIKey(name: row["name"], scope: APIKeyScope(rawValue: row["scope"]) ?? .read, app: row["app"],
               createdAt: Date(timeIntervalSince1970: row["createdAt"]), lastUsedAt: (row["lastUsedAt"] as Double?).map(Date.init(timeIntervalSince1970:)))
    }
}
