import Foundation
import SQLEngine
import MediaStore

#if canImport(Glibc)
import Glibc
#endif

/// Who a campaign is for (SPEC §10).
public enum Audience: Sendable, Equatable {
    /// Every account.
    case all
    /// These accounts (sorted, without duplicates).
    case users([String])
    /// Every device whose registration tags match a Notification Hubs tag expression; each
    /// device's owner is a recipient.
    case tags(TagExpression)

    /// Parses the JSON form `{"all":true}`, `{"users":[…]}` or `{"tags":"<expression>"}`.
    public init(json object: [String: Any]) throws {
        let keys = Set(object.keys)
        guard keys.count == 1, let key = keys.first else {
            throw CoreError(.invalid, "audience must have exactly one of \"all\", \"users\" or \"tags\"")
        }
        switch (key, object[key]) {
        case ("all", let flag as Bool) where flag:
            self = .all
        case ("users", let names as [Any]):
            guard let strings = names as? [String] else { throw CoreError(.invalid, "audience.users must be an array of user names") }
            self = try .listing(strings)
        case ("tags", let text as String):
            self = .tags(try TagExpression(text))
        default:
            throw CoreError(.invalid, "audience must be {\"all\":true}, {\"users\":[names]} or {\"tags\":\"expression\"}")
        }
    }

    /// A list of users, checked, sorted and without duplicates.
    public static func listing(_ names: [String]) throws -> Audience {
        guard !names.isEmpty else { throw CoreError(.invalid, "audience.users is empty") }
        guard names.count <= Campaign.maxListedUsers else {
            throw CoreError(.invalid, "audience.users lists \(names.count) users, at most \(Campaign.maxListedUsers); use a tag expression or {\"all\":true}")
        }
        for name in names { try UserStore.validateName(name) }
        return .users(Array(Set(names)).sorted())
    }

    /// The stored form.
    var stored: String {
        let object: [String: Any] = switch self {
        case .all: ["all": true]
        case .users(let names): ["users": names]
        case .tags(let expression): ["tags": expression.text]
        }
        return String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    init(stored: String) throws {
        guard let object = try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any] else {
            throw CoreError(.invalid, "unreadable audience")
        }
        if let names = object["users"] as? [String] {
            self = .users(names) // stored lists were checked and sorted on the way in
        } else {
            try self.init(json: object)
        }
    }

    /// A short description for people (`all`, `3 users`, `tags: a && b`).
    public var summary: String {
        switch self {
        case .all: "all"
        case .users(let names): names.count == 1 ? "user \(names[0])" : "\(names.count) users"
        case .tags(let expression): "tags: \(expression.text)"
        }
    }
}

/// What an admin asks for when sending a campaign.
public struct CampaignDraft: Sendable {
    public var audience: Audience
    /// Message, title, rich type, payload and mode, as for a single notification.
    public var content: NotificationDraft
    /// The app whose devices it goes to (SPEC §18); nil for every app the audience has devices in.
    public var app: String?

    /// Creates a draft; the mode defaults to `alert` (SPEC §10).
    public init(audience: Audience, content: NotificationDraft, app: String? = nil) {
        self.audience = audience
        self.content = content
        self.app = app
    }
}

/// A campaign and how far it got.
public struct Campaign: Sendable, Equatable {
    /// `sending` until every recipient is queued and no push is pending, then `done`.
    public enum Status: String, Sendable, Codable, CaseIterable { case sending, done }

    public var id: Int64
    public var audience: Audience
    public var message: String
    public var title: String?
    public var richType: String
    public var payload: MediaID
    public var mode: PushMode
    public var createdBy: String
    public var createdAt: Date
    /// Recipients and devices queued so far (all of them once `queued`).
    public var recipients: Int
    public var devices: Int
    /// Whether every recipient has been queued.
    public var queued: Bool
    /// The app whose devices it goes to; nil for every app.
    public var app: String? = nil

    /// The most users an audience may list by name.
    public static let maxListedUsers = 10_000
}

/// Delivery and read counts of a campaign (SPEC §10).
public struct CampaignProgress: Sendable, Equatable {
    public var campaign: Campaign
    public var pending: Int
    public var sent: Int
    public var failed: Int
    /// Recipients who fetched the payload.
    public var fetched: Int

    /// `done` once every recipient is queued and nothing is pending.
    public var status: Campaign.Status { campaign.queued && pending == 0 ? .done : .sending }
}

/// Campaigns: one rich message to many users.
///
/// A campaign is queued in batches of recipients, each batch one transaction that also moves
/// the campaign's cursor, so memory does not grow with the audience and a process that dies
/// half-way leaves a campaign that `resumeUnfinished` completes, without queueing anyone twice.
public struct CampaignStore: Sendable {
    /// The database.
    let database: SQLDatabase
    /// Signs payload URLs for alert pushes.
    public let links: PayloadLinks?
    /// The media name used when a campaign names no payload.
    public let defaultImage: String
    /// Recipients per transaction.
    public var batchSize = 500
    /// Called with each batch's notifications once it is committed (the server indexes them,
    /// so that recipients' first fetches need no database read).
    public var onQueued: (@Sendable ([QueuedNotification]) -> Void)?

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase, links: PayloadLinks?, defaultImage: String) {
        self.database = database
        self.links = links
        self.defaultImage = defaultImage
    }

    /// Records a campaign, refusing bad content (422) and unknown listed users (400), and
    /// claims it for queueing by this process. Nothing is queued yet: call `queue`.
    public func create(_ draft: CampaignDraft, by admin: String, now: Date = Date()) async throws -> Campaign {
        let links = self.links, defaultImage = self.defaultImage
        return try await database.write { db in
            let writer = try NotificationWriter(db, draft: draft.content, defaultImage: defaultImage, links: links, now: now)
            try writer.checkFitsEveryPlatform(db)
            if case .users(let names) = draft.audience {
                var unknown: [String] = []
                for chunk in names.sqlBatches() {
                    let known = Set(try String.fetchAll(db, sql: "SELECT name FROM users WHERE name IN (\(sqlPlaceholders(chunk.count)))",
                                                        arguments: SQLArguments(Array(chunk))))
                    unknown += chunk.filter { !known.contains($0) }
                }
                if !unknown.isEmpty {
                    let shown = unknown.prefix(10).joined(separator: ", ") + (unknown.count > 10 ? " and \(unknown.count - 10) more" : "")
                    throw CoreError(.unprocessable, "audience.users names \(unknown.count) unknown user(s): \(shown)")
                }
            }
            let inserted = try db.fetchOne(sql: """
                INSERT INTO campaigns (audience, message, title, richType, payload, mode, createdBy, queuedBy, createdAt, app)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """, arguments: [draft.audience.stored, writer.message, writer.title, writer.richType, writer.media.id.hex,
                                 writer.mode.rawValue, admin, Int(getpid()), now.timeIntervalSince1970, draft.app])
            let id: Int64 = inserted!["id"]
            try MediaIndex.addReference(db, id: writer.media.id, owner: "campaign:\(id)", now: now)
            return Campaign(id: id, audience: draft.audience, message: writer.message, title: writer.title, richType: writer.richType,
                            payload: writer.media.id, mode: writer.mode, createdBy: admin, createdAt: now, recipients: 0, devices: 0, queued: false,
                            app: draft.app)
        }
    }

    /// Queues the rest of campaign `id`, a batch per transaction; `batchQueued` is called after
    /// each commit (to wake the dispatcher). Returns the campaign once everyone is queued.
    /// With `maxBatches`, stops after that many batches (the campaign then says `queued == false`).
    public func queue(_ id: Int64, addressing: DeliveryAddressing, maxBatches: Int = .max,
                      batchQueued: @Sendable () -> Void = {}) async throws -> Campaign {
        var batches = 0
        while true {
            let (campaign, made) = try await queueBatch(id, addressing: addressing)
            if !made.isEmpty { onQueued?(made) }
            batches += 1
            batchQueued()
            if campaign.queued || batches >= maxBatches { return campaign }
        }
    }

    /// Queues campaigns left half-queued by processes that died; returns their ids.
    public func resumeUnfinished(addressing: DeliveryAddressing, batchQueued: @Sendable () -> Void = {}) async throws -> [Int64] {
        let pid = Int(getpid())
        let orphans = try await database.write { db -> [Int64] in
            let rows = try SQLRow.fetchAll(db, sql: "SELECT id, queuedBy FROM campaigns WHERE queued = 0")
            let ids: [Int64] = rows.compactMap { row in
                let holder: Int? = row["queuedBy"]
                if let holder, holder == pid || kill(pid_t(holder), 0) == 0 || errno == EPERM { return nil }
                return row["id"]
            }
            for id in ids { try db.execute(sql: "UPDATE campaigns SET queuedBy = ? WHERE id = ?", arguments: [pid, id]) }
            return ids
        }
        for id in orphans { _ = try await queue(id, addressing: addressing, batchQueued: batchQueued) }
        return orphans
    }

    /// One batch: the next recipients after the cursor, their notifications and deliveries,
    /// and the moved cursor, in one transaction.
    private func queueBatch(_ id: Int64, addressing: DeliveryAddressing) async throws -> (Campaign, [QueuedNotification]) {
        let links = self.links, batchSize = self.batchSize, defaultImage = self.defaultImage, indexed = onQueued != nil
        return try await database.write { db -> (Campaign, [QueuedNotification]) in
            var made: [QueuedNotification] = []
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ?", arguments: [id]) else {
                throw CoreError(.notFound, "no campaign \(id)")
            }
            var campaign = try Self.campaign(row)
            guard !campaign.queued else { return (campaign, []) }
            let cursor: String = row["cursor"] ?? ""
            let now = Date()
            let draft = NotificationDraft(message: campaign.message, richType: campaign.richType, payload: campaign.payload.hex,
                                          title: campaign.title, mode: campaign.mode)
            let writer = try NotificationWriter(db, draft: draft, defaultImage: defaultImage, links: links, campaignId: id, now: now)
            let (names, nextCursor, exhausted) = try Self.nextRecipients(db, campaign.audience, after: cursor, limit: batchSize)
            let devices = try Self.devices(db, of: names, audience: campaign.audience, app: campaign.app)
            var recipients: [(name: String, targets: [PushTarget])] = []
            var queuedDevices = 0
            for name in names {
                let owned = devices[name] ?? []
                if case .tags = campaign.audience, owned.isEmpty { continue }
                // A tag expression picks devices: those go by device, a hub's too (to its installation).
                let byDevice = if case .tags = campaign.audience { true } else { false }
                let targets = addressing.targets(recipient: name, devices: owned, app: campaign.app, byDevice: byDevice)
                recipients.append((name, targets))
                queuedDevices += owned.count
            }
            let created = try writer.insert(db, recipients: recipients)
            if indexed {
                made = created.map { QueuedNotification(id: $0.notification.id, recipient: $0.notification.recipient, payload: writer.media.id) }
            }
            let queuedRecipients = created.count
            campaign.recipients += queuedRecipients
            campaign.devices += queuedDevices
            campaign.queued = exhausted
            try db.execute(sql: "UPDATE campaigns SET recipients = ?, devices = ?, cursor = ?, queued = ? WHERE id = ?",
                           arguments: [campaign.recipients, campaign.devices, nextCursor, exhausted, id])
            return (campaign, made)
        }
    }

    /// How many users and devices a campaign to `audience` would reach now (what `queue` would
    /// queue), read a thousand users at a time: the console's "will reach" before sending.
    public func reach(_ audience: Audience, app: String? = nil) async throws -> (users: Int, devices: Int) {
        try await database.read { db in
            if case .all = audience {
                // Two counts, not a walk: what the console asks as often as an admin types.
                let users = try Int.fetchOne(db, sql: "SELECT count(*) FROM users") ?? 0
                let devices = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM registrations r JOIN users u ON u.name = r.username WHERE r.handle IS NOT NULL \(app == nil ? "" : "AND r.app = ?")
                    """, arguments: SQLArguments(app.map { [$0] } ?? [])) ?? 0
                return (users, devices)
            }
            var cursor = "", users = 0, devices = 0
            while true {
                let (names, next, exhausted) = try Self.nextRecipients(db, audience, after: cursor, limit: 1000)
                let owned = try Self.devices(db, of: names, audience: audience, app: app)
                for name in names {
                    let count = owned[name]?.count ?? 0
                    if case .tags = audience, count == 0 { continue }
                    users += 1
                    devices += count
                }
                if exhausted { return (users, devices) }
                cursor = next
            }
        }
    }

    /// Up to `limit` recipient names after `cursor`, in name order; the cursor after them; and
    /// whether none are left.
    private static func nextRecipients(_ db: SQLConnection, _ audience: Audience, after cursor: String, limit: Int) throws
        -> (names: [String], cursor: String, exhausted: Bool) {
        let names: [String]
        switch audience {
        case .all:
            names = try String.fetchAll(db, sql: "SELECT name FROM users WHERE name > ? ORDER BY name LIMIT ?", arguments: [cursor, limit])
        case .users(let listed):
            let start = listed.firstIndex { $0 > cursor } ?? listed.count
            let slice = Array(listed[start..<min(start + limit, listed.count)])
            // Accounts removed since the campaign was made are skipped.
            let existing = Set(try String.fetchAll(db, sql: "SELECT name FROM users WHERE name IN (\(sqlPlaceholders(slice.count)))",
                                                   arguments: SQLArguments(slice)))
            return (slice.filter(existing.contains), slice.last ?? cursor, start + slice.count >= listed.count)
        case .tags:
            names = try String.fetchAll(db, sql: """
                SELECT DISTINCT r.username FROM registrations r JOIN users u ON u.name = r.username
                WHERE r.username > ? AND r.handle IS NOT NULL ORDER BY r.username LIMIT ?
                """, arguments: [cursor, limit])
        }
        return (names, names.last ?? cursor, names.count < limit)
    }

    /// The device targets of each named user: every device, or those matching the tag expression.
    private static func devices(_ db: SQLConnection, of names: [String], audience: Audience, app: String?) throws -> [String: [PushTarget]] {
        guard let first = names.first, let last = names.last else { return [:] }
        let wanted = Set(names)
        var devices: [String: [PushTarget]] = [:]
        // Listed users are sparse (two names can span the whole table): by name. The others
        // come in name order, a contiguous range.
        let (condition, arguments): (String, [String]) = if case .users = audience {
            ("username IN (\(sqlPlaceholders(names.count)))", names)
        } else {
            ("username BETWEEN ? AND ?", [first, last])
        }
        try db.forEach(sql: """
            SELECT id, username, handle, platform, tags, app FROM registrations
            WHERE \(condition) AND handle IS NOT NULL ORDER BY username, createdAt
            """, arguments: SQLArguments(arguments)) { row in
            let name: String = row["username"]
            guard wanted.contains(name), app == nil || (row["app"] as String) == app else { return }
            if case .tags(let expression) = audience {
                let tags = RegistrationStore.decodeTags(row["tags"])
                guard expression.matches(tags) else { return }
            }
            devices[name, default: []].append(PushTarget(registration: row["id"], target: row["handle"], platform: row["platform"], app: row["app"]))
        }
        return devices
    }

    /// Campaign `id` with its counts, or nil.
    public func progress(_ id: Int64) async throws -> CampaignProgress? {
        try await database.read { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ?", arguments: [id]) else { return nil }
            return try Self.progress(db, campaign: try Self.campaign(row))
        }
    }

    /// The newest campaigns with their counts, newest first.
    /// With `app`, only that app's campaigns.
    public func list(limit: Int = 50, before: Int64? = nil, app: String? = nil) async throws -> [CampaignProgress] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT * FROM campaigns WHERE id < ? \(app == nil ? "" : "AND app = ?") ORDER BY id DESC LIMIT ?",
                                arguments: SQLArguments([before ?? Int64.max] + (app.map { [$0 as any SQLValueConvertible] } ?? []) + [limit]))
                .map { try Self.progress(db, campaign: try Self.campaign($0)) }
        }
    }

    private static func progress(_ db: SQLConnection, campaign: Campaign) throws -> CampaignProgress {
        var counts: [String: Int] = [:]
        for row in try SQLRow.fetchAll(db, sql: "SELECT state, count(*) AS n FROM deliveries WHERE campaignId = ? GROUP BY state", arguments: [campaign.id]) {
            counts[row["state"]] = row["n"]
        }
        let fetched = try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE campaignId = ? AND read = 1", arguments: [campaign.id]) ?? 0
        return CampaignProgress(campaign: campaign, pending: counts["pending"] ?? 0, sent: counts["sent"] ?? 0, failed: counts["failed"] ?? 0,
                                fetched: fetched)
    }

    private static func campaign(_ row: SQLRow) throws -> Campaign {
        guard let payload = MediaID(row["payload"] as String) else { throw CoreError(.notFound, "campaign payload unreadable") }
        return Campaign(id: row["id"], audience: try Audience(stored: row["audience"]), message: row["message"], title: row["title"],
                        richType: row["richType"], payload: payload, mode: PushMode(rawValue: row["mode"]) ?? .alert,
                        createdBy: row["createdBy"], createdAt: Date(timeIntervalSince1970: row["createdAt"]),
                        recipients: row["recipients"], devices: row["devices"], queued: row["queued"], app: row["app"])
    }
}
