import Foundation
import SQLEngine
import HummingbirdBcrypt

/// An account that may call the API.
public struct User: Sendable, Equatable {
    /// The user name; devices of this user carry the tag `username:<name>`.
    public var name: String
    /// Whether the account may call `/api/admin/…` and name media.
    public var admin: Bool
    /// When it was created.
    public var createdAt: Date
    /// The IANA time zone a local-time campaign reaches them in (nil: UTC), docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries.
    public var timezone: String? = nil
    /// The BCP 47 locale their campaigns' content is chosen by (nil: the campaign's default).
    public var locale: String? = nil
    /// Their own quiet hours, in place of their apps' (docs/api.md#frequency-caps-and-quiet-hours); nil: the apps'.
    public var quietHours: QuietHours? = nil
}

/// A user's time zone and locale (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries), checked and in canonical form.
public enum UserPreferences {
    /// An IANA zone Foundation knows (`Europe/Paris`, `UTC`); 400 otherwise.
    public static func timezone(_ text: String) throws -> String {
        guard text.utf8.count <= 64, !text.isEmpty, text.allSatisfy({ $0.isASCII && !$0.isWhitespace }), let zone = TimeZone(identifier: text) else {
            throw CoreError(.invalid, "unknown time zone '\(text.prefix(64))': use an IANA name such as Europe/Paris or America/New_York")
        }
        return zone.identifier
    }

    /// A well-formed BCP 47 tag (language, then subtags of 1 to 8 letters or digits), in its
    /// canonical case: `fr-CA`, `zh-Hant-TW`, `es-419`; 400 otherwise.
    public static func locale(_ text: String) throws -> String {
        let parts = text.replacingOccurrences(of: "_", with: "-").split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard text.utf8.count <= 35, let language = parts.first, (2...3).contains(language.count), language.allSatisfy({ $0.isASCII && $0.isLetter }),
              parts.dropFirst().allSatisfy({ (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } })
        else {
            throw CoreError(.invalid, "malformed locale '\(text.prefix(40))': use a BCP 47 tag such as en, fr-CA or zh-Hant-TW")
        }
        return ([language.lowercased()] + parts.dropFirst().map { part in
            if part.count == 2 && part.allSatisfy(\.isLetter) { return part.uppercased() }              // region
            if part.count == 4 && part.allSatisfy(\.isLetter) { return part.prefix(1).uppercased() + part.dropFirst().lowercased() } // script
            return part.lowercased()
        }).joined(separator: "-")
    }

    /// The tags `locale` falls back through, most specific first: `fr-CA` → `fr-CA`, `fr`.
    public static func fallbacks(_ locale: String) -> [String] {
        let parts = locale.split(separator: "-").map(String.init)
        return (1...max(1, parts.count)).reversed().map { parts.prefix($0).joined(separator: "-") }
    }
}

/// What authentication needs to know of an account.
public struct StoredCredentials: Sendable, Equatable {
    /// The bcrypt hash, exactly as stored (`$2a$`, `$2b$` or `$2y$`).
    public var passwordHash: String
    /// Whether the account is an admin.
    public var admin: Bool
}

/// Accounts with bcrypt-hashed passwords.
///
/// Removing a user or changing a password increments `usersEpoch` in the `meta` table (and
/// `sessionsEpoch`, since their sessions go too), so a server in another process can drop the
/// credentials it has cached.
public struct UserStore: Sendable {
    /// The database.
    let database: SQLDatabase
    /// bcrypt cost for new hashes.
    public let cost: UInt8
    /// The cost a store hashes at unless told otherwise (`--bcrypt-cost`'s default).
    public static let defaultCost: UInt8 = 12
    /// The costs bcrypt allows (`--bcrypt-cost`'s range).
    public static let costs: ClosedRange<UInt8> = 4...31

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase, cost: UInt8 = UserStore.defaultCost) {
        self.database = database
        self.cost = cost
    }

    /// Checks a user name: 1–64 of `A–Z a–z 0–9 _ @ # . -` (what a Notification Hubs tag allows).
    public static func validateName(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@#.-")
        guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else {
            throw CoreError(.invalid, "invalid user name '\(name.prefix(80))': use 1 to 64 of A-Z a-z 0-9 _ @ # . -")
        }
    }

    /// Checks a password bcrypt can hash: 1 to 72 bytes.
    public static func validatePassword(_ password: String) throws {
        guard !password.isEmpty else { throw CoreError(.invalid, "the password is empty") }
        guard password.utf8.count <= 72 else {
            throw CoreError(.invalid, "the password is longer than 72 bytes (bcrypt ignores the rest)")
        }
    }

    /// Checks a bcrypt hash given for import: `$2a$`, `$2b$` or `$2y$`, a cost of 04 to 14, and
    /// 53 characters of bcrypt's base64 (22 of salt, 31 of hash). Each step of cost doubles a
    /// sign-in's work: cost 14 is about a second of a core, 31 would be days, and every sign-in
    /// of an imported account (a right password or a guess) would hold a bcrypt thread for it.
    public static func validateBcrypt(_ hash: String) throws {
        let bytes = Array(hash.utf8)
        let alphabet = Set("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        guard bytes.count == 60, hash.hasPrefix("$2a$") || hash.hasPrefix("$2b$") || hash.hasPrefix("$2y$"), bytes[6] == UInt8(ascii: "$"),
              let cost = Int(String(decoding: bytes[4..<6], as: UTF8.self)), (4...Self.maxImportedCost).contains(cost),
              bytes[7...].allSatisfy(alphabet.contains)
        else {
            throw CoreError(.invalid, "not a bcrypt hash: expected $2a$, $2b$ or $2y$, a cost of 04 to \(Self.maxImportedCost) and 53 characters of salt and hash")
        }
    }

    /// The highest bcrypt cost an imported hash may have.
    public static let maxImportedCost = 14

    /// True when `password` matches `hash`. `$2y$` (PHP's name for the fixed algorithm) is `$2b$`.
    public static func verify(password: String, hash: String) -> Bool {
        let normalized = hash.hasPrefix("$2y$") ? "$2b$" + hash.dropFirst(4) : hash
        return Bcrypt.verify(password, hash: normalized)
    }

    /// Creates a user, or refuses when the name is taken; `audit` records who did (`user.add`).
    @discardableResult
    public func add(name: String, password: String, admin: Bool = false, audit: AuditActor? = nil) async throws -> User {
        try Self.validateName(name)
        try Self.validatePassword(password)
        let hash = Bcrypt.hash(password, cost: cost)
        let now = Date()
        return try await database.write { db in
            guard try Self.insert(db, name: name, hash: hash, admin: admin, now: now) else {
                throw CoreError(.conflict, "user '\(name)' already exists")
            }
            try Audit.record(db, audit, "user.add", target: "user:\(name)", detail: ["admin": .bool(admin)])
            return User(name: name, admin: admin, createdAt: now)
        }
    }

    /// Inserts an account; false when the name is taken.
    ///
    /// A new account starts empty: whatever a name without an account left behind (devices,
    /// notifications and sessions of `--demo-auth`'s user-equals-password rule) is removed in
    /// the same transaction, and the users epoch moves, so that the demo credentials cached
    /// for the name stop working and its demo devices never receive the new account's pushes.
    private static func insert(_ db: SQLConnection, name: String, hash: String, admin: Bool, now: Date) throws -> Bool {
        try db.execute(sql: "INSERT INTO users (name, passwordHash, admin, createdAt) VALUES (?, ?, ?, ?) ON CONFLICT(name) DO NOTHING",
                       arguments: [name, hash, admin, now.timeIntervalSince1970])
        guard db.changesCount > 0 else { return false }
        let leftover = try db.fetchOne(sql: """
            SELECT (SELECT COUNT(*) FROM registrations WHERE username = ?) + (SELECT COUNT(*) FROM notifications WHERE recipient = ?)
                 + (SELECT COUNT(*) FROM sessions WHERE username = ?) AS n
            """, arguments: [name, name, name])
        if let count: Int = leftover?["n"], count > 0 { try removeEverything(db, of: name) }
        return true
    }

    /// Removes what belongs to `name` (devices, topics, inbox, sessions) and moves the users
    /// epoch, so that every node drops the credentials it cached for the name. Attributes live on
    /// the account's row and go with it.
    private static func removeEverything(_ db: SQLConnection, of name: String) throws {
        try RegistrationStore.deleteAll(db, username: name)
        try TopicStore.deleteAll(db, username: name)
        try db.execute(sql: """
            DELETE FROM media_refs WHERE owner IN (SELECT 'notification:' || id FROM notifications WHERE recipient = ?)
            """, arguments: [name])
        try NotificationStore.recordRemovals(db, try Int64.fetchAll(db, sql: "SELECT id FROM notifications WHERE recipient = ?", arguments: [name]))
        // Their campaigns' pushes still to send go with their inbox, and leave the campaigns'
        // counts of pushes queued, which say how many are left (`Insight.finishCampaigns`): counted
        // first, the outbox's rows deleted, then the campaigns' rows changed (the order in which
        // recording sends takes them).
        // Runs first, then rows: the order in which recording sends locks them.
        // Their pushes in a campaign's runs (docs/design/outbox.md#runs), with their tokens.
        let runs = try OutboxRuns.remove(db, notifications: Int64.fetchAll(db, sql: "SELECT id FROM notifications WHERE recipient = ?", arguments: [name]),
                                         now: db.now)
        let leaving = try db.fetchAll(sql: """
            SELECT d.campaignId, count(*) AS n FROM deliveries d JOIN notifications n ON n.id = d.notificationId
            WHERE n.recipient = ? AND d.campaignId IS NOT NULL AND d.state = 'pending' AND d.kind IS NULL GROUP BY d.campaignId ORDER BY d.campaignId
            """, arguments: [name])
        try db.execute(sql: "DELETE FROM deliveries WHERE notificationId IN (SELECT id FROM notifications WHERE recipient = ?)", arguments: [name])
        var left: [Int64: Int] = [:]
        for row in leaving { left[row["campaignId"] as Int64, default: 0] += row["n"] as Int }
        left.merge(runs, uniquingKeysWith: +)
        for (campaign, n) in left.sorted(by: { $0.key < $1.key }) {
            try db.execute(sql: "UPDATE campaigns SET pushes = pushes - ? WHERE id = ? AND pushes IS NOT NULL", arguments: [n, campaign])
        }
        try db.execute(sql: "DELETE FROM notifications WHERE recipient = ?", arguments: [name])
        try SessionStore.revokeAll(db, username: name)
        // What they asked with an Idempotency-Key ends with them: an account made later under
        // the same name must not be answered with their notifications (docs/security.md).
        try db.execute(sql: "DELETE FROM idempotency_keys WHERE owner = ?", arguments: [name])
        try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'usersEpoch'")
        try db.notify(DataChange.users.rawValue)
    }

    /// How an import went.
    public struct ImportSummary: Sendable, Equatable {
        /// Accounts created.
        public var imported = 0
        /// Lines whose name already had an account.
        public var skipped = 0

        /// Creates a summary.
        public init(imported: Int = 0, skipped: Int = 0) {
            self.imported = imported
            self.skipped = skipped
        }
    }

    /// Creates the accounts of `entries` in one transaction, skipping names that exist.
    /// A given bcrypt hash is stored as it is; a given password is hashed here. `audit` records
    /// who did (`user.import`, one entry per call, with the counts and the names imported).
    public func importUsers(_ entries: [UserImport.Entry], audit: AuditActor? = nil) async throws -> ImportSummary {
        let hashed: [(UserImport.Entry, String)] = entries.map { entry in
            switch entry.secret {
            case .bcrypt(let hash): (entry, hash)
            case .password(let password): (entry, Bcrypt.hash(password, cost: cost))
            }
        }
        let now = Date()
        return try await database.write { db in
            var summary = ImportSummary()
            var imported: [JSONValue] = []
            for (entry, hash) in hashed {
                if try Self.insert(db, name: entry.name, hash: hash, admin: entry.admin, now: now) {
                    if entry.timezone != nil || entry.locale != nil {
                        try db.execute(sql: "UPDATE users SET timezone = ?, locale = ? WHERE name = ?", arguments: [entry.timezone, entry.locale, entry.name])
                    }
                    if let attributes = entry.attributes.stored {
                        try db.execute(sql: "UPDATE users SET attributes = ? WHERE name = ?", arguments: [attributes, entry.name])
                    }
                    summary.imported += 1
                    if imported.count < 100 { imported.append(.string(entry.name)) }
                } else {
                    summary.skipped += 1
                }
            }
            if !hashed.isEmpty {
                try Audit.record(db, audit, "user.import", detail: ["imported": .integer(Int64(summary.imported)),
                                                                    "skipped": .integer(Int64(summary.skipped)), "users": .array(imported)])
            }
            return summary
        }
    }

    /// Every user, by name.
    public func list() async throws -> [User] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT name, admin, createdAt, timezone, locale FROM users ORDER BY name").map {
                User(name: $0["name"], admin: $0["admin"], createdAt: Date(timeIntervalSince1970: $0["createdAt"]), timezone: $0["timezone"], locale: $0["locale"])
            }
        }
    }

    /// The names of `names` that are no user, in their order (a query per 500 names).
    public func unknown(_ names: [String]) async throws -> [String] {
        try await database.read { db in try Self.unknown(db, names) }
    }

    static func unknown(_ db: SQLConnection, _ names: [String]) throws -> [String] {
        var unknown: [String] = []
        for chunk in names.sqlBatches() {
            let known = Set(try String.fetchAll(db, sql: "SELECT name FROM users WHERE name IN (\(sqlPlaceholders(chunk.count)))",
                                                arguments: SQLArguments(Array(chunk))))
            unknown += chunk.filter { !known.contains($0) }
        }
        return unknown
    }

    /// `name`'s account, or nil.
    public func find(_ name: String) async throws -> User? {
        try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT name, admin, createdAt, timezone, locale, quietHours FROM users WHERE name = ?", arguments: [name]).map {
                User(name: $0["name"], admin: $0["admin"], createdAt: Date(timeIntervalSince1970: $0["createdAt"]), timezone: $0["timezone"], locale: $0["locale"],
                     quietHours: ($0["quietHours"] as String?).flatMap { try? QuietHours($0) })
            }
        }
    }

    /// Sets `name`'s time zone and locale (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries, `PUT /api/me`): each when given, checked
    /// (400 for an unknown zone or a malformed tag); 404 when there is no such user.
    /// With `quietHours`, sets their own quiet hours (docs/api.md#frequency-caps-and-quiet-hours), or clears them given `.some(nil)`.
    public func setPreferences(_ name: String, timezone: String?, locale: String?, quietHours: QuietHours?? = nil) async throws -> User {
        let zone = try timezone.map(UserPreferences.timezone)
        let tag = try locale.map(UserPreferences.locale)
        try await database.write { db in
            if let zone { try db.execute(sql: "UPDATE users SET timezone = ? WHERE name = ?", arguments: [zone, name]) }
            if let tag { try db.execute(sql: "UPDATE users SET locale = ? WHERE name = ?", arguments: [tag, name]) }
            if let quietHours { try db.execute(sql: "UPDATE users SET quietHours = ? WHERE name = ?", arguments: [quietHours?.stored, name]) }
        }
        guard let user = try await find(name) else { throw CoreError(.notFound, "no user \(name)") }
        return user
    }

    /// `name`'s attributes (docs/api.md#attributes-devices-versions-and-topics), empty when none
    /// were set; 404 when there is no such user.
    public func attributes(of name: String) async throws -> UserAttributes {
        try await database.read { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT attributes FROM users WHERE name = ?", arguments: [name]) else {
                throw CoreError(.notFound, "no user '\(name)'")
            }
            return try UserAttributes(stored: row["attributes"] as String?)
        }
    }

    /// Replaces `name`'s attributes with `attributes` (checked when they were made); 404 when
    /// there is no such user. Returns them as stored. `audit` records who did (`user.attributes`,
    /// with the keys, not their values).
    @discardableResult
    public func setAttributes(_ attributes: UserAttributes, for name: String, audit: AuditActor? = nil) async throws -> UserAttributes {
        try await database.write { db in
            try db.execute(sql: "UPDATE users SET attributes = ? WHERE name = ?", arguments: [attributes.stored, name])
            guard db.changesCount > 0 else { throw CoreError(.notFound, "no user '\(name)'") }
            try Audit.record(db, audit, "user.attributes", target: "user:\(name)",
                             detail: ["replaced": true, "keys": .array(attributes.values.keys.sorted().map(JSONValue.string))])
            return attributes
        }
    }

    /// Applies a merge patch (RFC 7396) to `name`'s attributes in one transaction: keys set,
    /// keys with null removed, the others kept; 400 when the result would have more than
    /// `UserAttributes.maxCount`, 404 when there is no such user. Returns the result. `audit`
    /// records who did (`user.attributes`, with the keys patched, not their values).
    @discardableResult
    public func mergeAttributes(_ patch: UserAttributes.Patch, for name: String, audit: AuditActor? = nil) async throws -> UserAttributes {
        try await database.write { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT attributes FROM users WHERE name = ?", arguments: [name]) else {
                throw CoreError(.notFound, "no user '\(name)'")
            }
            let merged = try UserAttributes(stored: row["attributes"] as String?).merging(patch)
            try db.execute(sql: "UPDATE users SET attributes = ? WHERE name = ?", arguments: [merged.stored, name])
            try Audit.record(db, audit, "user.attributes", target: "user:\(name)",
                             detail: ["replaced": false, "keys": .array(patch.changes.keys.sorted().map(JSONValue.string))])
            return merged
        }
    }

    /// Users whose name contains `search` (any case; every user without one), by name, at most
    /// `limit`, each with how many devices it has registered.
    public func overview(matching search: String?, limit: Int = 100) async throws -> [(user: User, devices: Int)] {
        let pattern = search.map { text in
            "%" + text.lowercased().replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
                .replacingOccurrences(of: "_", with: "\\_") + "%"
        } ?? "%"
        return try await database.read { db in
            try SQLRow.fetchAll(db, sql: """
                SELECT u.name, u.admin, u.createdAt,
                       (SELECT count(*) FROM registrations r WHERE r.username = u.name AND r.handle IS NOT NULL) AS devices
                FROM users u WHERE lower(u.name) LIKE ? ESCAPE '\\' ORDER BY u.name LIMIT ?
                """, arguments: [pattern, limit]).map {
                (User(name: $0["name"], admin: $0["admin"], createdAt: Date(timeIntervalSince1970: $0["createdAt"])), $0["devices"] as Int)
            }
        }
    }

    /// Removes a user, their attributes, device registrations, topics, sessions and
    /// notifications (with their pending pushes); cached credentials elsewhere are invalidated.
    /// A new account of the same name later starts with an empty inbox, no attributes and no topics.
    /// `audit` records who did (`user.remove`).
    public func remove(name: String, audit: AuditActor? = nil) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM users WHERE name = ?", arguments: [name])
            guard db.changesCount > 0 else { throw CoreError(.notFound, "no user '\(name)'") }
            try Self.removeEverything(db, of: name)
            try Audit.record(db, audit, "user.remove", target: "user:\(name)")
        }
    }

    /// Sets a new password and revokes every session of the user; `audit` records who did
    /// (`user.password`: that it changed, never the password or its hash).
    public func setPassword(name: String, password: String, audit: AuditActor? = nil) async throws {
        try Self.validatePassword(password)
        let hash = Bcrypt.hash(password, cost: cost)
        try await database.write { db in
            try db.execute(sql: "UPDATE users SET passwordHash = ? WHERE name = ?", arguments: [hash, name])
            guard db.changesCount > 0 else { throw CoreError(.notFound, "no user '\(name)'") }
            try SessionStore.revokeAll(db, username: name)
            try db.execute(sql: "UPDATE meta SET value = value + 1 WHERE key = 'usersEpoch'")
            try db.notify(DataChange.users.rawValue)
            try Audit.record(db, audit, "user.password", target: "user:\(name)")
        }
    }

    /// The stored hash and role of `name`, or nil.
    public func credentials(of name: String) async throws -> StoredCredentials? {
        try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT passwordHash, admin FROM users WHERE name = ?", arguments: [name]).map {
                StoredCredentials(passwordHash: $0["passwordHash"], admin: $0["admin"])
            }
        }
    }

    /// True when `password` is `name`'s password. Runs bcrypt: slow on purpose, so cache the outcome.
    public func verify(name: String, password: String) async throws -> Bool {
        guard let stored = try await credentials(of: name) else { return false }
        return Self.verify(password: password, hash: stored.passwordHash)
    }

    /// Numbers that change whenever a user is removed or changes password (`users`), and
    /// whenever any session is revoked (`sessions`).
    public func epochs() async throws -> (users: Int, sessions: Int) {
        try await database.read { db in
            let rows = try SQLRow.fetchAll(db, sql: "SELECT key, value FROM meta WHERE key IN ('usersEpoch', 'sessionsEpoch')")
            let values = Dictionary(uniqueKeysWithValues: rows.map { ($0["key"] as String, $0["value"] as Int) })
            return (values["usersEpoch"] ?? 0, values["sessionsEpoch"] ?? 0)
        }
    }
}

/// The lines of `richpush users import`: JSON objects `{"name","password"}` or
/// `{"name","bcrypt"}`, with an optional `"admin":true`, `"timezone"`, `"locale"` and
/// `"attributes"` (an object, as `PUT /api/me/attributes` takes).
public enum UserImport {
    /// One account to create.
    public struct Entry: Sendable, Equatable {
        /// How the account's password is given.
        public enum Secret: Sendable, Equatable {
            /// In clear, to be hashed.
            case password(String)
            /// Already a bcrypt hash, stored as it is.
            case bcrypt(String)
        }
        public var name: String
        public var secret: Secret
        public var admin: Bool
        /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: the user's IANA time zone and BCP 47 locale, when given.
        public var timezone: String?
        public var locale: String?
        /// docs/api.md#attributes-devices-versions-and-topics: the user's attributes (none when left out).
        public var attributes: UserAttributes

        /// Creates an entry.
        public init(name: String, secret: Secret, admin: Bool, timezone: String? = nil, locale: String? = nil,
                    attributes: UserAttributes = UserAttributes()) {
            self.name = name
            self.secret = secret
            self.admin = admin
            self.timezone = timezone
            self.locale = locale
            self.attributes = attributes
        }
    }

    private struct Line: Decodable {
        var name: String?
        var password: String?
        var bcrypt: String?
        var admin: Bool?
        var timezone: String?
        var locale: String?
        var attributes: UserAttributes?
    }

    /// Parses one line; throws a `CoreError` saying what is wrong with it.
    public static func parse(_ line: String) throws -> Entry {
        let fields: Line
        do {
            fields = try JSONDecoder().decode(Line.self, from: Data(line.utf8))
        } catch let error as CoreError {
            throw error // an attribute that breaks a rule, named
        } catch DecodingError.typeMismatch(_, let context) {
            let field = context.codingPath.first?.stringValue ?? "the line"
            let message = switch field {
            case "admin": "\"admin\" must be true or false"
            case "attributes": "\"attributes\" must be an object of key → string, number, true or false"
            default: "\"\(field)\" must be a string"
            }
            throw CoreError(.invalid, message)
        } catch {
            throw CoreError(.invalid, "not a JSON object")
        }
        guard let name = fields.name else { throw CoreError(.invalid, "\"name\" is missing") }
        try UserStore.validateName(name)
        let timezone = try fields.timezone.map(UserPreferences.timezone)
        let locale = try fields.locale.map(UserPreferences.locale)
        let attributes = fields.attributes ?? UserAttributes()
        switch (fields.password, fields.bcrypt) {
        case (let password?, nil):
            try UserStore.validatePassword(password)
            return Entry(name: name, secret: .password(password), admin: fields.admin ?? false, timezone: timezone, locale: locale, attributes: attributes)
        case (nil, let hash?):
            try UserStore.validateBcrypt(hash)
            return Entry(name: name, secret: .bcrypt(hash), admin: fields.admin ?? false, timezone: timezone, locale: locale, attributes: attributes)
        case (nil, nil):
            throw CoreError(.invalid, "give \"password\" or \"bcrypt\"")
        case (.some, .some):
            throw CoreError(.invalid, "give \"password\" or \"bcrypt\", not both")
        }
    }
}
