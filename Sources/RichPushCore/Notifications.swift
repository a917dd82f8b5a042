import Foundation
import GRDB
import MediaStore

/// A rich notification: a message shown first, and a payload (an image) fetched on demand.
public struct RichNotification: Sendable, Equatable {
    /// Sequential id; the silent push carries it as `richId`.
    public var id: Int64
    /// The user it is for; only they may fetch the payload.
    public var recipient: String
    public var message: String
    public var richType: String
    /// The media id (SHA-256) of the payload image.
    public var payload: MediaID
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

    /// Creates a draft.
    public init(message: String? = nil, richType: String? = nil, payload: String? = nil) {
        self.message = message
        self.richType = richType
        self.payload = payload
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
    /// The silent push's exact bytes.
    public var push: Data
    /// How many deliveries (push targets) were queued.
    public var deliveries: Int
}

/// How pushes of a notification are addressed in the outbox.
public enum DeliveryAddressing: Sendable {
    /// One delivery per registered device (APNs direct, or no provider yet).
    case perDevice
    /// One delivery per notification, to the tag `username:<recipient>` (Notification Hubs).
    case perUserTag
}

/// Rich notifications and their outbox.
public struct NotificationStore: Sendable {
    /// The database.
    public let database: DatabasePool

    /// Creates the store over a database opened with `CoreDatabase`.
    public init(database: DatabasePool) {
        self.database = database
    }

    /// Creates a notification for `recipient`, its silent push, and one pending delivery per target,
    /// all in one transaction (nothing is stored when anything is refused).
    ///
    /// Refuses an unknown payload (422) and a push over 4096 bytes (422).
    public func create(for recipient: String, draft: NotificationDraft, defaultImage: String,
                       addressing: DeliveryAddressing = .perDevice, now: Date = Date()) async throws -> CreatedNotification {
        let message = draft.message ?? NotificationDraft.defaultMessage
        let richType = draft.richType ?? NotificationDraft.defaultRichType
        let payloadKey = draft.payload ?? defaultImage
        guard !richType.isEmpty, richType.utf8.count <= 64 else {
            throw CoreError(.unprocessable, "richType must be 1 to 64 bytes")
        }
        return try await database.writeWithoutTransaction { db in
            var created: CreatedNotification?
            try db.inTransaction(.immediate) {
                guard let media = try MediaIndex.resolve(db, payloadKey) else {
                    let hint = draft.payload == nil
                        ? "the default image '\(payloadKey)' is not in the media store; add it with `richpush media add --name \(payloadKey) FILE`"
                        : "payload '\(payloadKey)' is not a stored media id or name; upload it with POST /api/media first"
                    throw CoreError(.unprocessable, hint)
                }
                try db.execute(
                    sql: "INSERT INTO notifications (recipient, message, richType, payload, push, createdAt) VALUES (?, ?, ?, ?, x'', ?)",
                    arguments: [recipient, message, richType, media.id.hex, now.timeIntervalSince1970])
                let id = db.lastInsertedRowID
                let push = SilentPush(id: id, message: message, richType: richType).encoded()
                guard push.count <= SilentPush.maxBytes else {
                    throw CoreError(.unprocessable, "the silent push would be \(push.count) bytes, over APNs' limit of \(SilentPush.maxBytes); shorten the message")
                }
                try db.execute(sql: "UPDATE notifications SET push = ? WHERE id = ?", arguments: [push, id])
                try MediaIndex.addReference(db, id: media.id, owner: "notification:\(id)", now: now)
                var targets: [(registration: String?, target: String)] = []
                switch addressing {
                case .perDevice:
                    targets = try RegistrationStore.registrations(db, username: recipient).compactMap { r in
                        r.handle.map { (r.id, $0) }
                    }
                case .perUserTag:
                    targets = [(nil, "username:\(recipient)")]
                }
                for target in targets {
                    try db.execute(
                        sql: """
                            INSERT INTO deliveries (notificationId, registrationId, target, state, pushId, nextAttemptAt, createdAt, updatedAt)
                            VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)
                            """,
                        arguments: [id, target.registration, target.target, UUID().uuidString, now.timeIntervalSince1970,
                                    now.timeIntervalSince1970, now.timeIntervalSince1970])
                }
                let notification = RichNotification(id: id, recipient: recipient, message: message, richType: richType,
                                                    payload: media.id, read: false, createdAt: now)
                created = CreatedNotification(notification: notification, push: push, deliveries: targets.count)
                return .commit
            }
            return created!
        }
    }

    /// `recipient`'s notifications, newest first.
    public func list(for recipient: String, limit: Int = 100, before: Int64? = nil) async throws -> [RichNotification] {
        try await database.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM notifications WHERE recipient = ? AND id < ? ORDER BY id DESC LIMIT ?",
                arguments: [recipient, before ?? Int64.max, limit]
            ).compactMap(Self.notification)
        }
    }

    /// Notification `id` when `recipient` is its recipient; nil otherwise (the caller answers 404 either way).
    public func find(id: Int64, for recipient: String) async throws -> RichNotification? {
        try await database.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM notifications WHERE id = ? AND recipient = ?", arguments: [id, recipient])
                .flatMap(Self.notification)
        }
    }

    /// Marks notification `id` read (once; later calls change nothing).
    public func markRead(id: Int64, now: Date = Date()) async throws {
        try await database.write { db in
            try db.execute(sql: "UPDATE notifications SET read = 1, readAt = ? WHERE id = ? AND read = 0",
                           arguments: [now.timeIntervalSince1970, id])
        }
    }

    static func notification(_ row: Row) -> RichNotification? {
        guard let payload = MediaID(row["payload"] as String) else { return nil }
        return RichNotification(id: row["id"], recipient: row["recipient"], message: row["message"], richType: row["richType"],
                                payload: payload, read: row["read"], createdAt: Date(timeIntervalSince1970: row["createdAt"]))
    }
}
