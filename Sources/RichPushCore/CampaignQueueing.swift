import Foundation
import SQLEngine
import Telemetry
import MediaStore

extension CampaignStore {
    /// Queues the rest of campaign `id`, a batch per transaction; `batchQueued` is called after
    /// each commit (to wake the dispatcher). Returns the campaign once everyone is queued.
    /// With `maxBatches`, stops after that many batches (the campaign then says `queued == false`).
    ///
    /// With `ahead`, a batch is queued only while fewer than `ahead` of the campaign's pushes
    /// wait to be sent: queueing keeps a few seconds ahead of the sends instead of racing them
    /// for the database (on SQLite a push cost twice the CPU while its campaign was still being
    /// queued, issue #28), and the outbox stays small whatever the audience. The lease is
    /// renewed while it waits, and a cancelled task stops before its next batch. When the pushes
    /// waiting stay at `ahead` and none is sent or fails for `stalled` (pushes for a platform no
    /// node sends, a service down or throttling), the rest
    /// is queued without waiting, as without `ahead`: nobody is left out of the inbox. A paced
    /// campaign (`ratePerMinute`) is queued whole, its pushes being spread over time anyway.
    ///
    /// While tracing is on, it is a span (`campaign.queue`) of the trace of the request that made
    /// the campaign (docs/operations.md#traces), on whichever node queues it.
    public func queue(_ id: Int64, addressing: DeliveryAddressing, maxBatches: Int = .max, ahead: Int? = nil,
                      stalled: Duration = .seconds(15), batchQueued: @Sendable () -> Void = {}) async throws -> Campaign {
        guard Telemetry.isTracing else {
            return try await queueBatches(id, addressing: addressing, maxBatches: maxBatches, ahead: ahead, stalled: stalled, batchQueued: batchQueued)
        }
        let parent = try await database.read { db in try String.fetchOne(db, sql: "SELECT traceparent FROM campaigns WHERE id = ?", arguments: [id]) }
        return try await Telemetry.traced("campaign.queue", parent: Telemetry.context(traceparent: parent)) { span in
            span?.attributes["richpush.campaign"] = Int(id)
            let campaign = try await queueBatches(id, addressing: addressing, maxBatches: maxBatches, ahead: ahead, stalled: stalled,
                                                  batchQueued: batchQueued)
            span?.attributes["richpush.recipients"] = campaign.recipients
            span?.attributes["richpush.queued"] = campaign.queued
            return campaign
        }
    }

    private func queueBatches(_ id: Int64, addressing: DeliveryAddressing, maxBatches: Int, ahead: Int?, stalled: Duration,
                              batchQueued: @Sendable () -> Void) async throws -> Campaign {
        precondition(ahead.map { $0 > 0 } ?? true, "ahead must be positive")
        try await prepare(id)
        let background = ahead != nil
        var ahead = ahead
        if ahead != nil, try await database.read({ db in try Int.fetchOne(db, sql: "SELECT ratePerMinute FROM campaigns WHERE id = ?", arguments: [id]) }) != nil {
            ahead = nil
        }
        var batches = 0
        while true {
            // In the background, a shutdown stops queueing between batches, waiting or not.
            if background { try Task.checkCancellation() }
            // Polled every 50 ms while the sends catch up: outside the campaign's trace (docs/operations.md#traces).
            if let limit = ahead, !(try await ServiceContext.$current.withValue(nil) { try await waitForSends(of: id, below: limit, stalled: stalled) }) {
                ahead = nil
            }
            let (campaign, made) = try await queueBatch(id, addressing: addressing)
            if !made.isEmpty { onQueued?(made) }
            batches += 1
            batchQueued()
            if campaign.queued || batches >= maxBatches { return campaign }
        }
    }

    /// On PostgreSQL, refreshes the planner's statistics of the outbox. A large campaign moves
    /// thousands of rows to pending within seconds: until autovacuum's next ANALYZE (a minute or
    /// more), plans made for an outbox of few pending rows scan every pending row to record
    /// each batch of sends by id and to claim each batch (found with auto_explain in
    /// bench/million.sh, where the rate rose from about 1,500 to 2,100 pushes/s when it ran).
    /// It samples a bounded number of rows and blocks neither reads nor writes; SKIP_LOCKED: it
    /// neither waits for an autovacuum of the table nor makes PostgreSQL cancel one. Run by a
    /// role that does not own the table, PostgreSQL skips it with a warning. SQLite: nothing.
    ///
    /// It samples `300 × outboxStatisticsTarget` rows, not PostgreSQL's default 30,000: what these
    /// plans need is how many rows there are and what share is pending and due, which a small
    /// sample tells as well, at a tenth of the cost (docs/design/campaign-queueing.md). A
    /// campaign pays for one refresh at its start and one every 20 s while it is queued.
    public func refreshOutboxStatistics() async throws {
        guard database.dialect == .postgres else { return }
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: "SET LOCAL default_statistics_target = \(Self.outboxStatisticsTarget)")
            try db.execute(sql: "ANALYZE (SKIP_LOCKED) deliveries, outbox_runs")
        }
    }

    /// The statistics target of the outbox's refreshes (`default_statistics_target`, for that
    /// statement alone): at most 11 bounds in each column's histogram and 10 common values.
    package static let outboxStatisticsTarget = 10

    /// Returns true once fewer than `ahead` of campaign `id`'s pushes wait, looking every 50 ms
    /// and renewing the campaign's lease meanwhile; false once none was sent or failed (its
    /// counters) for `stalled`.
    ///
    /// Each look reads two counters: the pushes queued less those counted sent or failed, kept
    /// in the transactions that change the outbox. The waiting ones are counted in the index (at
    /// most `ahead` entries) only while the counters say `ahead` or more wait and none was
    /// counted sent or failed for a second (then once a second), in case they say more than
    /// wait: while sends go on, the counters move. Counting 5,000 entries every 50 ms was 1.7% of
    /// `serve`'s CPU during a 10,000-device campaign on SQLite (issue #28); on PostgreSQL, whose
    /// index keeps the entries of pushes sent until a vacuum, counting at every batch's first
    /// look was still 6% of its statements' time during a campaign (issue #51). The counters say
    /// fewer wait than do only for pushes queued by a node from before pushes were counted (a
    /// rolling upgrade from part three): the outbox then holds that many more than `ahead`. A
    /// campaign from before pushes were counted, or with a notification changed or taken back
    /// while it is queued (`revisedAt`: replacements are pushes beyond those queued), is counted
    /// in the index at every look.
    private func waitForSends(of id: Int64, below ahead: Int, stalled: Duration) async throws -> Bool {
        var since = ContinuousClock.now
        var renewed = since
        var counted: ContinuousClock.Instant?  // when the index was last counted
        var finished: Int?
        while true {
            // While pushes are being sent, the counters move and the index is not needed.
            let countNow = ContinuousClock.now - since >= .seconds(1) && counted.map { ContinuousClock.now - $0 >= .seconds(1) } ?? true
            let (waiting, done, exact) = try await database.read { db -> (Int, Int, Bool) in
                let done = try Int.fetchOne(db, sql: "SELECT coalesce(sum(sent + failed + capped), 0) FROM campaign_stats WHERE campaignId = ?", arguments: [id],
                                            cached: true) ?? 0
                let row = try SQLRow.fetchOne(db, sql: "SELECT pushes, countedInStats, revisedAt IS NULL AS unrevised FROM campaigns WHERE id = ?",
                                              arguments: [id], cached: true)
                if let pushes = row?["pushes"] as Int?, row?["countedInStats"] as Int? == 1, row?["unrevised"] as Bool? == true,
                   pushes - done < ahead || !countNow {
                    return (pushes - done, done, false)
                }
                let waiting = try (Int.fetchOne(db, sql: """
                    SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE campaignId = ? AND state = 'pending' LIMIT ?) AS pending
                    """, arguments: [id, ahead], cached: true) ?? 0) + OutboxRuns.pending(db, campaign: id)
                return (waiting, done, true)
            }
            if exact { counted = .now }
            guard waiting >= ahead else { break }
            if done != finished { (finished, since) = (done, .now) }
            if ContinuousClock.now - since >= stalled { return false }
            try await Task.sleep(for: .milliseconds(50))
            if ContinuousClock.now - renewed >= .seconds(Self.lease / 4) {
                renewed = .now
                try await database.write(isolation: .readCommitted) { db in
                    try db.execute(sql: "UPDATE campaigns SET leaseUntil = ? WHERE id = ? AND queued = 0", arguments: [db.now + Self.lease, id])
                }
            }
        }
        try Task.checkCancellation()
        return true
    }

    /// Runs `beforeQueueing` with campaign `id`'s payload, when it is set.
    func prepare(_ id: Int64) async throws {
        guard let beforeQueueing else { return }
        let payload = try await database.read { db in
            try String.fetchOne(db, sql: "SELECT payload FROM campaigns WHERE id = ?", arguments: [id]).flatMap { MediaID($0) }
        }
        if let payload { await beforeQueueing(payload) }
    }

    /// Queues `names` for `campaign` in the caller's transaction: each gets the notification
    /// in their locale and one push per device; the campaign's counts grow. A campaign whose
    /// words are templates has them rendered per recipient (`CampaignTemplates`); any other takes
    /// no more than its locales' query. A campaign with an A/B test (docs/api.md#ab-tests-and-conversions)
    /// has its recipients queued by arm (`Experiments.queue`), each arm's with `experimentArms` false.
    static func queueRecipients(_ db: SQLConnection, _ campaign: inout Campaign, names: [String], addressing: DeliveryAddressing,
                                        links: PayloadLinks?, defaultImage: String, indexed: Bool, sparse: Bool = false,
                                        experimentArms: Bool = true) throws -> [QueuedNotification] {
        guard !names.isEmpty else { return [] }
        if experimentArms, let state = try Experiments.state(db, campaign.id) {
            return try Experiments.queue(db, &campaign, state: state, names: names, addressing: addressing, links: links,
                                         defaultImage: defaultImage, indexed: indexed, sparse: sparse)
        }
        let now = Date()
        let draft = NotificationDraft(message: campaign.message, richType: campaign.richType, payload: campaign.payload.hex,
                                      title: campaign.title, mode: campaign.mode, options: campaign.options)
        // A paced campaign's pushes are due one step apart, after those queued before (docs/api.md#options-badges-and-paced-sends).
        let pace = campaign.ratePerMinute.map { Pace(start: max(campaign.paceNextAt?.timeIntervalSince1970 ?? 0, db.now), perMinute: $0) }
        var writers: [String: NotificationWriter] = [:] // by content locale, "" for the campaign's own words
        func writer(_ locale: String?) throws -> NotificationWriter {
            if let known = writers[locale ?? ""] { return known }
            let content = locale.flatMap { campaign.locales[$0] }
            let made = try NotificationWriter(db, draft: content.map { localized(draft, $0) } ?? draft, defaultImage: defaultImage, links: links,
                                              campaignId: campaign.id, now: now)
            writers[locale ?? ""] = made
            return made
        }
        // Personalized words (docs/api.md#templates-and-localization-keys) need each recipient's attributes: read with their locales.
        let people = try CampaignTemplates.isTemplated(campaign) ? CampaignTemplates.recipients(db, names) : nil
        var userLocales: [String: String] = people?.compactMapValues(\.locale) ?? [:]
        if people == nil, !campaign.locales.isEmpty {
            for chunk in names.sqlBatches() {
                for row in try SQLRow.fetchAll(db, sql: "SELECT name, locale FROM users WHERE name IN (\(sqlPlaceholders(chunk.count)))",
                                               arguments: SQLArguments(Array(chunk))) {
                    if let locale: String = row["locale"] { userLocales[row["name"]] = locale }
                }
            }
        }
        let devices = try Self.devices(db, of: names, audience: campaign.audience, app: campaign.app, sparse: sparse)
        var groups: [String: [(name: String, targets: [PushTarget])]] = [:]
        var queuedDevices = 0, queuedPushes = 0
        for name in names {
            let owned = devices[name] ?? []
            if case .tags = campaign.audience, owned.isEmpty { continue }
            // A tag expression picks devices: those go by device, a hub's too (to its installation).
            let byDevice = if case .tags = campaign.audience { true } else { false }
            let targets = addressing.targets(recipient: name, devices: owned, app: campaign.app, byDevice: byDevice)
            let locale = contentLocale(for: userLocales[name], locales: campaign.locales, defaultLocale: campaign.defaultLocale)
            groups[locale ?? "", default: []].append((name, targets))
            queuedDevices += owned.count
            queuedPushes += targets.count
        }
        var made: [QueuedNotification] = []
        var queuedRecipients = 0
        if let people {
            let created = try CampaignTemplates.insert(db, groups.sorted(by: { $0.key < $1.key }), people: people, campaignId: campaign.id,
                                                       pace: pace, writer: writer)
            queuedRecipients = created.count
            if indexed {
                made = created.map { QueuedNotification(id: $0.notification.id, recipient: $0.notification.recipient, payload: $0.notification.payload) }
            }
        } else {
            for (locale, recipients) in groups.sorted(by: { $0.key < $1.key }) {
                let writer = try writer(locale.isEmpty ? nil : locale)
                let created = try writer.insert(db, recipients: recipients, pace: pace)
                queuedRecipients += created.count
                if indexed {
                    made += created.map { QueuedNotification(id: $0.notification.id, recipient: $0.notification.recipient, payload: writer.media.id) }
                }
            }
        }
        campaign.recipients += queuedRecipients
        campaign.devices += queuedDevices
        if let pushes = campaign.pushes {
            campaign.pushes = pushes + queuedPushes
            try db.execute(sql: "UPDATE campaigns SET pushes = pushes + ? WHERE id = ?", arguments: [queuedPushes, campaign.id])
        }
        if let pace {
            campaign.paceNextAt = Date(timeIntervalSince1970: pace.nextAt)
            try db.execute(sql: "UPDATE campaigns SET paceNextAt = ? WHERE id = ?", arguments: [pace.nextAt, campaign.id])
        }
        return made
    }

    /// One batch: the next recipients after the cursor, their notifications and deliveries,
    /// and the moved cursor, in one transaction.
    private func queueBatch(_ id: Int64, addressing: DeliveryAddressing) async throws -> (Campaign, [QueuedNotification]) {
        let links = self.links, batchSize = self.batchSize, defaultImage = self.defaultImage, indexed = onQueued != nil
        return try await database.write { db -> (Campaign, [QueuedNotification]) in
            // Locked on PostgreSQL: two nodes queueing one campaign take turns, each after the other's cursor.
            let lock = db.dialect == .postgres ? "FOR UPDATE" : ""
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ? \(lock)", arguments: [id]) else {
                throw CoreError(.notFound, "no campaign \(id)")
            }
            var campaign = try Self.campaign(row)
            guard !campaign.queued, campaign.cancelledAt == nil else { return (campaign, []) }
            let cursor: String = row["cursor"] ?? ""
            let (names, nextCursor, exhausted) = try Self.nextRecipients(db, campaign.audience, after: cursor, limit: batchSize)
            let made = try Self.queueRecipients(db, &campaign, names: names, addressing: addressing, links: links, defaultImage: defaultImage, indexed: indexed)
            campaign.queued = exhausted
            try db.execute(sql: "UPDATE campaigns SET recipients = ?, devices = ?, cursor = ?, queued = ?, leaseUntil = ? WHERE id = ?",
                           arguments: [campaign.recipients, campaign.devices, nextCursor, exhausted, db.now + Self.lease, id])
            // Every push may have been recorded before the last batch: done now, if so (a campaign with no devices too).
            if exhausted { try Insight.finishCampaigns(db, [id], now: db.now) }
            return (campaign, made)
        }
    }
}
