import Foundation
import SQLEngine

/// What a change of sent content asks for (docs/api.md#change-or-take-back-what-was-sent): each
/// field left nil is kept as it is.
public struct ContentChange: Sendable, Equatable {
    /// The new title; empty removes it.
    public var title: String?
    public var message: String?
    /// A media id or name.
    public var payload: String?
    /// A campaign's content per locale, replacing all of it (a notification has none).
    public var locales: [String: LocalizedContent]?
    /// The platform options, replacing them whole (the badge stays unless `badge` is given).
    public var options: PushOptions?
    public var badge: PushOptions.Badge?
    /// Devices that already showed it alert again (sound, interruption level as the options
    /// say) instead of replacing it quietly.
    public var alertAgain: Bool

    /// Creates a change.
    public init(title: String? = nil, message: String? = nil, payload: String? = nil, locales: [String: LocalizedContent]? = nil,
                options: PushOptions? = nil, badge: PushOptions.Badge? = nil, alertAgain: Bool = false) {
        self.title = title
        self.message = message
        self.payload = payload
        self.locales = locales
        self.options = options
        self.badge = badge
        self.alertAgain = alertAgain
    }

    /// Whether it changes nothing.
    public var isEmpty: Bool { title == nil && message == nil && payload == nil && locales == nil && options == nil && badge == nil }

    /// `draft` with this change's fields in place of its own.
    func applied(to draft: NotificationDraft) -> NotificationDraft {
        var draft = draft
        if let title { draft.title = title.isEmpty ? nil : title }
        if let message { draft.message = message }
        if let payload { draft.payload = payload }
        if var options {
            options.badge = draft.options.badge
            draft.options = options
        }
        if let badge { draft.options.badge = badge }
        return draft
    }
}

/// What a change did.
public struct ChangeOutcome: Sendable, Equatable {
    /// Notifications (inbox entries) that now show the new content.
    public var notifications = 0
    /// Pushes not yet sent, which go out with it.
    public var pending = 0
    /// Devices that got it and get a replacement, by platform (`apns`, `fcm`, `web`, `hub`).
    public var replacements: [String: Int] = [:]
    /// The notifications whose payload image changed: every node's index forgets them.
    public var repointed: [Int64] = []

    /// Creates an outcome.
    public init() {}
}

/// What a retraction did.
public struct RetractOutcome: Sendable, Equatable {
    /// Notifications removed from their inboxes.
    public var inboxes = 0
    /// Pushes not yet sent, dropped.
    public var cancelled = 0
    /// Background pushes (a browser's: a replacing notification) queued or coalesced, by platform.
    public var retractPushes: [String: Int] = [:]
    /// The notifications taken back.
    public var retracted: [Int64] = []

    /// Creates an outcome.
    public init() {}
}

/// Changing and taking back what was sent (docs/api.md#change-or-take-back-what-was-sent), for a
/// notification or a campaign's, inside the caller's transaction: what each device that got
/// it is sent next, as rows of the outbox.
enum Revisions {
    /// The text a browser shows in place of a notification taken back, unless the sender gave one.
    static let defaultRetractedText = "This message was withdrawn"
    /// The longest retracted text, in characters.
    static let maxRetractedText = 256
    /// Background pushes a device is sent in an hour at most (Apple asks for no more than two or
    /// three): a retraction past them is coalesced with the next one.
    static let backgroundPerHour = 2

    /// A retracted text as given (trimmed, 1 to 256 characters), or the default.
    static func retractedText(_ given: String?) throws -> String {
        guard let given else { return defaultRetractedText }
        let text = given.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, text.unicodeScalars.count <= maxRetractedText else {
            throw CoreError(.invalid, "retractedText must be 1 to \(maxRetractedText) characters")
        }
        return text
    }

    /// A device that a notification being revised went to (its notification and target), as
    /// the revision reads its outbox rows.
    private struct Device {
        var notification: Int64
        var campaign: Int64?
        var registration: String?
        var target: String
        var platform: String?
        var app: String?
        /// A row of it waits to be sent (it will carry what the notification says then): the
        /// notification's own push, or a revision queued before.
        var waiting: Waiting?
        /// A push of it reached the device or is on its way (sent, or handed to a push service
        /// under a lease that has not lapsed).
        var reached = false
        /// When the last lease of a push on its way ends; nil when none is.
        var leaseEnd: Double?

        enum Waiting { case original, revision }

        /// The platform its counts are kept under.
        var countedAs: String { platform ?? (registration == nil ? "hub" : "apns") }

        /// A pending outbox row of `kind` to this device, for notification `notification`, due at
        /// `due`: at once, or, while a push to it is on its way, once that push is recorded
        /// (`waitsForInFlight`).
        func row(_ kind: PushKind, due: Double, now: Double, extra: String? = nil) -> [SQLValue] {
            let values: [any SQLValueConvertible] = [notification, campaign, registration, target, platform, app, RandomUUIDs.string(),
                                                     max(due, leaseEnd.map { $0 + 1 } ?? due), due, now, now, kind.stored,
                                                     leaseEnd == nil ? nil : waitsForInFlight, extra]
            return values.map(\.sqlValue)
        }
    }

    /// The devices notifications `ids` went to, from their outbox rows that are not retractions.
    private static func devices(_ db: SQLConnection, _ ids: [Int64], now: Double) throws -> [Device] {
        struct Key: Hashable { var notification: Int64; var target: String }
        var order: [Key] = []
        var found: [Key: Device] = [:]
        if db.dialect == .postgres {
            // The pushes in flight are locked first, in id order: the outbox's record of one
            // either committed before (it is read as sent below) or waits for this transaction,
            // and then sees the revision waiting for it and releases it (`OutboxStore.releaseRevisions`).
            // Unlocked, a record committed between this read and this commit would release
            // nothing, and the revision would wait for the lease to end.
            // Runs before rows, the order in which recording sends locks them.
            try OutboxRuns.lockInFlight(db, notifications: ids, now: now)
            for chunk in ids.sqlBatches() {
                _ = try db.fetchAll(sql: """
                    SELECT id FROM deliveries WHERE \(db.idIn("notificationId")) AND state = 'pending' AND leaseTag IS NOT NULL AND \(OutboxStore.leaseEnd) > ?
                    ORDER BY id FOR UPDATE
                    """, arguments: [db.idList(chunk), now])
            }
        }
        for chunk in ids.sqlBatches() {
            for row in try db.fetchAll(sql: """
                SELECT notificationId, campaignId, registrationId, target, platform, app, state, kind, leaseTag, \(OutboxStore.leaseEnd) AS leaseEnd FROM deliveries
                WHERE \(db.idIn("notificationId")) AND state IN ('pending', 'sent') AND (kind IS NULL OR kind <> 'retract') ORDER BY id
                """, arguments: [db.idList(chunk)]) {
                let key = Key(notification: row["notificationId"], target: row["target"])
                if found[key] == nil { order.append(key) }
                var device = found[key] ?? Device(notification: key.notification, campaign: row["campaignId"], registration: row["registrationId"],
                                                  target: key.target, platform: row["platform"], app: row["app"])
                let next: Double = row["leaseEnd"]
                if (row["state"] as String) == "sent" {
                    device.reached = true
                } else if (row["leaseTag"] as Int64?) != nil, next > now {
                    device.reached = true
                    device.leaseEnd = max(device.leaseEnd ?? next, next)
                } else {
                    device.waiting = (row["kind"] as String?) == nil ? .original : .revision
                }
                found[key] = device
            }
            // A campaign's pushes in runs (docs/design/outbox.md#runs): sent, in flight, or waiting.
            for push in try OutboxRuns.pushes(db, notifications: Array(chunk)) {
                let sent: Bool = push["sent"], settled: Bool = push["settled"]
                guard sent || (!settled && push["state"] as String == "pending") else { continue }
                let key = Key(notification: push["notificationId"], target: push["target"])
                if found[key] == nil { order.append(key) }
                var device = found[key] ?? Device(notification: key.notification, campaign: push["campaignId"], registration: push["registrationId"],
                                                  target: key.target, platform: push["platform"], app: push["app"])
                let until = (push["leaseUntil"] as Double?) ?? 0
                if sent {
                    device.reached = true
                } else if (push["leaseTag"] as Int64?) != nil, until > now {
                    device.reached = true
                    device.leaseEnd = max(device.leaseEnd ?? until, until)
                } else {
                    device.waiting = .original
                }
                found[key] = device
            }
        }
        return order.map { found[$0]! }
    }

    /// Marks the campaigns of notifications `ids` revised (`campaigns.revisedAt`, once): their
    /// replacements and retractions are pushes beyond those queued, and their pushes taken back
    /// leave the outbox uncounted, so their counters no longer say what is left to send.
    private static func markCampaignsRevised(_ db: SQLConnection, _ ids: [Int64]) throws {
        for chunk in ids.sqlBatches() {
            try db.execute(sql: """
                UPDATE campaigns SET revisedAt = ? WHERE revisedAt IS NULL
                    AND id IN (SELECT campaignId FROM notifications WHERE \(db.idIn("id")) AND campaignId IS NOT NULL)
                """, arguments: [db.now, db.idList(chunk)])
        }
    }

    /// Queues, for each device of notifications `ids` (just rewritten) that got them, a
    /// replacement under the same collapse id, tag and Topic: quiet unless `alertAgain`. A device
    /// whose push waits to be sent gets the new content with it, and nothing more; one whose
    /// push is on its way now gets the replacement once that push is recorded.
    static func replace(_ db: SQLConnection, _ ids: [Int64], alertAgain: Bool, into outcome: inout ChangeOutcome) throws {
        let now = db.now
        try markCampaignsRevised(db, ids)
        var rows: [[SQLValue]] = []
        for device in try devices(db, ids, now: now) {
            switch device.waiting {
            case .original?: outcome.pending += 1
            case .revision?: outcome.replacements[device.countedAs, default: 0] += 1 // it carries the new content
            case nil where device.reached:
                rows.append(device.row(.update(alertAgain: alertAgain), due: now, now: now))
                outcome.replacements[device.countedAs, default: 0] += 1
            case nil: break
            }
        }
        try insert(db, rows)
    }

    /// Takes notifications `ids` back: their pushes not yet sent are dropped, they leave their
    /// inboxes (every node's index forgets them, and their payload URLs answer 410), and each
    /// device that got one is sent a retraction: a browser a notification showing `text` under
    /// the same Topic; any other a background push, at most `backgroundPerHour` an hour per
    /// device, a retraction past them joining the device's next one (which waits for the hour).
    static func retract(_ db: SQLConnection, _ ids: [Int64], text: String, into outcome: inout RetractOutcome) throws {
        guard !ids.isEmpty else { return }
        let now = db.now
        try markCampaignsRevised(db, ids)
        // On PostgreSQL retractions take turns (a device's budget is read, then written).
        if db.dialect == .postgres { try db.execute(sql: "SELECT pg_advisory_xact_lock(7265701)") }
        // Runs before rows (docs/design/outbox.md#runs).
        outcome.cancelled += try OutboxRuns.drop(db, notifications: ids, now: now)
        for chunk in ids.sqlBatches() {
            outcome.cancelled += try Int64.fetchAll(db, sql: """
                DELETE FROM deliveries WHERE \(db.idIn("notificationId")) AND state = 'pending' AND (kind IS NULL OR kind <> 'retract')
                    AND (leaseTag IS NULL OR \(OutboxStore.leaseEnd) <= ?) RETURNING id
                """, arguments: [db.idList(chunk), now]).count
        }
        let reached = try devices(db, ids, now: now).filter(\.reached)
        var retracted: [Int64] = []
        for chunk in ids.sqlBatches() {
            retracted += try Int64.fetchAll(db, sql: "UPDATE notifications SET retractedAt = ? WHERE \(db.idIn("id")) AND retractedAt IS NULL RETURNING id",
                                            arguments: [now, db.idList(chunk)])
        }
        outcome.inboxes += retracted.count
        outcome.retracted += retracted
        try NotificationStore.recordRemovals(db, retracted.sorted())
        let taken = Set(retracted)
        let retraction = { (ids: [Int64]) in (kind: PushKind.retract(ids: ids, text: text), extra: RetractionExtra(ids: ids, text: text).stored) }
        var rows: [[SQLValue]] = []
        // Browsers: a visible notification each, no budget.
        var background: [Device] = []
        for device in reached where taken.contains(device.notification) {
            if device.platform == "web" {
                let (kind, extra) = retraction([device.notification])
                rows.append(device.row(kind, due: now, now: now, extra: extra))
                outcome.retractPushes["web", default: 0] += 1
            } else {
                background.append(device)
            }
        }
        // Each device's retractions of the last hour and those waiting, by due time.
        var recent: [String: [(id: Int64, due: Double, joinable: Bool, extra: String?)]] = [:]
        for chunk in Array(Set(background.map(\.target))).sorted().sqlBatches() {
            for found in try db.fetchAll(sql: """
                SELECT id, target, dueAt, state, leaseTag, extra FROM deliveries
                WHERE kind = 'retract' AND target IN (\(sqlPlaceholders(chunk.count))) AND dueAt > ?
                """, arguments: SQLArguments(chunk.map { $0 as any SQLValueConvertible } + [now - 3600])) {
                let due: Double = found["dueAt"]
                let joinable = (found["state"] as String) == "pending" && (found["leaseTag"] as Int64?) == nil && due > now
                recent[found["target"], default: []].append((found["id"], due, joinable, found["extra"]))
            }
        }
        for device in background {
            var earlier = recent[device.target, default: []].sorted { $0.due < $1.due }
            outcome.retractPushes[device.countedAs, default: 0] += 1
            if earlier.count >= backgroundPerHour, let waiting = earlier.last(where: \.joinable),
               var extra = RetractionExtra(stored: waiting.extra) {
                // Past the budget, and a retraction waits for the hour: this one goes with it.
                extra.ids.append(device.notification)
                try db.execute(sql: "UPDATE deliveries SET extra = ?, updatedAt = ? WHERE id = ?", arguments: [extra.stored, now, waiting.id])
                recent[device.target] = earlier.map { $0.id == waiting.id ? ($0.id, $0.due, $0.joinable, extra.stored) : $0 }
                continue
            }
            // Within the budget now, or at the hour after the last but one.
            let at = earlier.count >= backgroundPerHour ? max(now, earlier[earlier.count - backgroundPerHour].due + 3600) : now
            let (kind, extra) = retraction([device.notification])
            let inserted = try Int64.fetchOne(db, sql: "INSERT INTO deliveries (\(columns)) VALUES \(tuple) RETURNING id",
                                              arguments: SQLArguments(values: device.row(kind, due: at, now: now, extra: extra))) ?? 0
            earlier.append((inserted, at, at > now, extra))
            recent[device.target] = earlier
        }
        try insert(db, rows)
        if rows.isEmpty && !background.isEmpty { try db.notify(DataChange.outbox.rawValue) }
    }

    /// The reason a revision waits with while a push of its notification to the same device is
    /// in flight: it goes once that push is recorded (`OutboxStore.releaseRevisions`), or when
    /// the push's lease ends (its holder died), never before it (a retraction that overtook its
    /// alert would leave the alert shown).
    static let waitsForInFlight = "waits for the push before it, in flight"

    /// The columns of a revision's outbox row, and a row's placeholders.
    private static let columns = "notificationId, campaignId, registrationId, target, platform, app, state, pushId, nextAttemptAt, dueAt, createdAt, updatedAt, kind, reason, extra"
    private static let tuple = "(?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)"
    /// `columns` one by one, and where `state` is among them (what `tuple` writes as a literal).
    private static let columnNames = columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    private static let stateColumn = columnNames.firstIndex(of: "state")!

    /// Inserts pending outbox rows, each the values of `columns` but `state`.
    private static func insert(_ db: SQLConnection, _ rows: [[SQLValue]]) throws {
        guard !rows.isEmpty else { return }
        try db.insertRows(into: "deliveries", columns: columnNames, rows.map { row in
            var row = row
            row.insert(.text("pending"), at: stateColumn)
            return row
        })
        try db.notify(DataChange.outbox.rawValue)
    }
}
