import Foundation
import SQLEngine

/// Which users follow which topics (docs/api.md#attributes-devices-versions-and-topics): a user
/// subscribes and unsubscribes themselves, an admin adds and removes many at once.
///
/// A topic exists while someone follows it; it has no row of its own. A removed user's
/// subscriptions go with them (`UserStore.remove`).
public struct TopicStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// The most topics one user follows.
    public static let maxPerUser = 2_000
    /// The most user names one change (`change(topic:add:remove:)`) may name, added and removed together.
    public static let maxNamesPerChange = 1_000
    /// What a topic name looks like (the same rule as `validateName`).
    public static let namePattern = "^[A-Za-z0-9_.~%-]{1,64}$"

    /// What one change did.
    public struct Change: Sendable, Equatable {
        /// Users who follow the topic now and did not before.
        public var added: Int
        /// Users who followed it and no longer do.
        public var removed: Int
        /// How many follow it now.
        public var subscribers: Int

        /// Creates a summary.
        public init(added: Int, removed: Int, subscribers: Int) {
            self.added = added
            self.removed = removed
            self.subscribers = subscribers
        }
    }

    /// Checks a topic name: 1 to 64 of `A-Z a-z 0-9 _ . ~ % -` (a URL path segment as it is
    /// written, percent signs included).
    public static func validateName(_ topic: String) throws {
        let bytes = Array(topic.utf8)
        guard (1...64).contains(bytes.count), bytes.allSatisfy({ byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "_.~%-".utf8.contains(byte)
        }) else {
            throw CoreError(.invalid, "invalid topic '\(topic.prefix(80))': a topic is 1 to 64 of A-Z a-z 0-9 _ . ~ % -")
        }
    }

    /// Subscribes `user` to `topic`; nothing changes when they follow it already. 404 when there
    /// is no such user, 409 when they follow `maxPerUser` topics.
    public func subscribe(_ user: String, to topic: String, now: Date = Date()) async throws {
        try Self.validateName(topic)
        try await database.write { db in
            guard try Self.userExists(db, user) else { throw CoreError(.notFound, "no user \(user)") }
            _ = try Self.add(db, users: [user], to: topic, now: now.timeIntervalSince1970)
        }
    }

    /// Unsubscribes `user` from `topic`; nothing changes when they do not follow it.
    public func unsubscribe(_ user: String, from topic: String) async throws {
        try Self.validateName(topic)
        try await database.write { db in
            _ = try Self.remove(db, users: [user], from: topic)
        }
    }

    /// The topics `user` follows, in byte order.
    public func list(of user: String) async throws -> [String] {
        try await database.read { db in
            try String.fetchAll(db, sql: "SELECT topic FROM topics WHERE username = ? ORDER BY topic", arguments: [user])
        }
    }

    /// How many users follow `topic`.
    public func subscribers(of topic: String) async throws -> Int {
        try await database.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM topics WHERE topic = ?", arguments: [topic]) ?? 0
        }
    }

    /// Adds `add` to `topic`'s followers and removes `remove`, in one transaction: all of it or,
    /// when anything is refused, none of it. 400 for a bad name, a user in both lists, more than
    /// `maxNamesPerChange` names, or names of no user (listed); 409 when a user to add follows
    /// `maxPerUser` topics already. `audit` records who did (`topic.subscribers`, with the names).
    public func change(topic: String, add: [String], remove: [String], now: Date = Date(), audit: AuditActor? = nil) async throws -> Change {
        try Self.validateName(topic)
        guard add.count + remove.count <= Self.maxNamesPerChange else {
            throw CoreError(.invalid, "\(add.count + remove.count) names, at most \(Self.maxNamesPerChange) a call (added and removed together): split the change into several calls")
        }
        let adding = Self.once(add), removing = Self.once(remove)
        for name in adding + removing { try UserStore.validateName(name) }
        if let both = Set(adding).intersection(removing).sorted().first {
            throw CoreError(.invalid, "\(both) is in both \"add\" and \"remove\": name each user in one of them")
        }
        return try await database.write { db in
            let unknown = try UserStore.unknown(db, adding + removing)
            if !unknown.isEmpty {
                let shown = unknown.prefix(50).joined(separator: ", ") + (unknown.count > 50 ? " and \(unknown.count - 50) more" : "")
                throw CoreError(.invalid, "no such users: \(shown); nothing was changed")
            }
            let added = try Self.add(db, users: adding, to: topic, now: now.timeIntervalSince1970)
            let removed = try Self.remove(db, users: removing, from: topic)
            let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM topics WHERE topic = ?", arguments: [topic]) ?? 0
            try Audit.record(db, audit, "topic.subscribers", target: "topic:\(topic)",
                             detail: ["added": .integer(Int64(added)), "removed": .integer(Int64(removed)),
                                      "add": .array(adding.prefix(100).map(JSONValue.string)), "remove": .array(removing.prefix(100).map(JSONValue.string))])
            return Change(added: added, removed: removed, subscribers: count)
        }
    }

    /// Deletes every subscription of `username`, inside the caller's transaction (removing a user).
    static func deleteAll(_ db: SQLConnection, username: String) throws {
        try db.execute(sql: "DELETE FROM topics WHERE username = ?", arguments: [username])
    }

    /// `names` without repeats, in their first order.
    private static func once(_ names: [String]) -> [String] {
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }

    private static func userExists(_ db: SQLConnection, _ name: String) throws -> Bool {
        try String.fetchOne(db, sql: "SELECT name FROM users WHERE name = ?", arguments: [name]) != nil
    }

    /// Subscribes `users` (known, without repeats) to `topic` in the caller's transaction; how
    /// many did not follow it before. 409, naming the user, when one of them would pass `maxPerUser`.
    private static func add(_ db: SQLConnection, users: [String], to topic: String, now: Double) throws -> Int {
        var fresh: [String] = []
        for chunk in users.sqlBatches() {
            var arguments: [any SQLValueConvertible] = [topic]
            arguments += Array(chunk) as [any SQLValueConvertible]
            let following = Set(try String.fetchAll(db, sql: "SELECT username FROM topics WHERE topic = ? AND username IN (\(sqlPlaceholders(chunk.count)))",
                                                    arguments: SQLArguments(arguments)))
            fresh += chunk.filter { !following.contains($0) }
        }
        for chunk in fresh.sqlBatches() {
            var arguments: [any SQLValueConvertible] = Array(chunk)
            arguments.append(maxPerUser)
            if let full = try SQLRow.fetchOne(db, sql: """
                SELECT username, count(*) AS n FROM topics WHERE username IN (\(sqlPlaceholders(chunk.count)))
                GROUP BY username HAVING count(*) >= ? ORDER BY username LIMIT 1
                """, arguments: SQLArguments(arguments)) {
                let name: String = full["username"]
                throw CoreError(.conflict, "\(name) follows \(maxPerUser) topics, the most one user may: remove some first (DELETE /api/me/topics/{topic}, or \"remove\" in POST /api/admin/topics/{topic}/subscribers)")
            }
            let rows: [any SQLValueConvertible] = chunk.flatMap { [$0, topic, now] as [any SQLValueConvertible] }
            try db.execute(sql: "INSERT INTO topics (username, topic, createdAt) VALUES "
                           + Array(repeating: "(?, ?, ?)", count: chunk.count).joined(separator: ", ")
                           + " ON CONFLICT (username, topic) DO NOTHING",
                           arguments: SQLArguments(rows))
        }
        return fresh.count
    }

    /// Unsubscribes `users` from `topic` in the caller's transaction; how many followed it.
    private static func remove(_ db: SQLConnection, users: [String], from topic: String) throws -> Int {
        var removed = 0
        for chunk in users.sqlBatches() {
            var arguments: [any SQLValueConvertible] = [topic]
            arguments += Array(chunk) as [any SQLValueConvertible]
            try db.execute(sql: "DELETE FROM topics WHERE topic = ? AND username IN (\(sqlPlaceholders(chunk.count)))", arguments: SQLArguments(arguments))
            removed += db.changesCount
        }
        return removed
    }
}
