import Crypto
import Foundation
import SQLEngine

/// `Idempotency-Key` (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries): a POST repeated with the same key and the same body within 24 h
/// answers what the first did and creates nothing; the same key with another body is 422. The
/// key is recorded in the same transaction as what the request creates, so two nodes taking the
/// same key at once make one thing: the second waits for the first's commit, finds the key, and
/// answers with the first's resource.
public struct IdempotencyKey: Sendable, Equatable {
    /// Who sent it (keys are per caller: two callers may use the same key).
    public var owner: String
    /// The route (`POST /api/admin/campaigns`), so that one key means one thing per route.
    public var route: String
    public var key: String
    /// The SHA-256 of the request body.
    public var bodyHash: Data

    /// How long a key is kept.
    public static let lifetime: TimeInterval = 24 * 3600
    /// The longest key taken, in bytes.
    public static let maxBytes = 255

    /// A key for `body` sent by `owner` to `route`; 400 for an empty or too long key.
    public init(owner: String, route: String, key: String, body: some DataProtocol) throws {
        guard !key.isEmpty, key.utf8.count <= Self.maxBytes else {
            throw CoreError(.invalid, "Idempotency-Key must be 1 to \(Self.maxBytes) bytes, got \(key.utf8.count)")
        }
        self.owner = owner
        self.route = route
        self.key = key
        self.bodyHash = Data(SHA256.hash(data: Data(body)))
    }

    /// Throws `IdempotentReplay` with what an earlier request with this key made, if one did
    /// (422 for another body); call first in the transaction that would make it.
    static func replayIfSeen(_ db: SQLConnection, _ key: IdempotencyKey?, now: Date) throws {
        guard let key, let resource = try earlier(db, key, now: now) else { return }
        throw IdempotentReplay(resource: resource)
    }

    /// What an earlier request with this key made: its resource id, or 422 when it was another body.
    static func earlier(_ db: SQLConnection, _ key: IdempotencyKey, now: Date) throws -> Int64? {
        guard let row = try SQLRow.fetchOne(db, sql: """
            SELECT bodyHash, resource FROM idempotency_keys WHERE owner = ? AND route = ? AND key = ? AND createdAt > ?
            """, arguments: [key.owner, key.route, key.key, now.timeIntervalSince1970 - lifetime]) else { return nil }
        guard (row["bodyHash"] as Data) == key.bodyHash else {
            throw CoreError(.unprocessable, "Idempotency-Key '\(key.key.prefix(64))' was used with another body; use a new key for a new request")
        }
        return row["resource"]
    }

    /// Records the key for `resource`, inside the transaction that made it. Throws
    /// `IdempotentReplay` when a concurrent request with the key committed first (the caller's
    /// transaction then rolls back, and it answers with that request's resource).
    static func record(_ db: SQLConnection, _ key: IdempotencyKey, resource: Int64, now: Date) throws {
        try db.execute(sql: """
            INSERT INTO idempotency_keys (owner, route, key, bodyHash, resource, createdAt) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (owner, route, key) DO UPDATE SET bodyHash = excluded.bodyHash, resource = excluded.resource, createdAt = excluded.createdAt
            WHERE idempotency_keys.createdAt <= ?
            """, arguments: [key.owner, key.route, key.key, key.bodyHash, resource, now.timeIntervalSince1970, now.timeIntervalSince1970 - lifetime])
        guard db.changesCount > 0 else { throw IdempotentReplay(resource: nil) }
    }
}

/// A request with the same `Idempotency-Key` and body came first: answer with what it made
/// (`resource`, or nil when a concurrent one committed while this ran: `IdempotencyStore.resource`
/// reads it then).
public struct IdempotentReplay: Error, Sendable {
    public let resource: Int64?
}

/// Reads recorded keys.
public struct IdempotencyStore: Sendable {
    let database: SQLDatabase

    init(database: SQLDatabase) {
        self.database = database
    }

    /// Removes keys past their 24 h (run now and then, off the requests' path).
    @discardableResult
    public func expire(now: Date = Date()) async throws -> Int {
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE createdAt < ?", arguments: [now.timeIntervalSince1970 - IdempotencyKey.lifetime])
            return db.changesCount
        }
    }

    /// What the key's first request made; 422 for another body; nil when the key is new or expired.
    public func resource(for key: IdempotencyKey, now: Date = Date()) async throws -> Int64? {
        try await database.read { db in try IdempotencyKey.earlier(db, key, now: now) }
    }
}
