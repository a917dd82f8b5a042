import Foundation
import MediaStore
import SQLEngine

/// An A/B test's settings and where it stands (docs/api.md#ab-tests-and-conversions), as a
/// campaign's progress shows it.
public struct ExperimentProgress: Sendable, Equatable {
    /// The variants' names, in the order given.
    public var variants: [String]
    public var testShare: Double
    public var holdout: Double
    public var metric: Experiment.Metric
    /// `after` as it was asked (`2h`).
    public var after: String
    public var fallback: String?
    /// When its test group started going out (nil until its first batch is queued), and when
    /// the winner is due (`startedAt + after`).
    public var startedAt: Date?
    public var decideAt: Date?
    /// When the winner was decided; nil until then.
    public var decidedAt: Date?
    /// Pearson's χ² over the variants (users with the metric, users without) and its p-value; nil until decided.
    public var statistic: Double?
    public var pValue: Double?
    /// The variant the rest got: the best one when p < 0.05, else the fallback; nil until decided, or when there is none.
    public var winner: String?
    /// Whether p < 0.05; nil until decided.
    public var significant: Bool?
}

/// An A/B test's counts (docs/api.md#ab-tests-and-conversions), from counters kept as things happen.
public struct ExperimentStats: Sendable, Equatable {
    /// One variant's test group: users assigned to it, and how many of them were sent a push, fetched it,
    /// opened it and converted (each user once).
    public struct Variant: Sendable, Equatable {
        public var name: String
        public var users: Int
        public var sent: Int
        public var displayed: Int
        public var opened: Int
        public var converted: Int
    }
    public var variants: [Variant]
    /// Users held out (sent nothing), and how many of them converted within 24 h of the campaign's start.
    public var holdoutUsers: Int
    public var holdoutConverted: Int
    /// As `ExperimentProgress`: nil until decided.
    public var statistic: Double?
    public var pValue: Double?
    public var winner: String?
    public var significant: Bool?
}

/// The A/B tests' rows (docs/api.md#ab-tests-and-conversions), inside the callers' transactions:
/// `campaign_experiments` (a test's settings, resolved variants, lease and decision),
/// `campaign_members` (each user the campaign reached, with their arm and, once each, whether they
/// were sent it, fetched it, opened it, converted), `campaign_arms` (those counts per arm, kept in
/// the same transactions, so that stats read a few rows) and `conversions` (one per campaign and user).
enum Experiments {
    /// A test as queueing and deciding read it.
    struct State: Sendable {
        var experiment: Experiment
        var startedAt: Double?
        var decidedAt: Double?
        var winner: Int?
        var leasedBy: Int64?
    }

    /// How long an event after a push (or after a test's start, for the holdout) counts as its conversion.
    static let conversionWindow: Double = 86_400

    /// Resolves `draft`'s variants against the campaign's content (each field a variant leaves
    /// out is the campaign's), checks each as a campaign's content is checked (its payload exists,
    /// its locales and options, its push fits every platform: 400/422 naming the variant) and
    /// records the test of campaign `id`, in the transaction that records the campaign.
    static func insert(_ db: SQLConnection, campaign id: Int64, draft: ExperimentDraft, rules: ExperimentRules, base: NotificationDraft,
                       locales: [String: LocalizedContent], defaultLocale: String, defaultImage: String, links: PayloadLinks?, now: Date) throws {
        var variants: [ExperimentVariant] = []
        for (index, variant) in draft.variants.enumerated() {
            do {
                var content = base
                if let title = variant.title { content.title = title }
                if let message = variant.message { content.message = message }
                if let payload = variant.payload { content.payload = payload }
                if var options = variant.options {
                    options.badge = base.options.badge
                    content.options = options
                }
                if let count = variant.locales?.count, count > Campaign.maxLocales {
                    throw CoreError(.tooLarge, "content has \(count) locales; a campaign has at most \(Campaign.maxLocales)")
                }
                let checked = try CampaignStore.checkedLocales(content, variant.locales ?? locales, defaultLocale: defaultLocale)
                let writer = try NotificationWriter(db, draft: content, defaultImage: defaultImage, links: links, now: now)
                try writer.checkFitsEveryPlatform(db)
                for (_, localized) in checked {
                    try NotificationWriter(db, draft: CampaignStore.localized(content, localized), defaultImage: defaultImage, links: links, now: now)
                        .checkFitsEveryPlatform(db)
                }
                try MediaIndex.addReference(db, id: writer.media.id, owner: "campaign:\(id)", now: now)
                variants.append(ExperimentVariant(name: variant.name, title: writer.title, message: writer.message, payload: writer.media.id.hex,
                                                  options: writer.options.stored, locales: checked))
            } catch let error as CoreError {
                throw CoreError(error.kind, "variants[\(index)] (\(variant.name)): \(error.message)")
            }
        }
        let encoder = CampaignStore.sortedEncoder
        try db.execute(sql: """
            INSERT INTO campaign_experiments (campaignId, variants, variantNames, testShare, holdout, metric, afterSeconds, afterText, fallback)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [id, String(decoding: try encoder.encode(variants), as: UTF8.self),
                             String(decoding: try encoder.encode(rules.names), as: UTF8.self), rules.testShare, rules.holdout,
                             rules.metric.rawValue, rules.after, rules.afterText, rules.fallback])
    }

    /// Campaign `id`'s test with its variants (what queueing needs), or nil for a campaign without one.
    static func state(_ db: SQLConnection, _ id: Int64) throws -> State? {
        guard let row = try SQLRow.fetchOne(db, sql: """
            SELECT variants, testShare, holdout, metric, afterSeconds, afterText, fallback, startedAt, decidedAt, winner, leasedBy
            FROM campaign_experiments WHERE campaignId = ?
            """, arguments: [id], cached: true) else { return nil }
        let variants = try JSONDecoder().decode([ExperimentVariant].self, from: Data((row["variants"] as String).utf8))
        let experiment = Experiment(variants: variants, testShare: row["testShare"], holdout: row["holdout"],
                                    metric: Experiment.Metric(rawValue: row["metric"]) ?? .opened, after: row["afterSeconds"],
                                    afterText: row["afterText"], fallback: row["fallback"])
        return State(experiment: experiment, startedAt: row["startedAt"], decidedAt: row["decidedAt"], winner: row["winner"],
                     leasedBy: row["leasedBy"])
    }

    /// Campaign `id`'s test as its progress shows it (never its variants' content: a campaign is
    /// polled often), or nil.
    static func progress(_ db: SQLConnection, _ id: Int64) throws -> ExperimentProgress? {
        guard let row = try SQLRow.fetchOne(db, sql: """
            SELECT variantNames, testShare, holdout, metric, afterText, fallback, startedAt, decideAt, decidedAt, statistic, pValue, winner, significant
            FROM campaign_experiments WHERE campaignId = ?
            """, arguments: [id], cached: true) else { return nil }
        let names = try JSONDecoder().decode([String].self, from: Data((row["variantNames"] as String).utf8))
        func name(_ index: Int?) -> String? { index.flatMap { names.indices.contains($0) ? names[$0] : nil } }
        func date(_ column: String) -> Date? { (row[column] as Double?).map(Date.init(timeIntervalSince1970:)) }
        return ExperimentProgress(variants: names, testShare: row["testShare"], holdout: row["holdout"],
                                  metric: Experiment.Metric(rawValue: row["metric"]) ?? .opened, after: row["afterText"],
                                  fallback: name(row["fallback"]), startedAt: date("startedAt"), decideAt: date("decideAt"),
                                  decidedAt: date("decidedAt"), statistic: row["statistic"], pValue: row["pValue"],
                                  winner: name(row["winner"]), significant: row["significant"])
    }

    /// Queues `names` (the next batch of campaign's audience) for a campaign with a test, in the
    /// caller's transaction (`CampaignStore.queueRecipients`). Each user new to the test is
    /// recorded in their arm. Before the decision: each test user gets their variant's content;
    /// holdout and rest users get nothing (the test's clock starts with the first batch). After
    /// it: the rest gets the winner's content (users new to the audience since are assigned as
    /// the hash says, a test arm counting as the rest: the test is over); the holdout and the
    /// test group nothing more.
    static func queue(_ db: SQLConnection, _ campaign: inout Campaign, state: State, names: [String], addressing: DeliveryAddressing,
                      links: PayloadLinks?, defaultImage: String, indexed: Bool, sparse: Bool) throws -> [QueuedNotification] {
        let experiment = state.experiment, id = campaign.id
        var groups: [Int: [String]] = [:]
        if state.decidedAt == nil {
            if state.startedAt == nil {
                try db.execute(sql: "UPDATE campaign_experiments SET startedAt = ?, decideAt = ? WHERE campaignId = ? AND startedAt IS NULL",
                               arguments: [db.now, db.now + experiment.after, id])
            }
            let fresh = try record(db, id, names.map { ($0, experiment.arm(campaign: id, user: $0)) })
            for name in names {
                if let arm = fresh[name], arm >= 0 { groups[arm, default: []].append(name) }
            }
        } else {
            guard let winner = state.winner, experiment.variants.indices.contains(winner) else { return [] }
            var members = try recorded(db, id, of: names)
            let newcomers: [(String, Int)] = names.filter { members[$0] == nil }.map { name in
                (name, experiment.arm(campaign: id, user: name) == ExperimentArm.holdout ? ExperimentArm.holdout : ExperimentArm.rest)
            }
            let fresh = try record(db, id, newcomers)
            members.merge(fresh) { old, _ in old }
            groups[winner] = names.filter { members[$0] == ExperimentArm.rest }
        }
        var made: [QueuedNotification] = []
        for (arm, group) in groups.sorted(by: { $0.key < $1.key }) where !group.isEmpty {
            var variant = campaign
            experiment.variants[arm].apply(to: &variant)
            made += try CampaignStore.queueRecipients(db, &variant, names: group, addressing: addressing, links: links, defaultImage: defaultImage,
                                                      indexed: indexed, sparse: sparse, experimentArms: false)
            campaign.recipients = variant.recipients
            campaign.devices = variant.devices
            campaign.pushes = variant.pushes
            campaign.paceNextAt = variant.paceNextAt
        }
        return made
    }

    /// Records `assigned` (user, arm) as campaign `id`'s members, those not yet recorded, and
    /// counts them in their arms; returns the ones recorded now.
    private static func record(_ db: SQLConnection, _ id: Int64, _ assigned: [(String, Int)]) throws -> [String: Int] {
        var fresh: [String: Int] = [:]
        for chunk in assigned.sqlBatches(of: 300) {
            let rows = try db.fetchAll(sql: """
                INSERT INTO campaign_members (campaignId, userName, arm) VALUES \(Array(repeating: "(?, ?, ?)", count: chunk.count).joined(separator: ", "))
                ON CONFLICT DO NOTHING RETURNING userName, arm
                """, arguments: SQLArguments(chunk.flatMap { [id as any SQLValueConvertible, $0.0, $0.1] }))
            for row in rows {
                let (name, arm): (String, Int) = (row["userName"], row["arm"])
                fresh[name] = arm
            }
        }
        var byArm: [Int: Int] = [:]
        for arm in fresh.values { byArm[arm, default: 0] += 1 }
        for (arm, count) in byArm.sorted(by: { $0.key < $1.key }) {
            try db.execute(sql: """
                INSERT INTO campaign_arms (campaignId, arm, users) VALUES (?, ?, ?)
                ON CONFLICT (campaignId, arm) DO UPDATE SET users = campaign_arms.users + excluded.users
                """, arguments: [id, arm, count], cached: true)
        }
        return fresh
    }

    /// The arms of those of `names` campaign `id` has recorded.
    private static func recorded(_ db: SQLConnection, _ id: Int64, of names: [String]) throws -> [String: Int] {
        var arms: [String: Int] = [:]
        for chunk in names.sqlBatches() {
            for row in try SQLRow.fetchAll(db, sql: "SELECT userName, arm FROM campaign_members WHERE campaignId = ? AND userName IN (\(sqlPlaceholders(chunk.count)))",
                                           arguments: SQLArguments([id as any SQLValueConvertible] + chunk.map { $0 as any SQLValueConvertible })) {
                let (name, arm): (String, Int) = (row["userName"], row["arm"])
                arms[name] = arm
            }
        }
        return arms
    }

    /// Counts what `happenings` did to tests' members (`Insight.record`, in its transaction): a
    /// member's first push sent, first fetch, open, each once per user, in their arm's counters.
    /// A campaign without a test costs one probe of `campaign_experiments` per call.
    static func count(_ db: SQLConnection, _ happenings: [Happening]) throws {
        // The campaigns first (a batch of sends is nearly always one): only a test's happenings are gathered by user.
        let campaigns = Set(happenings.compactMap(\.campaign)).sorted()
        for campaign in campaigns {
            guard try Int.fetchOne(db, sql: "SELECT 1 FROM campaign_experiments WHERE campaignId = ?", arguments: [campaign], cached: true) != nil else {
                continue
            }
            var columns: [String: Set<String>] = [:]
            for happening in happenings where happening.campaign == campaign {
                guard let user = happening.user else { continue }
                switch happening.type {
                case .sent: columns["sent", default: []].insert(user)
                case .displayed: columns["displayed", default: []].insert(user)
                case .opened: columns["opened", default: []].insert(user)
                default: continue
                }
            }
            for (column, users) in columns.sorted(by: { $0.key < $1.key }) {
                try mark(db, campaign: campaign, column: column, users: users.sorted())
            }
        }
    }

    /// Sets `column` (`sent`, `displayed`, `opened`, `converted`) of `users` in campaign's test,
    /// where it is not set yet, and adds them to their arms' counters.
    static func mark(_ db: SQLConnection, campaign: Int64, column: String, users: [String]) throws {
        var byArm: [Int: Int] = [:]
        for chunk in users.sqlBatches() {
            for row in try db.fetchAll(sql: """
                UPDATE campaign_members SET \(column) = 1 WHERE campaignId = ? AND \(column) = 0 AND userName IN (\(sqlPlaceholders(chunk.count)))
                RETURNING arm
                """, arguments: SQLArguments([campaign as any SQLValueConvertible] + chunk.map { $0 as any SQLValueConvertible })) {
                byArm[row["arm"], default: 0] += 1
            }
        }
        for (arm, count) in byArm.sorted(by: { $0.key < $1.key }) {
            try db.execute(sql: """
                INSERT INTO campaign_arms (campaignId, arm, \(column)) VALUES (?, ?, ?)
                ON CONFLICT (campaignId, arm) DO UPDATE SET \(column) = campaign_arms.\(column) + excluded.\(column)
                """, arguments: [campaign, arm, count])
        }
    }

    /// The test's contingency table, a row per variant: [users with the metric, users without],
    /// over the variant's users who had at least one push queued (a user with no device, or none
    /// the audience reached, is not in it).
    static func table(_ db: SQLConnection, _ id: Int64, experiment: Experiment) throws -> [[Int]] {
        var table = Array(repeating: [0, 0], count: experiment.variants.count)
        let column = experiment.metric.rawValue
        for row in try SQLRow.fetchAll(db, sql: """
            SELECT m.arm AS arm, count(*) AS n, coalesce(sum(m.\(column)), 0) AS hit FROM campaign_members m
            WHERE m.campaignId = ? AND m.arm >= 0
                AND EXISTS (SELECT 1 FROM notifications n WHERE n.campaignId = m.campaignId AND n.recipient = m.userName
                            AND (EXISTS (SELECT 1 FROM deliveries d WHERE d.notificationId = n.id) OR \(OutboxRuns.hasPush(db, notification: "n.id"))))
            GROUP BY m.arm
            """, arguments: [id]) {
            let (arm, reached, hit): (Int, Int, Int) = (row["arm"], row["n"], row["hit"])
            guard table.indices.contains(arm) else { continue }
            table[arm] = [hit, reached - hit]
        }
        return table
    }

    /// The row of `table` with the highest rate (the first of equals); nil when no row has users.
    static func best(_ table: [[Int]]) -> Int? {
        var best: (index: Int, rate: Double)?
        for (index, row) in table.enumerated() {
            let users = row.reduce(0, +)
            guard users > 0 else { continue }
            let rate = Double(row[0]) / Double(users)
            if best.map({ rate > $0.rate }) ?? true { best = (index, rate) }
        }
        return best?.index
    }

    /// Campaign `id`'s test counts, or nil for a campaign without a test.
    static func stats(_ db: SQLConnection, _ id: Int64) throws -> ExperimentStats? {
        guard let shown = try Self.progress(db, id) else { return nil }
        var arms: [Int: SQLRow] = [:]
        for row in try SQLRow.fetchAll(db, sql: "SELECT arm, users, sent, displayed, opened, converted FROM campaign_arms WHERE campaignId = ?",
                                       arguments: [id]) {
            let arm: Int = row["arm"]
            arms[arm] = row
        }
        func counted(_ arm: Int, _ column: String) -> Int { arms[arm].map { $0[column] as Int } ?? 0 }
        let variants = shown.variants.enumerated().map { index, name in
            ExperimentStats.Variant(name: name, users: counted(index, "users"), sent: counted(index, "sent"), displayed: counted(index, "displayed"),
                                    opened: counted(index, "opened"), converted: counted(index, "converted"))
        }
        return ExperimentStats(variants: variants, holdoutUsers: counted(ExperimentArm.holdout, "users"),
                               holdoutConverted: counted(ExperimentArm.holdout, "converted"), statistic: shown.statistic, pValue: shown.pValue,
                               winner: shown.winner, significant: shown.significant)
    }

    /// Recipients of campaign `id` who converted (`POST /api/events`), the holdout's aside.
    static func converted(_ db: SQLConnection, _ id: Int64) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM conversions WHERE campaignId = ? AND (arm IS NULL OR arm <> \(ExperimentArm.holdout))",
                         arguments: [id], cached: true) ?? 0
    }
}

extension CampaignStore {
    /// How long a node holds a test it decides.
    static let decisionLease: Double = 60
    /// The most tests one `decideExperiments` decides (the next call takes the others).
    static let decisionsPerRun = 100

    /// Decides the A/B tests whose winner is due (docs/api.md#ab-tests-and-conversions), each
    /// once whichever nodes run this: a node leases a due test (`decideAt` passed, nobody's lease
    /// live, its test group wholly queued; on PostgreSQL `FOR UPDATE SKIP LOCKED`), then in one
    /// transaction counts the variants, runs Pearson's χ² over them and writes the statistic, the
    /// p-value and the winner with the decision. When there is a winner and a rest, the campaign is
    /// opened again for queueing (its cursor from the start, leased by this node) and handed to
    /// `handOff` (the server's `CampaignQueuer`), or queued here without one: the rest gets the
    /// winner through the normal queueing and pace. A test whose time passed while no node ran is
    /// decided by the first call after. Returns the campaigns decided here.
    @discardableResult
    public func decideExperiments(addressing: DeliveryAddressing, handOff: (@Sendable (Int64) -> Void)? = nil,
                                  batchQueued: @Sendable () -> Void = {}) async throws -> [Int64] {
        var decided: [Int64] = []
        for _ in 0..<Self.decisionsPerRun {
            guard let id = try await claimDecision() else { break }
            guard let reopened = try await decide(id) else { continue }
            decided.append(id)
            guard reopened else { continue }
            if let handOff { handOff(id) } else { _ = try await queue(id, addressing: addressing, batchQueued: batchQueued) }
        }
        return decided
    }

    /// Leases the test due first, if any: its campaign id. A campaign wholly queued whose test
    /// never started (its audience walk met nobody, or it was cancelled before its time) is due
    /// at once: nothing is left to wait for.
    private func claimDecision() async throws -> Int64? {
        try await database.write(isolation: .readCommitted) { db -> Int64? in
            let now = db.now
            let lock = db.dialect == .postgres ? "FOR UPDATE SKIP LOCKED" : ""
            guard let id = try Int64.fetchOne(db, sql: """
                SELECT e.campaignId FROM campaign_experiments e
                WHERE e.decidedAt IS NULL AND (e.decideAt <= ? OR e.startedAt IS NULL) AND (e.leaseUntil IS NULL OR e.leaseUntil < ?)
                    AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = e.campaignId AND c.queued = 1)
                ORDER BY e.decideAt LIMIT 1 \(lock)
                """, arguments: [now, now]) else { return nil }
            try db.execute(sql: """
                UPDATE campaign_experiments SET leaseUntil = ?, leasedBy = ?
                WHERE campaignId = ? AND decidedAt IS NULL AND (leaseUntil IS NULL OR leaseUntil < ?)
                """, arguments: [now + Self.decisionLease, Self.holder, id, now])
            return db.changesCount == 1 ? id : nil
        }
    }

    /// Decides campaign `id`'s test under this node's lease: nil when it no longer holds it (or
    /// it was decided meanwhile), else whether the campaign was opened again for its rest.
    private func decide(_ id: Int64) async throws -> Bool? {
        try await database.write { db -> Bool? in
            guard let state = try Experiments.state(db, id), state.decidedAt == nil, state.leasedBy == Self.holder else { return nil }
            let experiment = state.experiment
            let table = try Experiments.table(db, id, experiment: experiment)
            let result = ChiSquared.test(table)
            let significant = !result.degenerate && result.pValue < Experiment.significance
            let winner = significant ? Experiments.best(table) : experiment.fallback
            try db.execute(sql: """
                UPDATE campaign_experiments SET decidedAt = ?, statistic = ?, pValue = ?, winner = ?, significant = ?, leaseUntil = NULL
                WHERE campaignId = ? AND decidedAt IS NULL AND leasedBy = ?
                """, arguments: [db.now, result.statistic, result.pValue, winner, significant, id, Self.holder])
            guard db.changesCount == 1 else { return nil }
            if winner != nil, experiment.hasRest {
                try db.execute(sql: """
                    UPDATE campaigns SET queued = 0, cursor = NULL, queuedBy = ?, leaseUntil = ? WHERE id = ? AND queued = 1 AND cancelledAt IS NULL
                    """, arguments: [Self.holder, db.now + Self.lease, id])
                if db.changesCount == 1 { return true }
            }
            // Nobody more to send to: done once nothing is pending.
            try Insight.finishCampaigns(db, [id], now: db.now)
            return false
        }
    }

    /// `POST /api/events` (docs/api.md#ab-tests-and-conversions): `user`'s app event `name`,
    /// counted as a conversion of each campaign whose push (a delivery recorded sent) the user got
    /// within the last 24 h, and as a holdout conversion of each A/B test started within the last
    /// 24 h that held the user out; each once per campaign and user (one row in `conversions`),
    /// in the variant's counters for a test's member. Returns the campaigns it was counted for now
    /// (0 when the user's conversions were all counted before). 400 for a name that is not 1 to 64
    /// letters, digits, `_ . : -`.
    public func recordConversion(user: String, name: String) async throws -> Int {
        guard Experiment.isName(name) else {
            throw CoreError(.invalid, "name must be 1 to 64 letters, digits, _ . : or -, got '\(name.prefix(70))'")
        }
        return try await database.write(isolation: .readCommitted) { db -> Int in
            let now = db.now, since = db.now - Experiments.conversionWindow
            let reached = try Int64.fetchAll(db, sql: """
                SELECT DISTINCT n.campaignId FROM notifications n
                WHERE n.recipient = ? AND n.campaignId IS NOT NULL
                    AND (EXISTS (SELECT 1 FROM deliveries d WHERE d.notificationId = n.id AND d.state = 'sent' AND d.kind IS NULL AND d.updatedAt >= ?)
                         OR \(OutboxRuns.sent(db, notification: "n.id", since: "?")))
                """, arguments: [user, since, since])
            let heldOut = try Int64.fetchAll(db, sql: """
                SELECT m.campaignId FROM campaign_members m JOIN campaign_experiments e ON e.campaignId = m.campaignId
                WHERE m.userName = ? AND m.arm = \(ExperimentArm.holdout) AND e.startedAt >= ?
                """, arguments: [user, since])
            var counted = 0
            for campaign in Set(reached + heldOut).sorted() {
                let arm = try Int.fetchOne(db, sql: "SELECT arm FROM campaign_members WHERE campaignId = ? AND userName = ?",
                                           arguments: [campaign, user], cached: true)
                try db.execute(sql: "INSERT INTO conversions (campaignId, userName, name, arm, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                               arguments: [campaign, user, name, arm, now], cached: true)
                guard db.changesCount == 1 else { continue }
                counted += 1
                if arm != nil { try Experiments.mark(db, campaign: campaign, column: "converted", users: [user]) }
            }
            return counted
        }
    }
}
