import Foundation
import SQLEngine

/// One push target of a notification, as the outbox records it.
public struct Delivery: Sendable, Equatable {
    /// The state of a delivery.
    public enum State: String, Sendable, Codable {
        case pending, sent, failed
    }

    public var id: Int64
    public var notificationId: Int64
    /// The device registration, for per-device deliveries.
    public var registrationId: String?
    /// A device token, or a tag such as `username:alice`.
    public var target: String
    public var state: State
    /// How many sends were tried.
    public var attempts: Int
    /// Apple's or the hub's reason for the last failure, or why it is still pending.
    public var reason: String?
    /// The id sent as `apns-id` (kept across retries).
    public var pushId: String
    public var nextAttemptAt: Date
    public var createdAt: Date
    public var updatedAt: Date
}

/// Reads the outbox.
public struct DeliveryStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// Deliveries of one notification, or of the `recent` newest notifications.
    public func list(notification: Int64? = nil, recent: Int = 20) async throws -> [Delivery] {
        try await database.read { db in
            // A campaign's pushes in runs (docs/design/outbox.md#runs) come after each notification's rows.
            if let notification {
                return try SQLRow.fetchAll(db, sql: "SELECT * FROM deliveries WHERE notificationId = ? ORDER BY id", arguments: [notification]).map(Self.delivery)
                    + OutboxRuns.deliveries(db, notifications: [notification])
            }
            let rows = try SQLRow.fetchAll(db, sql: """
                SELECT * FROM deliveries WHERE notificationId IN
                    (SELECT id FROM notifications ORDER BY id DESC LIMIT ?)
                ORDER BY notificationId DESC, id
                """, arguments: [recent]).map(Self.delivery)
            let newest = try Int64.fetchAll(db, sql: "SELECT id FROM notifications ORDER BY id DESC LIMIT ?", arguments: [recent])
            let fromRuns = Dictionary(grouping: try OutboxRuns.deliveries(db, notifications: newest), by: \.notificationId)
            guard !fromRuns.isEmpty else { return rows }
            let byNotification = Dictionary(grouping: rows, by: \.notificationId)
            return newest.flatMap { (byNotification[$0] ?? []) + (fromRuns[$0] ?? []) }
        }
    }

    /// The failed deliveries of campaign `id`, first failed first, at most `limit`.
    public func failed(campaign id: Int64, limit: Int = 100) async throws -> [Delivery] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT * FROM deliveries WHERE campaignId = ? AND state = 'failed' ORDER BY id LIMIT ?",
                             arguments: [id, limit]).map(Self.delivery)
        }
    }

    /// Up to `limit` deliveries of campaign `campaign` after the one whose id is `after` (0:
    /// from the first): its rows in id order, then its pushes in runs, whose ids are negative
    /// (docs/design/outbox.md#runs). Page through a large campaign, without holding it in
    /// memory, by passing the last id of each page.
    public func list(campaign: Int64, after: Int64 = 0, limit: Int = 1000) async throws -> [Delivery] {
        try await database.read { db in
            guard after >= 0 else { return try OutboxRuns.deliveries(db, campaign: campaign, after: -after, limit: limit) }
            let rows = try SQLRow.fetchAll(db, sql: "SELECT * FROM deliveries WHERE campaignId = ? AND id > ? ORDER BY id LIMIT ?",
                                           arguments: [campaign, after, limit]).map(Self.delivery)
            return try rows + OutboxRuns.deliveries(db, campaign: campaign, after: 0, limit: limit - rows.count)
        }
    }

    /// How many pushes wait in the outbox, by the platform of their device (`tag` for pushes
    /// addressed to a user's tag, as Notification Hubs takes them).
    ///
    /// Rows that name their platform, and a hub's tag pushes, are counted without reading a
    /// registration (at a million waiting, the join took 1.3 s on SQLite, the plain count
    /// 0.56 s); only device pushes from before deliveries named a platform are looked up.
    public func pendingByPlatform() async throws -> [String: Int] {
        try await database.read { db in
            var pending: [String: Int] = [:]
            var unnamed = 0
            for row in try SQLRow.fetchAll(db, sql: """
                SELECT platform, CASE WHEN registrationId IS NULL THEN 1 ELSE 0 END AS tag, count(*) AS pending FROM deliveries WHERE state = 'pending' GROUP BY 1, 2
                """) {
                if let platform: String = row["platform"] {
                    pending[platform, default: 0] += row["pending"]
                } else if row["tag"] as Int == 1 {
                    pending["tag", default: 0] += row["pending"]
                } else {
                    unnamed += row["pending"] as Int
                }
            }
            // A campaign's runs (docs/design/outbox.md#runs): the pushes each has left.
            for row in try SQLRow.fetchAll(db, sql: "SELECT platform, sum(remaining) AS pending FROM outbox_runs WHERE state = 'pending' GROUP BY 1") {
                pending[row["platform"] as String, default: 0] += row["pending"] as Int
            }
            guard unnamed > 0 else { return pending }
            for row in try SQLRow.fetchAll(db, sql: """
                SELECT COALESCE(r.platform, 'unregistered') AS platform, count(*) AS pending
                FROM deliveries d LEFT JOIN registrations r ON r.id = d.registrationId
                WHERE d.state = 'pending' AND d.platform IS NULL AND d.registrationId IS NOT NULL GROUP BY 1
                """) {
                pending[row["platform"] as String, default: 0] += row["pending"] as Int
            }
            return pending
        }
    }

    /// Maps a row of `deliveries`.
    public static func delivery(_ row: SQLRow) -> Delivery {
        Delivery(id: row["id"], notificationId: row["notificationId"], registrationId: row["registrationId"], target: row["target"],
                 state: Delivery.State(rawValue: row["state"]) ?? .pending, attempts: row["attempts"], reason: row["reason"],
                 pushId: row["pushId"], nextAttemptAt: Date(timeIntervalSince1970: row["nextAttemptAt"]),
                 createdAt: Date(timeIntervalSince1970: row["createdAt"]), updatedAt: Date(timeIntervalSince1970: row["updatedAt"]))
    }
}
