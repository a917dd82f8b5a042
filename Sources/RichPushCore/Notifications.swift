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

    /// Creates a draft.
    public init(message: String? = nil, richType: String? = nil, payload: String? = nil, title: String? = nil, mode: PushMode = .silent) {
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

/// How pushes of a notification are addressed in the outbox.
public enum DeliveryAddressing: Sendable {
    /// One delivery per registered device (APNs direct, or no provider yet).
    case perDevice
    /// One delivery per notification, to the tag `username:<recipient>` (Notification Hubs).
    case perUserTag
}

/// One push target: a device (its registration and token) or a tag.
struct PushTarget {
    var registration: String?
    var target: String
}

/// The content every recipient of a notification or campaign shares, checked once; writes
/// each recipient's notification, push and outbox rows inside the caller's transaction.
struct NotificationWriter {
    let message: String
    let title: String?
    let richType: String
    let mode: PushMode
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

    /// Inserts `recipient`'s notification with its push and one pending delivery per target.
    /// Throws 422 when the push would exceed APNs' 4096 bytes.
    func insert(_ db: SQLConnection, recipient: String, targets: [PushTarget]) throws -> CreatedNotification {
        let time = now.timeIntervalSince1970
        let inserted = try db.fetchOne(sql: """
            INSERT INTO notifications (recipient, message, title, richType, payload, mode, campaignId, push, createdAt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
            """, arguments: [recipient, message, title, richType, media.id.hex, mode.rawValue, campaignId, Data(), time])
        let id: Int64 = inserted!["id"]
        let richUrl = links?.url(notification: id, payload: media.id, now: now)
        let push: Data = switch mode {
        case .silent: SilentPush(id: id, message: message, richType: richType).encoded()
        case .alert: AlertPush(id: id, title: title, message: message, richType: richType, richUrl: richUrl!).encoded()
        }
        guard push.count <= SilentPush.maxBytes else {
            throw CoreError(.unprocessable, "the push would be \(push.count) bytes, over APNs' limit of \(SilentPush.maxBytes); shorten the message or title")
        }
        try db.execute(cached: "UPDATE notifications SET push = ? WHERE id = ?", arguments: [push, id])
        if !targets.isEmpty { try db.notify(DataChange.outbox.rawValue) }
        for target in targets {
            try db.execute(cached: """
                INSERT INTO deliveries (notificationId, campaignId, registrationId, target, state, pushId, nextAttemptAt, createdAt, updatedAt)
                VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)
                """, arguments: [id, campaignId, target.registration, target.target, UUID().uuidString, time, time, time])
        }
        let notification = RichNotification(id: id, recipient: recipient, message: message, title: title, richType: richType,
                                            payload: media.id, mode: mode, campaignId: campaignId, read: false, createdAt: now)
        return CreatedNotification(notification: notification, push: push, richUrl: richUrl, deliveries: targets.count)
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
                       addressing: DeliveryAddressing = .perDevice, now: Date = Date()) async throws -> CreatedNotification {
        let links = self.links
        return try await database.write { db in
            let writer = try NotificationWriter(db, draft: draft, defaultImage: defaultImage, links: links, now: now)
            let targets: [PushTarget] = switch addressing {
            case .perDevice:
                try RegistrationStore.registrations(db, username: recipient).compactMap { r in
                    r.handle.map { PushTarget(registration: r.id, target: $0) }
                }
            case .perUserTag:
                [PushTarget(registration: nil, target: "username:\(recipient)")]
            }
            let made = try writer.insert(db, recipient: recipient, targets: targets)
            try MediaIndex.addReference(db, id: writer.media.id, owner: "notification:\(made.notification.id)", now: now)
            return made
        }
    }

    /// `recipient`'s notifications, newest first.
    public func list(for recipient: String, limit: Int = 100, before: Int64? = nil) async throws -> [RichNotification] {
        try await database.read { db in
            try SQLRow.fetchAll(
                db,
                sql: "SELECT * FROM notifications WHERE recipient = ? AND id < ? ORDER BY id DESC LIMIT ?",
                arguments: [recipient, before ?? Int64.max, limit]
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

    public func markRead(ids: [Int64], now: Date = Date()) async throws {
        try await database.write { db in
            for id in ids {
                try db.execute(cached: "UPDATE notifications SET read = 1, readAt = ? WHERE id = ? AND read = 0", arguments: [now.timeIntervalSince1970, id])
            }
        }
    }

    static func notification(_ row: SQLRow) -> RichNotification? {
        guard let payload = MediaID(row["payload"] as String) else { return nil }
        return RichNotification(id: row["id"], recipient: row["recipient"], message: row["message"], title: row["title"],
                                richType: row["richType"], payload: payload, mode: PushMode(rawValue: row["mode"]) ?? .silent,
                                campaignId: row["campaignId"], read: row["read"], createdAt: Date(timeIntervalSince1970: row["createdAt"]))
    }
}
