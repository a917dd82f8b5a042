import Foundation
import MediaStore
import SQLEngine

/// The content every recipient of a notification or campaign shares, checked once; writes
/// each recipient's notification, push and outbox rows inside the caller's transaction.
struct NotificationWriter {
    /// What a writer does with a push over its platform's size.
    enum Oversize: Sendable, Equatable {
        /// The write is refused (422) and nothing is stored: a notification, and a campaign's
        /// words as written, which are checked before anyone is queued.
        case refuse
        /// Each push over its platform's size is recorded failed with `reason` (counted failed,
        /// with its `failed` event) and the others are queued: a campaign's personalized words
        /// (docs/api.md#templates-and-localization-keys), whose size is known only per recipient.
        case fail(reason: String)
    }

    private(set) var message: String
    private(set) var title: String?
    let richType: String
    let mode: PushMode
    private(set) var options: PushOptions
    let media: MediaItem
    let links: PayloadLinks?
    let campaignId: Int64?
    let now: Date
    /// What is done with a push over its platform's size.
    var oversize = Oversize.refuse
    /// The alert push's JSON around each recipient's id and payload URL (alert mode), made once
    /// for these words.
    private var alertTemplate: AlertPush.Template?
    /// Signs each recipient's payload URL, with what every URL of this image shares looked up once.
    private let signer: PayloadLinks.Signer?

    /// One recipient for `insert(_:_:pace:)`: the writer of their words, their name, their targets.
    typealias Entry = (writer: NotificationWriter, name: String, targets: [PushTarget])

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
        signer = links?.signer(payload: media.id, now: now)
        alertTemplate = Self.template(mode: mode, title: title, message: message, richType: richType, options: options)
    }

    private static func template(mode: PushMode, title: String?, message: String, richType: String, options: PushOptions) -> AlertPush.Template? {
        mode == .alert ? AlertPush.Template(title: title, message: message, richType: richType, options: options) : nil
    }

    /// This writer with other words: a recipient's rendered templates
    /// (docs/api.md#templates-and-localization-keys). The payload and what was checked once are
    /// kept, without a query. The words are not checked against the options' rules again (their
    /// templates were, when the campaign was made): a recipient's words that came out too long
    /// are caught by the push's size, under `oversize`.
    func reworded(title: String?, message: String, options: PushOptions) -> NotificationWriter {
        var copy = self
        copy.title = title.flatMap { $0.isEmpty ? nil : $0 }
        copy.message = message
        copy.options = options
        copy.alertTemplate = Self.template(mode: mode, title: copy.title, message: message, richType: richType, options: options)
        return copy
    }

    /// Refuses (422) content that would not fit a push with the longest id, to APNs and, when any
    /// browser is registered, to Web Push: a campaign checks this once, before it queues anyone,
    /// so no batch is refused halfway.
    func checkFitsEveryPlatform(_ db: SQLConnection) throws {
        let browsers = try Int.fetchOne(db, sql: "SELECT 1 FROM registrations WHERE platform = 'web' LIMIT 1") != nil
        let made = make(id: .max, targets: browsers ? [PushTarget(registration: nil, target: "", platform: "web")] : [])
        if let refusal = Self.refusal(made) { throw refusal }
    }

    /// Inserts `recipient`'s notification with its push and one pending delivery per target.
    /// Throws 422 when the push would exceed APNs' 4096 bytes, unless `oversize` fails it instead.
    func insert(_ db: SQLConnection, recipient: String, targets: [PushTarget], pace: Pace? = nil) throws -> CreatedNotification {
        let time = now.timeIntervalSince1970
        // A paced campaign's pushes are due at their turns (docs/api.md#options-badges-and-paced-sends), and its inbox entry shows
        // from the first of them (`Notifications.visibleNow`), not before; a push's life counts
        // from its turn. (A push failed for its size keeps its turn: a gap in the pace.)
        let dues = targets.map { _ in pace?.next() ?? time }
        // Compiled once (a campaign on SQLite runs it per recipient).
        let inserted = try db.fetchAll(sql: """
            INSERT INTO notifications (recipient, message, title, richType, payload, mode, campaignId, push, createdAt, options)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
            """, arguments: [recipient, message, title, richType, media.id.hex, mode.rawValue, campaignId, Data(), max(time, dues.min() ?? time),
                             options.stored], cached: true)
        let id: Int64 = inserted[0]["id"]
        let made = make(id: id, targets: targets)
        let failing = try failures(made, targets: targets)
        try db.execute(sql: "UPDATE notifications SET push = ?, richUrl = ? WHERE id = ?", arguments: [made.bytes, made.richUrl, id], cached: true)
        if failing.contains(where: { $0 == nil }) { try db.notify(DataChange.outbox.rawValue) }
        var happenings: [Happening] = []
        for ((target, due), failure) in zip(zip(targets, dues), failing) {
            if let failure {
                try db.execute(sql: "INSERT INTO deliveries \(Self.failedColumns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               arguments: SQLArguments(values: failedRow(id: id, target: target, due: due, reason: failure)), cached: true)
                happenings.append(failed(id: id, recipient: recipient, target: target, reason: failure))
                continue
            }
            try db.execute(sql: """
                INSERT INTO deliveries (notificationId, campaignId, registrationId, target, platform, app, state, pushId, nextAttemptAt, dueAt, createdAt, updatedAt)
                VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)
                """, arguments: [id, campaignId, target.registration, target.target, target.platform, target.app, RandomUUIDs.string(),
                                 due, due, time, time],
                    cached: true)
        }
        if !happenings.isEmpty { try Insight.record(db, happenings, now: db.now) }
        return self.made(id: id, recipient: recipient, push: made.bytes, richUrl: made.richUrl, targets: targets)
    }

    /// Writes this writer's words, payload, options and push over notification `id`'s, stamped
    /// changed at `now` (docs/api.md#change-or-take-back-what-was-sent): its pushes not yet sent
    /// carry them, as its inbox entry does. `web`: some target of it is a browser, so the Web
    /// Push message must fit too. 422 when the push would not fit its platform. Returns its new
    /// payload URL.
    @discardableResult
    func rewrite(_ db: SQLConnection, id: Int64, web: Bool) throws -> String? {
        let made = make(id: id, targets: web ? [PushTarget(registration: nil, target: "", platform: "web")] : [])
        if let refusal = Self.refusal(made) { throw refusal }
        try db.execute(sql: """
            UPDATE notifications SET message = ?, title = ?, payload = ?, options = ?, push = ?, richUrl = ?, changedAt = ? WHERE id = ?
            """, arguments: [message, title, media.id.hex, options.stored, made.bytes, made.richUrl, now.timeIntervalSince1970, id], cached: true)
        return made.richUrl
    }

    /// `insert` for many recipients: the ids are taken first, so that each row is written once,
    /// whole, and the rows go in a few statements (`SQLConnection.insertRows`: 500 rows to one
    /// on SQLite, an array per column on PostgreSQL). One at a time, a notification was inserted,
    /// then updated with its push (which names its id), and its deliveries inserted: on
    /// PostgreSQL a round trip and a parse each; on SQLite the row written twice.
    func insert(_ db: SQLConnection, recipients: [(name: String, targets: [PushTarget])], pace: Pace? = nil) throws -> [CreatedNotification] {
        try Self.insert(db, recipients.map { (writer: self, name: $0.name, targets: $0.targets) }, pace: pace)
    }

    /// `insert(_:recipients:pace:)` where each recipient may have words of their own (a campaign's
    /// personalized ones, one writer each), in the same few statements.
    static func insert(_ db: SQLConnection, _ entries: [Entry], pace: Pace? = nil) throws -> [CreatedNotification] {
        guard entries.count > 1 else {
            return try entries.map { try $0.writer.insert(db, recipient: $0.name, targets: $0.targets, pace: pace) }
        }
        let ids: [Int64]
        if db.dialect == .postgres {
            // The sequence's name looked up once, not per id (per id, 4 µs of PostgreSQL's CPU a
            // push); the ids in one row, not a row each (each row is a message to decode).
            let list = try String.fetchOne(db, sql: """
                WITH s AS MATERIALIZED (SELECT pg_get_serial_sequence('notifications', 'id')::regclass AS seq)
                SELECT string_agg(nextval(s.seq)::text, ',') FROM s, generate_series(1, ?)
                """, arguments: [entries.count]) ?? ""
            ids = list.utf8.split(separator: UInt8(ascii: ",")).compactMap { Int64(Substring($0)) }
            guard ids.count == entries.count else {
                throw UnexpectedIDs(description: "PostgreSQL gave \(ids.count) notification ids for \(entries.count) notifications")
            }
        } else {
            // This transaction holds SQLite's write lock (BEGIN IMMEDIATE), so the ids after the
            // largest ever used (AUTOINCREMENT keeps it in sqlite_sequence: ids are never reused)
            // are this batch's; inserting them moves the sequence past them.
            let last = try Int64.fetchOne(db, sql: """
                SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'notifications'), 0),
                           COALESCE((SELECT max(id) FROM notifications), 0))
                """) ?? 0
            ids = (1...Int64(entries.count)).map { last + $0 }
        }
        // Every push's id (its apns-id), drawn together.
        var pushIDs = RandomUUIDs.strings(entries.reduce(0) { $0 + $1.targets.count }).makeIterator()
        var created: [CreatedNotification] = []
        var notificationRows: [[SQLValue]] = []
        var deliveryRows: [[SQLValue]] = []
        var failedRows: [[SQLValue]] = []
        var runPushes: [OutboxRuns.Push] = []
        // A campaign's first attempts, unpaced, go in runs where every holder alive reads them.
        let runs = pace == nil && entries.contains { $0.writer.campaignId != nil } ? try OutboxRuns.writable(db, now: db.now) : false
        var happenings: [Happening] = []
        // The options' JSON, made once for the recipients that share them (a campaign's all do).
        var storedOptions: (options: PushOptions, json: String?)?
        for (index, entry) in entries.enumerated() {
            let (writer, id) = (entry.writer, ids[index])
            if storedOptions?.options != writer.options { storedOptions = (writer.options, writer.options.stored) }
            let time = writer.now.timeIntervalSince1970
            let made = writer.make(id: id, targets: entry.targets)
            let failing = try writer.failures(made, targets: entry.targets)
            let dues = entry.targets.map { _ in pace?.next() ?? time }
            // Each value converted where its type is known (an array of `any SQLValueConvertible` boxes each one).
            notificationRows.append([id.sqlValue, entry.name.sqlValue, writer.message.sqlValue, writer.title.sqlValue, writer.richType.sqlValue,
                                     writer.media.id.hex.sqlValue, writer.mode.rawValue.sqlValue, writer.campaignId.sqlValue, made.bytes.sqlValue,
                                     made.richUrl.sqlValue, max(time, dues.min() ?? time).sqlValue, storedOptions?.json.sqlValue ?? .null])
            for ((target, due), failure) in zip(zip(entry.targets, dues), failing) {
                if let failure {
                    failedRows.append(writer.failedRow(id: id, target: target, due: due, reason: failure))
                    happenings.append(writer.failed(id: id, recipient: entry.name, target: target, reason: failure))
                    continue
                }
                if runs, let campaign = writer.campaignId, let registration = target.registration, let platform = target.platform {
                    runPushes.append(OutboxRuns.Push(notificationId: id, campaignId: campaign, registrationId: registration, target: target.target,
                                                     platform: platform, app: target.app, pushId: pushIDs.next() ?? RandomUUIDs.string(),
                                                     due: due, createdAt: time))
                    continue
                }
                deliveryRows.append([id.sqlValue, writer.campaignId.sqlValue, target.registration.sqlValue, target.target.sqlValue,
                                     target.platform.sqlValue, target.app.sqlValue, .text("pending"),
                                     (pushIDs.next() ?? RandomUUIDs.string()).sqlValue, due.sqlValue, due.sqlValue, time.sqlValue, time.sqlValue])
            }
            created.append(writer.made(id: id, recipient: entry.name, push: made.bytes, richUrl: made.richUrl, targets: entry.targets))
        }
        try db.insertRows(into: "notifications", columns: notificationColumns, notificationRows)
        try db.insertRows(into: "deliveries", columns: deliveryColumns, deliveryRows)
        try db.insertRows(into: "deliveries", columns: failedColumnList, failedRows)
        try OutboxRuns.insert(db, runPushes)
        if !deliveryRows.isEmpty || !runPushes.isEmpty { try db.notify(DataChange.outbox.rawValue) }
        if !happenings.isEmpty { try Insight.record(db, happenings, now: db.now) }
        return created
    }

    /// The columns of a batch's notifications, and of its pending deliveries.
    private static let notificationColumns = ["id", "recipient", "message", "title", "richType", "payload", "mode", "campaignId", "push",
                                              "richUrl", "createdAt", "options"]
    private static let deliveryColumns = ["notificationId", "campaignId", "registrationId", "target", "platform", "app", "state", "pushId",
                                          "nextAttemptAt", "dueAt", "createdAt", "updatedAt"]

    /// The columns of a delivery failed as it is queued: a pending one's, and its reason.
    private static let failedColumnList = ["notificationId", "campaignId", "registrationId", "target", "platform", "app", "state", "reason",
                                           "pushId", "nextAttemptAt", "dueAt", "createdAt", "updatedAt"]
    private static let failedColumns = "(" + failedColumnList.joined(separator: ", ") + ")"

    /// The values of `failedColumns` for notification `id`'s push to `target`.
    private func failedRow(id: Int64, target: PushTarget, due: Double, reason: String) -> [SQLValue] {
        let time = now.timeIntervalSince1970
        let values: [any SQLValueConvertible] = [id, campaignId, target.registration, target.target, target.platform, target.app, "failed", reason,
                                                 RandomUUIDs.string(), due, due, time, time]
        return values.map(\.sqlValue)
    }

    /// The `failed` a push failed as it is queued counts as (stats, progress and webhooks), named
    /// by platform as the outbox names its outcomes.
    private func failed(id: Int64, recipient: String, target: PushTarget, reason: String) -> Happening {
        Happening(type: .failed, campaign: campaignId, notification: id, user: recipient,
                  platform: target.platform ?? (target.registration == nil ? "hub" : "apns"), reason: reason)
    }

    /// A push as made for one notification, and its size on the platforms it goes to.
    struct MadePush {
        /// The APNs push: what is stored with the notification.
        var bytes: Data
        /// The payload URL (in both modes when this process can sign one: FCM and Web Push carry
        /// it even in silent mode).
        var richUrl: String?
        /// The APNs push's size, room kept for the largest unread count a badge may set per device.
        var apnsBytes: Int
        /// The Web Push message's size, when a target is a browser.
        var webBytes: Int?

        /// Whether the push to `target` is within its platform's size: a browser's Web Push
        /// message within 3,993 bytes; any other's APNs push within 4,096 (the stored push, which
        /// APNs and hubs send, and FCM's 4,096 bytes hold the same words).
        func fits(_ target: PushTarget) -> Bool {
            target.platform == "web" ? (webBytes ?? 0) <= PushContent.webPushMaxBytes : apnsBytes <= SilentPush.maxBytes
        }
    }

    /// The push of notification `id` to `targets`, measured. With `placeholder`, its payload URL is
    /// a dry run's (`DryRun.placeholderURL`, of a signed one's length): nothing is signed.
    private func make(id: Int64, targets: [PushTarget], placeholder: Bool = false) -> MadePush {
        let richUrl = placeholder ? links.map(DryRun.placeholderURL) : signer?.url(notification: id)
        let push: Data = switch mode {
        case .silent: SilentPush(id: id, message: message, richType: richType).encoded()
        case .alert:
            (alertTemplate ?? AlertPush.Template(title: title, message: message, richType: richType, options: options))
                .encoded(richId: String(id), richUrl: richUrl!)
        }
        // An unread count is set per device at send time: room is kept for the largest.
        let largest = options.badge == .unread ? AlertPush.settingBadge(push, to: PushOptions.maxBadge).count : push.count
        var webBytes: Int?
        if targets.contains(where: { $0.platform == "web" }) {
            var content = PushContent(id: id, message: message, title: title, richType: richType, richUrl: richUrl, options: options)
            if options.badge == .unread { content.badge = PushOptions.maxBadge }
            webBytes = content.webPushPlaintext.count
        }
        return MadePush(bytes: push, richUrl: richUrl, apnsBytes: largest, webBytes: webBytes)
    }

    /// Refuses (422) what `insert` would refuse for notification `id` to `targets`, writing
    /// nothing: a dry run's check (docs/api.md#dry-runs).
    func checkFits(id: Int64, targets: [PushTarget]) throws {
        if oversize == .refuse, let refusal = Self.refusal(make(id: id, targets: targets, placeholder: true)) { throw refusal }
    }

    /// Notification `id`'s push to `target` as the outbox would hand it to a provider, made
    /// without writing or signing anything: a dry run's sample (docs/api.md#dry-runs), its payload
    /// URL `DryRun.placeholderURL`. With the reason it would be failed for as it is queued, when
    /// it is over its platform's size.
    func sample(id: Int64, recipient: String, target: PushTarget) -> (job: DeliveryJob, failure: String?) {
        let made = make(id: id, targets: [target], placeholder: true)
        var failure: String?
        if !made.fits(target) {
            switch oversize {
            case .refuse: failure = Self.refusal(made)?.message
            case .fail:
                if let reasons = try? failures(made, targets: [target]), let reason = reasons.first { failure = reason }
            }
        }
        var job = DeliveryJob(id: 0, notificationId: id, registrationId: target.registration, target: target.target, payload: made.bytes, mode: mode,
                              pushId: "", platform: target.platform,
                              content: PushContent(id: id, message: message, title: title, richType: richType, richUrl: made.richUrl, options: options))
        job.app = target.app
        job.campaignId = campaignId
        job.image = media.id
        job.recipient = recipient
        job.options = options
        // As the outbox's claim reckons it: the life counts from the making.
        let lifetime = options.lifetime
        job.expiresAt = now.addingTimeInterval(lifetime == 0 ? DeliveryJob.nowOrNeverWindow : Double(lifetime))
        return (job, failure)
    }

    /// 422 past APNs' 4,096 bytes, or past Web Push's 3,993 when a target is a browser; nil when it fits.
    private static func refusal(_ made: MadePush) -> CoreError? {
        if made.apnsBytes > SilentPush.maxBytes {
            return CoreError(.unprocessable, "the push would be \(made.apnsBytes) bytes, over APNs' limit of \(SilentPush.maxBytes); shorten the message or title")
        }
        if let size = made.webBytes, size > PushContent.webPushMaxBytes {
            return CoreError(.unprocessable, "the Web Push message would be \(size) bytes, over its limit of \(PushContent.webPushMaxBytes); shorten the message or title")
        }
        return nil
    }

    /// Per target, nil when its push is queued, else the reason it is failed with: under
    /// `refuse` none (a push too large throws), under `fail` those `made` does not fit, with the
    /// policy's reason first (what stats group failures by) and the sizes after a colon.
    private func failures(_ made: MadePush, targets: [PushTarget]) throws -> [String?] {
        switch oversize {
        case .refuse:
            if let refusal = Self.refusal(made) { throw refusal }
            return targets.map { _ in nil }
        case .fail(let reason):
            return targets.map { target -> String? in
                guard !made.fits(target) else { return nil }
                let (size, limit, whose) = target.platform == "web"
                    ? (made.webBytes ?? 0, PushContent.webPushMaxBytes, "Web Push's")
                    : (made.apnsBytes, SilentPush.maxBytes, "APNs'")
                return "\(reason): the push would be \(size) bytes, over \(whose) limit of \(limit)"
            }
        }
    }

    private func made(id: Int64, recipient: String, push: Data, richUrl: String?, targets: [PushTarget]) -> CreatedNotification {
        let notification = RichNotification(id: id, recipient: recipient, message: message, title: title, richType: richType,
                                            payload: media.id, mode: mode, campaignId: campaignId, read: false, createdAt: now)
        return CreatedNotification(notification: notification, push: push, richUrl: richUrl, deliveries: targets.count,
                                   deliveriesByApp: Dictionary(targets.map { ($0.app, 1) }, uniquingKeysWith: +))
    }
}

/// The database answered a batch's ids with another count than asked for (never expected: the
/// batch's transaction is rolled back, and the caller's error handling retries it).
private struct UnexpectedIDs: Error, CustomStringConvertible {
    let description: String
}
