import Crypto
import Foundation
import SQLEngine

/// A webhook: where events go, which ones, and how far it got (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks).
public struct Webhook: Sendable, Equatable {
    public var id: Int64
    public var url: String
    public var events: [DeliveryEventType]
    public var createdAt: Date
    /// Events delivered, and dropped after 24 h of failures.
    public var delivered: Int
    public var dropped: Int
    /// The receiver's last refusal or silence, while it fails.
    public var lastError: String?
    /// Failed attempts in a row.
    public var attempts: Int
}

/// Webhooks and their place in the event queue. Events are appended by the transactions that
/// make them (`Insight`); each webhook reads past its cursor, a batch at a time, leased by one
/// node, and moves the cursor only once the receiver said 2xx: at least once, nothing lost.
public struct WebhookStore: Sendable {
    let database: SQLDatabase

    init(database: SQLDatabase) {
        self.database = database
    }

    /// Events are read only once this old: on PostgreSQL, ids come from a sequence before
    /// commit, so a newer id may commit before an older one; waiting this long lets the older
    /// commit first (a transaction that makes events takes milliseconds).
    public static let settle: Double = 2
    /// The first event past a cursor (`?`) that is not yet settled (newer than `?`): only the
    /// unbroken run of settled events before it is read, so an event whose `at` is later than a
    /// higher id's is never passed over.
    static let unsettled = "COALESCE((SELECT min(u.id) FROM events u WHERE u.id > ? AND u.at > ?), 9223372036854775807)"

    /// How long events are retried for before they are recorded as dropped.
    public static let retention: Double = 24 * 3600

    /// The flag that lifts the rules on webhook URLs, named in every refusal (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks); its
    /// variable is `RICHPUSH_ALLOW_PRIVATE_WEBHOOKS`.
    public static let allowPrivateFlag = "--allow-private-webhooks"
    static let allowPrivateHint = "\(WebhookStore.allowPrivateFlag), env RICHPUSH_ALLOW_PRIVATE_WEBHOOKS,"

    /// The rules a webhook URL meets before any lookup, those of every URL RichPush calls on
    /// someone's behalf (`OutboundURL`, `OutboundPolicy`): read strictly, `https://`, at a host
    /// name rather than an IP address; any port. `allowPrivate` (`--allow-private-webhooks`) lets
    /// it be `http://` and an address, for a receiver on this machine or a private network.
    /// Whether the name resolves to public addresses only is for `OutboundPolicy`, which
    /// `webhooks add` asks and every delivery asks again (DNS may change).
    public static func validate(url: String, allowPrivate: Bool = false) throws {
        guard url.utf8.count <= 2048 else { throw CoreError(.invalid, "a webhook URL is at most 2048 bytes") }
        let parsed: OutboundURL
        do { parsed = try OutboundURL(url) } catch let error as CoreError {
            throw CoreError(.invalid, "not a webhook URL: \(error.message)")
        }
        guard !allowPrivate else { return }
        guard parsed.isHTTPS else {
            throw CoreError(.unprocessable, "a webhook URL must be https://, not http://\(parsed.authority) (\(allowPrivateHint) allows plain http for a receiver on this machine or a private network)")
        }
        if parsed.hostIsIPAddress {
            let kind = PublicAddress.bytes(of: parsed.host).flatMap(PublicAddress.refusal(for:)).map { ", \($0)" } ?? ""
            throw CoreError(.unprocessable, "a webhook URL names the IP address \(parsed.host)\(kind); it must name its host, and RichPush sends only to public addresses (\(allowPrivateHint) allows others, for a receiver on this machine or a private network)")
        }
    }

    /// Adds a webhook for `events` (every type when empty) signed with `secret`; its id. The URL
    /// meets `validate(url:allowPrivate:)`. `audit` records who did (`webhook.add`, with the
    /// receiver's scheme and host and the events: never its path, which may be a secret itself, nor the secret).
    public func add(url: String, events: [DeliveryEventType], secret: String, allowPrivate: Bool = false, now: Date = Date(),
                    audit: AuditActor? = nil) async throws -> Int64 {
        try Self.validate(url: url, allowPrivate: allowPrivate)
        guard secret.utf8.count >= 16 else { throw CoreError(.invalid, "a webhook secret is at least 16 bytes") }
        let types = (events.isEmpty ? DeliveryEventType.allCases : events).map(\.rawValue)
        return try await database.write { db in
            // It starts with what happens from now on: events already queued are others'.
            let start = try Int64.fetchOne(db, sql: "SELECT COALESCE(max(id), 0) FROM events") ?? 0
            let row = try db.fetchOne(sql: "INSERT INTO webhooks (url, events, secret, createdAt, cursor) VALUES (?, ?, ?, ?, ?) RETURNING id",
                                      arguments: [url, types.joined(separator: ","), secret, now.timeIntervalSince1970, start])
            let id: Int64 = row!["id"]
            try Audit.record(db, audit, "webhook.add", target: "webhook:\(id)",
                             detail: ["receiver": .string(Self.origin(of: url)), "events": .array(types.map(JSONValue.string))])
            return id
        }
    }

    /// Every webhook, by id.
    public func list() async throws -> [Webhook] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT * FROM webhooks ORDER BY id").map(Self.webhook)
        }
    }

    /// Removes webhook `id` (404 when there is none); its undelivered events go with it. `audit`
    /// records who did (`webhook.remove`).
    public func remove(id: Int64, audit: AuditActor? = nil) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM webhooks WHERE id = ?", arguments: [id])
            guard db.changesCount > 0 else { throw CoreError(.notFound, "no webhook \(id)") }
            // Events nobody will read any more.
            let oldest = try Int64.fetchOne(db, sql: "SELECT min(cursor) FROM webhooks")
            try db.execute(sql: "DELETE FROM events WHERE id <= ?", arguments: [oldest ?? Int64.max])
            try Audit.record(db, audit, "webhook.remove", target: "webhook:\(id)")
        }
    }

    /// A receiver's scheme and host (and port), for the audit log: its path, query and user
    /// info stay out (a receiver's URL path is often a secret of its own).
    static func origin(of url: String) -> String {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme, let host = parts.host else { return "?" }
        return "\(scheme)://\(host)" + (parts.port.map { ":\($0)" } ?? "")
    }

    /// A batch to deliver: a webhook due now that nobody leases, leased to `holder` for
    /// `lease` seconds, with up to `limit` of its events past its cursor; nil when none is due.
    ///
    /// The webhook due longest goes first: `nextAttemptAt` is when it was last served (or, while
    /// it fails, when its backoff ends), so a webhook just delivered to waits behind the others
    /// (never reset to 0, which put a receiver with a steady stream of events ahead of every
    /// webhook of a higher id, whatever it took to answer). A dispatcher delivers several
    /// webhooks at once (`WebhookDispatcher`); the lease keeps each webhook's batches in order.
    public func claim(holder: Int64, limit: Int = 100, lease: Double = 60) async throws -> (webhook: Webhook, secret: String, events: [DeliveryEvent])? {
        try await database.write(isolation: .readCommitted) { db in
            let now = db.now
            for row in try SQLRow.fetchAll(db, sql: """
                SELECT * FROM webhooks WHERE nextAttemptAt <= ? AND (leaseUntil IS NULL OR leaseUntil < ?) ORDER BY nextAttemptAt, id
                """, arguments: [now, now]) {
                let webhook = Self.webhook(row)
                let types = webhook.events.map(\.rawValue)
                let events = try SQLRow.fetchAll(db, sql: """
                    SELECT * FROM events WHERE id > ? AND id < \(Self.unsettled) AND type IN (\(sqlPlaceholders(types.count))) ORDER BY id LIMIT ?
                    """, arguments: SQLArguments([row["cursor"] as Int64, row["cursor"] as Int64, now - Self.settle]
                                                   + types.map { $0 as any SQLValueConvertible } + [limit]))
                    .map(Self.event)
                guard !events.isEmpty else {
                    // Nothing it wants: its place moves past what others want, so the queue can be compacted.
                    try db.execute(sql: """
                        UPDATE webhooks SET cursor = (SELECT max(id) FROM events WHERE id > ? AND id < \(Self.unsettled))
                        WHERE id = ? AND EXISTS (SELECT 1 FROM events WHERE id > ? AND id < \(Self.unsettled))
                        """, arguments: [row["cursor"] as Int64, row["cursor"] as Int64, now - Self.settle, webhook.id,
                                         row["cursor"] as Int64, row["cursor"] as Int64, now - Self.settle])
                    continue
                }
                try db.execute(sql: "UPDATE webhooks SET leaseUntil = ? WHERE id = ? AND (leaseUntil IS NULL OR leaseUntil < ?)",
                               arguments: [now + lease, webhook.id, now])
                guard db.changesCount == 1 else { continue }
                _ = holder
                return (webhook, row["secret"] as String, events)
            }
            return nil
        }
    }

    /// The stored `traceparent` of each of `campaigns` that has one (docs/operations.md#traces):
    /// a delivery of their events continues the trace of the request that made them.
    public func traceparents(of campaigns: [Int64]) async throws -> [Int64: String] {
        try await database.read { db in
            var found: [Int64: String] = [:]
            for chunk in campaigns.sqlBatches() {
                for row in try db.fetchAll(sql: "SELECT id, traceparent FROM campaigns WHERE traceparent IS NOT NULL AND \(db.idIn("id"))",
                                           arguments: [db.idList(chunk)]) {
                    found[row["id"]] = row["traceparent"]
                }
            }
            return found
        }
    }

    /// The receiver took events up to `last`: the cursor moves past them, failures are forgotten,
    /// and the webhook is due again at once, behind those that have waited longer (`claim`).
    public func delivered(_ webhook: Int64, through last: Int64, count: Int) async throws {
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: """
                UPDATE webhooks SET cursor = ?, delivered = delivered + ?, attempts = 0, nextAttemptAt = ?, leaseUntil = NULL, lastError = NULL
                WHERE id = ? AND cursor < ?
                """, arguments: [last, count, db.now, webhook, last])
        }
    }

    /// The receiver failed (`error`): tried again after a backoff (1 s doubling to 10 minutes);
    /// events older than a day are then recorded as dropped and skipped.
    public func failed(_ webhook: Int64, attempts: Int, error: String, backoffBase: Double = 1) async throws {
        try await database.write(isolation: .readCommitted) { db in
            let now = db.now
            let delay = min(600, backoffBase * pow(2, Double(min(attempts, 20))))
            try db.execute(sql: "UPDATE webhooks SET attempts = attempts + 1, nextAttemptAt = ?, leaseUntil = NULL, lastError = ? WHERE id = ?",
                           arguments: [now + delay, String(error.prefix(300)), webhook])
            guard let cursor = try Int64.fetchOne(db, sql: "SELECT cursor FROM webhooks WHERE id = ?", arguments: [webhook]) else { return }
            let stale = try Int64.fetchAll(db, sql: "SELECT id FROM events WHERE id > ? AND at < ? ORDER BY id", arguments: [cursor, now - Self.retention])
            if let last = stale.last {
                try db.execute(sql: "UPDATE webhooks SET cursor = ?, dropped = dropped + ? WHERE id = ?", arguments: [last, stale.count, webhook])
            }
        }
    }

    /// Removes events every webhook has taken (run now and then).
    public func compact() async throws {
        try await database.write(isolation: .readCommitted) { db in
            let oldest = try Int64.fetchOne(db, sql: "SELECT min(cursor) FROM webhooks")
            try db.execute(sql: "DELETE FROM events WHERE id <= ?", arguments: [oldest ?? Int64.max])
        }
    }

    static func webhook(_ row: SQLRow) -> Webhook {
        Webhook(id: row["id"], url: row["url"], events: (row["events"] as String).split(separator: ",").compactMap { DeliveryEventType(rawValue: String($0)) },
                createdAt: Date(timeIntervalSince1970: row["createdAt"]), delivered: row["delivered"], dropped: row["dropped"],
                lastError: row["lastError"], attempts: row["attempts"])
    }

    static func event(_ row: SQLRow) -> DeliveryEvent {
        DeliveryEvent(id: row["id"], type: DeliveryEventType(rawValue: row["type"]) ?? .sent, at: Date(timeIntervalSince1970: row["at"]),
                      campaign: row["campaignId"], notification: row["notificationId"], user: row["recipient"], platform: row["platform"],
                      reason: row["reason"])
    }
}

/// `X-RichPush-Signature` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks): `t=<unix>,v1=<hex HMAC-SHA-256 of "t.body">`.
public enum WebhookSignature {
    /// The header's value for `body` sent at `time` with `secret`.
    public static func header(body: some DataProtocol, secret: String, time: Int) -> String {
        var message = Data("\(time).".utf8)
        message.append(contentsOf: body)
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8)))
        return "t=\(time),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}
