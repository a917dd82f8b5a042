import Foundation
import SQLEngine
import MediaStore

/// A rich notification: a message shown first, and a payload (an image) fetched on demand.
public struct RichNotification: Sendable, Equatable {
    /// Sequential id; the push carries it as `richId`.
    public var id: Int64
    /// The user it is for; only they may fetch the payload.
    public var recipient: String
    public var message: String
    public var title: String?
    public var richType: String
    /// The media id (SHA-256) of the payload image.
    public var payload: MediaID
    public var mode: PushMode
    /// The campaign it belongs to, if any.
    public var campaignId: Int64?
    /// Whether the recipient has fetched the payload.
    public var read: Bool
    public var createdAt: Date
}

/// What `POST /api/notifications` asks for; nil fields take the tutorial's defaults.
public struct NotificationDraft: Sendable, Equatable {
    public var message: String?
    public var richType: String?
    /// A media id or name.
    public var payload: String?
    /// The alert's title (alert mode only).
    public var title: String?
    public var mode: PushMode
    /// Platform options and the badge (docs/api.md#options-badges-and-paced-sends).
    public var options: PushOptions

    /// Creates a draft.
    public init(message: String? = nil, richType: String? = nil, payload: String? = nil, title: String? = nil, mode: PushMode = .silent,
                options: PushOptions = PushOptions()) {
        self.options = options
        self.message = message
        self.richType = richType
        self.payload = payload
        self.title = title
        self.mode = mode
    }

    /// The tutorial's message.
    public static let defaultMessage = "Check this image out!"
    /// The tutorial's rich type.
    public static let defaultRichType = "img"
}

/// The outcome of creating a notification.
public struct CreatedNotification: Sendable {
    /// The stored notification.
    public var notification: RichNotification
    /// The push's exact bytes.
    public var push: Data
    /// The payload URL (when the server signs them).
    public var richUrl: String?
    /// How many deliveries (push targets) were queued.
    public var deliveries: Int
    /// How many of them each app sends.
    public var deliveriesByApp: [String: Int] = [:]
}

/// A notification as a payload fetch needs it: whose it is and what it carries.
public struct QueuedNotification: Sendable {
    /// The notification id.
    public var id: Int64
    /// The only user who may fetch it.
    public var recipient: String
    /// Its payload image.
    public var payload: MediaID

    /// Describes a notification.
    public init(id: Int64, recipient: String, payload: MediaID) {
        self.id = id
        self.recipient = recipient
        self.payload = payload
    }
}

/// How pushes of a notification are addressed in the outbox, app by app (docs/api.md#apps-and-api-keys): one
/// delivery per registered device (APNs, FCM and Web Push direct, or no provider yet), except
/// for apps that send through a Notification Hub, which get one delivery per recipient, to the
/// tag `username:<recipient>`.
public struct DeliveryAddressing: Sendable, Equatable {
    /// The apps whose pushes go to a hub's user tag.
    public var tagApps: Set<String>

    /// Addressing with `tagApps` sent through hubs.
    public init(tagApps: Set<String>) {
        self.tagApps = tagApps
    }

    /// One delivery per registered device, in every app.
    public static let perDevice = DeliveryAddressing(tagApps: [])
    /// The `default` app through a hub (the section 7 flags' Notification Hubs).
    public static let perUserTag = DeliveryAddressing(tagApps: [AppName.default])

    /// The deliveries of one recipient whose devices (in the notification's apps) are `devices`:
    /// each device's, but one tag per hub app instead of that app's devices. With `alwaysTag`, the
    /// `default` app's hub gets its tag even when no device is registered here (a hub may know
    /// devices registered with it directly); `byDevice` keeps devices (a tag expression's matches).
    func targets(recipient: String, devices: [PushTarget], app: String?, alwaysTag: Bool = false, byDevice: Bool = false) -> [PushTarget] {
        guard !tagApps.isEmpty, !byDevice else { return devices }
        var targets = devices.filter { !tagApps.contains($0.app) }
        var tagged = Set(devices.map(\.app)).intersection(tagApps)
        if alwaysTag, tagApps.contains(AppName.default), app == nil || app == AppName.default { tagged.insert(AppName.default) }
        for app in tagged.sorted() {
            targets.append(PushTarget(registration: nil, target: "username:\(recipient)", app: app))
        }
        return targets
    }
}

/// One push target: a device (its registration and token) or a tag.
struct PushTarget {
    var registration: String?
    var target: String
    /// The registration's platform (`apns`, `fcm`, `web`); nil for a hub's tag.
    var platform: String? = nil
    /// The app whose credentials send it.
    var app: String = AppName.default
}

/// Rich notifications and their outbox.
public struct NotificationStore: Sendable {
    /// The database.
    let database: SQLDatabase
    /// Signs payload URLs; nil where no key is available (then only silent pushes can be made).
    public let links: PayloadLinks?

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase, links: PayloadLinks? = nil) {
        self.database = database
        self.links = links
    }

    /// Creates a notification for `recipient`, its push, and one pending delivery per target,
    /// all in one transaction (nothing is stored when anything is refused).
    ///
    /// Refuses an unknown payload (422) and a push over 4096 bytes (422).
    /// `sender` (a user's or a key's name) is kept: who may change it or take it back. `audit`
    /// records who made it (`notification.create`).
    public func create(for recipient: String, draft: NotificationDraft, defaultImage: String,
                       addressing: DeliveryAddressing = .perDevice, app: String? = nil, idempotency: IdempotencyKey? = nil,
                       sender: String? = nil, now: Date = Date(), audit: AuditActor? = nil) async throws -> CreatedNotification {
        let links = self.links
        return try await database.write { db in
            try IdempotencyKey.replayIfSeen(db, idempotency, now: now)
            let writer = try NotificationWriter(db, draft: draft, defaultImage: defaultImage, links: links, now: now)
            let devices = try RegistrationStore.registrations(db, username: recipient).compactMap { r in
                r.handle.map { PushTarget(registration: r.id, target: $0, platform: r.platform, app: r.app) }
            }.filter { app == nil || $0.app == app }
            let targets = addressing.targets(recipient: recipient, devices: devices, app: app, alwaysTag: true)
            let made = try writer.insert(db, recipient: recipient, targets: targets)
            if let sender {
                try db.execute(sql: "UPDATE notifications SET sender = ? WHERE id = ?", arguments: [sender, made.notification.id], cached: true)
            }
            try MediaIndex.addReference(db, id: writer.media.id, owner: "notification:\(made.notification.id)", now: now)
            if let idempotency { try IdempotencyKey.record(db, idempotency, resource: made.notification.id, now: now) }
            try Audit.record(db, audit, "notification.create", target: "notification:\(made.notification.id)",
                             detail: ["to": .string(recipient), "app": app.map(JSONValue.string) ?? .null])
            return made
        }
    }

    /// Notification `id` and its payload URL, whoever it is for (an idempotent replay answers with it).
    public func created(id: Int64) async throws -> (RichNotification, String?)? {
        try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT * FROM notifications WHERE id = ?", arguments: [id]).flatMap { row in
                Self.notification(row).map { ($0, row["richUrl"] as String?) }
            }
        }
    }

    /// How far ahead of this machine's clock an entry's time may be and still be listed: another
    /// node's clock may run that much ahead. A paced campaign's entries further out are not yet
    /// in the inbox, nor in the unread count a badge shows.
    public static let clockTolerance: Double = 5

    /// The newest `createdAt` an inbox shows now.
    public static func visibleNow(_ now: Date = Date()) -> Double { now.timeIntervalSince1970 + clockTolerance }

    /// `recipient`'s notifications, newest first: those whose time has come (a paced campaign's
    /// entry shows from its push's turn).
    public func list(for recipient: String, limit: Int = 100, before: Int64? = nil) async throws -> [RichNotification] {
        try await database.read { db in
            try SQLRow.fetchAll(
                db,
                sql: "SELECT * FROM notifications WHERE recipient = ? AND id < ? AND createdAt <= ? AND retractedAt IS NULL ORDER BY id DESC LIMIT ?",
                arguments: [recipient, before ?? Int64.max, Self.visibleNow(), limit]
            ).compactMap(Self.notification)
        }
    }

    /// Notification `id` when `recipient` is its recipient; nil otherwise (the caller answers 404 either way).
    public func find(id: Int64, for recipient: String) async throws -> RichNotification? {
        try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT * FROM notifications WHERE id = ? AND recipient = ? AND retractedAt IS NULL", arguments: [id, recipient])
                .flatMap(Self.notification)
        }
    }

    /// Marks notifications read (once; later calls change nothing), in one transaction.
    /// Notifications as a payload fetch needs them, each with whether it is read: the newest
    /// `limit` when `after` is nil, else the first `limit` after id `after`, in id order.
    /// Those taken back are left out; `last` is the largest id read (nil: none), where the next
    /// read goes on from, and `full` says that `limit` rows were read (more may follow).
    public func indexEntries(after: Int64?, limit: Int) async throws
        -> (entries: [(notification: QueuedNotification, read: Bool)], last: Int64?, full: Bool) {
        try await database.read { db in
            let rows = if let after {
                try SQLRow.fetchAll(db, sql: "SELECT id, recipient, payload, read, retractedAt FROM notifications WHERE id > ? ORDER BY id LIMIT ?",
                                 arguments: [after, limit])
            } else {
                try SQLRow.fetchAll(db, sql: "SELECT id, recipient, payload, read, retractedAt FROM notifications ORDER BY id DESC LIMIT ?",
                                 arguments: [limit]).reversed() as [SQLRow]
            }
            // A notification taken back is not served (docs/api.md#change-or-take-back-what-was-sent): not indexed.
            let entries = rows.filter { ($0["retractedAt"] as Double?) == nil }.compactMap { row in
                MediaID(row["payload"] as String).map { (notification: QueuedNotification(id: row["id"], recipient: row["recipient"], payload: $0),
                                                         read: row["read"] as Bool) }
            }
            return (entries, rows.map { $0["id"] as Int64 }.max(), rows.count >= limit)
        }
    }

    /// Ids marked read per statement.
    static let markBatch = 1_000

    /// Marks the notifications `ids` read, those not read yet, in one transaction.
    ///
    /// docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: a first fetch is the notification's **displayed**, counted with the marking.
    public func markRead(ids: [Int64], now: Date = Date()) async throws {
        // Read committed: the guards (read = 0) hold, and batches from several nodes touch the same counter row.
        try await database.write(isolation: .readCommitted) { db in
            var happenings: [Happening] = []
            // One statement, compiled once, per batch of ids given as one list (a fetch storm
            // marks thousands a second): a statement per id cost more than the fetches it marked.
            let unique = Array(Set(ids)).sorted()
            let sql = Self.markStatement(db)
            for start in stride(from: 0, to: unique.count, by: Self.markBatch) {
                let list = db.idList(unique[start..<min(start + Self.markBatch, unique.count)])
                let rows = try db.fetchAll(sql: sql, arguments: [now.timeIntervalSince1970, list], cached: true)
                for row in rows {
                    happenings.append(Happening(type: .displayed, campaign: row["campaignId"], notification: row["id"], user: row["recipient"]))
                }
            }
            happenings.sort { ($0.notification ?? 0) < ($1.notification ?? 0) }
            try Insight.record(db, happenings, now: now.timeIntervalSince1970)
        }
    }

    /// The statement that marks a batch of notifications read: it changes no indexed column
    /// (core-v29), so on SQLite a mark rewrites the row alone.
    static func markStatement(_ db: SQLConnection) -> String {
        "UPDATE notifications SET read = 1, readAt = ? WHERE read = 0 AND \(db.idIn("id")) RETURNING id, campaignId, recipient"
    }

    /// docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: the recipient's device says notification `id` was opened (tapped). Counted once;
    /// false when there is no such notification (for `recipient`, when given).
    @discardableResult
    public func markOpened(id: Int64, recipient: String? = nil, now: Date = Date()) async throws -> Bool {
        // A repeat (a device reporting again, or anyone replaying a payload URL's open) is
        // answered from a read: it writes nothing and waits for no writer.
        let seen = try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT recipient, openedAt FROM notifications WHERE id = ? AND retractedAt IS NULL", arguments: [id])
        }
        guard let seen, recipient == nil || (seen["recipient"] as String) == recipient else { return false }
        if (seen["openedAt"] as Double?) != nil { return true }
        return try await database.write(isolation: .readCommitted) { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT campaignId, recipient, openedAt FROM notifications WHERE id = ?", arguments: [id]),
                  recipient == nil || (row["recipient"] as String) == recipient else { return false }
            guard (row["openedAt"] as Double?) == nil else { return true }
            try db.execute(sql: "UPDATE notifications SET openedAt = ? WHERE id = ? AND openedAt IS NULL", arguments: [now.timeIntervalSince1970, id])
            if db.changesCount > 0 {
                try Insight.record(db, [Happening(type: .opened, campaign: row["campaignId"], notification: id, user: row["recipient"])],
                                   now: now.timeIntervalSince1970)
            }
            return true
        }
    }

    /// Records that notifications `ids` were removed, in the transaction that removes them, so
    /// that every node drops them from its payload index (`removals(since:)`).
    static func recordRemovals(_ db: SQLConnection, _ ids: [Int64]) throws {
        for chunk in ids.sqlBatches(of: 400) {
            try db.execute(sql: "INSERT INTO notification_removals (notificationId, at) VALUES \(Array(repeating: "(?, ?)", count: chunk.count).joined(separator: ", "))",
                           arguments: SQLArguments(chunk.flatMap { [$0 as any SQLValueConvertible, db.now] }))
        }
    }

    /// Notifications removed at or after `since` (the database's clock), and the latest time
    /// among them; records older than a day are dropped on the way.
    public func removals(since: Double) async throws -> (ids: [Int64], latest: Double) {
        try await database.read { db in
            let rows = try SQLRow.fetchAll(db, sql: "SELECT notificationId, at FROM notification_removals WHERE at >= ? ORDER BY at LIMIT 100000",
                                           arguments: [since])
            let latest = rows.last.map { $0["at"] as Double } ?? since
            return (rows.map { $0["notificationId"] as Int64 }, latest)
        }
    }

    /// Drops removal records older than a day (every node has long read them).
    public func compactRemovals() async throws {
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: "DELETE FROM notification_removals WHERE at < ?", arguments: [db.now - 86_400])
        }
    }

    /// The database's clock, as removals are stamped with it.
    public func databaseNow() async throws -> Double {
        try await database.read { db in db.now }
    }

    static func notification(_ row: SQLRow) -> RichNotification? {
        guard let payload = MediaID(row["payload"] as String) else { return nil }
        return RichNotification(id: row["id"], recipient: row["recipient"], message: row["message"], title: row["title"],
                                richType: row["richType"], payload: payload, mode: PushMode(rawValue: row["mode"]) ?? .silent,
                                campaignId: row["campaignId"], read: row["read"], createdAt: Date(timeIntervalSince1970: row["createdAt"]))
    }
}
