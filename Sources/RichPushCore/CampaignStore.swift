import Foundation
import SQLEngine
import MediaStore

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
    /// Below this many, the pending pushes of a revised or cancelled campaign are counted row by
    /// row (see `pending`).
    public var pendingCountedUpTo = 10_000
    /// Called with each batch's notifications once it is committed (the server indexes them,
    /// so that recipients' first fetches need no database read).
    public var onQueued: (@Sendable ([QueuedNotification]) -> Void)?
    /// Called with a campaign's payload before this process queues a batch of it (the server
    /// puts the image in its memory cache, docs/design/fast-path.md).
    public var beforeQueueing: (@Sendable (MediaID) async -> Void)?

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase, links: PayloadLinks?, defaultImage: String) {
        self.database = database
        self.links = links
        self.defaultImage = defaultImage
    }

    /// Records a campaign, refusing bad content (422) and unknown listed users (400). An
    /// unscheduled one is claimed for queueing by this process (call `queue`); a scheduled one
    /// waits for `runDue`. With `idempotency`, a key seen before answers with its campaign
    /// (`IdempotentReplay`) and makes nothing. `audit` records who did (`campaign.create`) in the
    /// same transaction (its queueing, later, is the server's).
    public func create(_ draft: CampaignDraft, by admin: String, idempotency: IdempotencyKey? = nil, now: Date = Date(),
                       audit: AuditActor? = nil) async throws -> Campaign {
        try await record(draft, by: admin, idempotency: idempotency, now: now, audit: audit, inspect: nil)
    }

    /// `create`, or with `inspect` a dry run's first half (docs/api.md#dry-runs): the campaign is
    /// checked and recorded in the transaction as `create` records it, then `inspect` reads what
    /// it would do, and its answer is thrown as `DryRunRollback`, which rolls everything back
    /// (the audit row with it: a dry run changes nothing).
    func record(_ draft: CampaignDraft, by admin: String, idempotency: IdempotencyKey?, now: Date, audit: AuditActor? = nil,
                inspect: (@Sendable (SQLConnection, Campaign) throws -> DryRun)?) async throws -> Campaign {
        let links = self.links, defaultImage = self.defaultImage
        // A repeat is answered before anything is checked again: its time may have passed since.
        if let idempotency, let resource = try await IdempotencyStore(database: database).resource(for: idempotency, now: now) {
            throw IdempotentReplay(resource: resource)
        }
        // Checked before the transaction: none of it needs the database.
        let locales = try Self.checkedLocales(draft.content, draft.locales, defaultLocale: draft.defaultLocale)
        let defaultLocale = try UserPreferences.locale(draft.defaultLocale)
        if let rate = draft.ratePerMinute, !(1...Campaign.maxRatePerMinute).contains(rate) {
            throw CoreError(.invalid, "ratePerMinute must be 1 to \(Campaign.maxRatePerMinute) (got \(rate))")
        }
        // docs/api.md#ab-tests-and-conversions: a test's shape (its variants' content is checked with the campaign's, below).
        let experimentRules = try draft.experiment.map { try $0.checked(schedule: draft.schedule) }
        var schedule = draft.schedule
        switch schedule {
        case .at(let date)?:
            guard date > now.addingTimeInterval(-60) else { throw CoreError(.unprocessable, "sendAt is in the past") }
            guard date < now.addingTimeInterval(366 * 86_400) else { throw CoreError(.unprocessable, "sendAt is more than a year away") }
            if date <= now { schedule = nil }
        case .localTime(_, _?)?:
            guard schedule!.last(createdAt: now) > now else { throw CoreError(.unprocessable, "localTime on localDate has passed in every time zone") }
            guard schedule!.first(createdAt: now) < now.addingTimeInterval(366 * 86_400) else { throw CoreError(.unprocessable, "localDate is more than a year away") }
        default: break
        }
        let (sendAt, localTime, localDate): (Double?, String?, String?) = switch schedule {
        case .at(let date)?: (date.timeIntervalSince1970, nil, nil)
        case .localTime(let time, let date)?: (nil, time.description, date?.description)
        case nil: (nil, nil, nil)
        }
        let contentJSON = locales.isEmpty ? nil
            : String(decoding: try Self.sortedEncoder.encode(locales), as: UTF8.self)
        let scheduled = schedule != nil
        let (finalLocales, finalSchedule) = (locales, schedule)
        guard locales.count <= Campaign.maxLocales else {
            throw CoreError(.invalid, "content has \(locales.count) locales; a campaign has at most \(Campaign.maxLocales)")
        }
        let localeNames = locales.isEmpty ? nil : locales.keys.sorted().joined(separator: ",")
        return try await database.write { db in
            try IdempotencyKey.replayIfSeen(db, idempotency, now: now)
            if scheduled {
                let waiting = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM campaigns WHERE createdBy = ? AND queued = 0 AND cancelledAt IS NULL
                        AND (sendAt IS NOT NULL OR atLocalTime IS NOT NULL)
                    """, arguments: [admin]) ?? 0
                guard waiting < Campaign.maxScheduledPerCreator else {
                    throw CoreError(.conflict, "\(admin) has \(waiting) campaigns scheduled, the most one creator may have waiting (\(Campaign.maxScheduledPerCreator)); "
                                    + "cancel one (DELETE /api/admin/campaigns/{id}) or wait until one goes out")
                }
            }
            let writer = try NotificationWriter(db, draft: draft.content, defaultImage: defaultImage, links: links, now: now)
            try writer.checkFitsEveryPlatform(db)
            for (_, content) in finalLocales {
                // Every locale's push must fit too.
                try NotificationWriter(db, draft: Self.localized(draft.content, content), defaultImage: defaultImage, links: links, now: now)
                    .checkFitsEveryPlatform(db)
            }
            if case .users(let names) = draft.audience {
                let unknown = try UserStore.unknown(db, names)
                if !unknown.isEmpty {
                    let shown = unknown.prefix(10).joined(separator: ", ") + (unknown.count > 10 ? " and \(unknown.count - 10) more" : "")
                    throw CoreError(.unprocessable, "audience.users names \(unknown.count) unknown user(s): \(shown)")
                }
            }
            // docs/api.md#segments: a segment is read now and kept as its filter, every segment
            // it names inlined, so that changing a segment later leaves this campaign as it is.
            var audience = draft.audience
            if let filter = audience.segmentFilter {
                audience = .filter(try SegmentStore.resolve(db, filter, path: audience.filterPath))
            }
            let inserted = try db.fetchOne(sql: """
                INSERT INTO campaigns (audience, message, title, richType, payload, mode, createdBy, queuedBy, createdAt, app,
                                       sendAt, atLocalTime, onLocalDate, content, defaultLocale, leaseUntil, options, ratePerMinute, countedInStats, pushes,
                                       localeNames, limits, traceparent)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?, ?, ?) RETURNING id
                """, arguments: [audience.stored, writer.message, writer.title, writer.richType, writer.media.id.hex,
                                 writer.mode.rawValue, admin, scheduled ? nil : Self.holder, now.timeIntervalSince1970, draft.app,
                                 sendAt, localTime, localDate, contentJSON, defaultLocale,
                                 scheduled ? nil : db.now + Self.lease, writer.options.stored, draft.ratePerMinute, localeNames, draft.limits, draft.traceparent])
            let id: Int64 = inserted!["id"]
            try MediaIndex.addReference(db, id: writer.media.id, owner: "campaign:\(id)", now: now)
            if let experiment = draft.experiment, let experimentRules {
                try Experiments.insert(db, campaign: id, draft: experiment, rules: experimentRules, base: draft.content, locales: finalLocales,
                                       defaultLocale: defaultLocale, defaultImage: defaultImage, links: links, now: now)
            }
            if let idempotency { try IdempotencyKey.record(db, idempotency, resource: id, now: now) }
            let campaign = Campaign(id: id, audience: audience, message: writer.message, title: writer.title, richType: writer.richType,
                                    payload: writer.media.id, mode: writer.mode, createdBy: admin, createdAt: now, recipients: 0, devices: 0, queued: false,
                                    app: draft.app, schedule: finalSchedule, locales: finalLocales, localeNames: finalLocales.keys.sorted(),
                                    defaultLocale: defaultLocale, options: writer.options, ratePerMinute: draft.ratePerMinute, pushes: 0, limits: draft.limits,
                                    traceparent: draft.traceparent)
            if let inspect { throw DryRunRollback(result: try inspect(db, campaign)) }
            try Audit.record(db, audit, "campaign.create", target: "campaign:\(id)",
                             detail: ["audience": .string(audience.summary), "app": draft.app.map(JSONValue.string) ?? .null,
                                      "scheduled": .bool(scheduled), "abTest": .bool(draft.experiment != nil)])
            return campaign
        }
    }

    /// A campaign's content per locale, checked (422 naming the field): locales canonical and
    /// once each, each with words, buttons the options have, its words within the options'
    /// rules, templates that parse, and words for the default locale. What a campaign is made
    /// with and changed to (docs/api.md#change-or-take-back-what-was-sent) alike.
    static func checkedLocales(_ content: NotificationDraft, _ given: [String: LocalizedContent], defaultLocale: String) throws -> [String: LocalizedContent] {
        var locales: [String: LocalizedContent] = [:]
        for (tag, localized) in given {
            let canonical = try UserPreferences.locale(tag)
            guard locales[canonical] == nil else { throw CoreError(.unprocessable, "content names the locale \(canonical) twice (in two spellings)") }
            guard localized.title != nil || localized.message != nil || localized.subtitle != nil || localized.actions != nil else {
                throw CoreError(.unprocessable, "content.\(tag) has no title, message, subtitle or button titles")
            }
            let buttons = Set((content.options.actions ?? []).map(\.id))
            if let unknown = (localized.actions ?? [:]).keys.sorted().first(where: { !buttons.contains($0) }) {
                throw CoreError(.unprocessable, "content.\(tag).actions names the button \"\(unknown)\", which options.actions does not have")
            }
            // Its words follow the options' rules (lengths; no subtitle on a silent push).
            do {
                try Self.localized(content, localized).options.validate(mode: content.mode)
            } catch let error as CoreError {
                throw CoreError(error.kind, "content.\(tag): \(error.message)")
            }
            locales[canonical] = localized
        }
        // Its words' templates must parse (docs/api.md#templates-and-localization-keys): 422 naming the field and where.
        try CampaignTemplates.check(content, locales: given)
        let defaultLocale = try UserPreferences.locale(defaultLocale)
        if !locales.isEmpty && Self.contentLocale(for: nil, locales: locales, defaultLocale: defaultLocale) == nil && content.message == nil {
            throw CoreError(.unprocessable, "content has nothing for the default locale \(defaultLocale) and there is no message: add \"\(defaultLocale)\" to content, set defaultLocale, or give a message")
        }
        return locales
    }

    static var sortedEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// The draft of one locale: its title, message, subtitle and button titles, the campaign's
    /// where it has none.
    static func localized(_ draft: NotificationDraft, _ content: LocalizedContent) -> NotificationDraft {
        var draft = draft
        if let message = content.message { draft.message = message }
        if let title = content.title { draft.title = title }
        if let subtitle = content.subtitle { draft.options.subtitle = subtitle }
        if let titles = content.actions, let actions = draft.options.actions {
            draft.options.actions = actions.map { PushOptions.Action(id: $0.id, title: titles[$0.id] ?? $0.title) }
        }
        return draft
    }

    /// The content locale a recipient whose locale is `userLocale` gets: theirs, falling back
    /// through its prefixes (`fr-CA`, `fr`), then the default locale's; nil for the campaign's
    /// own title and message.
    static func contentLocale(for userLocale: String?, locales: [String: LocalizedContent], defaultLocale: String) -> String? {
        guard !locales.isEmpty else { return nil }
        for candidate in (userLocale.map(UserPreferences.fallbacks) ?? []) + UserPreferences.fallbacks(defaultLocale) where locales[candidate] != nil {
            return candidate
        }
        return nil
    }

    /// Cancels campaign `id` (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries): nothing more is queued; pushes not yet handed to a push
    /// service are dropped (those in flight finish); recipients who got nothing lose the inbox
    /// entry; sent pushes stay sent. 404 for no such campaign, 409 for one already done. `audit`
    /// records who asked (`campaign.cancel`; `already` when it was cancelled before).
    public func cancel(_ id: Int64, now: Date = Date(), audit: AuditActor? = nil) async throws -> CampaignProgress {
        try await database.write { db in
            let lock = db.dialect == .postgres ? "FOR UPDATE" : ""
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ? \(lock)", arguments: [id]) else {
                throw CoreError(.notFound, "no campaign \(id)")
            }
            var campaign = try Self.campaign(row)
            try Audit.record(db, audit, "campaign.cancel", target: "campaign:\(id)", detail: ["already": .bool(campaign.cancelledAt != nil)])
            if campaign.cancelledAt == nil {
                let progress = try Self.progress(db, campaign: campaign, countedUpTo: pendingCountedUpTo)
                if progress.status == .done { throw CoreError(.conflict, "campaign \(id) is done: every push was sent, nothing is left to cancel") }
                let time = now.timeIntervalSince1970
                try db.execute(sql: "UPDATE campaigns SET cancelledAt = ?, queued = 1, leaseUntil = NULL WHERE id = ?", arguments: [time, id])
                // Not handed to a push service: never claimed, or claimed by a holder whose lease lapsed
                // (the outbox's leases are on the database's clock).
                // Runs before rows, the order in which recording sends locks them.
                let fromRuns = try OutboxRuns.drop(db, campaign: id)
                let dropped = Set(try Int64.fetchAll(db, sql: """
                    DELETE FROM deliveries WHERE campaignId = ? AND state = 'pending' AND (leaseTag IS NULL OR \(OutboxStore.leaseEnd) <= ?) RETURNING notificationId
                    """, arguments: [id, db.now]) + fromRuns)
                // Recipients who now get nothing lose the inbox entry, unless they have read it.
                for chunk in Array(dropped).sorted().sqlBatches() {
                    let gone = try Int64.fetchAll(db, sql: """
                        SELECT n.id FROM notifications n WHERE n.id IN (\(sqlPlaceholders(chunk.count))) AND n.read = 0
                            AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notificationId = n.id) AND NOT \(OutboxRuns.hasPush(db, notification: "n.id"))
                        """, arguments: SQLArguments(Array(chunk)))
                    guard !gone.isEmpty else { continue }
                    try db.execute(sql: "DELETE FROM media_refs WHERE owner IN (\(sqlPlaceholders(gone.count)))",
                                   arguments: SQLArguments(gone.map { "notification:\($0)" }))
                    try db.execute(sql: "DELETE FROM notifications WHERE id IN (\(sqlPlaceholders(gone.count)))", arguments: SQLArguments(gone))
                    try NotificationStore.recordRemovals(db, gone)
                }
                campaign.cancelledAt = now
                campaign.queued = true
                campaign.recipients = try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE campaignId = ?", arguments: [id]) ?? 0
                campaign.devices = try (Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ?", arguments: [id]) ?? 0)
                    + OutboxRuns.pushes(db, campaign: id)
                if campaign.pushes != nil { campaign.pushes = campaign.devices }
                try db.execute(sql: "UPDATE campaigns SET recipients = ?, devices = ?, pushes = ? WHERE id = ?",
                               arguments: [campaign.recipients, campaign.devices, campaign.pushes, id])
            }
            return try Self.progress(db, campaign: campaign, countedUpTo: pendingCountedUpTo)
        }
    }

    /// How many users and devices a campaign to `audience` would reach now (what `queue` would
    /// queue), read a thousand users at a time: the console's "will reach" before sending.
    /// A segment or a filter is counted by two queries, as `SegmentStore.count` does.
    public func reach(_ audience: Audience, app: String? = nil) async throws -> (users: Int, devices: Int) {
        try await database.read { db in
            if let filter = audience.segmentFilter {
                let selected = try SegmentStore.condition(db, filter, path: audience.filterPath, now: db.now)
                let users = try Int.fetchOne(db, sql: "SELECT count(*) FROM users u WHERE \(selected.sql)",
                                             arguments: SQLArguments(values: selected.arguments)) ?? 0
                let devices = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM registrations reg JOIN users u ON u.name = reg.username
                    WHERE reg.handle IS NOT NULL \(app == nil ? "" : "AND reg.app = ?") AND \(selected.sql)
                    """, arguments: SQLArguments(values: (app.map { [SQLValue.text($0)] } ?? [SQLValue]()) + selected.arguments)) ?? 0
                return (users, devices)
            }
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

    /// Campaign `id` with its counts, or nil.
    public func progress(_ id: Int64) async throws -> CampaignProgress? {
        try await database.read { db in
            // Polled while a campaign sends (the console, scripts): its statements are compiled once.
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT \(Self.shownColumns) FROM campaigns WHERE id = ?", arguments: [id], cached: true) else { return nil }
            return try Self.progress(db, campaign: try Self.campaign(row), countedUpTo: pendingCountedUpTo)
        }
    }

    /// The newest campaigns with their counts, newest first.
    /// With `app`, only that app's campaigns.
    public func list(limit: Int = 50, before: Int64? = nil, app: String? = nil) async throws -> [CampaignProgress] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT \(Self.shownColumns) FROM campaigns WHERE id < ? \(app == nil ? "" : "AND app = ?") ORDER BY id DESC LIMIT ?",
                                arguments: SQLArguments([before ?? Int64.max] + (app.map { [$0 as any SQLValueConvertible] } ?? []) + [limit]))
                .map { try Self.progress(db, campaign: try Self.campaign($0), countedUpTo: pendingCountedUpTo) }
        }
    }

    static func progress(_ db: SQLConnection, campaign: Campaign, countedUpTo: Int) throws -> CampaignProgress {
        var progress = try counts(db, campaign: campaign, countedUpTo: countedUpTo)
        // docs/api.md#ab-tests-and-conversions: an A/B test's settings and decision (one probe of its key).
        progress.experiment = try Experiments.progress(db, campaign.id)
        return progress
    }

    /// `progress` without its A/B test.
    private static func counts(_ db: SQLConnection, campaign: Campaign, countedUpTo: Int) throws -> CampaignProgress {
        // Sent, failed and displayed are counted as they happen (campaign_stats, in the same
        // transactions): summing them reads a row per minute and platform, so asking costs the
        // same at a million recipients as at ten (the console asks every few seconds while a
        // campaign sends, and a script may ask several times a second).
        if let kept = try SQLRow.fetchOne(db, sql: """
            SELECT coalesce(sum(s.sent), 0) AS sent, coalesce(sum(s.failed), 0) AS failed, coalesce(sum(s.displayed), 0) AS displayed,
                   coalesce(sum(s.capped), 0) AS capped
            FROM campaigns c LEFT JOIN campaign_stats s ON s.campaignId = c.id WHERE c.id = ? AND c.countedInStats = 1 GROUP BY c.id
            """, arguments: [campaign.id], cached: true) {
            let (sent, failed, capped): (Int, Int, Int) = (kept["sent"], kept["failed"], kept["capped"])
            // A push held back by a cap is done with, as one failed is (docs/api.md#frequency-caps-and-quiet-hours).
            return CampaignProgress(campaign: campaign, pending: try pending(db, campaign: campaign, sent: sent, failed: failed + capped, countedUpTo: countedUpTo),
                                    sent: sent, failed: failed, fetched: kept["displayed"])
        }
        var counts: [String: Int] = [:]
        for row in try SQLRow.fetchAll(db, sql: "SELECT state, count(*) AS n FROM deliveries WHERE campaignId = ? GROUP BY state", arguments: [campaign.id]) {
            counts[row["state"]] = row["n"]
        }
        let fetched = try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE campaignId = ? AND read = 1", arguments: [campaign.id]) ?? 0
        return CampaignProgress(campaign: campaign, pending: counts["pending"] ?? 0, sent: counts["sent"] ?? 0, failed: counts["failed"] ?? 0,
                                fetched: fetched)
    }

    /// The pushes of `campaign` still to send: its pushes queued less those counted sent or
    /// failed. Both counters change in the transactions that change its original pushes in the
    /// outbox (a user removed mid-campaign takes their pending pushes out of those queued), so
    /// asking costs the same at a million recipients as at ten. Counting the index instead took
    /// 75 ms at a million on SQLite, and a script polling a campaign four times a second then
    /// took a third of a core from the sends (bench/million.sh, issue #28); on PostgreSQL, whose
    /// index keeps the entries of pushes sent until a vacuum, a count of 10,000 took 9 ms in a
    /// 50,000-device campaign (issue #51).
    ///
    /// A campaign with a notification changed or taken back (`revisedAt`) has pushes beyond
    /// those queued (replacements and retractions; the pushes taken back leave the outbox
    /// uncounted), and a cancelled one's pushes queued are set to its rows left: for those,
    /// below `countedUpTo` its pending pushes are counted in the index, above it the counters'
    /// figure stands. Campaigns from before pushes were counted are counted row by row.
    private static func pending(_ db: SQLConnection, campaign: Campaign, sent: Int, failed: Int, countedUpTo: Int) throws -> Int {
        guard let pushes = campaign.pushes else {
            return try (Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ? AND state = 'pending'", arguments: [campaign.id]) ?? 0)
                + OutboxRuns.pending(db, campaign: campaign.id)
        }
        if campaign.cancelledAt == nil,
           try Bool.fetchOne(db, sql: "SELECT revisedAt IS NULL FROM campaigns WHERE id = ?", arguments: [campaign.id], cached: true) == true {
            return max(0, pushes - sent - failed)
        }
        let counted = try (Int.fetchOne(db, sql: """
            SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE campaignId = ? AND state = 'pending' LIMIT ?) AS pending
            """, arguments: [campaign.id, countedUpTo], cached: true) ?? 0) + OutboxRuns.pending(db, campaign: campaign.id)
        return counted < countedUpTo ? counted : max(counted, pushes - sent - failed)
    }

    /// What a campaign is shown with (listed, polled, answered): every column but its content,
    /// whose locale names are enough (content only for a campaign made before they were kept).
    static let shownColumns = """
        id, audience, message, title, richType, payload, mode, createdBy, createdAt, recipients, devices, queued, app, sendAt,
        atLocalTime, onLocalDate, defaultLocale, cancelledAt, options, ratePerMinute, paceNextAt, pushes, countedInStats,
        localeNames, CASE WHEN localeNames IS NULL THEN content END AS content, changedAt, retractedAt, limits, traceparent
        """

    /// A row's schedule (`sendAt`, or `atLocalTime` with `onLocalDate`).
    static func schedule(_ row: SQLRow) throws -> CampaignSchedule? {
        if let sendAt: Double = row["sendAt"] {
            return .at(Date(timeIntervalSince1970: sendAt))
        } else if let time: String = row["atLocalTime"] {
            return .localTime(try LocalTime(time), date: try (row["onLocalDate"] as String?).map(LocalDate.init))
        }
        return nil
    }

    static func campaign(_ row: SQLRow) throws -> Campaign {
        guard let payload = MediaID(row["payload"] as String) else { throw CoreError(.notFound, "campaign payload unreadable") }
        let schedule = try Self.schedule(row)
        let locales = try (row["content"] as String?).map { try JSONDecoder().decode([String: LocalizedContent].self, from: Data($0.utf8)) } ?? [:]
        let names = (row["localeNames"] as String?).map { $0.split(separator: ",").map(String.init) } ?? locales.keys.sorted()
        return Campaign(id: row["id"], audience: try Audience(stored: row["audience"]), message: row["message"], title: row["title"],
                        richType: row["richType"], payload: payload, mode: PushMode(rawValue: row["mode"]) ?? .alert,
                        createdBy: row["createdBy"], createdAt: Date(timeIntervalSince1970: row["createdAt"]),
                        recipients: row["recipients"], devices: row["devices"], queued: row["queued"], app: row["app"],
                        schedule: schedule, locales: locales, localeNames: names, defaultLocale: row["defaultLocale"] ?? "en",
                        cancelledAt: (row["cancelledAt"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        options: PushOptions(stored: row["options"]), ratePerMinute: row["ratePerMinute"],
                        paceNextAt: (row["paceNextAt"] as Double?).map(Date.init(timeIntervalSince1970:)), pushes: row["pushes"],
                        changedAt: (row["changedAt"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        retractedAt: (row["retractedAt"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        limits: (row["limits"] as Int?) != 0, traceparent: row["traceparent"])
    }
}
