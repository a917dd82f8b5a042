import Foundation
import SQLEngine

/// A campaign's first attempts as a row per run of pushes, on PostgreSQL
/// (docs/design/outbox.md#runs): written as one row of `outbox_runs` for up to `size` pushes of
/// one app and platform, claimed and leased a run at a time, and recorded as bits. A push sent
/// sets its bit in `sent` and `settled`; a push that fails, is tried again or held back gets a
/// row of `deliveries` of its own (it is *spilled*) and its bit in `settled` alone.
enum OutboxRuns {
    /// Pushes a run holds at most: the bits of `settled` and `sent`.
    static let capacity = 512
    /// Pushes written to a run: about a claim's worth (the dispatcher's window per platform).
    static let size = 200
    /// `outbox_holders.outboxVersion` of holders that claim runs; older holders do not see them.
    static let version = 3
    /// The most runs a claim takes (a statement each): runs of 13 pushes fill a claim of 200.
    static let claimedRuns = 16

    /// One push of a campaign's first attempts, as the queue writes it.
    struct Push {
        var notificationId: Int64
        var campaignId: Int64
        var registrationId: String
        var target: String
        var platform: String
        var app: String
        var pushId: String
        var due: Double
        var createdAt: Double
    }

    /// Whether a batch may be written as runs now: on PostgreSQL, while every holder alive claims
    /// runs (an older one would neither send them nor see them when it cancels), and unless the
    /// database's setting `outboxRuns` is `off` (`SettingsStore.outboxRuns`).
    static func writable(_ db: SQLConnection, now: Double) throws -> Bool {
        guard db.dialect == .postgres,
              try String.fetchOne(db, sql: "SELECT value FROM settings WHERE key = ?", arguments: [SettingsStore.outboxRuns], cached: true) != "off"
        else { return false }
        return try Int.fetchOne(db, sql: """
            SELECT 1 FROM outbox_holders WHERE (outboxVersion IS NULL OR outboxVersion < ?) AND seenAt >= ? LIMIT 1
            """, arguments: [version, now - OutboxStore.holderTimeout], cached: true) == nil
    }

    /// Writes `pushes` as runs of one campaign, app and platform each: a statement a run, its
    /// columns bound as binary arrays (one statement for every run, grouping pushes by run with
    /// `array_agg`, cost PostgreSQL more: 13.9 µs a push against 8.4).
    static func insert(_ db: SQLConnection, _ pushes: [Push]) throws {
        guard !pushes.isEmpty else { return }
        var groups: [String: [Push]] = [:]
        for push in pushes { groups["\(push.campaignId)/\(push.app)/\(push.platform)", default: []].append(push) }
        for key in groups.keys.sorted() {
            for run in groups[key]!.sqlBatches(of: size) {
                let first = run[run.startIndex]
                let ids = run.map(\.notificationId)
                try db.execute(sql: """
                    INSERT INTO outbox_runs (campaignId, app, platform, state, nextAttemptAt, span, notificationIds, registrationIds, targets, pushIds,
                                             settled, sent, size, remaining, createdAt, updatedAt)
                    VALUES (?, ?, ?, 'pending', ?, int8range(?, ?, '[]'), ?::int8[], ?::text[], ?::text[], ?::text[], 0::bit(512), 0::bit(512), ?, ?, ?, ?)
                    """, parameters: [.value(.integer(first.campaignId)), .value(.text(first.app)), .value(.text(first.platform)),
                                      .value(.real(run.map(\.due).min() ?? first.due)), .value(.integer(ids.min()!)), .value(.integer(ids.max()!)),
                                      .array(SQLArray(.int8, ids.map(SQLValue.integer))), .array(SQLArray(.text, run.map { .text($0.registrationId) })),
                                      .array(SQLArray(.text, run.map { .text($0.target) })), .array(SQLArray(.text, run.map { .text($0.pushId) })),
                                      .value(.integer(Int64(run.count))), .value(.integer(Int64(run.count))), .value(.real(first.createdAt)),
                                      .value(.real(first.createdAt))])
            }
        }
    }

    /// A run's push as a job's id: negative, so it is never a row of `deliveries`.
    static func jobID(run: Int64, index: Int) -> Int64 { -(run * Int64(capacity) + Int64(index)) }

    /// The run and the place in it (from 0) of a job whose id is negative.
    static func place(of id: Int64) -> (run: Int64, index: Int) { (-id / Int64(capacity), Int(-id % Int64(capacity))) }

    /// Claims due runs for `holder`, oldest due first, one at a time (`FOR UPDATE SKIP LOCKED`)
    /// while fewer than `limit` pushes are claimed (so at least one run, which may hold more; at
    /// most `claimedRuns`), each leased until `until` in the statement that takes it; returns
    /// their pushes not yet settled, with the columns of `OutboxStore.claim`'s rows and `run`, `place`.
    /// `only` is the claim's condition on platforms and apps (alias `d`).
    static func claim(_ db: SQLConnection, limit: Int, now: Double, until: Double, holder: OutboxHolder, only: String) throws -> [SQLRow] {
        guard db.dialect == .postgres, limit > 0 else { return [] }
        // A run a statement, each the first due that no other claim holds, leased as it is read
        // (so the next statement passes over it): two nodes claiming at once each take a run
        // (locking a few and keeping one would leave the other none).
        var rows: [SQLRow] = []
        for _ in 0..<claimedRuns where rows.count < limit {
            let run = try db.fetchAll(sql: """
                WITH b AS (SELECT d.id, d.campaignId, d.app, d.platform, d.nextAttemptAt, d.notificationIds, d.registrationIds, d.targets, d.pushIds, d.settled
                    FROM outbox_runs d WHERE d.state = 'pending' AND d.nextAttemptAt <= ? AND (d.leaseTag IS NULL OR d.leaseUntil <= ?) \(only)
                    ORDER BY d.nextAttemptAt, d.id LIMIT 1 FOR UPDATE SKIP LOCKED),
                l AS (UPDATE outbox_runs SET leaseUntil = ?, leasedBy = ?, leaseTag = ? FROM b WHERE outbox_runs.id = b.id)
                SELECT b.id AS run, u.i - 1 AS place, u.nid AS notificationId, u.rid AS registrationId, u.target, b.platform, b.app, b.campaignId,
                       n.recipient, u.pushId, n.push, n.mode, n.message, n.title, n.richType, n.richUrl, n.options, n.createdAt, n.payload,
                       r.updatedAt AS registrationUpdatedAt
                FROM b CROSS JOIN LATERAL unnest(b.notificationIds, b.registrationIds, b.targets, b.pushIds) WITH ORDINALITY AS u(nid, rid, target, pushId, i)
                LEFT JOIN notifications n ON n.id = u.nid LEFT JOIN registrations r ON r.id = u.rid
                WHERE get_bit(b.settled, u.i::int - 1) = 0
                ORDER BY u.i
                """, arguments: [now, now, until, holder.pid, holder.tag], cached: true)
            guard !run.isEmpty else { break }
            rows += run
        }
        // A push whose notification is gone (its recipient removed, a cancel's inbox entry
        // deleted) is dropped here: settled, not sent, so its run still ends.
        let orphans = rows.filter { $0["recipient"] as String? == nil }
        guard !orphans.isEmpty else { return rows }
        _ = try settle(db, orphans.map { (jobID(run: $0["run"], index: $0["place"]), false) }, holder: holder, now: now)
        return rows.filter { $0["recipient"] as String? != nil }
    }

    /// The assignments of an UPDATE of run `r` that settles the bits `m.bits`: `remaining`
    /// counts down by those not settled before, and a run with none left is done and its lease
    /// ends (`settle` and `drop(run:)`, each under the run's lock).
    private static let countDown = {
        let left = "r.remaining - bit_count(m.bits & ~r.settled)"
        return """
            remaining = \(left)::int, state = CASE WHEN \(left) <= 0 THEN 'done' ELSE r.state END,
                leaseUntil = CASE WHEN \(left) <= 0 THEN NULL ELSE r.leaseUntil END,
                leasedBy = CASE WHEN \(left) <= 0 THEN NULL ELSE r.leasedBy END,
                leaseTag = CASE WHEN \(left) <= 0 THEN NULL ELSE r.leaseTag END
            """
    }()

    /// The bits of `places` in a run, as the text of a `bit(512)`.
    static func mask(_ places: some Sequence<Int>) -> String {
        var bits = [UInt8](repeating: UInt8(ascii: "0"), count: capacity)
        for place in places where (0..<capacity).contains(place) { bits[place] = UInt8(ascii: "1") }
        return String(decoding: bits, as: UTF8.self)
    }

    /// Records the outcomes of run pushes `jobs` held by `holder` (`sent`: sent from the run;
    /// the others are spilled by the caller), each run's in one statement; a run with none left
    /// is done and its lease ends. Returns the jobs recorded: those of runs `holder` still held,
    /// whose bits were not yet set.
    static func settle(_ db: SQLConnection, _ jobs: [(id: Int64, sent: Bool)], holder: OutboxHolder, now: Double) throws -> Set<Int64> {
        var byRun: [Int64: [(place: Int, sent: Bool)]] = [:]
        for job in jobs {
            let (run, place) = place(of: job.id)
            byRun[run, default: []].append((place, job.sent))
        }
        var recorded = Set<Int64>()
        for run in byRun.keys.sorted() {
            let places = byRun[run]!
            // Bits already set are not recorded twice (a push claimed again after its lease lapsed):
            // `fresh` is what this call set, from the run as it was.
            let fresh = try String.fetchOne(db, sql: """
                UPDATE outbox_runs r SET settled = r.settled | m.bits, sent = r.sent | (s.bits & ~r.settled),
                    updatedAt = ?, sentAt = CASE WHEN bit_count(s.bits & ~r.settled) > 0 THEN ? ELSE r.sentAt END, \(countDown)
                FROM (SELECT ?::bit(512) AS bits) m, (SELECT ?::bit(512) AS bits) s,
                     (SELECT id, settled AS old FROM outbox_runs WHERE id = ? FOR UPDATE) o
                WHERE r.id = o.id AND r.leaseTag = ? AND r.state = 'pending'
                RETURNING (m.bits & ~o.old)::text
                """, arguments: [now, now, mask(places.map(\.place)), mask(places.filter(\.sent).map(\.place)), run, holder.tag], cached: true)
            guard let fresh = fresh.map({ Array($0.utf8) }) else { continue }
            for (place, _) in places where place < fresh.count && fresh[place] == UInt8(ascii: "1") {
                recorded.insert(jobID(run: run, index: place))
            }
        }
        return recorded
    }
}

extension OutboxRuns {
    /// Gives the run pushes among `jobs` rows of `deliveries` of their own, pending and leased
    /// to `holder` until `until` (for the guardrails, which hold back or fail rows), and settles
    /// them in their runs, not sent. Their jobs take the rows' ids; a push whose run `holder` no
    /// longer holds is left out.
    static func spill(_ db: SQLConnection, _ jobs: inout [DeliveryJob], holder: OutboxHolder, until: Double, now: Double) throws {
        let fromRuns = jobs.filter { $0.id < 0 }
        guard !fromRuns.isEmpty else { return }
        let recorded = try settle(db, fromRuns.map { ($0.id, false) }, holder: holder, now: now)
        let ids = try insertRows(db, fromRuns.filter { recorded.contains($0.id) }, state: "pending", reasons: nil, attempts: 0, due: now,
                                 lease: (until, holder), now: now)
        jobs = jobs.compactMap { job in
            guard job.id < 0 else { return job }
            guard let id = ids[job.pushId] else { return nil }
            var spilled = job
            spilled.id = id
            return spilled
        }
    }

    /// Writes `jobs`, pushes of runs, as rows of `deliveries` in `state` (with `reasons` by push
    /// id, `attempts`, due at `due` or at `dues` by push id), leased to `lease` if given; returns
    /// their ids by push id.
    static func insertRows(_ db: SQLConnection, _ jobs: [DeliveryJob], state: String, reasons: [String: String]?, attempts: Int, due: Double,
                           dues: [String: Double] = [:], lease: (until: Double, holder: OutboxHolder)?, now: Double) throws -> [String: Int64] {
        guard !jobs.isEmpty else { return [:] }
        func column(_ kind: SQLArray.Kind, _ value: (DeliveryJob) -> SQLValue) -> SQLParameter { .array(SQLArray(kind, jobs.map(value))) }
        let rows = try db.fetchAll(sql: """
            INSERT INTO deliveries (notificationId, campaignId, registrationId, target, platform, app, pushId, reason, nextAttemptAt,
                                    state, attempts, leaseUntil, leasedBy, leaseTag, leaseOwner, createdAt, updatedAt)
            SELECT u.nid, u.campaign, u.rid, u.target, u.platform, u.app, u.pushid, u.reason, u.due, ?, ?, ?, ?, ?, ?, ?, ?
            FROM unnest(?::int8[], ?::int8[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::float8[])
                 AS u(nid, campaign, rid, target, platform, app, pushid, reason, due)
            RETURNING id, pushId
            """, parameters: [.value(.text(state)), .value(.integer(Int64(attempts))), .value(lease.map { .real($0.until) } ?? .null),
                              .value(lease.map { .integer(Int64($0.holder.pid)) } ?? .null), .value(lease.map { .integer($0.holder.tag) } ?? .null),
                              .value(lease.map { .integer($0.holder.tag) } ?? .null), .value(.real(now)), .value(.real(now)),
                              column(.int8) { .integer($0.notificationId) }, column(.int8) { $0.campaignId.map(SQLValue.integer) ?? .null },
                              column(.text) { $0.registrationId.map(SQLValue.text) ?? .null }, column(.text) { .text($0.target) },
                              column(.text) { $0.platform.map(SQLValue.text) ?? .null }, column(.text) { .text($0.app) },
                              column(.text) { .text($0.pushId) }, column(.text) { reasons?[$0.pushId].map(SQLValue.text) ?? .null },
                              column(.float8) { .real(dues[$0.pushId] ?? due) }])
        var ids: [String: Int64] = [:]
        for row in rows { ids[row["pushId"] as String] = row["id"] as Int64 }
        return ids
    }

    /// Records the outcomes of run pushes (`OutboxStore.record`): a push sent sets its bits; one
    /// failed or tried again is settled and gets a row of its own, failed or due again at its
    /// time. Returns the jobs recorded (see `settle`).
    /// A push listed twice (claimed again by the same holder after its lease lapsed) is recorded
    /// by its first result only.
    static func record(_ db: SQLConnection, _ results: [(DeliveryJob, OutboxResult)], holder: OutboxHolder, now: Double) throws -> Set<Int64> {
        var seen = Set<Int64>()
        let results = results.filter { seen.insert($0.0.id).inserted }
        let recorded = try settle(db, results.map { ($0.0.id, $0.1 == .sent) }, holder: holder, now: now)
        var failed: [DeliveryJob] = [], retried: [DeliveryJob] = []
        var reasons: [String: String] = [:], dues: [String: Double] = [:]
        for (job, result) in results where recorded.contains(job.id) {
            switch result {
            case .sent: continue
            case .failed(let reason, _, _):
                failed.append(job)
                reasons[job.pushId] = reason
            case .retry(let reason, let at):
                retried.append(job)
                reasons[job.pushId] = reason
                // `at` is this machine's time; the row keeps the database's.
                dues[job.pushId] = at.timeIntervalSince1970 + (now - Date().timeIntervalSince1970)
            }
        }
        _ = try insertRows(db, failed, state: "failed", reasons: reasons, attempts: 1, due: now, lease: nil, now: now)
        _ = try insertRows(db, retried, state: "pending", reasons: reasons, attempts: 1, due: now, dues: dues, lease: nil, now: now)
        return recorded
    }
}

extension OutboxRuns {
    /// Cancelling campaign `id`: the pushes of its runs that no live lease holds (never claimed,
    /// or claimed by a holder whose lease lapsed, on the database's clock) are dropped: settled,
    /// not sent, with no row. Returns their notifications' ids. Leased runs finish.
    static func drop(_ db: SQLConnection, campaign id: Int64) throws -> [Int64] {
        guard db.dialect == .postgres else { return [] }
        let dropped = try Int64.fetchAll(db, sql: """
            SELECT u.nid FROM (SELECT id, size, notificationIds, settled FROM outbox_runs
                               WHERE campaignId = ? AND state = 'pending' AND (leaseTag IS NULL OR leaseUntil <= ?) FOR UPDATE) r
            CROSS JOIN LATERAL unnest(r.notificationIds) WITH ORDINALITY AS u(nid, i)
            WHERE get_bit(r.settled, u.i::int - 1) = 0
            """, arguments: [id, db.now])
        try db.execute(sql: """
            UPDATE outbox_runs SET settled = ~(0::bit(512)), remaining = 0, state = 'done', leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL,
                updatedAt = ?
            WHERE campaignId = ? AND state = 'pending' AND (leaseTag IS NULL OR leaseUntil <= ?)
            """, arguments: [db.now, id, db.now])
        return dropped
    }

    /// An SQL condition on notification `n`: a push of it in a run was sent, or is still to be
    /// sent (empty on SQLite, which has no runs).
    static func hasPush(_ db: SQLConnection, notification n: String) -> String {
        guard db.dialect == .postgres else { return "FALSE" }
        return """
            EXISTS (SELECT 1 FROM outbox_runs r CROSS JOIN LATERAL unnest(r.notificationIds) WITH ORDINALITY AS u(nid, i)
                    WHERE r.span @> \(n) AND u.nid = \(n)
                      AND (get_bit(r.sent, u.i::int - 1) = 1 OR (r.state = 'pending' AND get_bit(r.settled, u.i::int - 1) = 0)))
            """
    }

    /// An SQL condition on notification `n`: a push of it was sent from a run whose last send
    /// was recorded at or after `since` (a placeholder or an expression; `sentAt` is within the
    /// seconds a run takes of its push's own). `FALSE` on SQLite, whose `since` must then be bound all
    /// the same: the condition names it once either way.
    static func sent(_ db: SQLConnection, notification n: String, since: String) -> String {
        guard db.dialect == .postgres else { return "(FALSE AND \(since) IS NULL)" }
        return """
            EXISTS (SELECT 1 FROM outbox_runs r CROSS JOIN LATERAL unnest(r.notificationIds) WITH ORDINALITY AS u(nid, i)
                    WHERE r.span @> \(n) AND u.nid = \(n) AND get_bit(r.sent, u.i::int - 1) = 1 AND r.sentAt >= \(since))
            """
    }

    /// Campaign `id`'s pushes in runs that were sent or are still to be sent.
    static func pushes(_ db: SQLConnection, campaign id: Int64) throws -> Int {
        guard db.dialect == .postgres else { return 0 }
        return try Int.fetchOne(db, sql: "SELECT coalesce(sum(bit_count(sent) + remaining), 0)::int8 FROM outbox_runs WHERE campaignId = ?",
                                arguments: [id]) ?? 0
    }

    /// Campaign `id`'s pushes in runs still to be sent.
    static func pending(_ db: SQLConnection, campaign id: Int64) throws -> Int {
        guard db.dialect == .postgres else { return 0 }
        return try Int.fetchOne(db, sql: "SELECT coalesce(sum(remaining), 0)::int8 FROM outbox_runs WHERE campaignId = ? AND state = 'pending'",
                                arguments: [id], cached: true) ?? 0
    }
}

extension OutboxRuns {
    /// Settles `places` of run `run`, not sent, where `condition` (alias `r`) holds: `remaining`
    /// counts down by those not settled before (read under the run's lock, so a record or another
    /// drop at the same time is not counted twice), and a run with none left is done and its
    /// lease ends. `unsend` clears their `sent` bits too; `blank` (with `blanks`) sets more
    /// columns; `bound` are `condition`'s. Returns how many this call settled, or nil if
    /// `condition` did not hold.
    @discardableResult
    static func drop(_ db: SQLConnection, run: Int64, places: [Int], now: Double, condition: String = "TRUE", bound: [SQLParameter] = [],
                     unsend: Bool = false, blank: String = "", blanks: [SQLParameter] = []) throws -> Int? {
        return try db.fetchAll(sql: """
            UPDATE outbox_runs r SET settled = r.settled | m.bits, sent = CASE WHEN ?::int8 = 1 THEN r.sent & ~m.bits ELSE r.sent END,
                updatedAt = ?, \(countDown)\(blank)
            FROM (SELECT ?::bit(512) AS bits) m, (SELECT id, settled AS old FROM outbox_runs WHERE id = ? FOR UPDATE) o
            WHERE r.id = o.id AND \(condition)
            RETURNING bit_count(m.bits & ~o.old)::int8 AS dropped
            """, parameters: [.value(.integer(unsend ? 1 : 0)), .value(.real(now))] + blanks
                + [.value(.text(mask(places))), .value(.integer(run))] + bound).first.map { $0["dropped"] as Int }
    }

    /// The runs holding a push of notifications `ids` (an SQL condition on `r.id`, bound to the
    /// ids as an array): each id found through the runs' span index.
    private static let holding = "r.id IN (SELECT h.id FROM unnest(?::int8[]) AS q(id) JOIN outbox_runs h ON h.span @> q.id)"

    /// A registration pruned (a 410), whose user is `user`: its pushes in pending runs (leased or
    /// not, as its rows) fail with `reason`, each with a row of its own, settled and not sent.
    /// The runs are found through the user's notifications in campaigns with runs pending (a
    /// run's registration ids have no index). Returns them as the cascade of
    /// `OutboxStore.recordFailure` reads its rows: `notificationId`, `campaignId`, `platform`.
    static func fail(_ db: SQLConnection, registration: String, user: String?, reason: String, now: Double) throws -> [SQLRow] {
        guard db.dialect == .postgres, let user else { return [] }
        let notifications = try Int64.fetchAll(db, sql: """
            SELECT n.id FROM notifications n WHERE n.recipient = ?
                AND EXISTS (SELECT 1 FROM outbox_runs o WHERE o.campaignId = n.campaignId AND o.state = 'pending')
            """, arguments: [user])
        guard !notifications.isEmpty else { return [] }
        let ids = SQLParameter.array(SQLArray(.int8, notifications.map(SQLValue.integer)))
        let pushes = try db.fetchAll(sql: """
            SELECT r.id AS run, u.i - 1 AS place, u.nid AS notificationId, u.target, u.pushId, r.campaignId, r.app, r.platform
            FROM (SELECT * FROM outbox_runs r WHERE state = 'pending' AND \(holding) AND ? = ANY(r.registrationIds) ORDER BY id FOR UPDATE) r
            CROSS JOIN LATERAL unnest(r.notificationIds, r.registrationIds, r.targets, r.pushIds) WITH ORDINALITY AS u(nid, rid, target, pushId, i)
            WHERE u.rid = ? AND get_bit(r.settled, u.i::int - 1) = 0
            """, parameters: [ids, .value(.text(registration)), .value(.text(registration))])
        guard !pushes.isEmpty else { return [] }
        var byRun: [Int64: [Int]] = [:]
        for push in pushes { byRun[push["run"] as Int64, default: []].append(push["place"]) }
        for (run, places) in byRun.sorted(by: { $0.key < $1.key }) { try drop(db, run: run, places: places, now: now) }
        let jobs = pushes.map { push in
            var job = DeliveryJob(id: 0, notificationId: push["notificationId"], registrationId: registration, target: push["target"],
                                  payload: Data(), pushId: push["pushId"], platform: push["platform"])
            job.campaignId = push["campaignId"]
            job.app = push["app"]
            return job
        }
        _ = try insertRows(db, jobs, state: "failed", reasons: Dictionary(jobs.map { ($0.pushId, reason) }, uniquingKeysWith: { a, _ in a }),
                           attempts: 0, due: now, lease: nil, now: now)
        return pushes
    }

    /// A user removed, whose notifications are `ids`: their pushes in runs are dropped (settled;
    /// those sent lose their `sent` bit, as their rows are deleted), and their tokens and
    /// registration ids are blanked, in every run (what the user leaves behind is their
    /// notifications' ids alone). A push under a live lease is dropped too: its record is then
    /// `lease_lost`, as a deleted row's. Returns the pushes dropped that were still to be sent, by
    /// campaign: they leave the campaigns' counts of pushes queued.
    static func remove(_ db: SQLConnection, notifications ids: [Int64], now: Double) throws -> [Int64: Int] {
        guard db.dialect == .postgres, !ids.isEmpty else { return [:] }
        var byRun: [Int64: (campaign: Int64, places: [Int])] = [:]
        for push in try pushes(db, notifications: ids) {
            byRun[push["run"] as Int64, default: (push["campaignId"] as Int64, [])].places.append(push["place"])
        }
        var dropped: [Int64: Int] = [:]
        for (run, entry) in byRun.sorted(by: { $0.key < $1.key }) {
            let blank = "(SELECT array_agg(CASE WHEN x.i - 1 = ANY(?::int8[]) THEN '' ELSE x.v END ORDER BY x.i) FROM unnest(r.%@) WITH ORDINALITY AS x(v, i))"
            let places = SQLParameter.array(SQLArray(.int8, entry.places.map { .integer(Int64($0)) }))
            let count = try drop(db, run: run, places: entry.places, now: now, unsend: true,
                                 blank: ", targets = \(blank.replacingOccurrences(of: "%@", with: "targets")), "
                                     + "registrationIds = \(blank.replacingOccurrences(of: "%@", with: "registrationIds"))",
                                 blanks: [places, places]) ?? 0
            if count > 0 { dropped[entry.campaign, default: 0] += count }
        }
        return dropped
    }
}

extension OutboxRuns {
    /// The places of notifications `ids` in runs, in run order: each push's run, place, campaign,
    /// registration, target, platform, app, and whether it was sent, is settled, and its run's
    /// state and lease.
    static func pushes(_ db: SQLConnection, notifications ids: [Int64]) throws -> [SQLRow] {
        guard db.dialect == .postgres, !ids.isEmpty else { return [] }
        let array = SQLParameter.array(SQLArray(.int8, ids.map(SQLValue.integer)))
        return try db.fetchAll(sql: """
            SELECT r.id AS run, u.i - 1 AS place, u.nid AS notificationId, r.campaignId, u.rid AS registrationId, u.target, r.platform, r.app,
                   get_bit(r.sent, u.i::int - 1) = 1 AS sent, get_bit(r.settled, u.i::int - 1) = 1 AS settled, r.state, r.leaseTag, r.leaseUntil
            FROM outbox_runs r CROSS JOIN LATERAL unnest(r.notificationIds, r.registrationIds, r.targets) WITH ORDINALITY AS u(nid, rid, target, i)
            WHERE \(holding) AND u.nid = ANY(?::int8[])
            ORDER BY r.id, u.i
            """, parameters: [array, array])
    }

    /// Locks, in id order, the runs in flight (leased until after `now`) that hold a push of
    /// notifications `ids` (see `Revisions.devices`).
    static func lockInFlight(_ db: SQLConnection, notifications ids: [Int64], now: Double) throws {
        guard db.dialect == .postgres, !ids.isEmpty else { return }
        _ = try db.fetchAll(sql: """
            SELECT r.id FROM outbox_runs r WHERE \(holding) AND r.state = 'pending' AND r.leaseTag IS NOT NULL AND r.leaseUntil > ?
            ORDER BY r.id FOR UPDATE
            """, parameters: [.array(SQLArray(.int8, ids.map(SQLValue.integer))), .value(.real(now))])
    }

    /// Taking notifications `ids` back: their pushes in runs that no live lease holds are
    /// dropped (settled, not sent). Returns how many.
    static func drop(_ db: SQLConnection, notifications ids: [Int64], now: Double) throws -> Int {
        var byRun: [Int64: [Int]] = [:]
        for push in try pushes(db, notifications: ids) where !(push["settled"] as Bool) && push["state"] as String == "pending" {
            byRun[push["run"] as Int64, default: []].append(push["place"])
        }
        var dropped = 0
        for (run, places) in byRun.sorted(by: { $0.key < $1.key }) {
            dropped += try drop(db, run: run, places: places, now: now, condition: "r.state = 'pending' AND (r.leaseTag IS NULL OR r.leaseUntil <= ?)",
                                bound: [.value(.real(now))]) ?? 0
        }
        return dropped
    }
}

extension OutboxRuns {
    /// The columns of a run's push as `DeliveryStore.delivery` reads a row: `id` its job id
    /// (negative), `sent` once sent, else `pending` (dropped and spilled pushes are left out: a
    /// spilled one is its own row).
    private static let deliveryColumns = """
        -(r.id * 512 + u.i - 1) AS id, u.nid AS notificationId, u.rid AS registrationId, u.target,
        CASE WHEN get_bit(r.sent, u.i::int - 1) = 1 THEN 'sent' ELSE 'pending' END AS state,
        CASE WHEN get_bit(r.sent, u.i::int - 1) = 1 THEN 1 ELSE 0 END AS attempts, NULL::text AS reason, u.pushId,
        r.nextAttemptAt, r.createdAt, r.updatedAt
        """

    /// Which of a run's pushes are deliveries: sent, or still to be sent.
    private static let shown = "(get_bit(r.sent, u.i::int - 1) = 1 OR (r.state = 'pending' AND get_bit(r.settled, u.i::int - 1) = 0))"

    /// The pushes of notifications `ids` in runs, as deliveries.
    static func deliveries(_ db: SQLConnection, notifications ids: [Int64]) throws -> [Delivery] {
        guard db.dialect == .postgres, !ids.isEmpty else { return [] }
        let array = SQLParameter.array(SQLArray(.int8, ids.map(SQLValue.integer)))
        return try db.fetchAll(sql: """
            SELECT \(deliveryColumns)
            FROM outbox_runs r CROSS JOIN LATERAL unnest(r.notificationIds, r.registrationIds, r.targets, r.pushIds) WITH ORDINALITY AS u(nid, rid, target, pushId, i)
            WHERE \(holding) AND u.nid = ANY(?::int8[]) AND \(shown)
            ORDER BY u.nid DESC, r.id, u.i
            """, parameters: [array, array])
            .map(DeliveryStore.delivery)
    }

    /// Up to `limit` pushes of campaign `id` in runs after the one whose delivery id is
    /// `-after` (0: from the first), in run and place order.
    static func deliveries(_ db: SQLConnection, campaign id: Int64, after: Int64, limit: Int) throws -> [Delivery] {
        guard db.dialect == .postgres, limit > 0 else { return [] }
        return try db.fetchAll(sql: """
            SELECT \(deliveryColumns)
            FROM outbox_runs r CROSS JOIN LATERAL unnest(r.notificationIds, r.registrationIds, r.targets, r.pushIds) WITH ORDINALITY AS u(nid, rid, target, pushId, i)
            WHERE r.campaignId = ? AND r.id >= ? AND r.id * 512 + u.i - 1 > ? AND \(shown)
            ORDER BY r.id, u.i LIMIT ?
            """, arguments: [id, after / 512, after, limit]).map(DeliveryStore.delivery)
    }
}
