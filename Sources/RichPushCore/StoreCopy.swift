import Foundation
import MediaStore
import NIOCore
import SQLEngine

/// What `DataStore.copy(to:)` did.
public struct StoreCopyReport: Sendable {
    /// Blobs written to the target, each checked against its id (SHA-256) first.
    public var blobsCopied = 0
    /// Blobs the target already had (a copy run again after an interruption).
    public var blobsPresent = 0
    /// Blobs not copied, with why (bytes that do not hash to their id, a blob missing in the source).
    public var blobProblems: [String] = []
    /// Rows copied per table (rows the target already had are not counted).
    public var rows: [(table: String, copied: Int)] = []
}

extension DataStore {
    /// The tables copied, in an order that satisfies their foreign keys, each with its key.
    /// `media` rows come with their blobs; `upsert` tables take the source's values.
    private static let copiedTables: [(name: String, key: [String], upsert: Bool)] = [
        ("media", ["sha256"], true),
        ("media_names", ["name"], false),
        ("users", ["name"], false),
        ("topics", ["username", "topic"], false),
        ("segments", ["name"], false),
        ("campaigns", ["id"], false),
        ("notifications", ["id"], false),
        ("media_refs", ["sha256", "owner"], false),
        ("media_variants", ["source", "kind"], false),
        ("deliveries", ["id"], false),
        ("registrations", ["id"], false),
        ("sessions", ["tokenHash"], false),
        ("api_keys", ["name"], false),
        ("campaign_zones", ["campaignId", "zone"], false),
        ("idempotency_keys", ["owner", "route", "key"], false),
        ("campaign_stats", ["campaignId", "minute", "platform"], false),
        ("campaign_failures", ["campaignId", "reason"], false),
        // docs/api.md#frequency-caps-and-quiet-hours: each user's campaign sends within their caps' windows.
        ("frequency_windows", ["userName", "app"], false),
        // docs/api.md#ab-tests-and-conversions: A/B tests, their members and counts, conversions.
        ("campaign_experiments", ["campaignId"], false),
        ("campaign_members", ["campaignId", "userName"], false),
        ("campaign_arms", ["campaignId", "arm"], false),
        ("conversions", ["campaignId", "userName"], false),
        ("events", ["id"], false),
        ("webhooks", ["id"], false),
        ("mirror_deletions", ["registrationId"], false),
        ("meta", ["key"], true),
        ("settings", ["key"], true),
        // docs/operations.md#audit-log: the audit log goes with what it is about.
        ("audit_log", ["id"], false),
    ]

    /// Copies everything this store holds into `target` (another engine, say PostgreSQL and a
    /// bucket): every blob, read back and checked against its SHA-256 id before it is written,
    /// then every table's rows with their ids, so that notifications, payload URLs and pending
    /// pushes carry on. Rows and blobs the target already has are left as they are, so a copy
    /// that was interrupted is finished by running it again. The payload key goes along, so
    /// payload URLs already sent keep working; pending pushes lose their leases (nobody holds
    /// them in the target) and are sent by the target's servers.
    ///
    /// Run it with no server writing to this store (stop them, or expect their last writes to
    /// need another run).
    public func copy(to target: DataStore, progress: @Sendable (String) -> Void = { _ in }) async throws -> StoreCopyReport {
        var report = StoreCopyReport()
        // Blobs first: a media row in the target always has its blob.
        var after = ""
        while true {
            let start = after
            let ids = try await database.read { db in
                try String.fetchAll(db, sql: "SELECT sha256 FROM media WHERE sha256 > ? ORDER BY sha256 LIMIT 200", arguments: [start])
            }
            guard let last = ids.last else { break }
            after = last
            for hex in ids {
                guard let id = MediaID(hex) else { continue }
                if try await target.media.item(id) != nil, await target.media.hasBlob(id) {
                    report.blobsPresent += 1
                    continue
                }
                guard let item = try await media.item(id), let buffer = try await media.read(id, offset: 0, length: item.size),
                      buffer.readableBytes == item.size
                else {
                    report.blobProblems.append("\(hex): missing from the source (\(media.blobPath(id)))")
                    continue
                }
                let bytes = Array(buffer.readableBytesView)
                let actual = MediaID(hashing: bytes)
                guard actual == id else {
                    report.blobProblems.append("\(hex): damaged in the source, its bytes hash to \(actual.hex)")
                    continue
                }
                // Byte for byte: a blob stored before stripping (or with --keep-metadata) keeps its id.
                let stored = try await target.media.ingest(bytes: bytes, keepMetadata: true)
                guard stored.item.id == id else { throw CoreError(.invalid, "\(hex) was stored as \(stored.item.id.hex)") }
                report.blobsCopied += 1
            }
            progress("blobs: \(report.blobsCopied) copied, \(report.blobsPresent) already there")
        }
        for table in Self.copiedTables {
            let copied = try await copyTable(table.name, key: table.key, upsert: table.upsert, to: target)
            report.rows.append((table.name, copied))
            progress("\(table.name): \(copied) rows")
        }
        try await target.database.write { db in
            // Leases name holders of the source; the target's dispatchers take the rows up.
            try db.execute(sql: "UPDATE deliveries SET leaseUntil = NULL, leasedBy = NULL, leaseTag = NULL WHERE state = 'pending'")
            if db.dialect == .postgres {
                // Ids were given explicitly: the identity sequences carry on after the largest.
                for table in ["notifications", "deliveries", "campaigns", "events", "webhooks", "audit_log"] {
                    try db.execute(sql: "SELECT setval(pg_get_serial_sequence('\(table)', 'id'), (SELECT COALESCE(max(id), 0) + 1 FROM \(table)), false)")
                }
            }
        }
        // A campaign's pushes in runs (PostgreSQL, docs/design/outbox.md#runs) become rows of the
        // target's outbox: sent, or pending. Their rows get the target's ids, after those
        // copied (the sequences were set above).
        let expanded = try await copyRuns(to: target)
        if expanded > 0 {
            report.rows.append(("outbox_runs (as deliveries)", expanded))
            progress("outbox_runs: \(expanded) pushes as deliveries")
        }
        if database.dialect == .sqlite, target.database.dialect == .postgres, let hex = try? PayloadKey.storedHex(directory: directory) {
            try await target.settings.set(PayloadKey.settingsKey, hex, notify: .users)
        }
        return report
    }

    /// Copies the source's runs as rows of the target's `deliveries`, a page of deliveries at a
    /// time; returns how many. A push the target already has (its push id, for a copy run again) is left.
    private func copyRuns(to target: DataStore) async throws -> Int {
        guard database.dialect == .postgres else { return 0 }
        let campaigns = try await database.read { db in try Int64.fetchAll(db, sql: "SELECT DISTINCT campaignId FROM outbox_runs ORDER BY 1") }
        var copied = 0
        for campaign in campaigns {
            var after: Int64 = 0
            while true {
                let cursor = after
                let page = try await database.read { db in try OutboxRuns.deliveries(db, campaign: campaign, after: cursor, limit: 500) }
                guard let last = page.last else { break }
                after = -last.id
                let platforms = try await database.read { db in
                    try db.fetchAll(sql: "SELECT id, platform, app FROM outbox_runs WHERE campaignId = ? AND \(db.idIn("id"))",
                                    arguments: [campaign, db.idList(Set(page.map { OutboxRuns.place(of: $0.id).run }).sorted())])
                }
                let runs = Dictionary(platforms.map { row -> (Int64, (platform: String, app: String)) in (row["id"], (row["platform"], row["app"])) },
                                      uniquingKeysWith: { first, _ in first })
                copied += try await target.database.write { db in
                    var inserted = 0
                    for push in page {
                        guard try Int.fetchOne(db, sql: "SELECT 1 FROM deliveries WHERE pushId = ? AND notificationId = ?",
                                               arguments: [push.pushId, push.notificationId]) == nil else { continue }
                        let run = runs[OutboxRuns.place(of: push.id).run]
                        try db.execute(sql: """
                            INSERT INTO deliveries (notificationId, campaignId, registrationId, target, platform, app, state, attempts, pushId,
                                                    nextAttemptAt, createdAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """, arguments: [push.notificationId, campaign, push.registrationId, push.target, run?.platform, run?.app,
                                             push.state.rawValue, push.attempts, push.pushId, push.nextAttemptAt.timeIntervalSince1970,
                                             push.createdAt.timeIntervalSince1970, push.updatedAt.timeIntervalSince1970])
                        inserted += 1
                    }
                    return inserted
                }
            }
        }
        return copied
    }

    /// Copies `table`'s rows, 500 to a transaction, in key order; returns how many the target did not have.
    private func copyTable(_ table: String, key: [String], upsert: Bool, to target: DataStore) async throws -> Int {
        var copied = 0
        var last: [SQLValue]?
        let keyList = key.joined(separator: ", ")
        // The target's own columns, less those it computes (a generated column takes no value).
        let writable = Set(try await target.database.read { db in
            db.dialect == .postgres
                ? try String.fetchAll(db, sql: """
                    SELECT lower(column_name) FROM information_schema.columns
                    WHERE table_schema = current_schema() AND table_name = ? AND is_generated = 'NEVER'
                    """, arguments: [table])
                : try String.fetchAll(db, sql: "SELECT lower(name) FROM pragma_table_xinfo(?) WHERE hidden = 0", arguments: [table])
        })
        while true {
            let bound = last
            let rows = try await database.read { db -> [SQLRow] in
                let after = bound.map { _ in "WHERE (\(keyList)) > (\(key.map { _ in "?" }.joined(separator: ", ")))" } ?? ""
                return try db.fetchAll(sql: "SELECT * FROM \(table) \(after) ORDER BY \(keyList) LIMIT 500",
                                       arguments: SQLArguments(values: bound ?? []))
            }
            guard let final = rows.last else { return copied }
            last = key.map { final.values[final.columnIndex($0)!] }
            copied += try await target.database.write { db in
                var inserted = 0
                for row in rows {
                    let kept = row.columnNames.indices.filter { writable.contains(row.columnNames[$0].lowercased()) }
                    let columns = kept.map { row.columnNames[$0] }
                    guard !columns.isEmpty else { throw CoreError(.invalid, "the target has no table \(table) to copy into: migrate it first") }
                    let conflict = upsert
                        ? "ON CONFLICT (\(keyList)) DO UPDATE SET " + columns.filter { !key.contains($0) }.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
                        : "ON CONFLICT DO NOTHING"
                    try db.execute(sql: "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", "))) \(conflict)",
                                   arguments: SQLArguments(values: kept.map { row.values[$0] }))
                    inserted += db.changesCount
                }
                return inserted
            }
        }
    }
}
