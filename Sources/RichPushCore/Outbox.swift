import Foundation
import MediaStore
import SQLEngine
import Telemetry

/// What a push of the outbox is (docs/api.md#change-or-take-back-what-was-sent).
public enum PushKind: Sendable, Equatable {
    /// The notification's own push.
    case original
    /// Its changed content, to a device that got it: replaces what the device shows under the
    /// same collapse id, tag and Topic; quietly (`passive`, no sound) unless `alertAgain`.
    case update(alertAgain: Bool)
    /// The background push that takes back notifications `ids` (several when a device's
    /// background pushes were coalesced); a browser is shown `text` in place of what it showed.
    case retract(ids: [Int64], text: String)

    /// Whether it takes notifications back.
    public var isRetraction: Bool {
        if case .retract = self { true } else { false }
    }

    /// The column's value (`deliveries.kind`); nil for an original push.
    var stored: String? {
        switch self {
        case .original: nil
        case .update(let alertAgain): alertAgain ? "update-alert" : "update"
        case .retract: "retract"
        }
    }
}

/// What a retraction's outbox row carries beside its kind (`deliveries.extra`).
struct RetractionExtra: Codable, Equatable {
    /// The notifications it takes back, oldest first.
    var ids: [Int64]
    /// What a browser shows instead.
    var text: String

    init(ids: [Int64], text: String) {
        self.ids = ids
        self.text = text
    }

    init?(stored: String?) {
        guard let stored, let read = try? JSONDecoder().decode(Self.self, from: Data(stored.utf8)), !read.ids.isEmpty else { return nil }
        self = read
    }

    var stored: String { String(decoding: (try? JSONEncoder().encode(self)) ?? Data(), as: UTF8.self) }
}

/// One push to make, as the outbox hands it to a provider. Its fields (`DeliveryJob.Fields`) read
/// and change as its own: `job.target`, `job.attempts += 1`.
///
/// The fields live in one copy-on-write box: a job is copied several times on its way (the
/// dispatcher's queue and window, the provider's callback, the outcome recorded), and a copy of
/// seventeen fields was a retain for each reference among them (`initializeWithCopy` and
/// `destroy` of this type were 4% of `serve`'s CPU during a campaign). Now a copy is one retain,
/// and a change to a shared job copies the box first.
@dynamicMemberLookup
public struct DeliveryJob: Sendable {
    /// What a job carries.
    public struct Fields: Sendable {
        /// The outbox row.
        public var id: Int64
        /// The notification it delivers.
        public var notificationId: Int64
        /// The device's registration; nil for a hub's tag.
        public var registrationId: String?
        /// A device token, or a tag such as `username:alice`.
        public var target: String
        /// The push's exact bytes.
        public var payload: Data
        /// Alert or silent: decides `apns-push-type` and `apns-priority`.
        public var mode: PushMode
        /// Sent as `apns-id`; the same on every attempt.
        public var pushId: String
        /// Attempts made before this one.
        public var attempts: Int
        /// When the device's registration last changed (410 prunes only registrations older than Apple's timestamp).
        public var registrationUpdatedAt: Date?
        /// The device's platform (`apns`, `fcm`, `web`); nil for APNs devices registered before
        /// platforms were recorded and for a hub's tag.
        public var platform: String?
        /// What the push says, for the platforms that build their own message from it.
        public var content: PushContent?
        /// The app whose credentials send it (docs/api.md#apps-and-api-keys).
        public var app: String = AppName.default
        /// The campaign it belongs to (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks's counts and events).
        public var campaignId: Int64?
        /// The notification's payload image (the claim reads it; nil when a job is made otherwise).
        public var image: MediaID?
        /// The notification's recipient (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks's counts and events).
        public var recipient: String?
        /// The notification's options (docs/api.md#options-badges-and-paced-sends).
        public var options = PushOptions()
        /// What the push is: the notification's own, its changed content, or its retraction.
        public var kind = PushKind.original
        /// A Live Activity's push (docs/api.md#live-activities), a row of `activity_pushes` rather
        /// than `deliveries` (then `notificationId` is 0 and `payload` the APNs payload).
        public var activity: ActivityPush?
        /// When the push's life ends, this machine's time: its notification's making (or its turn,
        /// in a paced campaign) plus `expiresIn`, or plus `nowOrNeverWindow` for `expiresIn` 0.
        public var expiresAt: Date? = Date().addingTimeInterval(Double(PushOptions.defaultExpiresIn))
        /// The W3C `traceparent` of the request that queued it (docs/operations.md#traces), read by
        /// the claim only while tracing is on: its span continues that trace.
        public var traceparent: String? = nil
    }

    @usableFromInline
    final class Box: @unchecked Sendable {
        @usableFromInline var fields: Fields

        @usableFromInline init(_ fields: Fields) { self.fields = fields }
    }

    /// Written only through the subscript below, which unshares it first: never `box.fields` directly.
    @usableFromInline var box: Box

    /// A field of the job, read or changed (the box is unshared first when another job holds it too).
    @inlinable
    public subscript<Value>(dynamicMember field: WritableKeyPath<Fields, Value>) -> Value {
        get { box.fields[keyPath: field] }
        set {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            box.fields[keyPath: field] = newValue
        }
    }

    /// Seconds the push service should keep it (0: now or never), or nil when its life ended
    /// before it could be sent (it is then failed, never sent late: a sale that ended at noon).
    public func remainingLife(now: Date = Date()) -> Int? {
        guard let expiresAt = self.expiresAt else { return 0 }
        let left = expiresAt.timeIntervalSince(now)
        // "Now or never" (expiresIn 0) is sent with a life of 0 while its short window lasts.
        if self.options.lifetime == 0 { return left > 0 ? 0 : nil }
        return left >= 1 ? Int(left) : nil
    }

    /// The life a provider sends the push with: `remainingLife()`, or 0 ("now or never") when it
    /// ended in the moment since the outbox checked it, which fails pushes whose life has ended
    /// before it hands them to a provider.
    public var sendingLife: Int { remainingLife() ?? 0 }

    /// How long a push with `expiresIn` 0 ("now or never") may wait in the outbox (a retry, a
    /// busy node, its turn in a paced campaign) before it is failed instead of sent late.
    public static let nowOrNeverWindow: Double = 60

    /// The reason a push whose life ended is failed with.
    public var expiredReason: String {
        "expired: its life of \(self.options.lifetime) s (options.expiresIn) ended before it could be sent"
    }

    /// The push's collapse identifier (docs/operations.md#when-a-dependency-fails): derived from the notification alone, so every
    /// send of it to a device (a retry, a resend after a crash or a node's death) carries the
    /// same one and the phone shows the message once. `rp-` and the notification id: within
    /// APNs' 64 bytes and Web Push's 32 URL-safe characters for a `Topic`.
    public var collapseID: String { "rp-\(self.notificationId)" }

    /// The collapse id an APNs or FCM push carries: none for a retraction, a background push
    /// that must not replace the alert it takes back (the app removes that one by its id).
    public var alertCollapseID: String? { self.kind.isRetraction ? nil : self.collapseID }

    /// Creates a job.
    public init(id: Int64, notificationId: Int64, registrationId: String? = nil, target: String, payload: Data, mode: PushMode = .silent,
                pushId: String, attempts: Int = 0, registrationUpdatedAt: Date? = nil, platform: String? = nil, content: PushContent? = nil) {
        box = Box(Fields(id: id, notificationId: notificationId, registrationId: registrationId, target: target, payload: payload, mode: mode,
                         pushId: pushId, attempts: attempts, registrationUpdatedAt: registrationUpdatedAt, platform: platform, content: content))
    }
}

/// Who holds a claim on outbox rows: a process (its pid, so a dead holder's rows can be taken
/// back) and a random tag (so only this holder, not a later process with the same pid, may
/// record their outcomes).
public struct OutboxHolder: Sendable, Equatable {
    public var pid: Int
    public var tag: Int64

    /// A new holder for process `pid`.
    public init(pid: Int, tag: Int64 = .random(in: 1 ... .max)) {
        self.pid = pid
        self.tag = tag
    }
}

/// What to record for one attempt, decided by the dispatcher.
public enum OutboxResult: Sendable, Equatable {
    /// Accepted by the push service.
    case sent
    /// Refused for good. With `prune`, the device's registration goes too, unless it changed
    /// after `deadSince` (Apple's timestamp of the token's death) or after the push was claimed.
    case failed(reason: String, prune: Bool, deadSince: Date?)
    /// Tried again at `at`.
    case retry(reason: String, at: Date)
}

/// The outbox (`deliveries`): claims due pushes under a lease, renews and takes back leases, and
/// records outcomes. The only writer of delivery state; `DeliveryStore` reads it.
public struct OutboxStore: Sendable {
    let database: SQLDatabase
    /// What claims hold back (docs/api.md#frequency-caps-and-quiet-hours); nil: nothing.
    public var guardrails: Guardrails?

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// Claims up to `limit` due deliveries for `holder`, oldest due first: each is leased for
    /// `lease` seconds (`leaseUntil`), so nobody else sends it meanwhile. Its next attempt stays
    /// (PostgreSQL writes the lease without a new index entry: docs/design/outbox.md#a-claim-is-a-lease),
    /// unless a holder from before core-v28 is alive: it finds only rows due later, so the lease
    /// moves that ahead too.
    ///
    /// On PostgreSQL the rows are locked with `FOR UPDATE SKIP LOCKED`: nodes claiming at once
    /// get different rows and never wait for each other. SQLite has one writer at a time.
    ///
    /// With `platforms`, only pushes to devices of those platforms (a row with none is an APNs
    /// device registered before platforms were recorded): a node that sends no FCM leaves FCM
    /// pushes to the nodes that do, and they wait, counted in `richpush_outbox_pending`, while no
    /// node does (a rolling restart that adds FCM, say). Each entry is a platform of the
    /// `default` app (`apns`), or `APP/PLATFORM` for another app's (`*`: any platform, a hub's).
    public func claim(limit: Int, lease: Double, holder: OutboxHolder, platforms: Set<String>? = nil) async throws -> [DeliveryJob] {
        let now = database.now()
        let only = platforms.map { "AND (" + Self.condition(sends: $0) + ")" } ?? ""
        let guardrails = self.guardrails
        let (claimed, screened) = try await database.write(isolation: .readCommitted) { db -> ([DeliveryJob], Guardrails.Screened?) in
            let lock = db.dialect == .postgres ? "FOR UPDATE OF d SKIP LOCKED" : ""
            // Live Activities' pushes first: an update is worth seconds (one probe of an index when none waits).
            let activities = try LiveActivityStore.claim(db, limit: limit, now: now, lease: lease, holder: holder, only: only)
            let limit = limit - activities.count
            guard limit > 0 else { return (activities, nil) }
            let rowsOnly = try db.fetchAll(sql: """
                SELECT d.id, d.notificationId, d.registrationId, d.target, d.platform, d.app, d.campaignId, n.recipient, d.pushId, d.attempts, n.push, n.mode,
                       n.message, n.title, n.richType, n.richUrl, n.options, n.createdAt, d.dueAt, n.payload, r.updatedAt AS registrationUpdatedAt,
                       d.kind, d.extra
                FROM deliveries d JOIN notifications n ON n.id = d.notificationId
                LEFT JOIN registrations r ON r.id = d.registrationId
                WHERE d.state = 'pending' AND d.nextAttemptAt <= ? AND (d.leaseTag IS NULL OR d.leaseUntil IS NULL OR d.leaseUntil <= ?) \(only)
                ORDER BY d.nextAttemptAt, d.id LIMIT ? \(lock)
                """, arguments: [now, now, limit], cached: true)
            // Then a campaign's runs (docs/design/outbox.md#runs), with the room left.
            // At least one run however many rows are due, so that a backlog of rows (a paced
            // campaign's) does not hold runs back.
            let rows = try rowsOnly + OutboxRuns.claim(db, limit: max(limit - rowsOnly.count, 1), now: now, until: now + lease, holder: holder, only: only)
            // A campaign's pushes share their options: read once per claim, not once per push.
            var options: (stored: String?, read: PushOptions) = (nil, PushOptions())
            var jobs = rows.indices.map { index in
                let row = rows[index], fromRun = index >= rowsOnly.count
                var job = DeliveryJob(id: fromRun ? OutboxRuns.jobID(run: row["run"], index: row["place"]) : row["id"], notificationId: row["notificationId"],
                            registrationId: row["registrationId"], target: row["target"],
                            payload: row["push"], mode: PushMode(rawValue: row["mode"]) ?? .silent, pushId: row["pushId"], attempts: fromRun ? 0 : row["attempts"],
                            registrationUpdatedAt: (row["registrationUpdatedAt"] as Double?).map(Date.init(timeIntervalSince1970:)),
                            platform: row["platform"],
                            content: PushContent(id: row["notificationId"], message: row["message"], title: row["title"], richType: row["richType"],
                                                 richUrl: row["richUrl"]))
                job.app = row["app"] ?? AppName.default
                job.campaignId = row["campaignId"]
                job.image = (row["payload"] as String?).flatMap { MediaID($0) }
                job.recipient = row["recipient"]
                let stored: String? = row["options"]
                if stored != options.stored { options = (stored, PushOptions(stored: stored)) }
                job.options = options.read
                job.content?.options = options.read
                if case .count(let fixed)? = options.read.badge { job.content?.badge = fixed }
                if !fromRun, let kind = row["kind"] as String? { Self.revise(&job, kind: kind, extra: row["extra"], richUrl: row["richUrl"]) }
                let lifetime = job.options.lifetime
                // A push's life counts from its notification's making, or from its turn in a paced campaign.
                let born = max(row["createdAt"] as Double, fromRun ? 0 : (row["dueAt"] as Double?) ?? 0)
                job.expiresAt = Date(timeIntervalSince1970: born + (lifetime == 0 ? DeliveryJob.nowOrNeverWindow : Double(lifetime)))
                return job
            }
            // Caps and quiet hours hold some back (docs/api.md#frequency-caps-and-quiet-hours), in this transaction.
            var screened: Guardrails.Screened?
            if let guardrails, try guardrails.mayHoldBack(db, jobs) {
                // What is held back or capped changes a row of its own: a run's pushes held back get theirs first.
                screened = try guardrails.screen(db, jobs, now: now) { held in
                    try OutboxRuns.spill(db, &held, holder: holder, until: now + lease, now: now)
                }
                jobs = screened!.jobs
            }
            try Self.setUnreadBadges(db, &jobs)
            if Telemetry.isTracing { try Self.setTraceparents(db, &jobs) }
            // A holder from before core-v28 sees only `nextAttemptAt`: while one is alive, it moves to the lease's end too.
            let until = now + lease
            let alsoDue = try !jobs.isEmpty && Self.olderHolderAlive(db, now: now)
            let ends: [any SQLValueConvertible] = alsoDue ? [until, until] : [until]
            for chunk in jobs.map(\.id).filter({ $0 > 0 }).sqlBatches() {
                try db.execute(sql: """
                    UPDATE deliveries SET leaseUntil = ?, \(alsoDue ? "nextAttemptAt = ?, " : "")leasedBy = ?, leaseTag = ?, leaseOwner = ? WHERE \(db.idIn("id"))
                    """, arguments: SQLArguments(ends + [holder.pid, holder.tag, holder.tag, db.idList(chunk)]), cached: true)
            }
            return (activities + jobs, screened)
        }
        guard let screened else { return claimed }
        if let report = guardrails?.onHeldBack {
            for (app, outcome) in screened.heldBack { report(app, outcome) }
        }
        if !screened.mayHaveEnded.isEmpty {
            // After the claim's commit, holding no push: see `Guardrails.screen`. The pushes are
            // claimed whatever happens here: a failure leaves the campaigns to every node's
            // sweep (`finishStragglers`), not the claim undone.
            _ = try? await database.write(isolation: .readCommitted) { db in try Insight.finishCampaigns(db, screened.mayHaveEnded, now: db.now) }
        }
        return claimed
    }

    /// Makes `job`, claimed with its notification's push, the push its row's `kind` says
    /// (docs/api.md#change-or-take-back-what-was-sent): a replacement, quiet unless it alerts
    /// again (`passive`, no sound: the APNs push made again with those options), or a retraction
    /// (a background push naming the notifications taken back, with a day's life; a browser's
    /// carries the text shown instead). A row it cannot read is sent as the notification's own.
    static func revise(_ job: inout DeliveryJob, kind: String, extra: String?, richUrl: String?) {
        switch kind {
        case "update", "update-alert":
            let alertAgain = kind == "update-alert"
            job.kind = .update(alertAgain: alertAgain)
            var options = job.options
            if !alertAgain {
                options.interruptionLevel = .passive
                options.sound = ""
            }
            job.options = options
            job.content?.options = options
            job.content?.isUpdate = true
            job.content?.quiet = !alertAgain
            if job.mode == .alert, let richUrl, let content = job.content {
                job.payload = AlertPush(id: job.notificationId, title: content.title, message: content.message, richType: content.richType,
                                        richUrl: richUrl, options: options).encoded()
            }
        case "retract":
            guard let retraction = RetractionExtra(stored: extra) else { return }
            job.kind = .retract(ids: retraction.ids, text: retraction.text)
            job.mode = .silent
            job.options = PushOptions()
            job.payload = PushContent.retractPush(retraction.ids)
            var content = PushContent(id: retraction.ids[0], message: retraction.text, title: job.content?.title,
                                      richType: job.content?.richType ?? NotificationDraft.defaultRichType, richUrl: nil)
            content.retracted = retraction.ids
            job.content = content
        default:
            return
        }
    }

    /// docs/api.md#options-badges-and-paced-sends: each push whose notification asks for `"badge":"unread"` carries its
    /// recipient's unread inbox count as it is now, read for the whole batch in one query.
    static func setUnreadBadges(_ db: SQLConnection, _ jobs: inout [DeliveryJob]) throws {
        let recipients = Set(jobs.filter { $0.options.badge == .unread }.compactMap(\.recipient))
        guard !recipients.isEmpty else { return }
        var unread: [String: Int] = [:]
        for chunk in Array(recipients).sorted().sqlBatches() {
            for row in try db.fetchAll(sql: """
                SELECT recipient, count(*) AS n FROM notifications
                WHERE read = 0 AND createdAt <= ? AND retractedAt IS NULL AND recipient IN (\(sqlPlaceholders(chunk.count))) GROUP BY recipient
                """, arguments: SQLArguments([NotificationStore.visibleNow() as any SQLValueConvertible] + chunk.map { $0 as any SQLValueConvertible })) {
                unread[row["recipient"]] = row["n"]
            }
        }
        for index in jobs.indices where jobs[index].options.badge == .unread {
            let count = min(unread[jobs[index].recipient ?? ""] ?? 0, PushOptions.maxBadge)
            jobs[index].payload = AlertPush.settingBadge(jobs[index].payload, to: count)
            jobs[index].content?.badge = count
        }
    }

    /// docs/operations.md#traces: each campaign push carries its campaign's `traceparent` (the
    /// request that made it), read for the batch in one query; only while tracing is on.
    static func setTraceparents(_ db: SQLConnection, _ jobs: inout [DeliveryJob]) throws {
        let campaigns = Array(Set(jobs.compactMap(\.campaignId))).sorted()
        guard !campaigns.isEmpty else { return }
        var parents: [Int64: String] = [:]
        for chunk in campaigns.sqlBatches() {
            for row in try db.fetchAll(sql: "SELECT id, traceparent FROM campaigns WHERE traceparent IS NOT NULL AND \(db.idIn("id"))",
                                       arguments: [db.idList(chunk)]) {
                parents[row["id"]] = row["traceparent"]
            }
        }
        for index in jobs.indices {
            if let campaign = jobs[index].campaignId, let parent = parents[campaign] { jobs[index].traceparent = parent }
        }
    }

    /// The SQL condition on `d` for rows one of `sends` covers: `PLATFORM` of the `default` app
    /// (rows from before apps name none), or `APP/PLATFORM`, `*` for any platform. Names that are
    /// not app names or platforms match nothing (they are written into the SQL).
    static func condition(sends: Set<String>) -> String {
        let clauses = sends.sorted().compactMap { entry -> String? in
            let parts = entry.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard (1...2).contains(parts.count) else { return nil }
            let app = parts.count == 2 ? parts[0] : AppName.default
            let platform = parts.last!
            guard (try? AppName.validate(app)) != nil, platform == "*" || (platform.allSatisfy(\.isLetter) && !platform.isEmpty) else { return nil }
            let appClause = app == AppName.default ? "(d.app IS NULL OR d.app = 'default')" : "d.app = '\(app)'"
            let platformClause = switch platform {
            case "*": "TRUE"
            case "apns": "(d.platform IS NULL OR d.platform = 'apns')"
            default: "d.platform = '\(platform)'"
            }
            return "(\(appClause) AND \(platformClause))"
        }
        return clauses.isEmpty ? "FALSE" : clauses.joined(separator: " OR ")
    }

    /// Records outcomes in one transaction (one fsync). Returns each one's metrics label:
    /// `sent`, `failed`, `retried`, or `lease_lost` where `holder` no longer held the row (another
    /// took it after the lease lapsed: its outcome stands, nothing is overwritten or pruned).
    /// Pushes sent take one statement per 500 (the common case, and on PostgreSQL one round trip).
    public func record(_ results: [(DeliveryJob, OutboxResult)], holder: OutboxHolder) async throws -> [String] {
        let now = database.now()
        return try await database.write(isolation: .readCommitted) { db in
            // Live Activities' pushes are rows of their own table, recorded in the same transaction.
            guard results.contains(where: { $0.0.activity != nil }) else { return try Self.record(db, notifications: results, holder: holder, now: now) }
            let activities = try LiveActivityStore.record(db, results.filter { $0.0.activity != nil }, holder: holder, now: now)
            let notifications = try Self.record(db, notifications: results.filter { $0.0.activity == nil }, holder: holder, now: now)
            var fromActivities = activities.makeIterator(), fromNotifications = notifications.makeIterator()
            return results.map { job, _ in (job.activity != nil ? fromActivities.next() : fromNotifications.next()) ?? "lease_lost" }
        }
    }

    /// The statement that records a batch of a holder's pushes sent (arguments: the time, the
    /// ids as one list, the holder's tag). On SQLite it deletes each push's entry in the index of
    /// a campaign's pending pushes and writes none in the campaign's own (core-v30).
    static func recordSentStatement(_ db: SQLConnection) -> String {
        """
        UPDATE deliveries SET state = 'sent', attempts = attempts + 1, reason = NULL, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL, updatedAt = ?
        WHERE \(db.idIn("id")) AND leaseTag = ? AND state = 'pending' RETURNING id
        """
    }

    /// `record` of the notifications' pushes (`deliveries`).
    private static func record(_ db: SQLConnection, notifications results: [(DeliveryJob, OutboxResult)], holder: OutboxHolder,
                               now: Double) throws -> [String] {
        var recordedSent = Set<Int64>()
        // A run's pushes are bits of their run, and rows of their own when not sent (docs/design/outbox.md#runs).
        let fromRuns = results.filter { $0.0.id < 0 }
        // A push listed twice is recorded by its first result (`OutboxRuns.record`), and labelled
        // once: each result of a run push takes its id out of `recordedInRuns`.
        var recordedInRuns = fromRuns.isEmpty ? [] : try OutboxRuns.record(db, fromRuns, holder: holder, now: now)
        var firstOfRun = Set<Int64>()
        recordedSent.formUnion(fromRuns.filter { firstOfRun.insert($0.0.id).inserted && $0.1 == .sent && recordedInRuns.contains($0.0.id) }.map(\.0.id))
        let sent = results.filter { $0.1 == .sent && $0.0.id > 0 }.map(\.0.id)
        for chunk in sent.sqlBatches() {
            let ids = try Int64.fetchAll(db, sql: recordSentStatement(db), arguments: [now, db.idList(chunk), holder.tag], cached: true)
            recordedSent.formUnion(ids)
        }
        var happenings: [Happening] = []
        let labels = try results.map { job, result in
            switch result {
            case .sent:
                // Once per row updated: the same push twice in one batch (claimed again by this
                // holder after its lease lapsed) is counted sent once.
                guard recordedSent.remove(job.id) != nil else { return "lease_lost" }
                if job.id < 0 { recordedInRuns.remove(job.id) }
                let type: DeliveryEventType = switch job.kind {
                case .original: .sent
                case .update: .updated
                case .retract: .retracted
                }
                happenings.append(Happening(type: type, campaign: job.campaignId, notification: job.notificationId, user: job.recipient,
                                            platform: job.platform ?? (job.registrationId == nil ? "hub" : "apns")))
                return "sent"
            case .failed(let reason, let prune, let deadSince):
                let label = try Self.recordFailure(db, job, reason: reason, prune: prune, deadSince: deadSince, holder: holder, now: now,
                                                   recordedInRun: job.id < 0 ? recordedInRuns.remove(job.id) != nil : nil, happenings: &happenings)
                if label == "failed" {
                    happenings.append(Happening(type: .failed, campaign: job.campaignId, notification: job.notificationId, user: job.recipient,
                                                platform: job.platform ?? (job.registrationId == nil ? "hub" : "apns"), reason: reason))
                }
                return label
            case .retry(let reason, let at):
                if job.id < 0 { return recordedInRuns.remove(job.id) != nil ? "retried" : "lease_lost" }
                // `at` is this machine's time; the row keeps the database's.
                let due = at.timeIntervalSince1970 + (now - Date().timeIntervalSince1970)
                try db.execute(sql: """
                    UPDATE deliveries SET attempts = ?, reason = ?, nextAttemptAt = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL, updatedAt = ?
                    WHERE id = ? AND leaseTag = ? AND state = 'pending'
                    """, arguments: [job.attempts + 1, reason, due, now, job.id, holder.tag])
                return db.changesCount > 0 ? "retried" : "lease_lost"
            }
        }
        try Self.releaseRevisions(db, results.compactMap { job, result in if case .retry = result { nil } else { job } }, now: now)
        // docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: counted in the transaction that records them, so counts and events never disagree.
        try Insight.record(db, happenings, now: now)
        try Insight.finishCampaigns(db, Set(happenings.compactMap(\.campaign)), now: now)
        return labels
    }

    /// Revisions (docs/api.md#change-or-take-back-what-was-sent) queued while a push of their
    /// notification to the same device was in flight wait for it (`Revisions.waitsForInFlight`):
    /// once it is recorded, sent or failed, they are due (at their own time: a retraction past a
    /// device's budget keeps its hour). When none waits, the common case, this is one probe of
    /// an index that holds only waiting rows.
    static func releaseRevisions(_ db: SQLConnection, _ jobs: [DeliveryJob], now: Double) throws {
        let waiting = "reason = '\(Revisions.waitsForInFlight)'"
        guard !jobs.isEmpty, try Int.fetchOne(db, sql: "SELECT 1 FROM deliveries WHERE \(waiting) LIMIT 1", cached: true) != nil else { return }
        for chunk in jobs.sqlBatches(of: 400) {
            try db.execute(sql: """
                UPDATE deliveries SET nextAttemptAt = CASE WHEN dueAt > ? THEN dueAt ELSE ? END, reason = NULL
                WHERE \(waiting) AND state = 'pending' AND (notificationId, target) IN (VALUES \(Array(repeating: "(?, ?)", count: chunk.count).joined(separator: ", ")))
                """, arguments: SQLArguments([now, now] + chunk.flatMap { [$0.notificationId as any SQLValueConvertible, $0.target] }))
        }
    }

    /// A push refused for good, pruning its registration where `prune` says so.
    private static func recordFailure(_ db: SQLConnection, _ job: DeliveryJob, reason: String, prune: Bool, deadSince: Date?,
                                      holder: OutboxHolder, now: Double, recordedInRun: Bool?, happenings: inout [Happening]) throws -> String {
        if let recordedInRun {
            guard recordedInRun else { return "lease_lost" }
        } else {
            try db.execute(sql: "UPDATE deliveries SET state = 'failed', attempts = ?, reason = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? AND leaseTag = ? AND state = 'pending'",
                           arguments: [job.attempts + 1, reason, now, job.id, holder.tag], cached: true)
            guard db.changesCount > 0 else { return "lease_lost" }
        }
        // 410 only prunes a registration that has not been renewed since Apple saw the token die,
        // and that nobody changed since this push was claimed (a device may have registered again meanwhile).
        let renewedSince = deadSince.map { stamp in (job.registrationUpdatedAt ?? .distantPast) > stamp } ?? false
        if prune, let registration = job.registrationId, let claimedVersion = job.registrationUpdatedAt, !renewedSince {
            guard try RegistrationStore.prune(db, id: registration, ifUpdatedAt: claimedVersion) else { return "failed" }
            // The device's other pending pushes fail with it, and count as failed too.
            let cascade = "device registration removed after \(reason)"
            // Runs before rows (docs/design/outbox.md#runs).
            let fromRuns = try OutboxRuns.fail(db, registration: registration, user: job.recipient, reason: cascade, now: now)
            // (The rows `fail` wrote for them are failed already: the statement below passes over them.)
            for row in try fromRuns + db.fetchAll(sql: """
                UPDATE deliveries SET state = 'failed', reason = ?, leaseUntil = NULL, leasedBy = NULL, updatedAt = ? WHERE registrationId = ? AND state = 'pending'
                RETURNING notificationId, campaignId, platform
                """, arguments: [cascade, now, registration]) {
                let notification: Int64 = row["notificationId"]
                let recipient = try String.fetchOne(db, sql: "SELECT recipient FROM notifications WHERE id = ?", arguments: [notification])
                happenings.append(Happening(type: .failed, campaign: row["campaignId"], notification: notification, user: recipient,
                                            platform: row["platform"] ?? "apns", reason: cascade))
            }
        }
        return "failed"
    }
}
