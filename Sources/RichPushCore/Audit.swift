import Foundation
import MediaStore
import SQLEngine

/// Who made a change the audit log keeps (docs/operations.md#audit-log): an admin account, an API
/// key, an admin in the console, or a CLI command.
public struct AuditActor: Sendable, Equatable {
    /// The account's name, the key's principal (`key:NAME`), or the OS user a CLI command ran as.
    public var name: String
    /// `user` (an admin account through the API), `key` (an API key), `console` (an admin in the
    /// console) or `cli` (a command on the server's machine).
    public var kind: String
    /// The request's id: its `X-Request-Id`, else the one the server's log gives it; nil for the CLI.
    public var requestId: String?
    /// The client's address (`serve --trusted-proxy` decides whose); nil for the CLI.
    public var client: String?

    /// An actor.
    public init(name: String, kind: String, requestId: String? = nil, client: String? = nil) {
        self.name = name
        self.kind = kind
        self.requestId = requestId
        self.client = client
    }

    /// A CLI command's actor: the OS user that runs it (`USER`), else `cli`.
    public static func cli(environment: [String: String] = ProcessInfo.processInfo.environment) -> AuditActor {
        let user = environment["USER"].flatMap { $0.isEmpty ? nil : String($0.prefix(64)) }
        return AuditActor(name: user ?? "cli", kind: Kind.cli)
    }

    /// The kinds of actor.
    public enum Kind {
        /// An admin account, through the HTTP API.
        public static let user = "user"
        /// An API key.
        public static let key = "key"
        /// An admin signed in to the console.
        public static let console = "console"
        /// A `richpush` command.
        public static let cli = "cli"
    }
}

/// One change, as the audit log keeps it: who, what (`campaign.create`, `apikey.add`,
/// `console.signin`, …), on what (`campaign:12`, `user:alice`), and a small JSON detail. Never a
/// secret: no password, hash, key, token or webhook secret goes in (`Audit.record` also drops any
/// string that looks like one).
public struct AuditEntry: Sendable, Equatable {
    /// Who made the change.
    public var actor: AuditActor
    /// `kind.verb`: `campaign.create`, `user.remove`, ….
    public var action: String
    /// `kind:id`: `campaign:12`, `user:alice`, `webhook:3`; nil when the change has no one target.
    public var target: String?
    /// A small JSON value (an object) saying more: the fields changed, a scope, counts.
    public var detail: JSONValue?

    /// An entry.
    public init(_ actor: AuditActor, _ action: String, target: String? = nil, detail: JSONValue? = nil) {
        self.actor = actor
        self.action = action
        self.target = target
        self.detail = detail
    }
}

/// An entry as the log holds it: its id (newer is larger) and when it was recorded.
public struct AuditRecord: Sendable, Equatable {
    /// Its place in the log: a later entry has a larger id (the paging cursor, `before`).
    public var id: Int64
    /// When it was recorded, by the database's clock.
    public var at: Date
    /// What was recorded.
    public var entry: AuditEntry
}

/// Writes the audit log, inside the transaction of the change it records: the change and its
/// entry are committed together or not at all.
public enum Audit {
    /// The longest detail kept, in bytes of JSON text (a longer one is replaced by a note).
    public static let maxDetailBytes = 4096

    /// Records `entry` in the caller's transaction, at the database's time.
    public static func record(_ db: SQLConnection, _ entry: AuditEntry) throws {
        var detail = entry.detail.map(scrubbed)?.text
        if let text = detail, text.utf8.count > maxDetailBytes { detail = #"{"truncated":true}"# }
        try db.execute(sql: """
            INSERT INTO audit_log (at, actor, actorKind, action, target, requestId, client, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [db.now, String(entry.actor.name.prefix(200)), entry.actor.kind, entry.action, entry.target.map { String($0.prefix(300)) },
                             entry.actor.requestId.map { String($0.prefix(128)) }, entry.actor.client.map { String($0.prefix(100)) }, detail],
            cached: true)
    }

    /// Records `action` by `actor` in the caller's transaction; nothing when there is no actor
    /// (a change nobody audited asked for: a device's own, a background task's).
    public static func record(_ db: SQLConnection, _ actor: AuditActor?, _ action: String, target: String? = nil, detail: JSONValue? = nil) throws {
        guard let actor else { return }
        try record(db, AuditEntry(actor, action, target: target, detail: detail))
    }

    /// What `MediaStore.ingest(…also:)` and `remove(_:also:)` run in their transaction: `action` on
    /// the image (`media:<sha256>`, with the name given) by `actor`; nil without an actor.
    public static func media(_ actor: AuditActor?, _ action: String, name: String? = nil) -> (@Sendable (SQLConnection, MediaID) throws -> Void)? {
        guard let actor else { return nil }
        return { db, id in
            try Audit.record(db, AuditEntry(actor, action, target: "media:\(id.hex)", detail: ["name": name.map(JSONValue.string) ?? .null]))
        }
    }

    /// `value` with every string that looks like a secret (an API key, a session token, a webhook
    /// secret, a bcrypt hash) replaced: the callers put none in, and this keeps it so.
    static func scrubbed(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let text): return looksSecret(text) ? .string("[redacted]") : value
        case .array(let items): return .array(items.map(scrubbed))
        case .object(let object): return .object(object.mapValues(scrubbed))
        default: return value
        }
    }

    /// Whether `text` starts as one of RichPush's secrets, or a bcrypt hash, does.
    static func looksSecret(_ text: String) -> Bool {
        ["rpk_", "rps_", "whsec_", "$2a$", "$2b$", "$2y$"].contains { text.hasPrefix($0) }
    }
}

/// The audit log (docs/operations.md#audit-log): read newest first with filters, and pruned past
/// its retention. It is append-only: nothing here changes or removes an entry but `prune`.
public struct AuditStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// How long entries are kept by default (`serve --audit-days`).
    public static let defaultRetentionDays = 365

    /// What `list` returns: each field given narrows it.
    public struct Filter: Sendable, Equatable {
        /// Entries recorded at or after this time.
        public var since: Date?
        /// The actor's name, exactly (`alice`, `key:ci`).
        public var actor: String?
        /// An action exactly (`campaign.create`), or, without a dot, every action of that kind (`campaign`).
        public var action: String?
        /// The target, exactly (`campaign:12`).
        public var target: String?

        /// A filter.
        public init(since: Date? = nil, actor: String? = nil, action: String? = nil, target: String? = nil) {
            self.since = since
            self.actor = actor
            self.action = action
            self.target = target
        }
    }

    /// Records `entry` in a transaction of its own: for a change that is not a transaction of
    /// this database (an image's blob, a key file). Every change that is records in its own.
    public func record(_ entry: AuditEntry) async throws {
        try await database.write(isolation: .readCommitted) { db in try Audit.record(db, entry) }
    }

    /// Entries newest first: at most `limit`, with ids below `before` when given (the next page).
    public func list(_ filter: Filter = Filter(), limit: Int = 50, before: Int64? = nil) async throws -> [AuditRecord] {
        var conditions: [String] = []
        var arguments: [any SQLValueConvertible] = []
        if let before {
            conditions.append("id < ?")
            arguments.append(before)
        }
        if let since = filter.since {
            conditions.append("at >= ?")
            arguments.append(since.timeIntervalSince1970)
        }
        if let actor = filter.actor {
            conditions.append("actor = ?")
            arguments.append(actor)
        }
        if let action = filter.action {
            if action.contains(".") {
                conditions.append("action = ?")
                arguments.append(action)
            } else {
                let escaped = action.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
                    .replacingOccurrences(of: "_", with: "\\_")
                conditions.append("(action = ? OR action LIKE ? ESCAPE '\\')")
                arguments.append(action)
                arguments.append(escaped + ".%")
            }
        }
        if let target = filter.target {
            conditions.append("target = ?")
            arguments.append(target)
        }
        let condition = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let sql = "SELECT * FROM audit_log \(condition) ORDER BY id DESC LIMIT ?"
        let bound = SQLArguments(arguments + [max(1, limit)])
        return try await database.read { db in
            try SQLRow.fetchAll(db, sql: sql, arguments: bound).map(Self.decode)
        }
    }

    /// Removes the entries recorded more than `days` days before `now`; how many went.
    @discardableResult
    public func prune(olderThanDays days: Int, now: Date = Date()) async throws -> Int {
        let cutoff = now.timeIntervalSince1970 - Double(max(1, days)) * 86_400
        return try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: "DELETE FROM audit_log WHERE at < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    private static func decode(_ row: SQLRow) -> AuditRecord {
        let actor = AuditActor(name: row["actor"], kind: row["actorKind"], requestId: row["requestId"], client: row["client"])
        let entry = AuditEntry(actor, row["action"], target: row["target"], detail: (row["detail"] as String?).flatMap { JSONValue(text: $0) })
        return AuditRecord(id: row["id"], at: Date(timeIntervalSince1970: row["at"]), entry: entry)
    }
}

extension ContentChange {
    /// The fields a change names, for the audit log (not their values).
    var auditDetail: JSONValue {
        var fields: [JSONValue] = []
        if title != nil { fields.append("title") }
        if message != nil { fields.append("message") }
        if payload != nil { fields.append("payload") }
        if locales != nil { fields.append("content") }
        if options != nil { fields.append("options") }
        if badge != nil { fields.append("badge") }
        return ["fields": .array(fields), "alertAgain": .bool(alertAgain)]
    }
}
