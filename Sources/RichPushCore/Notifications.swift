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

/// The content every recipient of a notification or campaign shares, checked once; writes
/// each recipient's notification, push and outbox rows inside the caller's transaction.
struct NotificationWriter {
    let message: String
    let title: String?
    let richType: String
    let mode: PushMode
    let options: PushOptions
    let media: MediaItem
    let links: PayloadLinks?
    let campaignId: Int64?
    let now: Date

    /// Checks the shared fields and resolves the payload (422 when unknown).
    init(_ db: SQLConnection, draft: NotificationDraft, defaultImage: String, links: PayloadLinks?, campaignId: Int64? = nil, now: Date) throws {
        message = draft.message ?? NotificationDraft.defaultMessage
        richType = draft.richType ?? NotificationDraft.defaultRichType
        title = draft.title.flatMap { $0.isEmpty ? nil : $0 }
        mode = draft.mode
        options = draft.options
        try options.validate(mode: mode)
        guard !richType.isEmpty, richType.utf8.count <= 64 else {
            throw CoreError(.unprocessable, "richType must be 1 to 64 bytes")
        }
        if mode == .alert && links == nil {
            throw CoreError(.unprocessable, "alert pushes carry a signed payload URL, and this process has no payload key")
        }
        let payloadKey = draft.payload ?? defaultImage
        guard let media = try MediaIndex.resolve(db, payloadKey) else {
            let hint = draft.payload == nil
                ? "the default image '\(payloadKey)' is not in the media store; add it with `richpush media add --name \(payloadKey) FILE`"
                : "payload '\(payloadKey)' is not a stored media id or name; upload it with POST /api/media first"
            throw CoreError(.unprocessable, hint)
        }
        self.media = media
        self.links = links
        self.campaignId = campaignId
        self.now = now
    }

    /// Refuses (422) content that would not fit a push with the longest id, to APNs and, when any
    /// browser is registered, to Web Push: a campaign checks this once, before it queues anyone,
    /// so no batch is refused halfway.
    func checkFitsEveryPlatform(_ db: SQLConnection) throws {
        let browsers = try Int.fetchOne(db, sql: "SELECT 1 FROM registrations WHERE platform = 'web' LIMIT 1") != nil
        _ = try push(id: .max, targets: browsers ? [PushTarget(registration: nil, target: "", platform: "web")] : [])
    }

    /// Inserts `recipient`'s notification with its push and one pending delivery per target.
    /// Throws 422 when the push would exceed APNs' 4096 bytes.
    func insert(_ db: SQLConnection, recipient: String, targets: [PushTarget], pace: Pace? = nil) throws -> CreatedNotification {
        let time = now.timeIntervalSince1970
        // A paced campaign's pushes are due at their turns (docs/api.md#options-badges-and-paced-sends), and its inbox entry shows
        // from the first of them (`Notifications.visibleNow`), not before; a push's life counts
        // from its turn.
        let dues = targets.map { _ in pace?.next() ?? time }
        // Compiled once (a campaign on SQLite runs it per recipient).
        let inserted = try db.fetchAll(sql: """
            INSERT INTO notifications (recipient, message, title, richType, payload, mode, campaignId, push, createdAt, options)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
            """, arguments: [recipient, message, title, richType, media.id.hex, mode.rawValue, campaignId, Data(), max(time, dues.min() ?? time),
                             options.stored], cached: true)
        let id: Int64 = inserted[0]["id"]
        let (push, richUrl) = try self.push(id: id, targets: targets)
        try db.execute(sql: "UPDATE notifications SET push = ?, richUrl = ? WHERE id = ?", arguments: [push, richUrl, id], cached: true)
        if !targets.isEmpty { try db.notify(DataChange.outbox.rawValue) }
        for (target, due) in zip(targets, dues) {
            try db.execute(sql: """
                INSERT INTO deliveries (notificationId, campaignId, registrationId, target, platform, app, state, pushId, nextAttemptAt, dueAt, createdAt, updatedAt)
                VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)
                """, arguments: [id, campaignId, target.registration, target.target, target.platform, target.app, UUID().uuidString,
                                 due, due, time, time],
                    cached: true)
        }
        return made(id: id, recipient: recipient, push: push, richUrl: richUrl, targets: targets)
    }

    /// `insert` for many recipients: the ids are taken first, so that each row is written once,
    /// whole, and the rows go in 500 to a statement. One at a time, a notification was inserted,
    /// then updated with its push (which names its id), and its deliveries inserted: on
    /// PostgreSQL a round trip and a parse each; on SQLite the row written twice.
    func insert(_ db: SQLConnection, recipients: [(name: String, targets: [PushTarget])], pace: Pace? = nil) throws -> [CreatedNotification] {
        guard recipients.count > 1 else {
            return try recipients.map { try insert(db, recipient: $0.name, targets: $0.targets, pace: pace) }
        }
        let ids: [Int64]
        if db.dialect == .postgres {
            ids = try Int64.fetchAll(db, sql: "SELECT nextval(pg_get_serial_sequence('notifications', 'id')) FROM generate_series(1, ?)",
                                     arguments: [recipients.count])
        } else {
            // This transaction holds SQLite's write lock (BEGIN IMMEDIATE), so the ids after the
            // largest ever used (AUTOINCREMENT keeps it in sqlite_sequence: ids are never reused)
            // are this batch's; inserting them moves the sequence past them.
            let last = try Int64.fetchOne(db, sql: """
                SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'notifications'), 0),
                           COALESCE((SELECT max(id) FROM notifications), 0))
                """) ?? 0
            ids = (1...Int64(recipients.count)).map { last + $0 }
        }
        let time = now.timeIntervalSince1970
        var created: [CreatedNotification] = []
        var notificationRows: [[SQLValue]] = []
        var deliveryRows: [[SQLValue]] = []
        for (index, recipient) in recipients.enumerated() {
            let id = ids[index]
            let (push, richUrl) = try self.push(id: id, targets: recipient.targets)
            let dues = recipient.targets.map { _ in pace?.next() ?? time }
            let fields: [any SQLValueConvertible] = [id, recipient.name, message, title, richType, media.id.hex, mode.rawValue, campaignId, push, richUrl,
                                                     max(time, dues.min() ?? time), options.stored]
            notificationRows.append(fields.map(\.sqlValue))
            for (target, due) in zip(recipient.targets, dues) {
                let delivery: [any SQLValueConvertible] = [id, campaignId, target.registration, target.target, target.platform, target.app, "pending", UUID().uuidString,
                                                           due, due, time, time]
                deliveryRows.append(delivery.map(\.sqlValue))
            }
            created.append(made(id: id, recipient: recipient.name, push: push, richUrl: richUrl, targets: recipient.targets))
        }
        try Self.insertRows(db, "notifications (id, recipient, message, title, richType, payload, mode, campaignId, push, richUrl, createdAt, options)",
                            notificationRows)
        try Self.insertRows(db, "deliveries (notificationId, campaignId, registrationId, target, platform, app, state, pushId, nextAttemptAt, dueAt, createdAt, updatedAt)",
                            deliveryRows)
        if !deliveryRows.isEmpty { try db.notify(DataChange.outbox.rawValue) }
        return created
    }

    /// One multi-row INSERT per 500 rows. A whole 500 is the common statement (a campaign's
    /// batches): it is compiled once and cached; a shorter run, a statement of its own.
    private static func insertRows(_ db: SQLConnection, _ into: String, _ rows: [[SQLValue]]) throws {
        let size = 500
        for chunk in rows.sqlBatches(of: size) {
            let tuple = "(" + Array(repeating: "?", count: chunk.first!.count).joined(separator: ", ") + ")"
            try db.execute(sql: "INSERT INTO \(into) VALUES " + Array(repeating: tuple, count: chunk.count).joined(separator: ", "),
                           arguments: SQLArguments(values: chunk.flatMap { $0 }), cached: chunk.count == size)
        }
    }

    /// The APNs push of notification `id`, and its payload URL (in both modes when this process
    /// can sign one: FCM and Web Push carry it even in silent mode); 422 past APNs' 4,096 bytes,
    /// or past Web Push's 3,993 when a target is a browser.
    private func push(id: Int64, targets: [PushTarget]) throws -> (Data, String?) {
        let richUrl = links?.url(notification: id, payload: media.id, now: now)
        let push: Data = switch mode {
        case .silent: SilentPush(id: id, message: message, richType: richType).encoded()
        case .alert: AlertPush(id: id, title: title, message: message, richType: richType, richUrl: richUrl!, options: options).encoded()
        }
        // An unread count is set per device at send time: room is kept for the largest.
        let largest = options.badge == .unread ? AlertPush.settingBadge(push, to: PushOptions.maxBadge).count : push.count
        guard largest <= SilentPush.maxBytes else {
            throw CoreError(.unprocessable, "the push would be \(largest) bytes, over APNs' limit of \(SilentPush.maxBytes); shorten the message or title")
        }
        if targets.contains(where: { $0.platform == "web" }) {
            var content = PushContent(id: id, message: message, title: title, richType: richType, richUrl: richUrl, options: options)
            if options.badge == .unread { content.badge = PushOptions.maxBadge }
            let size = content.webPushPlaintext.count
            guard size <= PushContent.webPushMaxBytes else {
                throw CoreError(.unprocessable, "the Web Push message would be \(size) bytes, over its limit of \(PushContent.webPushMaxBytes); shorten the message or title")
            }
        }
        return (push, richUrl)
    }

    private func made(id: Int64, recipient: String, push: Data, richUrl: String?, targets: [PushTarget]) -> CreatedNotification {
        let notification = RichNotification(id: id, recipient: recipient, message: message, title: title, richType: richType,
                                            payload: media.id, mode: mode, campaignId: campaignId, read: false, createdAt: now)
        return CreatedNotification(notification: notification, push: push, richUrl: richUrl, deliveries: targets.count,
                                   deliveriesByApp: Dictionary(targets.map { ($0.app, 1) }, uniquingKeysWith: +))
    }
}

/// The send times of a paced campaign's pushes (docs/api.md#options-badges-and-paced-sends): one every `step` seconds from `start`,
/// handed out in the order the pushes are queued, so every node's outbox claims them no faster
/// than the campaign's rate.
final class Pace {
    private(set) var nextAt: Double
    let step: Double

    /// Pushes from `start` (the database's clock), `perMinute` a minute.
    init(start: Double, perMinute: Int) {
        nextAt = start
        step = 60 / Double(max(1, perMinute))
    }

    /// The next push's time.
    func next() -> Double {
        defer { nextAt += step }
        return nextAt
    }
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
    public func create(for recipient: String, draft: NotificationDraft, defaultImage: String,
                       addressing: DeliveryAddressing = .perDevice, app: String? = nil, idempotency: IdempotencyKey? = nil,
                       now: Date = Date()) async throws -> CreatedNotification {
        let links = self.links
        return try await database.write { db in
            try IdempotencyKey.replayIfSeen(db, idempotency, now: now)
            let writer = try NotificationWriter(db, draft: draft, defaultImage: defaultImage, links: links, now: now)
            let devices = try RegistrationStore.registrations(db, username: recipient).compactMap { r in
                r.handle.map { PushTarget(registration: r.id, target: $0, platform: r.platform, app: r.app) }
            }.filter { app == nil || $0.app == app }
            let targets = addressing.targets(recipient: recipient, devices: devices, app: app, alwaysTag: true)
            let made = try writer.insert(db, recipient: recipient, targets: targets)
            try MediaIndex.addReference(db, id: writer.media.id, owner: "notification:\(made.notification.id)", now: now)
            if let idempotency { try IdempotencyKey.record(db, idempotency, resource: made.notification.id, now: now) }
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
                sql: "SELECT * FROM notifications WHERE recipient = ? AND id < ? AND createdAt <= ? ORDER BY id DESC LIMIT ?",
                arguments: [recipient, before ?? Int64.max, Self.visibleNow(), limit]
            ).compactMap(Self.notification)
        }
    }

    /// Notification `id` when `recipient` is its recipient; nil otherwise (the caller answers 404 either way).
    public func find(id: Int64, for recipient: String) async throws -> RichNotification? {
        try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT * FROM notifications WHERE id = ? AND recipient = ?", arguments: [id, recipient])
                .flatMap(Self.notification)
        }
    }

    /// Marks notifications read (once; later calls change nothing), in one transaction.
    /// Notifications as a payload fetch needs them, each with whether it is read: the newest
    /// `limit` when `after` is nil, else the first `limit` after id `after`, in id order.
    public func indexEntries(after: Int64?, limit: Int) async throws -> [(notification: QueuedNotification, read: Bool)] {
        try await database.read { db in
            let rows = if let after {
                try SQLRow.fetchAll(db, sql: "SELECT id, recipient, payload, read FROM notifications WHERE id > ? ORDER BY id LIMIT ?",
                                 arguments: [after, limit])
            } else {
                try SQLRow.fetchAll(db, sql: "SELECT id, recipient, payload, read FROM notifications ORDER BY id DESC LIMIT ?",
                                 arguments: [limit]).reversed() as [SQLRow]
            }
            return rows.compactMap { row in
                MediaID(row["payload"] as String).map { (QueuedNotification(id: row["id"], recipient: row["recipient"], payload: $0), row["read"]) }
            }
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
            let sql = "UPDATE notifications SET read = 1, readAt = ? WHERE read = 0 AND \(db.idIn("id")) RETURNING id, campaignId, recipient"
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

    /// docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: the recipient's device says notification `id` was opened (tapped). Counted once;
    /// false when there is no such notification (for `recipient`, when given).
    @discardableResult
    public func markOpened(id: Int64, recipient: String? = nil, now: Date = Date()) async throws -> Bool {
        // A repeat (a device reporting again, or anyone replaying a payload URL's open) is
        // answered from a read: it writes nothing and waits for no writer.
        let seen = try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT recipient, openedAt FROM notifications WHERE id = ?", arguments: [id])
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

    /// Whether notification `id` exists (a cancelled campaign's unsent ones, and a removed
    /// user's, do not).
    public func exists(_ id: Int64) async throws -> Bool {
        try await database.read { db in
            try Int64.fetchOne(db, sql: "SELECT id FROM notifications WHERE id = ?", arguments: [id]) != nil
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
