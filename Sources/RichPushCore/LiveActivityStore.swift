import Foundation
import SQLEngine


/// Live Activities (docs/api.md#live-activities): push-to-start tokens per registration and
/// attributes type, activities and their devices' update tokens, and their pushes, which go
/// through the outbox as every push does (`activity_pushes`, claimed with `deliveries`).
public struct LiveActivityStore: Sendable {
    let database: SQLDatabase

    init(database: SQLDatabase) {
        self.database = database
    }

    /// iOS ends an activity 8 hours after it started: updates after that are 409.
    public static let maxAge: Double = 8 * 3600
    /// APNs' largest Live Activity payload.
    public static let maxPayload = 4096
    /// The most devices one start reaches (a broadcast's updates reach any number).
    public static let maxDevices = 100_000

    // MARK: tokens

    /// A token as ActivityKit hands it: hex (lowercased here) of 32 to 255 bytes.
    public static func checkedToken(_ token: String, field: String) throws -> String {
        let lower = token.lowercased()
        guard lower.count >= 64, lower.count <= 510, lower.count % 2 == 0, lower.allSatisfy(\.isHexDigit) else {
            throw CoreError(.invalid, "\(field) must be the token in hex (64 to 510 hex digits, an even number), got \(token.count) characters")
        }
        return lower
    }

    /// An ActivityKit attributes type's name: 1 to 100 letters, digits, `_` and `.`.
    public static func checkedType(_ type: String) throws -> String {
        guard (1...100).contains(type.utf8.count), type.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ".") }) else {
            throw CoreError(.invalid, "type must be the ActivityKit attributes type's name (1 to 100 letters, digits, _ and .), got '\(type.prefix(40))'")
        }
        return type
    }

    /// Keeps `token` as the push-to-start token of registration `id` (owned by `owner`) for
    /// attributes `type`, replacing the one before. 404 for another's or no registration.
    public func setPushToStartToken(registration id: String, owner: String, type: String, token: String) async throws {
        let token = try Self.checkedToken(token, field: "pushToStartToken")
        let type = try Self.checkedType(type)
        try await database.write { db in
            guard let row = try db.fetchOne(sql: "SELECT username, platform FROM registrations WHERE id = ?", arguments: [id]),
                  (row["username"] as String) == owner else {
                throw CoreError(.notFound, "no registration \(id.prefix(64)) of yours")
            }
            if let platform = row["platform"] as String?, platform != "apns" {
                throw CoreError(.conflict, "registration \(id.prefix(64)) is a \(platform) device: push-to-start tokens are for iOS (apns) registrations")
            }
            try db.execute(sql: """
                INSERT INTO activity_start_tokens (registrationId, type, token, updatedAt) VALUES (?, ?, ?, ?)
                ON CONFLICT (registrationId, type) DO UPDATE SET token = excluded.token, updatedAt = excluded.updatedAt
                """, arguments: [id, type, token, db.now])
        }
    }

    /// Forgets registration `id`'s push-to-start token for `type`. 404 for another's registration.
    public func removePushToStartToken(registration id: String, owner: String, type: String) async throws {
        try await database.write { db in
            guard let user = try String.fetchOne(db, sql: "SELECT username FROM registrations WHERE id = ?", arguments: [id]), user == owner else {
                throw CoreError(.notFound, "no registration \(id.prefix(64)) of yours")
            }
            try db.execute(sql: "DELETE FROM activity_start_tokens WHERE registrationId = ? AND type = ?", arguments: [id, type])
        }
    }

    /// The push-to-start tokens of registration `id`, by type.
    public func pushToStartTokens(registration id: String) async throws -> [String: String] {
        try await database.read { db in
            var tokens: [String: String] = [:]
            for row in try db.fetchAll(sql: "SELECT type, token FROM activity_start_tokens WHERE registrationId = ?", arguments: [id]) {
                tokens[row["type"]] = row["token"]
            }
            return tokens
        }
    }

    // MARK: payloads

    /// `text` read as a JSON object, or 400 naming `field` and where it broke.
    public static func object(_ text: String, field: String) throws -> [String: Any] {
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "not JSON"
            throw CoreError(.invalid, "\(field): not valid JSON (\(detail))")
        }
        guard let object = value as? [String: Any] else { throw CoreError(.invalid, "\(field) must be a JSON object") }
        return object
    }

    static func json(_ object: Any) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
    }

    /// The APNs payload of an event (kebab-case keys, dates in seconds), and the JSON Android and
    /// browsers get (`richpushActivity`, `event`, `contentState`, `title`, `body`, `dismissAt`).
    static func payloads(activity id: String, event: String, timestamp: Int64, type: String? = nil, attributes: String? = nil,
                         contentState: String?, alert: LiveActivityAlert?, staleDate: Date?, relevanceScore: Double? = nil,
                         dismissAt: Date? = nil, channel: String? = nil) throws -> (apns: Data, twin: Data) {
        var aps: [String: Any] = ["event": event, "timestamp": timestamp]
        var twin: [String: Any] = ["richpushActivity": id, "event": event]
        if let contentState {
            let state = try object(contentState, field: "contentState")
            aps["content-state"] = state
            twin["contentState"] = state
        }
        if let type, let attributes {
            var fields = try object(attributes, field: "attributes")
            // The app learns the activity's id from its attributes (push-to-start hands the app no payload).
            if fields["richpushActivity"] == nil { fields["richpushActivity"] = id }
            aps["attributes-type"] = type
            aps["attributes"] = fields
        }
        if let alert {
            aps["alert"] = alert.apns
            twin["title"] = alert.title
            if let body = alert.body { twin["body"] = body }
        }
        if let staleDate { aps["stale-date"] = Int64(staleDate.timeIntervalSince1970) }
        if let relevanceScore { aps["relevance-score"] = relevanceScore }
        if let dismissAt {
            aps["dismissal-date"] = Int64(dismissAt.timeIntervalSince1970)
            twin["dismissAt"] = Int64(dismissAt.timeIntervalSince1970)
        }
        if let channel { aps["input-push-channel"] = channel }
        let apns = json(["aps": aps, "richpushActivity": id])
        guard apns.count <= maxPayload else {
            throw CoreError(.tooLarge, "the \(event) push would be \(apns.count) bytes; APNs takes at most \(maxPayload) for a Live Activity")
        }
        return (apns, json(twin))
    }

    // MARK: start, update, end

    /// A new activity's id: `la_` and 20 random lowercase letters and digits (a Web Push
    /// `Topic`, 32 URL-safe characters at most).
    static func newID() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return "la_" + String((0..<20).map { _ in alphabet.randomElement()! })
    }

    /// Starts an activity: stores it with its devices (each iOS device of the audience with a
    /// push-to-start token for its type, and each Android and web device) and queues each a
    /// start push, in one transaction. `audit` records who did (`liveactivity.start`).
    public func start(_ draft: LiveActivityDraft, by creator: String, audit: AuditActor? = nil) async throws -> LiveActivityQueued {
        let id = Self.newID()
        return try await database.write { db in
            let now = db.now
            let timestamp = Int64(now)
            // First: JSON that is not an object is 400 and a push too large 413, before any reading or writing.
            let payloads = try Self.payloads(activity: id, event: "start", timestamp: timestamp, type: draft.type, attributes: draft.attributes,
                                             contentState: draft.contentState, alert: draft.alert, staleDate: draft.staleDate,
                                             relevanceScore: draft.relevanceScore, channel: draft.channelId)
            let targets = try Self.startTargets(db, draft).targets
            try db.execute(sql: """
                INSERT INTO live_activities (id, type, app, state, channelId, attributes, contentState, staleDate, devices, updates, failures,
                                             lastTimestamp, createdAt, createdBy)
                VALUES (?, ?, ?, 'active', ?, ?, ?, ?, ?, 0, 0, ?, ?, ?)
                """, arguments: [id, draft.type, draft.app, draft.channelId, draft.attributes, draft.contentState,
                                 draft.staleDate?.timeIntervalSince1970, targets.count, timestamp, now, creator])
            for chunk in targets.sqlBatches(of: 300) {
                try db.execute(sql: "INSERT INTO activity_devices (activityId, registrationId, platform, updateToken) VALUES "
                                   + Array(repeating: "(?, ?, ?, NULL)", count: chunk.count).joined(separator: ", "),
                               arguments: SQLArguments(chunk.flatMap { [id, $0.registration, $0.platform] as [any SQLValueConvertible] }))
            }
            let event = try Self.insertEvent(db, activity: id, event: "start", timestamp: timestamp, priority: 10, payloads: payloads)
            try Self.queue(db, activity: id, app: draft.app, event: event, timestamp: timestamp,
                           pushes: targets.map { ($0.registration, $0.platform, $0.target) })
            try Audit.record(db, audit, "liveactivity.start", target: "liveactivity:\(id)",
                             detail: ["type": .string(draft.type), "app": .string(draft.app), "devices": .integer(Int64(targets.count)),
                                      "broadcast": .bool(draft.channelId != nil)])
            return LiveActivityQueued(activity: try Self.read(db, id)!, devices: targets.count, timestamp: timestamp)
        }
    }

    /// One device a start goes to: an iOS device through its push-to-start token for the type,
    /// an Android or web device through its handle.
    struct StartTarget: Sendable {
        var user: String
        var registration: String
        var platform: String
        var target: String
    }

    /// The devices a start of `draft` goes to, its audience read a page of 500 users at a time:
    /// each iOS device through its push-to-start token for the type (not its device token; those
    /// without one are counted in `withoutToken`), each Android and web device; 413 past `maxDevices`.
    static func startTargets(_ db: SQLConnection, _ draft: LiveActivityDraft) throws -> (targets: [StartTarget], withoutToken: Int) {
        var targets: [StartTarget] = []
        var withoutToken = 0
        var cursor = ""
        var exhausted = false
        while !exhausted {
            let page = try CampaignStore.nextRecipients(db, draft.audience, after: cursor, limit: 500)
            (cursor, exhausted) = (page.cursor, page.exhausted || page.names.isEmpty)
            let devices = try CampaignStore.devices(db, of: page.names, audience: draft.audience, app: draft.app, sparse: true)
            let found: [StartTarget] = page.names.flatMap { name in
                (devices[name] ?? []).compactMap { device in
                    device.registration.map { StartTarget(user: name, registration: $0, platform: device.platform ?? "apns", target: device.target) }
                }
            }
            let ios = found.filter { $0.platform == "apns" }.map(\.registration)
            var startTokens: [String: String] = [:]
            for chunk in ios.sqlBatches(of: 500) {
                for row in try db.fetchAll(sql: "SELECT registrationId, token FROM activity_start_tokens WHERE type = ? AND registrationId IN (\(sqlPlaceholders(chunk.count)))",
                                           arguments: SQLArguments([draft.type as any SQLValueConvertible] + chunk.map { $0 as any SQLValueConvertible })) {
                    startTokens[row["registrationId"]] = row["token"]
                }
            }
            for device in found {
                guard device.platform == "apns" else {
                    targets.append(device)
                    continue
                }
                guard let token = startTokens[device.registration] else {
                    withoutToken += 1
                    continue
                }
                targets.append(StartTarget(user: device.user, registration: device.registration, platform: device.platform, target: token))
            }
            guard targets.count <= Self.maxDevices else {
                throw CoreError(.tooLarge, "the audience has over \(Self.maxDevices) devices; one activity starts on at most that many (a broadcast's updates reach any number)")
            }
        }
        return (targets, withoutToken)
    }

    /// The activity `id` as a caller may see it: nil when there is none, or when `app` is given
    /// and it is another app's.
    public func activity(_ id: String, app: String? = nil, devices: Bool = false) async throws -> LiveActivity? {
        try await database.read { db in
            guard var activity = try Self.read(db, id), app == nil || activity.app == app else { return nil }
            if devices { activity.perDevice = try Self.perDevice(db, id) }
            return activity
        }
    }

    /// Activities, newest first: at most `limit`, of `app` when given.
    public func list(limit: Int, app: String? = nil) async throws -> [LiveActivity] {
        try await database.read { db in
            let (condition, arguments): (String, [any SQLValueConvertible]) = app.map { ("WHERE app = ?", [$0]) } ?? ("", [])
            return try db.fetchAll(sql: "SELECT * FROM live_activities \(condition) ORDER BY createdAt DESC, id LIMIT ?",
                                   arguments: SQLArguments(arguments + [limit])).map(Self.activity(from:))
        }
    }

    /// Updates the activity on every device (`end` false) or ends it (`end` true), with a
    /// timestamp past every one given before, by the database's clock, whatever the node.
    /// 404 when there is none, 409 when it ended or is over 8 hours old (an update). `audit`
    /// records who did (`liveactivity.update`, `liveactivity.end`).
    public func change(_ id: String, _ change: LiveActivityChange, end: Bool, audit: AuditActor? = nil) async throws -> LiveActivityQueued {
        try await database.write(isolation: .readCommitted) { db in
            let lock = db.dialect == .postgres ? "FOR UPDATE" : ""
            guard let row = try db.fetchOne(sql: "SELECT * FROM live_activities WHERE id = ? \(lock)", arguments: [id]) else {
                throw CoreError(.notFound, "no live activity \(id.prefix(40))")
            }
            var activity = Self.activity(from: row)
            let now = db.now
            guard activity.state == "active" else { throw CoreError(.conflict, "live activity \(id) has ended") }
            if !end && now - activity.createdAt.timeIntervalSince1970 > Self.maxAge {
                throw CoreError(.conflict, "live activity \(id) started over 8 hours ago: iOS has ended it; end it (DELETE) or start another")
            }
            let timestamp = max(activity.lastTimestamp + 1, Int64(now))
            let event = end ? "end" : "update"
            let priority = end ? 10 : (change.priority ?? (change.alert == nil ? 5 : 10))
            let payloads = try Self.payloads(activity: id, event: event, timestamp: timestamp,
                                             contentState: change.contentState ?? (end ? activity.contentState : nil),
                                             alert: change.alert, staleDate: change.staleDate, dismissAt: end ? change.dismissAt : nil)
            try db.execute(sql: """
                UPDATE live_activities SET lastTimestamp = ?, contentState = ?, updates = updates + ?, lastUpdate = ?, state = ?, endedAt = ?
                WHERE id = ?
                """, arguments: [timestamp, change.contentState ?? activity.contentState, end ? 0 : 1, end ? activity.lastUpdate?.timeIntervalSince1970 : now,
                                 end ? "ended" : "active", end ? now : nil, id])
            let eventID = try Self.insertEvent(db, activity: id, event: event, timestamp: timestamp, priority: priority, payloads: payloads)
            var pushes: [(String?, String, String)] = []
            let devices = try db.fetchAll(sql: """
                SELECT d.registrationId, d.platform, d.updateToken, r.handle FROM activity_devices d
                LEFT JOIN registrations r ON r.id = d.registrationId WHERE d.activityId = ?
                """, arguments: [id])
            if let channel = activity.channelId { pushes.append((nil, "apns", channel)) }
            for device in devices {
                let platform: String = device["platform"]
                if platform == "apns" {
                    guard activity.channelId == nil, let token = device["updateToken"] as String? else { continue }
                    pushes.append((device["registrationId"], platform, token))
                } else if let handle = device["handle"] as String? {
                    pushes.append((device["registrationId"], platform, handle))
                }
            }
            try Self.queue(db, activity: id, app: activity.app, event: eventID, timestamp: timestamp, pushes: pushes)
            if end {
                // Its update tokens die with it; the end pushes carry theirs.
                try db.execute(sql: "UPDATE activity_devices SET updateToken = NULL WHERE activityId = ?", arguments: [id])
            }
            activity = try Self.read(db, id)!
            try Audit.record(db, audit, end ? "liveactivity.end" : "liveactivity.update", target: "liveactivity:\(id)",
                             detail: ["pushes": .integer(Int64(pushes.count)), "timestamp": .integer(timestamp)])
            return LiveActivityQueued(activity: activity, devices: pushes.count, timestamp: timestamp)
        }
    }

    /// Keeps `token` as the update token of activity `id` on registration `registration` (owned
    /// by `owner`), replacing a rotated one. A device the activity was not started on (the app
    /// started it itself) joins it. A device whose token comes after updates were sent gets the
    /// current state at once. Returns whether a catch-up update was queued.
    @discardableResult
    public func reportToken(activity id: String, registration: String, owner: String, token: String) async throws -> Bool {
        let token = try Self.checkedToken(token, field: "token")
        return try await database.write(isolation: .readCommitted) { db in
            guard let device = try db.fetchOne(sql: "SELECT username, platform, app FROM registrations WHERE id = ?", arguments: [registration]),
                  (device["username"] as String) == owner else {
                throw CoreError(.notFound, "no registration \(registration.prefix(64)) of yours")
            }
            let lock = db.dialect == .postgres ? "FOR UPDATE" : ""
            guard let row = try db.fetchOne(sql: "SELECT * FROM live_activities WHERE id = ? \(lock)", arguments: [id]),
                  (row["app"] as String) == ((device["app"] as String?) ?? AppName.default) else {
                throw CoreError(.notFound, "no live activity \(id.prefix(40))")
            }
            let activity = Self.activity(from: row)
            guard activity.state == "active" else { throw CoreError(.conflict, "live activity \(id) has ended") }
            if let platform = device["platform"] as String?, platform != "apns" {
                throw CoreError(.conflict, "registration \(registration.prefix(64)) is a \(platform) device: update tokens are for iOS (apns) registrations")
            }
            let before = try db.fetchOne(sql: "SELECT updateToken FROM activity_devices WHERE activityId = ? AND registrationId = ?",
                                         arguments: [id, registration])
            if before == nil {
                try db.execute(sql: "INSERT INTO activity_devices (activityId, registrationId, platform, updateToken) VALUES (?, ?, 'apns', ?)",
                               arguments: [id, registration, token])
                try db.execute(sql: "UPDATE live_activities SET devices = devices + 1 WHERE id = ?", arguments: [id])
            } else {
                try db.execute(sql: "UPDATE activity_devices SET updateToken = ? WHERE activityId = ? AND registrationId = ?",
                               arguments: [token, id, registration])
            }
            // A rotated token's pushes not yet sent go to the new one.
            try db.execute(sql: """
                UPDATE activity_pushes SET target = ? WHERE activityId = ? AND lane = ? AND state = 'pending' AND target != ?
                  AND eventId IN (SELECT id FROM activity_events WHERE activityId = ? AND event != 'start')
                """, arguments: [token, id, registration, token, id])
            // Updates it missed: the current state now (broadcasts reach it on their channel).
            let hadToken = ((before?["updateToken"]) as String?) != nil
            guard !hadToken, activity.channelId == nil, activity.updates > 0 else { return false }
            let missed = try Int.fetchOne(db, sql: """
                SELECT count(*) FROM activity_events e WHERE e.activityId = ? AND e.event = 'update'
                  AND NOT EXISTS (SELECT 1 FROM activity_pushes p WHERE p.eventId = e.id AND p.lane = ?)
                """, arguments: [id, registration]) ?? 0
            guard missed > 0 else { return false }
            let timestamp = max(activity.lastTimestamp + 1, Int64(db.now))
            let payloads = try Self.payloads(activity: id, event: "update", timestamp: timestamp, contentState: activity.contentState,
                                             alert: nil, staleDate: nil)
            try db.execute(sql: "UPDATE live_activities SET lastTimestamp = ? WHERE id = ?", arguments: [timestamp, id])
            let event = try Self.insertEvent(db, activity: id, event: "update", timestamp: timestamp, priority: 5, payloads: payloads)
            try Self.queue(db, activity: id, app: activity.app, event: event, timestamp: timestamp, pushes: [(registration, "apns", token)])
            return true
        }
    }

    // MARK: rows

    static func insertEvent(_ db: SQLConnection, activity: String, event: String, timestamp: Int64, priority: Int,
                            payloads: (apns: Data, twin: Data)) throws -> Int64 {
        try Int64.fetchOne(db, sql: """
            INSERT INTO activity_events (activityId, event, timestamp, priority, apns, twin, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id
            """, arguments: [activity, event, timestamp, priority, payloads.apns, payloads.twin, db.now]) ?? 0
    }

    /// Queues one push per `(registration, platform, target)`; a nil registration is the broadcast.
    static func queue(_ db: SQLConnection, activity: String, app: String, event: Int64, timestamp: Int64,
                      pushes: [(registration: String?, platform: String, target: String)]) throws {
        guard !pushes.isEmpty else { return }
        let now = db.now
        for chunk in pushes.sqlBatches(of: 300) {
            var values: [any SQLValueConvertible] = []
            for push in chunk {
                values += [event, activity, push.registration ?? "", push.registration, push.platform, app, push.target, timestamp,
                           RandomUUIDs.string().lowercased(), now, now, now]
            }
            try db.execute(sql: """
                INSERT INTO activity_pushes (eventId, activityId, lane, registrationId, platform, app, target, timestamp, state, attempts,
                                             pushId, nextAttemptAt, createdAt, updatedAt) VALUES
                """ + Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)", count: chunk.count).joined(separator: ", "),
                           arguments: SQLArguments(values))
        }
        try db.notify(DataChange.outbox.rawValue)
    }

    static func read(_ db: SQLConnection, _ id: String) throws -> LiveActivity? {
        try db.fetchOne(sql: "SELECT * FROM live_activities WHERE id = ?", arguments: [id]).map(activity(from:))
    }

    static func activity(from row: SQLRow) -> LiveActivity {
        LiveActivity(id: row["id"], type: row["type"], app: row["app"], state: row["state"], channelId: row["channelId"],
                     attributes: row["attributes"], contentState: row["contentState"], devices: row["devices"], updates: row["updates"],
                     failures: row["failures"], lastUpdate: (row["lastUpdate"] as Double?).map(Date.init(timeIntervalSince1970:)),
                     lastTimestamp: row["lastTimestamp"], createdAt: Date(timeIntervalSince1970: row["createdAt"]),
                     endedAt: (row["endedAt"] as Double?).map(Date.init(timeIntervalSince1970:)), createdBy: row["createdBy"])
    }

    /// The most devices `GET /api/live-activities/{id}` lists (the first by registration id).
    public static let perDeviceLimit = 1000

    /// The first `perDeviceLimit` devices, each with its last push (its line's newest; a
    /// broadcast's iOS devices share the broadcast's line).
    static func perDevice(_ db: SQLConnection, _ id: String) throws -> [LiveActivityDevice] {
        let devices = try db.fetchAll(sql: """
            SELECT registrationId, platform, updateToken FROM activity_devices WHERE activityId = ? ORDER BY registrationId LIMIT ?
            """, arguments: [id, Self.perDeviceLimit])
        var last: [String: (event: String, state: String, reason: String?)] = [:]
        for chunk in (devices.map { $0["registrationId"] as String } + [""]).sqlBatches(of: 400) {
            for row in try db.fetchAll(sql: """
                SELECT p.lane, e.event, p.state, p.reason FROM activity_pushes p JOIN activity_events e ON e.id = p.eventId
                WHERE p.activityId = ? AND p.lane IN (\(sqlPlaceholders(chunk.count)))
                  AND p.timestamp = (SELECT max(q.timestamp) FROM activity_pushes q WHERE q.activityId = p.activityId AND q.lane = p.lane)
                """, arguments: SQLArguments([id as any SQLValueConvertible] + chunk.map { $0 as any SQLValueConvertible })) {
                last[row["lane"]] = (row["event"], row["state"], row["reason"])
            }
        }
        return devices.map { row in
            let registration: String = row["registrationId"]
            let platform: String = row["platform"]
            let push = last[registration] ?? (platform == "apns" ? last[""] : nil)
            return LiveActivityDevice(registration: registration, platform: platform, hasUpdateToken: (row["updateToken"] as String?) != nil,
                                      lastEvent: push?.event, lastState: push?.state, reason: push?.reason)
        }
    }
}
