import Foundation
import SQLEngine

extension Guardrails {
    /// What a screen held back: each push's app and what it became, for metrics once committed.
    typealias HeldBack = [(app: String, outcome: Outcome)]

    /// What a screen did: the pushes to send now, those held back, and the campaigns that may
    /// have ended with a push failed (`capped`, `dropped`), to be finished once the claim commits.
    struct Screened {
        var jobs: [DeliveryJob]
        var heldBack: HeldBack = []
        var mayHaveEnded: Set<Int64> = []
    }

    /// Whether `screen` could hold back or fail any of `jobs`: a campaign's own push, of an app
    /// with limits or while some user has quiet hours.
    func mayHoldBack(_ db: SQLConnection, _ jobs: [DeliveryJob]) throws -> Bool {
        let candidates = Self.candidates(jobs)
        guard !candidates.isEmpty else { return false }
        return try candidates.contains { apps[jobs[$0].app] != nil } || Self.someoneQuiet(db)
    }

    /// The indices of `jobs` that `screen` looks at.
    private static func candidates(_ jobs: [DeliveryJob]) -> [Int] {
        jobs.indices.filter { index in
            let job = jobs[index]
            guard job.campaignId != nil, job.recipient != nil, job.activity == nil, job.kind == .original else { return false }
            return job.options.interruptionLevel != .timeSensitive && job.options.interruptionLevel != .critical
        }
    }

    /// Whether any user set quiet hours (one probe of the index of those who did).
    private static func someoneQuiet(_ db: SQLConnection) throws -> Bool {
        try Int.fetchOne(db, sql: "SELECT 1 FROM users WHERE quietHours IS NOT NULL LIMIT 1", cached: true) != nil
    }

    /// Screens pushes just claimed, in the claim's transaction (docs/api.md#frequency-caps-and-quiet-hours),
    /// and returns those to send now.
    ///
    /// Only a campaign's own pushes are screened: not `POST /api/notifications`' (no campaign),
    /// not a change or a retraction, not `time-sensitive` or `critical` ones, not a campaign
    /// sent with `"limits":false`, nor one whose life has ended (the dispatcher fails it `expired`).
    /// In quiet hours (the user's own, else the app's, in the user's time zone), `delay` makes the
    /// push due when they end, spread over `Guardrails.spread` by user, and counts it `delayed`
    /// once; `drop` fails it. Past quiet hours, a push over its app's frequency cap fails `capped`.
    ///
    /// The cap is counted in `frequency_windows`, one row per user and app, locked on PostgreSQL
    /// (by an upsert's update), in user order: two nodes claiming pushes of one user take turns on that row,
    /// and the second sees what the first counted. A campaign counts once per user, so a
    /// user's second device, or a retry of a push counted, is not counted again.
    ///
    /// Costs nothing where no app has limits and no user set quiet hours (one probe of an index
    /// that holds only users who did), and nothing for a batch without campaign pushes.
    ///
    /// A campaign whose last pushes it fails is not marked done here: that takes the campaign's
    /// row, which a cancel takes before the pushes the claim holds (a deadlock on PostgreSQL).
    /// The caller finishes `mayHaveEnded` after the claim commits; `finishStragglers` mends a
    /// process that stopped in between.
    ///
    /// What it holds back or fails changes a row of `deliveries`: a push of a run (a negative
    /// id, docs/design/outbox.md#runs) is first given one by `spill`, which sets the pushes' new
    /// ids and leaves out any it could not spill. Only those: the pushes that go stay in their run.
    func screen(_ db: SQLConnection, _ jobs: [DeliveryJob], now: Double,
                spill: (inout [DeliveryJob]) throws -> Void = { _ in }) throws -> Screened {
        var jobs = jobs
        let candidates = Self.candidates(jobs)
        guard !candidates.isEmpty else { return Screened(jobs: jobs) }
        let appLimited = candidates.contains { apps[jobs[$0].app] != nil }
        let someoneQuiet = try Self.someoneQuiet(db)
        guard appLimited || someoneQuiet else { return Screened(jobs: jobs) }
        let campaigns = Array(Set(candidates.compactMap { jobs[$0].campaignId })).sorted()
        var unlimited = Set<Int64>()
        for chunk in campaigns.sqlBatches() {
            unlimited.formUnion(try Int64.fetchAll(db, sql: "SELECT id FROM campaigns WHERE limits = 0 AND \(db.idIn("id"))",
                                                   arguments: [db.idList(chunk)], cached: true))
        }
        let limited = candidates.filter { !unlimited.contains(jobs[$0].campaignId!) && jobs[$0].remainingLife() != nil }
        guard !limited.isEmpty else { return Screened(jobs: jobs) }

        // Quiet hours first: a push held to their end is counted against the cap when it goes.
        var people: [String: (zone: String?, quiet: String?)] = [:]
        let appQuiet = limited.contains(where: { apps[jobs[$0].app]?.quietHours != nil })
        if someoneQuiet || appQuiet {
            // Every recipient's zone when an app has quiet hours; else only those with their own
            // (the index of users who set them), however many users the batch has.
            let only = appQuiet ? "" : "quietHours IS NOT NULL AND"
            for chunk in Array(Set(limited.map { jobs[$0].recipient! })).sorted().sqlBatches() {
                for row in try SQLRow.fetchAll(db, sql: "SELECT name, timezone, quietHours FROM users WHERE \(only) name IN (\(sqlPlaceholders(chunk.count)))",
                                               arguments: SQLArguments(Array(chunk))) {
                    people[row["name"]] = (row["timezone"], row["quietHours"])
                }
            }
        }
        let instant = Date(timeIntervalSince1970: now)
        var delayed: [(index: Int, until: Double)] = [], dropped: [Int] = [], counted: [Int] = []
        for index in limited {
            let job = jobs[index]
            let person = people[job.recipient!]
            if let quiet = person?.quiet.flatMap({ try? QuietHours($0) }) ?? apps[job.app]?.quietHours,
               let end = quiet.end(containing: instant, in: person?.zone.flatMap(TimeZone.init(identifier:)) ?? Self.utc) {
                switch quiet.mode {
                case .delay:
                    // Spread by user over the first minutes; never past the push's life (it then fails `expired`).
                    // Never due before now: a push found in quiet hours again at once would be claimed in a loop.
                    var until = max(end.timeIntervalSince1970, now + 1) + Double(Self.stableHash(job.recipient!) % UInt64(Self.spread))
                    if let expires = job.expiresAt { until = min(until, expires.timeIntervalSince1970 + (now - Date().timeIntervalSince1970) + 1) }
                    delayed.append((index, until))
                case .drop:
                    dropped.append(index)
                }
            } else if apps[job.app]?.frequencyCap != nil {
                counted.append(index)
            }
        }
        var capped = try cap(db, jobs, counted, now: now)

        // The pushes held back that are a run's get rows of their own; one that cannot (its run
        // no longer this claim's) is neither sent nor held back here.
        let fromRuns = (delayed.map(\.index) + capped + dropped).filter { jobs[$0].id < 0 }
        var lost = Set<Int>()
        if !fromRuns.isEmpty {
            var spilled = fromRuns.map { jobs[$0] }
            try spill(&spilled)
            let ids = Dictionary(spilled.map { ($0.pushId, $0.id) }, uniquingKeysWith: { first, _ in first })
            for index in fromRuns {
                if let id = ids[jobs[index].pushId], id > 0 { jobs[index].id = id } else { lost.insert(index) }
            }
            delayed.removeAll { lost.contains($0.index) }
            capped.removeAll { lost.contains($0) }
            dropped.removeAll { lost.contains($0) }
        }

        var happenings: [Happening] = [], heldBack: HeldBack = []
        if !delayed.isEmpty {
            // Counted once: a push delayed again (its user moved zone) is not a second delay.
            let ids = delayed.map { jobs[$0.index].id }
            var already = Set<Int64>()
            for chunk in ids.sqlBatches() {
                already.formUnion(try Int64.fetchAll(db, sql: "SELECT id FROM deliveries WHERE \(db.idIn("id")) AND reason = ?",
                                                     arguments: [db.idList(chunk), Self.quietReason]))
            }
            for (index, until) in delayed {
                let job = jobs[index]
                try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = ?, reason = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL WHERE id = ?",
                               arguments: [until, Self.quietReason, job.id], cached: true)
                guard !already.contains(job.id) else { continue }
                happenings.append(Happening(type: .delayed, campaign: job.campaignId, notification: job.notificationId, user: job.recipient,
                                            platform: job.platform ?? "apns", reason: "quiet hours until \(Date(timeIntervalSince1970: until).formatted(.iso8601))"))
                heldBack.append((job.app, .delayed))
            }
        }
        for (indices, outcome) in [(capped, Outcome.capped), (dropped, Outcome.dropped)] where !indices.isEmpty {
            for index in indices {
                let job = jobs[index]
                let reason = outcome == .capped
                    ? "capped: over app \(job.app)'s frequency cap of \(apps[job.app]?.frequencyCap?.description ?? "")"
                    : "quiet hours: dropped, the user's quiet hours (mode drop)"
                try db.execute(sql: """
                    UPDATE deliveries SET state = 'failed', reason = ?, leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL, updatedAt = ? WHERE id = ? AND state = 'pending'
                    """, arguments: [reason, now, job.id], cached: true)
                happenings.append(Happening(type: outcome == .capped ? .capped : .failed, campaign: job.campaignId, notification: job.notificationId,
                                            user: job.recipient, platform: job.platform ?? "apns", reason: reason))
                heldBack.append((job.app, outcome))
            }
        }
        try Insight.record(db, happenings, now: now)
        let held = Set(delayed.map(\.index) + capped + dropped).union(lost)
        return Screened(jobs: jobs.indices.filter { !held.contains($0) }.map { jobs[$0] }, heldBack: heldBack,
                        mayHaveEnded: Set((capped + dropped).compactMap { jobs[$0].campaignId }))
    }

    /// The indices among `counted` over their app's cap, counting the others in `frequency_windows`.
    ///
    /// On PostgreSQL, two statements for every 500 users and apps, not two to four for each (each
    /// a round trip: they were about 120 µs of `serve` and 60 of PostgreSQL a push under a cap,
    /// BENCHMARKS.md, session 48): one upsert makes the missing rows and locks every row (a no-op
    /// update: the row lock of the one that counts) in (user, app) order, bytes' as the chunks',
    /// so two claims never wait for each other in a circle; then one UPDATE writes the rows whose
    /// sends changed. A user already deleted gets no row: their pushes fail with their
    /// registrations. (One removed while the claim runs must first take the push the claim holds:
    /// the two wait for each other, and PostgreSQL ends one, which is tried again.) SQLite, one
    /// writer in-process, reads and writes a row at a time with statements compiled once: there a
    /// statement of every row's values, compiled anew each time, cost more than it saved.
    private func cap(_ db: SQLConnection, _ jobs: [DeliveryJob], _ counted: [Int], now: Double) throws -> [Int] {
        guard !counted.isEmpty else { return [] }
        struct Key: Hashable, Comparable {
            var user: String
            var app: String
            /// Byte order, as PostgreSQL's `"C"` and SQLite's `BINARY` (Swift's own compares canonically).
            static func < (a: Key, b: Key) -> Bool {
                a.user.utf8.elementsEqual(b.user.utf8) ? a.app.utf8.lexicographicallyPrecedes(b.app.utf8) : a.user.utf8.lexicographicallyPrecedes(b.user.utf8)
            }
        }
        let groups = Dictionary(grouping: counted) { Key(user: jobs[$0].recipient!, app: jobs[$0].app) }
        var over: [Int] = []
        /// Counts `key`'s pushes against its `stored` sends; returns the sends to write, nil when unchanged.
        func count(_ key: Key, _ stored: String) -> String? {
            guard let cap = apps[key.app]?.frequencyCap, let indices = groups[key] else { return nil }
            let before = Self.sends(stored)
            var sends = before.filter { $0.at > now - Double(cap.per) }
            for index in indices {
                let campaign = jobs[index].campaignId!
                if sends.contains(where: { $0.campaign == campaign }) { continue }
                if sends.count < cap.max { sends.append((campaign, now)) } else { over.append(index) }
            }
            // Compared as written, times too: a campaign that left the window and came back (a
            // retry, a second device) is counted anew at `now`, in as many entries as before.
            let written = sends.map { "\($0.campaign):\(Int64($0.at))" }.joined(separator: ",")
            return written == stored ? nil : written
        }
        let keys = groups.keys.filter { apps[$0.app]?.frequencyCap != nil }.sorted()
        guard db.dialect == .postgres else {
            for key in keys {
                let read = "SELECT sends FROM frequency_windows WHERE userName = ? AND app = ?"
                var stored = try String.fetchOne(db, sql: read, arguments: [key.user, key.app], cached: true)
                if stored == nil {
                    try db.execute(sql: """
                        INSERT INTO frequency_windows (userName, app, sends) SELECT ?, ?, '' WHERE EXISTS (SELECT 1 FROM users WHERE name = ?)
                        ON CONFLICT (userName, app) DO NOTHING
                        """, arguments: [key.user, key.app, key.user], cached: true)
                    stored = try String.fetchOne(db, sql: read, arguments: [key.user, key.app], cached: true)
                }
                if let stored, let sends = count(key, stored) {
                    try db.execute(sql: "UPDATE frequency_windows SET sends = ? WHERE userName = ? AND app = ?",
                                   arguments: [sends, key.user, key.app], cached: true)
                }
            }
            return over.sorted()
        }
        func texts(_ values: [String]) -> SQLParameter { .array(SQLArray(.text, values.map(SQLValue.text))) }
        for chunk in keys.sqlBatches() {
            let stored = try db.fetchAll(sql: """
                INSERT INTO frequency_windows (userName, app, sends)
                SELECT u.name, asked.app, '' FROM unnest(?::text[], ?::text[]) AS asked(name, app) JOIN users u ON u.name = asked.name
                ORDER BY u.name, asked.app COLLATE "C"
                ON CONFLICT (userName, app) DO UPDATE SET sends = frequency_windows.sends
                RETURNING userName, app, sends
                """, parameters: [texts(chunk.map(\.user)), texts(chunk.map(\.app))])
            var changed: [(key: Key, sends: String)] = []
            for row in stored {
                let key = Key(user: row["userName"], app: row["app"])
                if let sends = count(key, row["sends"]) { changed.append((key, sends)) }
            }
            guard !changed.isEmpty else { continue }
            try db.execute(sql: """
                UPDATE frequency_windows f SET sends = c.sends FROM unnest(?::text[], ?::text[], ?::text[]) AS c(name, app, sends)
                WHERE f.userName = c.name AND f.app = c.app
                """, parameters: [texts(changed.map(\.key.user)), texts(changed.map(\.key.app)), texts(changed.map(\.sends))])
        }
        return over.sorted()
    }

    /// `campaignId:at,…` read back.
    private static func sends(_ stored: String) -> [(campaign: Int64, at: Double)] {
        stored.split(separator: ",").compactMap { entry in
            let parts = entry.split(separator: ":")
            guard parts.count == 2, let campaign = Int64(parts[0]), let at = Double(parts[1]) else { return nil }
            return (campaign, at)
        }
    }

    private static let utc = TimeZone(identifier: "UTC")!

    /// FNV-1a of `text`: the same on every node and every run (Swift's `hashValue` is seeded per process).
    static func stableHash(_ text: String) -> UInt64 {
        text.utf8.reduce(0xcbf2_9ce4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }
}
