import Foundation
import GRDB
import HummingbirdBcrypt

/// An account that may call the API.
public struct User: Sendable, Equatable {
    /// The user name; devices of this user carry the tag `username:<name>`.
    public var name: String
    /// When it was created.
    public var createdAt: Date
}

/// Accounts with bcrypt-hashed passwords.
///
/// Removing a user or changing a password increments `usersEpoch` in the `meta` table, so a
/// server in another process can drop the credentials it has cached.
public struct UserStore: Sendable {
    /// The database.
    public let database: DatabasePool
    /// bcrypt cost for new hashes.
    public let cost: UInt8

    /// Creates the store over a database opened with `CoreDatabase`.
    public init(database: DatabasePool, cost: UInt8 = 12) {
        self.database = database
        self.cost = cost
    }

    /// Checks a user name: 1–64 of `A–Z a–z 0–9 _ @ # . -` (what a Notification Hubs tag allows).
    public static func validateName(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@#.-")
        guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else {
            throw CoreError(.invalid, "invalid user name '\(name)': use 1 to 64 of A-Z a-z 0-9 _ @ # . -")
        }
    }

    /// Creates a user, or refuses when the name is taken.
    public func add(name: String, password: String) async throws -> User {
        try Self.validateName(name)
        guard !password.isEmpty else { throw CoreError(.invalid, "the password is empty") }
        guard password.utf8.count <= 72 else {
            throw CoreError(.invalid, "the password is longer than 72 bytes (bcrypt ignores the rest)")
        }
        let hash = Bcrypt.hash(password, cost: cost)
        let now = Date()
        return try await database.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM users WHERE name = ?", arguments: [name]) == true {
                throw CoreError(.conflict, "user '\(name)' already exists")
            }
            try db.execute(sql: "INSERT INTO users (name, passwordHash, createdAt) VALUES (?, ?, ?)",
                           arguments: [name, hash, now.timeIntervalSince1970])
            return User(name: name, createdAt: now)
        }
    }

    /// Every user, by name.
    public func list() async throws -> [User] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT name, createdAt FROM users ORDER BY name").map {
                User(name: $0["name"], createdAt: Date(timeIntervalSince1970: $0["createdAt"]))
            }
        }
    }

    /// Removes a user and their device registrations; cached credentials elsewhere are invalidated.
    public func remove(name: String) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM users WHERE name = ?", arguments: [name])
            guard db.changesCount > 0 else { throw CoreError(.notFound, "no user '\(name)'") }
            try db.execute(sql: "DELETE FROM registrations WHERE username = ?", arguments: [name])
            try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'usersEpoch'")
        }
    }

    /// The stored bcrypt hash of `name`, or nil.
    public func passwordHash(of name: String) async throws -> String? {
        try await database.read { db in
            try String.fetchOne(db, sql: "SELECT passwordHash FROM users WHERE name = ?", arguments: [name])
        }
    }

    /// True when `password` is `name`'s password. Runs bcrypt: slow on purpose, so cache the outcome.
    public func verify(name: String, password: String) async throws -> Bool {
        guard let hash = try await passwordHash(of: name) else { return false }
        return Bcrypt.verify(password, hash: hash)
    }

    /// A number that changes whenever a user is removed.
    public func epoch() async throws -> Int {
        try await database.read { db in
            try Int.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'usersEpoch'") ?? 0
        }
    }
}
