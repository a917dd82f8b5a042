import Crypto
import Foundation
import SQLEngine

/// A device registration: one device of one user, reachable through a push service.
public struct Registration: Sendable, Equatable, Codable {
    /// Opaque id handed out by `POST /api/register`.
    public var id: String
    /// The owner; the registration always carries the tag `username:<username>`.
    public var username: String
    /// `apns`, or nil before the first `PUT`.
    public var platform: String?
    /// The APNs device token (lowercase hex), or nil before the first `PUT`.
    public var handle: String?
    /// Every tag, `username:<username>` included.
    public var tags: [String]
    /// The app it belongs to (docs/api.md#apps-and-api-keys): its pushes go out with that app's credentials only.
    public var app: String = AppName.default
    /// When it was created and last changed.
    public var createdAt: Date
    public var updatedAt: Date
    /// The app's and the OS's versions, as the device last reported them (docs/api.md#attributes-devices-versions-and-topics).
    public var appVersion: String? = nil
    public var osVersion: String? = nil
    /// The start of the hour (UTC) in which the device last registered or updated its registration.
    public var lastSeen: Date? = nil
}

/// What a device sends with `PUT /api/register/{id}`.
public struct DeviceRegistration: Sendable, Equatable {
    public var platform: String
    public var handle: String
    public var tags: [String]
    /// The registration id the device held before, as proof that it may move its token from
    /// another account (a device token alone proves nothing: it can leak).
    public var replaces: String?
    /// The app the device runs (docs/api.md#apps-and-api-keys), `default` unless named.
    public var app: String
    /// The app's and the OS's versions (docs/api.md#attributes-devices-versions-and-topics); nil
    /// keeps what the device said before.
    public var appVersion: String?
    public var osVersion: String?

    /// Creates the request body's content.
    public init(platform: String, handle: String, tags: [String], replaces: String? = nil, app: String = AppName.default,
                appVersion: String? = nil, osVersion: String? = nil) {
        self.app = app
        self.platform = platform
        self.handle = handle
        self.tags = tags
        self.replaces = replaces
        self.appVersion = appVersion
        self.osVersion = osVersion
    }
}

/// Device registrations, owned by users.
public struct RegistrationStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// The most device registrations one user may have: a person has a few devices, and every
    /// notification writes one outbox row per registration.
    public static let maxPerUser = 100

    /// The platforms RichPush can deliver to (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).
    public static let platforms = ["apns", "fcm", "web"]

    /// The longest app or OS version a device may report, in bytes of UTF-8.
    public static let maxVersionBytes = 64

    /// Checks an app or OS version a device reports (`field` names it in the refusal): 1 to 64
    /// bytes of UTF-8 with no control characters.
    public static func validateVersion(_ text: String, field: String) throws {
        let printable = !text.unicodeScalars.contains { $0.properties.generalCategory == .control }
        guard (1...maxVersionBytes).contains(text.utf8.count), printable else {
            throw CoreError(.invalid, "\(field) must be 1 to \(maxVersionBytes) bytes of printable text (no control characters); this one is \(text.utf8.count) bytes")
        }
    }

    /// What `registrations.appVersionKey` holds for `version`: its `AppVersionKey`, or '' when it
    /// has none (NULL is left to versions not keyed yet, which `fillAppVersionKeys` looks for).
    static func versionKey(_ version: String) -> String {
        AppVersionKey.of(version) ?? ""
    }

    /// Keys the versions devices reported before versions were keyed (docs/api.md#segments), 500
    /// to a transaction; how many it keyed. A server runs it as it starts: with none left, it is
    /// one look in an empty index.
    @discardableResult
    public func fillAppVersionKeys() async throws -> Int {
        var keyed = 0
        while true {
            let done = try await database.write { db -> Int in
                let rows = try SQLRow.fetchAll(db, sql: "SELECT id, appVersion FROM registrations WHERE appVersion IS NOT NULL AND appVersionKey IS NULL LIMIT 500")
                for row in rows {
                    try db.execute(sql: "UPDATE registrations SET appVersionKey = ? WHERE id = ?",
                                   arguments: [Self.versionKey(row["appVersion"]), row["id"] as String])
                }
                return rows.count
            }
            keyed += done
            if done < 500 { return keyed }
        }
    }

    /// The start of `date`'s hour, UTC, in seconds since 1970: a device's `lastSeen`, which is
    /// kept to the hour.
    static func hour(_ date: Date) -> Double {
        (date.timeIntervalSince1970 / 3600).rounded(.down) * 3600
    }

    /// Creates an empty registration for `username`; with `handle`, any registration of that
    /// device token is removed first (the device changed hands), as the tutorial's backend does.
    public func create(for username: String, replacingHandle handle: String? = nil) async throws -> Registration {
        var random = SystemRandomNumberGenerator()
        let id = (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max, using: &random)) }.joined()
        let now = Date()
        let normalized = try handle.map { handle in
            // The tutorial's query parameter is an APNs token; an FCM token is taken too.
            if let apns = try? Self.normalizeHandle(handle) { return apns }
            if let fcm = try? Self.normalizeHandle(handle, platform: "fcm") { return fcm }
            throw CoreError(.invalid, "handle must be the APNs device token in hex (e.g. 64 hex digits) or an FCM registration token, got '\(handle.prefix(80))'")
        }
        return try await database.write { db in
            if let normalized {
                // The caller's own earlier registration of this device goes; another account's stays.
                try db.execute(sql: "DELETE FROM registrations WHERE handle = ? AND username = ?", arguments: [normalized, username])
            }
            // Deletions no hub took within 30 days are not waited for (without a hub, nobody takes them).
            try db.execute(sql: "DELETE FROM mirror_deletions WHERE createdAt < ?", arguments: [now.timeIntervalSince1970 - 30 * 86_400])
            let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM registrations WHERE username = ?", arguments: [username]) ?? 0
            guard count < Self.maxPerUser else {
                throw CoreError(.conflict, "\(username) already has \(count) device registrations, the most allowed; DELETE /api/register/{id} for devices no longer used")
            }
            try db.execute(
                sql: "INSERT INTO registrations (id, username, tags, createdAt, updatedAt, lastSeen) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [id, username, Self.encodeTags(["username:\(username)"]), now.timeIntervalSince1970, now.timeIntervalSince1970,
                            Self.hour(now)])
            return Registration(id: id, username: username, platform: nil, handle: nil, tags: ["username:\(username)"], createdAt: now, updatedAt: now,
                                lastSeen: Date(timeIntervalSince1970: Self.hour(now)))
        }
    }

    /// Sets platform, handle and tags of `username`'s registration `id`, the app's and OS's
    /// versions when given (kept when not), and `lastSeen` to this hour.
    ///
    /// Adds `username:<username>`, refuses any other `username:` tag (403) and unknown ids (410,
    /// which the tutorial's app answers by asking for a new id). A device token registered
    /// under another id moves to this one.
    public func update(id: String, for username: String, with device: DeviceRegistration, now: Date = Date()) async throws -> Registration {
        let platform = device.platform.lowercased()
        guard Self.platforms.contains(platform) else {
            throw CoreError(.unprocessable, "platform '\(device.platform.prefix(40))' is not supported; use \"apns\", \"fcm\" or \"web\"")
        }
        let handle = try Self.normalizeHandle(device.handle, platform: platform)
        try AppName.validate(device.app)
        var tags = [String]()
        for tag in device.tags {
            // The prefix in any case: tag expressions may compare it so, and it is the server's alone.
            if tag.lowercased().hasPrefix("username:") && tag != "username:\(username)" {
                throw CoreError(.forbidden, "tag '\(tag)' names another user; the server adds username:\(username) itself")
            }
            guard (1...120).contains(tag.count), tag.allSatisfy({ $0.isLetter && $0.isASCII || $0.isNumber && $0.isASCII || "_@#.:-".contains($0) }) else {
                throw CoreError(.invalid, "invalid tag '\(tag)': use 1 to 120 of A-Z a-z 0-9 _ @ # . : -")
            }
            if !tags.contains(tag) { tags.append(tag) }
        }
        if !tags.contains("username:\(username)") { tags.insert("username:\(username)", at: 0) }
        guard tags.count <= 60 else { throw CoreError(.invalid, "at most 60 tags per registration") }
        if let version = device.appVersion { try Self.validateVersion(version, field: "appVersion") }
        if let version = device.osVersion { try Self.validateVersion(version, field: "osVersion") }
        let encodedTags = Self.encodeTags(tags)
        let finalTags = tags
        return try await database.write { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM registrations WHERE id = ? AND username = ?", arguments: [id, username]) else {
                throw CoreError(.gone, "registration \(id) does not exist or has expired; POST /api/register for a new id")
            }
            // The token may be registered elsewhere: the caller's own other registration gives it up;
            // another account's only when the device proves it held that registration.
            for other in try SQLRow.fetchAll(db, sql: "SELECT id, username FROM registrations WHERE handle = ? AND platform = ? AND id != ?",
                                          arguments: [handle, platform, id]) {
                let otherID: String = other["id"], owner: String = other["username"]
                guard owner == username || device.replaces == otherID else {
                    throw CoreError(.conflict, "this device token is registered to another account; a device moving it sends \"replaces\": \"<the registration id it held>\"")
                }
                try db.execute(sql: "DELETE FROM registrations WHERE id = ?", arguments: [otherID])
            }
            // A body without a version (an older app) keeps the one reported before.
            let appVersion = device.appVersion ?? row["appVersion"] as String?
            let osVersion = device.osVersion ?? row["osVersion"] as String?
            let seen = Self.hour(now)
            try db.execute(
                sql: """
                    UPDATE registrations SET platform = ?, handle = ?, tags = ?, app = ?, updatedAt = ?, appVersion = ?, appVersionKey = ?,
                        osVersion = ?, lastSeen = ? WHERE id = ?
                    """,
                arguments: [platform, handle, encodedTags, device.app, now.timeIntervalSince1970, appVersion, appVersion.map(Self.versionKey),
                            osVersion, seen, id])
            return Registration(id: id, username: username, platform: platform, handle: handle, tags: finalTags, app: device.app,
                                createdAt: Date(timeIntervalSince1970: row["createdAt"]), updatedAt: now,
                                appVersion: appVersion, osVersion: osVersion, lastSeen: Date(timeIntervalSince1970: seen))
        }
    }

    /// Deletes `username`'s registration `id` (404 when there is none). `audit` records who did
    /// (`registration.remove`: an admin removing a user's device in the console).
    public func delete(id: String, for username: String, audit: AuditActor? = nil) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM registrations WHERE id = ? AND username = ?", arguments: [id, username])
            guard db.changesCount > 0 else { throw CoreError(.notFound, "no registration \(id) for user \(username)") }
            try Audit.record(db, audit, "registration.remove", target: "registration:\(id)", detail: ["user": .string(username)])
        }
    }

    /// Deletes every registration of `username`, inside the caller's transaction (removing a user).
    static func deleteAll(_ db: SQLConnection, username: String) throws {
        try db.execute(sql: "DELETE FROM registrations WHERE username = ?", arguments: [username])
    }

    /// Deletes registration `id` if it is still the version last changed at `updatedAt`, inside
    /// the caller's transaction (the outbox pruning a device Apple called dead). Whether it did.
    static func prune(_ db: SQLConnection, id: String, ifUpdatedAt updatedAt: Date) throws -> Bool {
        try db.execute(sql: "DELETE FROM registrations WHERE id = ? AND updatedAt = ?", arguments: [id, updatedAt.timeIntervalSince1970])
        return db.changesCount > 0
    }

    /// Registers devices in bulk (a move from another system, a benchmark's audience), 500 to a
    /// statement: each handle checked for its platform, each user's `username:` tag added, in the
    /// `default` app. The whole batch is refused when one is bad.
    public func importDevices(_ devices: [(user: String, platform: String, handle: String)], now: Date = Date()) async throws {
        var rows: [[SQLValue]] = []
        var random = SystemRandomNumberGenerator()
        for device in devices {
            guard Self.platforms.contains(device.platform) else { throw CoreError(.invalid, "platform '\(device.platform.prefix(20))' is not supported") }
            let handle = try Self.normalizeHandle(device.handle, platform: device.platform)
            let id = (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max, using: &random)) }.joined()
            let values: [any SQLValueConvertible] = [id, device.user, device.platform, handle, Self.encodeTags(["username:\(device.user)"]),
                                                     now.timeIntervalSince1970, now.timeIntervalSince1970]
            rows.append(values.map(\.sqlValue))
        }
        let batches = rows.sqlBatches()
        try await database.write { db in
            for chunk in batches {
                let tuple = "(?, ?, ?, ?, ?, ?, ?)"
                try db.execute(sql: "INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES "
                               + Array(repeating: tuple, count: chunk.count).joined(separator: ", "),
                               arguments: SQLArguments(values: chunk.flatMap { $0 }))
            }
        }
    }

    /// How many devices (registrations with a handle) each app has.
    public func devicesByApp() async throws -> [String: Int] {
        try await database.read { db in
            Dictionary(try SQLRow.fetchAll(db, sql: "SELECT app, count(*) AS n FROM registrations WHERE handle IS NOT NULL GROUP BY app")
                .map { ($0["app"] as String, $0["n"] as Int) }, uniquingKeysWith: +)
        }
    }

    /// Every registration of `username`.
    public func list(for username: String) async throws -> [Registration] {
        try await database.read { db in try Self.registrations(db, username: username) }
    }

    /// The registrations a push to `username:<username>` reaches (those with a handle).
    public static func registrations(_ db: SQLConnection, username: String) throws -> [Registration] {
        try SQLRow.fetchAll(db, sql: "SELECT * FROM registrations WHERE username = ? ORDER BY createdAt", arguments: [username]).map(registration)
    }

    static func decodeTags(_ json: String) -> [String] {
        (try? JSONDecoder().decode([String].self, from: Data(json.utf8))) ?? []
    }

    static func registration(_ row: SQLRow) -> Registration {
        let tags = decodeTags(row["tags"])
        return Registration(id: row["id"], username: row["username"], platform: row["platform"], handle: row["handle"], tags: tags,
                            app: row["app"], createdAt: Date(timeIntervalSince1970: row["createdAt"]), updatedAt: Date(timeIntervalSince1970: row["updatedAt"]),
                            appVersion: row["appVersion"], osVersion: row["osVersion"],
                            lastSeen: (row["lastSeen"] as Double?).map(Date.init(timeIntervalSince1970:)))
    }

    /// Registrations deleted (by any process, for any reason) whose copy in a push service
    /// (a Notification Hubs installation) may still have to go, oldest first.
    public func pendingMirrorDeletions(limit: Int = 100) async throws -> [String] {
        try await database.read { db in
            try String.fetchAll(db, sql: "SELECT registrationId FROM mirror_deletions ORDER BY createdAt LIMIT ?", arguments: [limit])
        }
    }

    /// Marks a registration's copy as gone from the push service.
    public func mirrorDeleted(_ id: String) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM mirror_deletions WHERE registrationId = ?", arguments: [id])
        }
    }

    /// Lowercase hex of even length, 16 to 400 digits (APNs tokens are 32 bytes today, and Apple reserves the right to lengthen them).
    public static func normalizeHandle(_ handle: String) throws -> String {
        let trimmed = handle.filter { $0 != " " && $0 != "<" && $0 != ">" }.lowercased()
        guard (16...400).contains(trimmed.count), trimmed.count % 2 == 0, trimmed.allSatisfy(\.isHexDigit) else {
            throw CoreError(.invalid, "handle must be the APNs device token in hex (e.g. 64 hex digits), got '\(handle.prefix(80))'")
        }
        return trimmed
    }

    /// The stored form of a device handle: APNs tokens as lowercase hex; FCM registration tokens
    /// as given (20 to 4,096 of A-Z a-z 0-9 _ : . -); Web Push subscriptions as canonical JSON.
    public static func normalizeHandle(_ handle: String, platform: String) throws -> String {
        switch platform {
        case "fcm":
            guard (20...4096).contains(handle.utf8.count),
                  handle.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_:.-".contains($0)) }) else {
                throw CoreError(.invalid, "handle must be the FCM registration token (20 to 4096 of A-Z a-z 0-9 _ : . -), got '\(handle.prefix(80))'")
            }
            return handle
        case "web":
            return try WebPushSubscription(jsonText: handle).handle
        default:
            return try normalizeHandle(handle)
        }
    }

    static func encodeTags(_ tags: [String]) -> String {
        String(decoding: try! JSONEncoder().encode(tags), as: UTF8.self)
    }
}
