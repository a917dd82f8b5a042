import Crypto
import Foundation
import SQLEngine

/// What happened to a push, as docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks names it.
public enum DeliveryEventType: String, Sendable, CaseIterable, Codable {
    case sent, failed, displayed, opened
    /// A replacement of a changed notification, or a retraction's background push, sent to a
    /// device (docs/api.md#change-or-take-back-what-was-sent).
    case updated, retracted
    /// A campaign push held back by its app's frequency cap, or delayed by quiet hours
    /// (docs/api.md#frequency-caps-and-quiet-hours); a push dropped in quiet hours is `failed`.
    case capped, delayed
    case campaignDone = "campaign.done"
}

/// One thing that happened to a push: an event of the webhook queue (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks).
public struct DeliveryEvent: Sendable, Equatable {
    public var id: Int64
    public var type: DeliveryEventType
    public var at: Date
    public var campaign: Int64?
    public var notification: Int64?
    public var user: String?
    public var platform: String?
    public var reason: String?

    /// The event as a webhook receives it: `{"id","type","at","campaign","notification","user","platform","reason"}`.
    public var json: [String: Any] {
        var object: [String: Any] = ["id": id, "type": type.rawValue, "at": at.formatted(.iso8601)]
        // Every key, null where there is nothing: receivers see one shape.
        object["campaign"] = campaign ?? NSNull()
        object["notification"] = notification ?? NSNull()
        object["user"] = user ?? NSNull()
        object["platform"] = platform ?? NSNull()
        object["reason"] = reason ?? NSNull()
        return object
    }
}

/// What one push did, as the outbox, a payload fetch or a device reports it.
struct Happening {
    var type: DeliveryEventType
    var campaign: Int64?
    var notification: Int64?
    var user: String?
    var platform: String?
    var reason: String?
}

/// Counts and events, written in the transaction of what they count (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks): a campaign's
/// counters per minute and platform (`campaign_stats`) and its failure reasons
/// (`campaign_failures`), so that its stats never scan the outbox; and, when a webhook wants
/// that type, the event in the durable queue (`events`).
enum Insight {
    /// Counts `happenings` at `now` and queues the events webhooks want, inside the caller's transaction.
    static func record(_ db: SQLConnection, _ happenings: [Happening], now: Double) throws {
        guard !happenings.isEmpty else { return }
        let minute = Int64((now / 60).rounded(.down))
        struct Key: Hashable { var campaign: Int64; var platform: String }
        var counts: [Key: (sent: Int, failed: Int, displayed: Int, opened: Int, updated: Int, retracted: Int, capped: Int, delayed: Int)] = [:]
        var reasons: [Int64: [String: Int]] = [:]
        for happening in happenings {
            guard let campaign = happening.campaign else { continue }
            let key = Key(campaign: campaign, platform: happening.platform ?? "")
            var count = counts[key] ?? (0, 0, 0, 0, 0, 0, 0, 0)
            switch happening.type {
            case .sent: count.sent += 1
            case .failed:
                count.failed += 1
                reasons[campaign, default: [:]][Self.reasonKey(happening.reason), default: 0] += 1
            case .displayed: count.displayed += 1
            case .opened: count.opened += 1
            case .updated: count.updated += 1
            case .retracted: count.retracted += 1
            case .capped: count.capped += 1
            case .delayed: count.delayed += 1
            case .campaignDone: break
            }
            counts[key] = count
        }
        for (key, count) in counts.sorted(by: { ($0.key.campaign, $0.key.platform) < ($1.key.campaign, $1.key.platform) }) {
            try db.execute(sql: """
                INSERT INTO campaign_stats (campaignId, minute, platform, sent, failed, displayed, opened, updated, retracted, capped, delayed)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (campaignId, minute, platform) DO UPDATE SET sent = campaign_stats.sent + excluded.sent,
                    failed = campaign_stats.failed + excluded.failed, displayed = campaign_stats.displayed + excluded.displayed,
                    opened = campaign_stats.opened + excluded.opened, updated = campaign_stats.updated + excluded.updated,
                    retracted = campaign_stats.retracted + excluded.retracted, capped = campaign_stats.capped + excluded.capped,
                    delayed = campaign_stats.delayed + excluded.delayed
                """, arguments: [key.campaign, minute, key.platform, count.sent, count.failed, count.displayed, count.opened,
                                 count.updated, count.retracted, count.capped, count.delayed], cached: true)
        }
        for (campaign, byReason) in reasons.sorted(by: { $0.key < $1.key }) {
            for (reason, n) in byReason.sorted(by: { $0.key < $1.key }) {
                try db.execute(sql: """
                    INSERT INTO campaign_failures (campaignId, reason, n) VALUES (?, ?, ?)
                    ON CONFLICT (campaignId, reason) DO UPDATE SET n = campaign_failures.n + excluded.n
                    """, arguments: [campaign, reason, n], cached: true)
            }
        }
        // docs/api.md#ab-tests-and-conversions: an A/B test's members, once each, in their arms' counters.
        try Experiments.count(db, happenings)
        try queueEvents(db, happenings, now: now)
    }

    /// A failure's reason as stats group it: the service's words up to the first colon (`400
    /// BadDeviceToken`, `gave up after 5 attempts`), at most 120 characters.
    static func reasonKey(_ reason: String?) -> String {
        let text = reason ?? "unknown"
        let head = text.split(separator: ":", maxSplits: 1).first.map(String.init) ?? text
        return String(head.trimmingCharacters(in: .whitespaces).prefix(120))
    }

    /// Appends the events some webhook wants (none are written while no webhook wants them).
    static func queueEvents(_ db: SQLConnection, _ happenings: [Happening], now: Double) throws {
        // Asked on every batch of sends and reads: the statement is compiled once.
        let wanted = Set(try db.fetchAll(sql: "SELECT events FROM webhooks", cached: true)
            .compactMap { $0.values.first.flatMap(String.fromSQL) }
            .flatMap { $0.split(separator: ",").map(String.init) })
        let chosen = happenings.filter { wanted.contains($0.type.rawValue) }
        guard !chosen.isEmpty else { return }
        let rows: [[SQLValue]] = chosen.map { happening in
            // The database's clock at the write: a reader takes events in id order, and only an unbroken run of settled ones.
            let values: [any SQLValueConvertible] = [happening.type.rawValue, db.now, happening.campaign, happening.notification, happening.user,
                                                     happening.platform, happening.reason.map { String($0.prefix(500)) }]
            return values.map(\.sqlValue)
        }
        for chunk in rows.sqlBatches() {
            try db.execute(sql: "INSERT INTO events (type, at, campaignId, notificationId, recipient, platform, reason) VALUES "
                           + Array(repeating: "(?, ?, ?, ?, ?, ?, ?)", count: chunk.count).joined(separator: ", "),
                           arguments: SQLArguments(values: chunk.flatMap { $0 }))
        }
    }

    /// Marks campaigns among `campaigns` done once everyone is queued and nothing is pending (and
    /// an A/B test's winner is decided, docs/api.md#ab-tests-and-conversions), each once, with its
    /// `campaign.done` event.
    ///
    /// The outbox is looked at only once the campaign's counters say none of its pushes is left
    /// (its pushes queued, less those counted sent, failed or capped), or when they cannot say: a
    /// campaign from before pushes were counted, or one with a notification changed or taken
    /// back (`revisedAt`), whose revisions are not among its pushes. Recording a batch of sends
    /// calls this, and on PostgreSQL the look walks the index entries of every push the campaign
    /// has sent, still there until a vacuum: 3 ms a batch in a 50,000-device campaign, an eighth
    /// of its statements' time (issue #51). When the counters say more are left than are (a user removed with pushes
    /// pending by a node from before removals were counted), every node's sweep
    /// (`CampaignStore.finishStragglers`) marks it within seconds: it passes
    /// `whateverTheCounters`, the outbox is looked at anyway, and the counters are set to agree.
    static func finishCampaigns(_ db: SQLConnection, _ campaigns: Set<Int64>, now: Double, whateverTheCounters: Bool = false) throws {
        for campaign in campaigns.sorted() {
            // Asked apart: PostgreSQL plans the outbox's look as a join, made whatever the counters say.
            if !whateverTheCounters, let row = try SQLRow.fetchOne(db, sql: """
                SELECT pushes, countedInStats, revisedAt IS NULL AS unrevised,
                       (SELECT coalesce(sum(sent + failed + capped), 0) FROM campaign_stats WHERE campaignId = campaigns.id) AS done
                FROM campaigns WHERE id = ?
                """, arguments: [campaign], cached: true),
               let pushes = row["pushes"] as Int?, row["countedInStats"] as Int == 1, row["unrevised"] as Bool, pushes > row["done"] as Int {
                continue
            }
            try db.execute(sql: """
                UPDATE campaigns SET doneAt = ? WHERE id = ? AND queued = 1 AND doneAt IS NULL AND cancelledAt IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries WHERE campaignId = ? AND state = 'pending')
                    AND NOT EXISTS (SELECT 1 FROM outbox_runs WHERE campaignId = campaigns.id AND state = 'pending')
                    AND NOT EXISTS (SELECT 1 FROM campaign_experiments e WHERE e.campaignId = campaigns.id AND e.decidedAt IS NULL)
                """, arguments: [now, campaign, campaign], cached: true)
            guard db.changesCount > 0 else { continue }
            if whateverTheCounters {
                // Counters that said pushes were left now say what the outbox does: none (its progress reads them).
                try db.execute(sql: """
                    UPDATE campaigns SET pushes = (SELECT coalesce(sum(sent + failed + capped), 0) FROM campaign_stats WHERE campaignId = campaigns.id)
                    WHERE id = ? AND countedInStats = 1 AND revisedAt IS NULL
                        AND pushes > (SELECT coalesce(sum(sent + failed + capped), 0) FROM campaign_stats WHERE campaignId = campaigns.id)
                    """, arguments: [campaign])
            }
            try queueEvents(db, [Happening(type: .campaignDone, campaign: campaign)], now: now)
        }
    }
}

/// A campaign's funnel, by platform, its failure reasons and its timeline (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks).
public struct CampaignStats: Sendable, Equatable {
    public struct Counts: Sendable, Equatable {
        public var sent = 0
        public var failed = 0
        public var displayed = 0
        public var opened = 0
        /// Replacements of its changed content and retractions' background pushes sent.
        public var updated = 0
        public var retracted = 0
        /// docs/api.md#frequency-caps-and-quiet-hours: pushes held back by a frequency cap, and delayed by quiet hours.
        public var capped = 0
        public var delayed = 0
    }
    public struct Minute: Sendable, Equatable {
        public var minute: Date
        public var sent: Int
        public var displayed: Int
        public var opened: Int
    }
    /// Pushes queued (its devices, or hub tags).
    public var queued: Int
    public var totals: Counts
    /// By device platform (`apns`, `fcm`, `web`): sent and failed; displayed and opened are the
    /// recipient's, whichever device showed it, so they count in `totals` only.
    public var byPlatform: [String: Counts]
    public var failures: [String: Int]
    public var timeline: [Minute]
    /// Recipients who converted (`POST /api/events` within 24 h of their push, docs/api.md#ab-tests-and-conversions).
    public var converted = 0
    /// Its A/B test's counts and decision; nil without one.
    public var experiment: ExperimentStats? = nil
}

extension CampaignStore {
    /// Campaign `id`'s stats, from its counters (a few rows a minute, however large the campaign); nil for no such campaign.
    public func stats(_ id: Int64) async throws -> CampaignStats? {
        try await database.read { db in
            // Pushes queued: a hub's are one per user (older campaigns did not count them: their devices).
            guard let queued = try Int.fetchOne(db, sql: "SELECT coalesce(pushes, devices) FROM campaigns WHERE id = ?", arguments: [id]) else { return nil }
            var stats = CampaignStats(queued: queued, totals: .init(), byPlatform: [:], failures: [:], timeline: [])
            var minutes: [Int64: CampaignStats.Minute] = [:]
            for row in try SQLRow.fetchAll(db, sql: "SELECT minute, platform, sent, failed, displayed, opened, updated, retracted, capped, delayed FROM campaign_stats WHERE campaignId = ? ORDER BY minute",
                                           arguments: [id]) {
                let (sent, failed, displayed, opened): (Int, Int, Int, Int) = (row["sent"], row["failed"], row["displayed"], row["opened"])
                stats.totals.sent += sent
                stats.totals.failed += failed
                stats.totals.displayed += displayed
                stats.totals.opened += opened
                let (updated, retracted): (Int, Int) = (row["updated"], row["retracted"])
                stats.totals.updated += updated
                stats.totals.retracted += retracted
                let (capped, delayed): (Int, Int) = (row["capped"], row["delayed"])
                stats.totals.capped += capped
                stats.totals.delayed += delayed
                let platform: String = row["platform"]
                if !platform.isEmpty {
                    stats.byPlatform[platform, default: .init()].sent += sent
                    stats.byPlatform[platform, default: .init()].failed += failed
                }
                let minute: Int64 = row["minute"]
                var entry = minutes[minute] ?? .init(minute: Date(timeIntervalSince1970: Double(minute) * 60), sent: 0, displayed: 0, opened: 0)
                entry.sent += sent
                entry.displayed += displayed
                entry.opened += opened
                minutes[minute] = entry
            }
            stats.timeline = minutes.keys.sorted().map { minutes[$0]! }
            for row in try SQLRow.fetchAll(db, sql: "SELECT reason, n FROM campaign_failures WHERE campaignId = ?", arguments: [id]) {
                stats.failures[row["reason"]] = row["n"]
            }
            stats.converted = try Experiments.converted(db, id)
            stats.experiment = try Experiments.stats(db, id)
            return stats
        }
    }
}
