import Foundation
import SQLEngine

extension LiveActivityStore {
    // MARK: the outbox's side

    /// Claims up to `limit` due activity pushes (`OutboxStore.claim`): the oldest of each device's
    /// line only, so a device gets an activity's pushes in their timestamps' order even when
    /// several nodes send (a later one waits until the one before it is recorded). A broadcast
    /// waits for every iOS push before it, the starts that subscribe phones to its channel.
    static func claim(_ db: SQLConnection, limit: Int, now: Double, lease: Double, holder: OutboxHolder, only: String) throws -> [DeliveryJob] {
        // Most claims find none: a probe of the index, planned in a tenth of the time of the
        // query below (whose planning was 2 µs of PostgreSQL's CPU a push in a campaign, issue #51).
        guard try Int.fetchOne(db, sql: "SELECT 1 FROM activity_pushes WHERE state = 'pending' AND nextAttemptAt <= ? LIMIT 1",
                               arguments: [now], cached: true) != nil else { return [] }
        let lock = db.dialect == .postgres ? "FOR UPDATE OF d SKIP LOCKED" : ""
        let rows = try db.fetchAll(sql: """
            SELECT d.id, d.activityId, d.registrationId, d.platform, d.app, d.target, d.pushId, d.attempts, e.event, e.priority, e.apns, e.twin,
                   e.createdAt, a.channelId, a.type
            FROM activity_pushes d JOIN activity_events e ON e.id = d.eventId JOIN live_activities a ON a.id = d.activityId
            WHERE d.state = 'pending' AND d.nextAttemptAt <= ? \(only)
              AND NOT EXISTS (SELECT 1 FROM activity_pushes o WHERE o.activityId = d.activityId AND o.state = 'pending'
                              AND (o.lane = d.lane OR (d.lane = '' AND o.platform = 'apns')) AND o.timestamp < d.timestamp)
            ORDER BY d.nextAttemptAt, d.id LIMIT ? \(lock)
            """, arguments: [now, limit], cached: true)
        guard !rows.isEmpty else { return [] }
        let jobs = rows.map { row in
            let priority: Int = row["priority"]
            var job = DeliveryJob(id: row["id"], notificationId: 0, registrationId: row["registrationId"], target: row["target"],
                                  payload: row["apns"], mode: priority == 10 ? .alert : .silent, pushId: row["pushId"], attempts: row["attempts"],
                                  platform: row["platform"])
            job.app = row["app"]
            let event: String = row["event"]
            let broadcast = (row["registrationId"] as String?) == nil
            job.activity = ActivityPush(id: row["activityId"], type: row["type"], event: event, priority: priority,
                                        channelId: broadcast ? row["channelId"] : nil, twin: row["twin"])
            // An update is worth an hour; a start or an end, the 8 hours an activity lives.
            job.expiresAt = Date(timeIntervalSince1970: (row["createdAt"] as Double) + (event == "update" ? 3600 : maxAge))
            return job
        }
        for chunk in jobs.map(\.id).sqlBatches() {
            try db.execute(sql: "UPDATE activity_pushes SET nextAttemptAt = ?, leasedBy = ?, leaseTag = ? WHERE \(db.idIn("id"))",
                           arguments: [now + lease, holder.pid, holder.tag, db.idList(chunk)], cached: true)
        }
        return jobs
    }

    /// Records activity pushes' outcomes (`OutboxStore.record`), in its transaction: a token APNs
    /// answers 410 for is forgotten (a push-to-start token for a start, else the update token),
    /// and a failure counts in the activity's `failures`.
    static func record(_ db: SQLConnection, _ results: [(DeliveryJob, OutboxResult)], holder: OutboxHolder, now: Double) throws -> [String] {
        try results.map { job, result in
            switch result {
            case .sent:
                try db.execute(sql: """
                    UPDATE activity_pushes SET state = 'sent', attempts = attempts + 1, reason = NULL, leasedBy = NULL, leaseTag = NULL, updatedAt = ?
                    WHERE id = ? AND leaseTag = ? AND state = 'pending'
                    """, arguments: [now, job.id, holder.tag], cached: true)
                return db.changesCount > 0 ? "sent" : "lease_lost"
            case .failed(let reason, let prune, _):
                try db.execute(sql: """
                    UPDATE activity_pushes SET state = 'failed', attempts = ?, reason = ?, leasedBy = NULL, leaseTag = NULL, updatedAt = ?
                    WHERE id = ? AND leaseTag = ? AND state = 'pending'
                    """, arguments: [job.attempts + 1, reason, now, job.id, holder.tag], cached: true)
                guard db.changesCount > 0, let activity = job.activity else { return "lease_lost" }
                try db.execute(sql: "UPDATE live_activities SET failures = failures + 1 WHERE id = ?", arguments: [activity.id])
                if prune, job.platform == "apns", let registration = job.registrationId {
                    if activity.event == "start" {
                        try db.execute(sql: "DELETE FROM activity_start_tokens WHERE registrationId = ? AND type = ? AND token = ?",
                                       arguments: [registration, activity.type, job.target])
                    } else {
                        try db.execute(sql: "UPDATE activity_devices SET updateToken = NULL WHERE activityId = ? AND registrationId = ? AND updateToken = ?",
                                       arguments: [activity.id, registration, job.target])
                    }
                }
                return "failed"
            case .retry(let reason, let at):
                let due = at.timeIntervalSince1970 + (now - Date().timeIntervalSince1970)
                try db.execute(sql: """
                    UPDATE activity_pushes SET attempts = ?, reason = ?, nextAttemptAt = ?, leasedBy = NULL, leaseTag = NULL, updatedAt = ?
                    WHERE id = ? AND leaseTag = ? AND state = 'pending'
                    """, arguments: [job.attempts + 1, reason, due, now, job.id, holder.tag])
                return db.changesCount > 0 ? "retried" : "lease_lost"
            }
        }
    }
}
