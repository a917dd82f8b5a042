import Foundation
import SQLEngine
import MediaStore

#if canImport(Glibc)
import Glibc
#endif

/// Who a campaign is for (SPEC §10).
public enum Audience: Sendable, Equatable {
    /// Every account.
    case all
    /// These accounts (sorted, without duplicates).
    case users([String])
    /// Every device whose registration tags match a Notification Hubs tag expression; each
    /// device's owner is a recipient.
    case tags(TagExpression)

    /// Parses the JSON form `{"all":true}`, `{"users":[…]}` or `{"tags":"<expression>"}`.
    public init(json object: [String: Any]) throws {
        let keys = Set(object.keys)
        guard keys.count == 1, let key = keys.first else {
            throw CoreError(.invalid, "audience must have exactly one of \"all\", \"users\" or \"tags\"")
        }
        switch (key, object[key]) {
        case ("all", let flag as Bool) where flag:
            self = .all
        case ("users", let names as [Any]):
            guard let strings = names as? [String] else { throw CoreError(.invalid, "audience.users must be an array of user names") }
            self = try .listing(strings)
        case ("tags", let text as String):
            self = .tags(try TagExpression(text))
        default:
            throw CoreError(.invalid, "audience must be {\"all\":true}, {\"users\":[names]} or {\"tags\":\"expression\"}")
        }
    }

    /// A list of users, checked, sorted and without duplicates.
    public static func listing(_ names: [String]) throws -> Audience {
        guard !names.isEmpty else { throw CoreError(.invalid, "audience.users is empty") }
        guard names.count <= Campaign.maxListedUsers else {
            throw CoreError(.invalid, "audience.users lists \(names.count) users, at most \(Campaign.maxListedUsers); use a tag expression or {\"all\":true}")
        }
        for name in names { try UserStore.validateName(name) }
        return .users(Array(Set(names)).sorted())
    }

    /// The stored form.
    var stored: String {
        let object: [String: Any] = switch self {
        case .all: ["all": true]
        case .users(let names): ["users": names]
        case .tags(let expression): ["tags": expression.text]
        }
        return String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    init(stored: String) throws {
        guard let object = try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any] else {
            throw CoreError(.invalid, "unreadable audience")
        }
        if let names = object["users"] as? [String] {
            self = .users(names) // stored lists were checked and sorted on the way in
        } else {
            try self.init(json: object)
        }
    }

    /// A short description for people (`all`, `3 users`, `tags: a && b`).
    public var summary: String {
        switch self {
        case .all: "all"
        case .users(let names): names.count == 1 ? "user \(names[0])" : "\(names.count) users"
        case .tags(let expression): "tags: \(expression.text)"
        }
    }
}

/// When a campaign goes out (SPEC §19).
public enum CampaignSchedule: Sendable, Equatable {
    /// At one instant, for everyone.
    case at(Date)
    /// At this wall-clock time in each recipient's own time zone (`users.timezone`, UTC when
    /// unset): on `date` when given, else at the first such time after the campaign is made.
    case localTime(LocalTime, date: LocalDate?)
}

/// A wall-clock time, `HH:MM`.
public struct LocalTime: Sendable, Equatable, CustomStringConvertible {
    public var hour: Int
    public var minute: Int

    /// Parses `HH:MM` (00:00 to 23:59); 400 otherwise.
    public init(_ text: String) throws {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let hour = Int(parts[0]), let minute = Int(parts[1]), (0...23).contains(hour), (0...59).contains(minute) else {
            throw CoreError(.invalid, "localTime must be HH:MM (00:00 to 23:59), got '\(text.prefix(20))'")
        }
        self.hour = hour
        self.minute = minute
    }

    public var description: String { String(format: "%02d:%02d", hour, minute) }
}

/// A calendar date, `YYYY-MM-DD`.
public struct LocalDate: Sendable, Equatable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    /// Parses `YYYY-MM-DD` (a real date); 400 otherwise.
    public init(_ text: String) throws {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]), (2000...2200).contains(year),
              DateComponents(calendar: calendar, year: year, month: month, day: day).isValidDate else {
            throw CoreError(.invalid, "localDate must be a date, YYYY-MM-DD, got '\(text.prefix(20))'")
        }
        self.year = year
        self.month = month
        self.day = day
    }

    public var description: String { String(format: "%04d-%02d-%02d", year, month, day) }
}

extension CampaignSchedule {
    /// An RFC 3339 date-time (`sendAt`, `send --at`): with a zone (Z or an offset), with or
    /// without fractional seconds; nil otherwise.
    public static func rfc3339(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return plain.date(from: text) ?? fractional.date(from: text)
    }

    /// When `zone`'s recipients get a campaign made at `createdAt`: the instant itself, or the
    /// local time in that zone (a time a DST change skips is taken as the moment after the gap).
    public func due(in zone: TimeZone, createdAt: Date) -> Date {
        switch self {
        case .at(let date):
            return date
        case .localTime(let time, let date):
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            if let date {
                let components = DateComponents(year: date.year, month: date.month, day: date.day, hour: time.hour, minute: time.minute)
                return calendar.date(from: components) ?? createdAt
            }
            let today = calendar.startOfDay(for: createdAt)
            func at(_ day: Date) -> Date {
                let components = calendar.dateComponents([.year, .month, .day], from: day)
                return calendar.date(from: DateComponents(year: components.year, month: components.month, day: components.day,
                                                          hour: time.hour, minute: time.minute)) ?? day
            }
            let candidate = at(today)
            guard candidate < createdAt else { return candidate }
            return at(calendar.date(byAdding: .day, value: 1, to: today) ?? today.addingTimeInterval(86_400))
        }
    }

    /// After this, no zone can still be waiting: the latest zone's due time (UTC-12 for a local
    /// time on a date, a day after the campaign is made otherwise).
    public func last(createdAt: Date) -> Date {
        switch self {
        case .at(let date): return date
        case .localTime(_, _?): return due(in: TimeZone(secondsFromGMT: -12 * 3600)!, createdAt: createdAt)
        case .localTime: return createdAt.addingTimeInterval(25 * 3600)
        }
    }

    /// The earliest any zone can be due: UTC+14's time on a date; without a date, any zone's
    /// next such time may come at once.
    public func first(createdAt: Date) -> Date {
        switch self {
        case .at(let date): return date
        case .localTime(_, _?): return due(in: TimeZone(secondsFromGMT: 14 * 3600)!, createdAt: createdAt)
        case .localTime: return createdAt
        }
    }
}

/// One locale's words (SPEC §19): the title and message, and the words of the options a phone
/// shows (SPEC §22): the subtitle and the buttons' titles, by button id.
public struct LocalizedContent: Sendable, Equatable, Codable {
    public var title: String?
    public var message: String?
    public var subtitle: String?
    /// Button id (one of the campaign's `options.actions`) → its title in this locale.
    public var actions: [String: String]?

    /// Creates content.
    public init(title: String? = nil, message: String? = nil, subtitle: String? = nil, actions: [String: String]? = nil) {
        self.title = title
        self.message = message
        self.subtitle = subtitle
        self.actions = actions
    }
}

/// What an admin asks for when sending a campaign.
public struct CampaignDraft: Sendable {
    public var audience: Audience
    /// Message, title, rich type, payload and mode, as for a single notification.
    public var content: NotificationDraft
    /// The app whose devices it goes to (SPEC §18); nil for every app the audience has devices in.
    public var app: String?
    /// When it goes out (SPEC §19); nil for now.
    public var schedule: CampaignSchedule?
    /// Title and message per BCP 47 locale; each recipient gets theirs, falling back from
    /// `fr-CA` to `fr` to `defaultLocale`, then to `content`'s title and message.
    public var locales: [String: LocalizedContent]
    /// The locale of recipients whose own has no content.
    public var defaultLocale: String
    /// At most this many pushes a minute, across all nodes (SPEC §22); nil: as fast as they go.
    public var ratePerMinute: Int?

    /// Creates a draft; the mode defaults to `alert` (SPEC §10).
    public init(audience: Audience, content: NotificationDraft, app: String? = nil, schedule: CampaignSchedule? = nil,
                locales: [String: LocalizedContent] = [:], defaultLocale: String = "en", ratePerMinute: Int? = nil) {
        self.ratePerMinute = ratePerMinute
        self.audience = audience
        self.content = content
        self.app = app
        self.schedule = schedule
        self.locales = locales
        self.defaultLocale = defaultLocale
    }
}

/// A campaign and how far it got.
public struct Campaign: Sendable, Equatable {
    /// `scheduled` until its first push is queued, `sending` until every recipient is queued
    /// and no push is pending, then `done`; `cancelled` once cancelled (SPEC §19).
    public enum Status: String, Sendable, Codable, CaseIterable { case scheduled, sending, done, cancelled }

    public var id: Int64
    public var audience: Audience
    public var message: String
    public var title: String?
    public var richType: String
    public var payload: MediaID
    public var mode: PushMode
    public var createdBy: String
    public var createdAt: Date
    /// Recipients and devices queued so far (all of them once `queued`).
    public var recipients: Int
    public var devices: Int
    /// Whether every recipient has been queued.
    public var queued: Bool
    /// The app whose devices it goes to; nil for every app.
    public var app: String? = nil
    /// When it goes out; nil: when it was made.
    public var schedule: CampaignSchedule? = nil
    /// Per-locale content and the default locale. Read only where a push is made from it
    /// (queueing): a campaign listed or polled has its `localeNames` alone.
    public var locales: [String: LocalizedContent] = [:]
    /// The locales it has content for, sorted.
    public var localeNames: [String] = []
    public var defaultLocale: String = "en"
    /// When it was cancelled.
    public var cancelledAt: Date? = nil
    /// Platform options and the badge, as each recipient's notification gets them (SPEC §22).
    public var options = PushOptions()
    /// The pace, pushes a minute; nil for unpaced.
    public var ratePerMinute: Int? = nil
    /// A paced campaign's next free send time: when its last push queued so far goes out, plus one step.
    public var paceNextAt: Date? = nil
    /// Pushes queued (one per device, or per user through a hub; nil for campaigns made before
    /// they were counted).
    public var pushes: Int? = nil

    /// The most pushes a minute a pace may ask for (a million: beyond it, pacing is moot).
    public static let maxRatePerMinute = 1_000_000

    /// The most users an audience may list by name.
    public static let maxListedUsers = 10_000

    /// The most locales `content` may have (SPEC §24).
    public static let maxLocales = 50

    /// The most campaigns one creator (an admin or a key) may have scheduled and not yet sent:
    /// each is looked at by every node every second until it is due.
    public static let maxScheduledPerCreator = 1_000
}

/// Delivery and read counts of a campaign (SPEC §10).
public struct CampaignProgress: Sendable, Equatable {
    public var campaign: Campaign
    public var pending: Int
    public var sent: Int
    public var failed: Int
    /// Recipients who fetched the payload.
    public var fetched: Int

    /// When a paced campaign's last queued push goes out (SPEC §22): nil when unpaced, done or cancelled.
    /// The last queued push's turn, or later when the outbox has fallen behind the pace (a
    /// service down, retries): then the pushes still pending, one step apart from now.
    public var expectedEnd: Date? {
        guard let rate = campaign.ratePerMinute, let next = campaign.paceNextAt, status == .sending else { return nil }
        let step = 60 / Double(rate)
        return max(next.addingTimeInterval(-step), Date().addingTimeInterval(Double(max(0, pending - 1)) * step))
    }

    /// `cancelled`, `scheduled` (nothing queued yet), `done` (everyone queued, nothing pending) or `sending`.
    public var status: Campaign.Status {
        if campaign.cancelledAt != nil { return .cancelled }
        if campaign.schedule != nil && !campaign.queued && campaign.recipients == 0 { return .scheduled }
        return campaign.queued && pending == 0 ? .done : .sending
    }
}

/// Campaigns: one rich message to many users.
///
/// A campaign is queued in batches of recipients, each batch one transaction that also moves
/// the campaign's cursor, so memory does not grow with the audience and a process that dies
/// half-way leaves a campaign that `resumeUnfinished` completes, without queueing anyone twice.
public struct CampaignStore: Sendable {
    /// The database.
    let database: SQLDatabase
    /// Signs payload URLs for alert pushes.
    public let links: PayloadLinks?
    /// The media name used when a campaign names no payload.
    public let defaultImage: String
    /// Recipients per transaction.
    public var batchSize = 500
    /// Below this many, a campaign's pending pushes are counted row by row (see `pending`).
    public var pendingCountedUpTo = 10_000
    /// Called with each batch's notifications once it is committed (the server indexes them,
    /// so that recipients' first fetches need no database read).
    public var onQueued: (@Sendable ([QueuedNotification]) -> Void)?
    /// Called with a campaign's payload before this process queues a batch of it (the server
    /// puts the image in its memory cache, SPEC §21).
    public var beforeQueueing: (@Sendable (MediaID) async -> Void)?

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase, links: PayloadLinks?, defaultImage: String) {
        self.database = database
        self.links = links
        self.defaultImage = defaultImage
    }

    /// Records a campaign, refusing bad content (422) and unknown listed users (400). An
    /// unscheduled one is claimed for queueing by this process (call `queue`); a scheduled one
    /// waits for `runDue`. With `idempotency`, a key seen before answers with its campaign
    /// (`IdempotentReplay`) and makes nothing.
    public func create(_ draft: CampaignDraft, by admin: String, idempotency: IdempotencyKey? = nil, now: Date = Date()) async throws -> Campaign {
        let links = self.links, defaultImage = self.defaultImage
        // A repeat is answered before anything is checked again: its time may have passed since.
        if let idempotency, let resource = try await IdempotencyStore(database: database).resource(for: idempotency, now: now) {
            throw IdempotentReplay(resource: resource)
        }
        // Checked before the transaction: none of it needs the database.
        var locales: [String: LocalizedContent] = [:]
        for (tag, content) in draft.locales {
            let canonical = try UserPreferences.locale(tag)
            guard locales[canonical] == nil else { throw CoreError(.unprocessable, "content names the locale \(canonical) twice (in two spellings)") }
            guard content.title != nil || content.message != nil || content.subtitle != nil || content.actions != nil else {
                throw CoreError(.unprocessable, "content.\(tag) has no title, message, subtitle or button titles")
            }
            let buttons = Set((draft.content.options.actions ?? []).map(\.id))
            if let unknown = (content.actions ?? [:]).keys.sorted().first(where: { !buttons.contains($0) }) {
                throw CoreError(.unprocessable, "content.\(tag).actions names the button \"\(unknown)\", which options.actions does not have")
            }
            // Its words follow the options' rules (lengths; no subtitle on a silent push).
            do {
                try Self.localized(draft.content, content).options.validate(mode: draft.content.mode)
            } catch let error as CoreError {
                throw CoreError(error.kind, "content.\(tag): \(error.message)")
            }
            locales[canonical] = content
        }
        let defaultLocale = try UserPreferences.locale(draft.defaultLocale)
        if let rate = draft.ratePerMinute, !(1...Campaign.maxRatePerMinute).contains(rate) {
            throw CoreError(.invalid, "ratePerMinute must be 1 to \(Campaign.maxRatePerMinute) (got \(rate))")
        }
        if !locales.isEmpty && Self.contentLocale(for: nil, locales: locales, defaultLocale: defaultLocale) == nil && draft.content.message == nil {
            throw CoreError(.unprocessable, "content has nothing for the default locale \(defaultLocale) and there is no message: add \"\(defaultLocale)\" to content, set defaultLocale, or give a message")
        }
        var schedule = draft.schedule
        switch schedule {
        case .at(let date)?:
            guard date > now.addingTimeInterval(-60) else { throw CoreError(.unprocessable, "sendAt is in the past") }
            guard date < now.addingTimeInterval(366 * 86_400) else { throw CoreError(.unprocessable, "sendAt is more than a year away") }
            if date <= now { schedule = nil }
        case .localTime(_, _?)?:
            guard schedule!.last(createdAt: now) > now else { throw CoreError(.unprocessable, "localTime on localDate has passed in every time zone") }
            guard schedule!.first(createdAt: now) < now.addingTimeInterval(366 * 86_400) else { throw CoreError(.unprocessable, "localDate is more than a year away") }
        default: break
        }
        let (sendAt, localTime, localDate): (Double?, String?, String?) = switch schedule {
        case .at(let date)?: (date.timeIntervalSince1970, nil, nil)
        case .localTime(let time, let date)?: (nil, time.description, date?.description)
        case nil: (nil, nil, nil)
        }
        let contentJSON = locales.isEmpty ? nil
            : String(decoding: try Self.sortedEncoder.encode(locales), as: UTF8.self)
        let scheduled = schedule != nil
        let (finalLocales, finalSchedule) = (locales, schedule)
        guard locales.count <= Campaign.maxLocales else {
            throw CoreError(.invalid, "content has \(locales.count) locales; a campaign has at most \(Campaign.maxLocales)")
        }
        let localeNames = locales.isEmpty ? nil : locales.keys.sorted().joined(separator: ",")
        return try await database.write { db in
            try IdempotencyKey.replayIfSeen(db, idempotency, now: now)
            if scheduled {
                let waiting = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM campaigns WHERE createdBy = ? AND queued = 0 AND cancelledAt IS NULL
                        AND (sendAt IS NOT NULL OR atLocalTime IS NOT NULL)
                    """, arguments: [admin]) ?? 0
                guard waiting < Campaign.maxScheduledPerCreator else {
                    throw CoreError(.conflict, "\(admin) has \(waiting) campaigns scheduled, the most one creator may have waiting (\(Campaign.maxScheduledPerCreator)); "
                                    + "cancel one (DELETE /api/admin/campaigns/{id}) or wait until one goes out")
                }
            }
            let writer = try NotificationWriter(db, draft: draft.content, defaultImage: defaultImage, links: links, now: now)
            try writer.checkFitsEveryPlatform(db)
            for (_, content) in finalLocales {
                // Every locale's push must fit too.
                try NotificationWriter(db, draft: Self.localized(draft.content, content), defaultImage: defaultImage, links: links, now: now)
                    .checkFitsEveryPlatform(db)
            }
            if case .users(let names) = draft.audience {
                var unknown: [String] = []
                for chunk in names.sqlBatches() {
                    let known = Set(try String.fetchAll(db, sql: "SELECT name FROM users WHERE name IN (\(sqlPlaceholders(chunk.count)))",
                                                        arguments: SQLArguments(Array(chunk))))
                    unknown += chunk.filter { !known.contains($0) }
                }
                if !unknown.isEmpty {
                    let shown = unknown.prefix(10).joined(separator: ", ") + (unknown.count > 10 ? " and \(unknown.count - 10) more" : "")
                    throw CoreError(.unprocessable, "audience.users names \(unknown.count) unknown user(s): \(shown)")
                }
            }
            let inserted = try db.fetchOne(sql: """
                INSERT INTO campaigns (audience, message, title, richType, payload, mode, createdBy, queuedBy, createdAt, app,
                                       sendAt, atLocalTime, onLocalDate, content, defaultLocale, leaseUntil, options, ratePerMinute, countedInStats, pushes,
                                       localeNames)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?) RETURNING id
                """, arguments: [draft.audience.stored, writer.message, writer.title, writer.richType, writer.media.id.hex,
                                 writer.mode.rawValue, admin, scheduled ? nil : Self.holder, now.timeIntervalSince1970, draft.app,
                                 sendAt, localTime, localDate, contentJSON, defaultLocale,
                                 scheduled ? nil : db.now + Self.lease, writer.options.stored, draft.ratePerMinute, localeNames])
            let id: Int64 = inserted!["id"]
            try MediaIndex.addReference(db, id: writer.media.id, owner: "campaign:\(id)", now: now)
            if let idempotency { try IdempotencyKey.record(db, idempotency, resource: id, now: now) }
            return Campaign(id: id, audience: draft.audience, message: writer.message, title: writer.title, richType: writer.richType,
                            payload: writer.media.id, mode: writer.mode, createdBy: admin, createdAt: now, recipients: 0, devices: 0, queued: false,
                            app: draft.app, schedule: finalSchedule, locales: finalLocales, localeNames: finalLocales.keys.sorted(),
                            defaultLocale: defaultLocale, options: writer.options, ratePerMinute: draft.ratePerMinute, pushes: 0)
        }
    }

    private static var sortedEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// How long a node holds a campaign it queues (renewed with each batch).
    static let lease: Double = 120

    /// The draft of one locale: its title, message, subtitle and button titles, the campaign's
    /// where it has none.
    static func localized(_ draft: NotificationDraft, _ content: LocalizedContent) -> NotificationDraft {
        var draft = draft
        if let message = content.message { draft.message = message }
        if let title = content.title { draft.title = title }
        if let subtitle = content.subtitle { draft.options.subtitle = subtitle }
        if let titles = content.actions, let actions = draft.options.actions {
            draft.options.actions = actions.map { PushOptions.Action(id: $0.id, title: titles[$0.id] ?? $0.title) }
        }
        return draft
    }

    /// The content locale a recipient whose locale is `userLocale` gets: theirs, falling back
    /// through its prefixes (`fr-CA`, `fr`), then the default locale's; nil for the campaign's
    /// own title and message.
    static func contentLocale(for userLocale: String?, locales: [String: LocalizedContent], defaultLocale: String) -> String? {
        guard !locales.isEmpty else { return nil }
        for candidate in (userLocale.map(UserPreferences.fallbacks) ?? []) + UserPreferences.fallbacks(defaultLocale) where locales[candidate] != nil {
            return candidate
        }
        return nil
    }

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
    public func queue(_ id: Int64, addressing: DeliveryAddressing, maxBatches: Int = .max, ahead: Int? = nil,
                      stalled: Duration = .seconds(15), batchQueued: @Sendable () -> Void = {}) async throws -> Campaign {
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
            if let limit = ahead, !(try await waitForSends(of: id, below: limit, stalled: stalled)) { ahead = nil }
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
    public func refreshOutboxStatistics() async throws {
        guard database.dialect == .postgres else { return }
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: "ANALYZE (SKIP_LOCKED) deliveries")
        }
    }

    /// Ends this node's lease on campaign `id` while it is not wholly queued, so that any node's
    /// `resumeUnfinished` finishes it within seconds (a process stopping mid-campaign).
    public func letLeaseLapse(_ id: Int64) async throws {
        try await database.write(isolation: .readCommitted) { db in
            // Only a lease this process holds: another node may have taken the campaign over since.
            try db.execute(sql: "UPDATE campaigns SET leaseUntil = 0 WHERE id = ? AND queued = 0 AND queuedBy = ?", arguments: [id, Self.holder])
        }
    }

    /// Returns true once fewer than `ahead` of campaign `id`'s pushes wait, looking every 50 ms
    /// and renewing the campaign's lease meanwhile; false once none was sent or failed (its
    /// counters) for `stalled`.
    ///
    /// Each look reads two counters: the pushes queued less those counted sent or failed. While
    /// they say `ahead` or more wait, the waiting ones are counted in the index (at most `ahead`
    /// entries) only once a second: counting 5,000 entries every 50 ms was 1.7% of `serve`'s CPU
    /// during a 10,000-device campaign (issue #28). The counters may say more wait than do (a
    /// push whose user was deleted leaves the outbox uncounted: the count a second later sees
    /// it), and a node from before pushes were counted would make them say fewer: a batch is
    /// queued only once the index, counted then, says fewer than `ahead` wait.
    private func waitForSends(of id: Int64, below ahead: Int, stalled: Duration) async throws -> Bool {
        var since = ContinuousClock.now
        var renewed = since
        var counted: ContinuousClock.Instant?  // when the index was last counted
        var finished: Int?
        while true {
            let countNow = counted.map { ContinuousClock.now - $0 >= .seconds(1) } ?? true
            let (waiting, done, exact) = try await database.read { db -> (Int, Int, Bool) in
                let done = try Int.fetchOne(db, sql: "SELECT coalesce(sum(sent + failed), 0) FROM campaign_stats WHERE campaignId = ?", arguments: [id],
                                            cached: true) ?? 0
                let row = try SQLRow.fetchOne(db, sql: "SELECT pushes, countedInStats FROM campaigns WHERE id = ?", arguments: [id], cached: true)
                if let pushes = row?["pushes"] as Int?, row?["countedInStats"] as Int? == 1, pushes - done >= ahead, !countNow {
                    return (pushes - done, done, false)
                }
                let waiting = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE campaignId = ? AND state = 'pending' LIMIT ?) AS pending
                    """, arguments: [id, ahead], cached: true) ?? 0
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

    /// Queues campaigns left half-queued by processes that died; returns their ids. (Scheduled
    /// campaigns are `runDue`'s: a node's lease on them lapses when it dies.) With `handOff`,
    /// each is leased and handed to it to queue instead (the server's `CampaignQueuer`).
    public func resumeUnfinished(addressing: DeliveryAddressing, handOff: (@Sendable (Int64) -> Void)? = nil,
                                 batchQueued: @Sendable () -> Void = {}) async throws -> [Int64] {
        let pid = Int(getpid())
        let orphans = try await database.write { db -> [Int64] in
            let now = db.now
            let rows = try SQLRow.fetchAll(db, sql: """
                SELECT id, queuedBy, leaseUntil FROM campaigns WHERE queued = 0 AND sendAt IS NULL AND atLocalTime IS NULL AND cancelledAt IS NULL
                """)
            let ids: [Int64] = rows.compactMap { row in
                // Whoever queues a campaign renews its lease with each batch: a live lease is a live
                // holder, a lapsed one a holder that died or gave up (on any machine, whatever its
                // pid). Campaigns made before leases go by their holder's pid on this machine.
                if let until: Double = row["leaseUntil"] { return until < now ? row["id"] : nil }
                let holder: Int? = row["queuedBy"]
                if let holder, holder == pid || kill(pid_t(holder), 0) == 0 || errno == EPERM { return nil }
                return row["id"]
            }
            for id in ids {
                try db.execute(sql: "UPDATE campaigns SET queuedBy = ?, leaseUntil = ? WHERE id = ?", arguments: [Self.holder, now + Self.lease, id])
            }
            return ids
        }
        for id in orphans {
            if let handOff { handOff(id) } else { _ = try await queue(id, addressing: addressing, batchQueued: batchQueued) }
        }
        return orphans
    }

    /// Sends what is due at `now` (SPEC §19): a scheduled campaign whose time came is queued
    /// whole; a local-time campaign, the zones whose local time came. Each campaign is leased
    /// by one node at a time (a node that dies lets its lease lapse), so every recipient is
    /// queued once, whichever nodes run this. Returns the campaigns it worked on.
    ///
    /// With `handOff`, a campaign scheduled at a time is leased and handed to it to queue (the
    /// server's `CampaignQueuer`, which keeps its queueing just ahead of its sends) instead.
    @discardableResult
    public func runDue(now: Date = Date(), addressing: DeliveryAddressing, handOff: (@Sendable (Int64) -> Void)? = nil,
                       batchQueued: @Sendable () -> Void = {}) async throws -> [Int64] {
        let candidates = try await database.read { db in
            // The columns that say whether it is due, never its content or audience (a scheduled
            // campaign is looked at every second on every node until it is).
            try SQLRow.fetchAll(db, sql: """
                SELECT c.id, c.createdAt, c.sendAt, c.atLocalTime, c.onLocalDate, c.zonesCheckedAt,
                    (SELECT min(z.dueAt) FROM campaign_zones z WHERE z.campaignId = c.id AND z.queued = 0) AS nextZoneDue
                FROM campaigns c WHERE c.queued = 0 AND c.cancelledAt IS NULL AND (c.sendAt IS NOT NULL OR c.atLocalTime IS NOT NULL)
                    AND (c.leaseUntil IS NULL OR c.leaseUntil < ?) ORDER BY c.id
                """, arguments: [db.now])
        }
        var worked: [Int64] = []
        var failures: [String] = []
        for row in candidates {
            // One campaign that cannot be read or queued must not hold up the others.
            var claimed: Int64?
            do {
                let campaign = (id: row["id"] as Int64, createdAt: Date(timeIntervalSince1970: row["createdAt"]))
                guard let schedule = try Self.schedule(row), schedule.first(createdAt: campaign.createdAt) <= now else { continue }
                if case .localTime = schedule, now < schedule.last(createdAt: campaign.createdAt),
                   let checked: Double = row["zonesCheckedAt"], now.timeIntervalSince1970 < checked + 60 {
                    // Nothing due until the next zone's time, and the zones were looked at lately.
                    guard let next: Double = row["nextZoneDue"], next <= now.timeIntervalSince1970 else { continue }
                }
                guard try await claim(campaign.id) else { continue }
                claimed = campaign.id
                worked.append(campaign.id)
                switch schedule {
                case .at:
                    if let handOff {
                        // The lease goes with it: renewed with each batch, ended by the last.
                        handOff(campaign.id)
                        claimed = nil
                        continue
                    }
                    _ = try await queue(campaign.id, addressing: addressing, batchQueued: batchQueued)
                case .localTime: try await queueZones(campaign.id, now: now, addressing: addressing, batchQueued: batchQueued)
                }
                claimed = nil
                try await release(campaign.id)
            } catch {
                if let claimed { try? await release(claimed) }
                failures.append("campaign \((row["id"] as Int64?) ?? 0): \(error)")
            }
        }
        if !failures.isEmpty { throw CoreError(.conflict, "cannot send scheduled campaigns: " + failures.joined(separator: "; ")) }
        return worked
    }

    /// Runs `beforeQueueing` with campaign `id`'s payload, when it is set.
    private func prepare(_ id: Int64) async throws {
        guard let beforeQueueing else { return }
        let payload = try await database.read { db in
            try String.fetchOne(db, sql: "SELECT payload FROM campaigns WHERE id = ?", arguments: [id]).flatMap { MediaID($0) }
        }
        if let payload { await beforeQueueing(payload) }
    }

    /// This process's mark on the campaigns it leases (a pid is no name across machines or containers).
    private static let holder = Int64.random(in: 1 ... Int64(Int32.max))

    /// Takes the lease on campaign `id` if nobody holds it; whether this node has it now.
    private func claim(_ id: Int64) async throws -> Bool {
        try await database.write(isolation: .readCommitted) { db in
            let now = db.now
            try db.execute(sql: """
                UPDATE campaigns SET leaseUntil = ?, queuedBy = ? WHERE id = ? AND queued = 0 AND cancelledAt IS NULL
                    AND (leaseUntil IS NULL OR leaseUntil < ?)
                """, arguments: [now + Self.lease, Self.holder, id, now])
            return db.changesCount == 1
        }
    }

    /// Gives this process's lease back (another node may take the campaign's next zone).
    private func release(_ id: Int64) async throws {
        try await database.write(isolation: .readCommitted) { db in
            try db.execute(sql: "UPDATE campaigns SET leaseUntil = NULL WHERE id = ? AND queuedBy = ?", arguments: [id, Self.holder])
        }
    }

    /// The zones of a local-time campaign: each zone users are in gets its due time once; the
    /// zones due at `now` are queued, a batch of users per transaction (memory stays flat, and
    /// only what is due is pending); once the last zone anywhere is past and every zone queued,
    /// the campaign is queued.
    private func queueZones(_ id: Int64, now: Date, addressing: DeliveryAddressing, batchQueued: @Sendable () -> Void) async throws {
        try await prepare(id)
        try await database.write { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ?", arguments: [id]) else { return }
            let campaign = try Self.campaign(row)
            guard let schedule = campaign.schedule else { return }
            try Self.addZones(db, campaign: campaign, schedule: schedule, now: now)
        }
        while true {
            let (more, made) = try await queueZoneBatch(id, now: now, addressing: addressing)
            if !made.isEmpty { onQueued?(made) }
            batchQueued()
            if !more { break }
        }
        try await database.write { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ?", arguments: [id]) else { return }
            let campaign = try Self.campaign(row)
            guard let schedule = campaign.schedule, now >= schedule.last(createdAt: campaign.createdAt) else { return }
            let waiting = try Int.fetchOne(db, sql: "SELECT count(*) FROM campaign_zones WHERE campaignId = ? AND queued = 0", arguments: [id]) ?? 0
            if waiting == 0 {
                try db.execute(sql: "UPDATE campaigns SET queued = 1 WHERE id = ?", arguments: [id])
                // Every push may have been recorded before this: done now, if so.
                try Insight.finishCampaigns(db, [id], now: db.now)
            }
        }
    }

    /// Gives each zone users are in now, and the campaign has not seen, its due time. A zone
    /// whose time had passed when the campaign was made (a date's 09:00 already gone in Tokyo),
    /// or that appeared after its time (the first user in a new zone), is skipped: its users
    /// would get it at another time than the one asked for.
    static func addZones(_ db: SQLConnection, campaign: Campaign, schedule: CampaignSchedule, now: Date) throws {
        let known = Set(try String.fetchAll(db, sql: "SELECT zone FROM campaign_zones WHERE campaignId = ?", arguments: [campaign.id]))
        let zones = Set(try SQLRow.fetchAll(db, sql: "SELECT DISTINCT timezone FROM users").map { ($0["timezone"] as String?) ?? "UTC" })
        let discovered = known.isEmpty ? campaign.createdAt : now
        for zone in zones.subtracting(known).sorted() {
            let due = schedule.due(in: TimeZone(identifier: zone) ?? TimeZone(identifier: "UTC")!, createdAt: campaign.createdAt)
            let missed = due < max(campaign.createdAt, discovered.addingTimeInterval(-60))
            try db.execute(sql: "INSERT INTO campaign_zones (campaignId, zone, dueAt, queued) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                           arguments: [campaign.id, zone, due.timeIntervalSince1970, missed])
        }
        try db.execute(sql: "UPDATE campaigns SET zonesCheckedAt = ? WHERE id = ?", arguments: [now.timeIntervalSince1970, campaign.id])
    }

    /// One batch of the earliest zone that is due and not yet queued; whether there may be more.
    private func queueZoneBatch(_ id: Int64, now: Date, addressing: DeliveryAddressing) async throws -> (Bool, [QueuedNotification]) {
        let links = self.links, batchSize = self.batchSize, defaultImage = self.defaultImage, indexed = onQueued != nil
        return try await database.write { db -> (Bool, [QueuedNotification]) in
            let lock = db.dialect == .postgres ? "FOR UPDATE" : ""
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ? \(lock)", arguments: [id]) else { return (false, []) }
            var campaign = try Self.campaign(row)
            guard campaign.cancelledAt == nil, !campaign.queued else { return (false, []) }
            guard let zoneRow = try SQLRow.fetchOne(db, sql: """
                SELECT zone, cursor FROM campaign_zones WHERE campaignId = ? AND queued = 0 AND dueAt <= ? ORDER BY dueAt, zone LIMIT 1
                """, arguments: [id, now.timeIntervalSince1970]) else { return (false, []) }
            let zone: String = zoneRow["zone"]
            let (names, next, exhausted) = try Self.nextRecipients(db, campaign.audience, after: zoneRow["cursor"], limit: batchSize, zone: zone)
            // Someone who moved from a zone already queued is not sent it twice.
            var fresh = names
            if !names.isEmpty {
                var seen = Set<String>()
                for chunk in names.sqlBatches() {
                    seen.formUnion(try String.fetchAll(db, sql: "SELECT recipient FROM notifications WHERE campaignId = ? AND recipient IN (\(sqlPlaceholders(chunk.count)))",
                                                       arguments: SQLArguments([id as any SQLValueConvertible] + chunk.map { $0 as any SQLValueConvertible })))
                }
                fresh = names.filter { !seen.contains($0) }
            }
            // One zone's users are scattered over the names: their devices are looked up by name.
            let made = try Self.queueRecipients(db, &campaign, names: fresh, addressing: addressing, links: links, defaultImage: defaultImage,
                                                indexed: indexed, sparse: true)
            try db.execute(sql: "UPDATE campaign_zones SET cursor = ?, queued = ? WHERE campaignId = ? AND zone = ?", arguments: [next, exhausted, id, zone])
            try db.execute(sql: "UPDATE campaigns SET recipients = ?, devices = ?, leaseUntil = ? WHERE id = ?",
                           arguments: [campaign.recipients, campaign.devices, db.now + Self.lease, id])
            return (true, made)
        }
    }

    /// Queues `names` for `campaign` in the caller's transaction: each gets the notification
    /// in their locale and one push per device; the campaign's counts grow.
    private static func queueRecipients(_ db: SQLConnection, _ campaign: inout Campaign, names: [String], addressing: DeliveryAddressing,
                                        links: PayloadLinks?, defaultImage: String, indexed: Bool, sparse: Bool = false) throws -> [QueuedNotification] {
        guard !names.isEmpty else { return [] }
        let now = Date()
        let draft = NotificationDraft(message: campaign.message, richType: campaign.richType, payload: campaign.payload.hex,
                                      title: campaign.title, mode: campaign.mode, options: campaign.options)
        // A paced campaign's pushes are due one step apart, after those queued before (SPEC §22).
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
        var userLocales: [String: String] = [:]
        if !campaign.locales.isEmpty {
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
        for (locale, recipients) in groups.sorted(by: { $0.key < $1.key }) {
            let writer = try writer(locale.isEmpty ? nil : locale)
            let created = try writer.insert(db, recipients: recipients, pace: pace)
            queuedRecipients += created.count
            if indexed {
                made += created.map { QueuedNotification(id: $0.notification.id, recipient: $0.notification.recipient, payload: writer.media.id) }
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

    /// Cancels campaign `id` (SPEC §19): nothing more is queued; pushes not yet handed to a push
    /// service are dropped (those in flight finish); recipients who got nothing lose the inbox
    /// entry; sent pushes stay sent. 404 for no such campaign, 409 for one already done.
    public func cancel(_ id: Int64, now: Date = Date()) async throws -> CampaignProgress {
        try await database.write { db in
            let lock = db.dialect == .postgres ? "FOR UPDATE" : ""
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ? \(lock)", arguments: [id]) else {
                throw CoreError(.notFound, "no campaign \(id)")
            }
            var campaign = try Self.campaign(row)
            if campaign.cancelledAt == nil {
                let progress = try Self.progress(db, campaign: campaign, countedUpTo: pendingCountedUpTo)
                if progress.status == .done { throw CoreError(.conflict, "campaign \(id) is done: every push was sent, nothing is left to cancel") }
                let time = now.timeIntervalSince1970
                try db.execute(sql: "UPDATE campaigns SET cancelledAt = ?, queued = 1, leaseUntil = NULL WHERE id = ?", arguments: [time, id])
                // Not handed to a push service: never claimed, or claimed by a holder whose lease lapsed
                // (the outbox's leases are on the database's clock).
                let dropped = Set(try Int64.fetchAll(db, sql: """
                    DELETE FROM deliveries WHERE campaignId = ? AND state = 'pending' AND (leaseTag IS NULL OR nextAttemptAt <= ?) RETURNING notificationId
                    """, arguments: [id, db.now]))
                // Recipients who now get nothing lose the inbox entry, unless they have read it.
                for chunk in Array(dropped).sorted().sqlBatches() {
                    let gone = try Int64.fetchAll(db, sql: """
                        SELECT n.id FROM notifications n WHERE n.id IN (\(sqlPlaceholders(chunk.count))) AND n.read = 0
                            AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notificationId = n.id)
                        """, arguments: SQLArguments(Array(chunk)))
                    guard !gone.isEmpty else { continue }
                    try db.execute(sql: "DELETE FROM media_refs WHERE owner IN (\(sqlPlaceholders(gone.count)))",
                                   arguments: SQLArguments(gone.map { "notification:\($0)" }))
                    try db.execute(sql: "DELETE FROM notifications WHERE id IN (\(sqlPlaceholders(gone.count)))", arguments: SQLArguments(gone))
                    try NotificationStore.recordRemovals(db, gone)
                }
                campaign.cancelledAt = now
                campaign.queued = true
                campaign.recipients = try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE campaignId = ?", arguments: [id]) ?? 0
                campaign.devices = try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ?", arguments: [id]) ?? 0
                if campaign.pushes != nil { campaign.pushes = campaign.devices }
                try db.execute(sql: "UPDATE campaigns SET recipients = ?, devices = ?, pushes = ? WHERE id = ?",
                               arguments: [campaign.recipients, campaign.devices, campaign.pushes, id])
            }
            return try Self.progress(db, campaign: campaign, countedUpTo: pendingCountedUpTo)
        }
    }

    /// How many users and devices a campaign to `audience` would reach now (what `queue` would
    /// queue), read a thousand users at a time: the console's "will reach" before sending.
    public func reach(_ audience: Audience, app: String? = nil) async throws -> (users: Int, devices: Int) {
        try await database.read { db in
            if case .all = audience {
                // Two counts, not a walk: what the console asks as often as an admin types.
                let users = try Int.fetchOne(db, sql: "SELECT count(*) FROM users") ?? 0
                let devices = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM registrations r JOIN users u ON u.name = r.username WHERE r.handle IS NOT NULL \(app == nil ? "" : "AND r.app = ?")
                    """, arguments: SQLArguments(app.map { [$0] } ?? [])) ?? 0
                return (users, devices)
            }
            var cursor = "", users = 0, devices = 0
            while true {
                let (names, next, exhausted) = try Self.nextRecipients(db, audience, after: cursor, limit: 1000)
                let owned = try Self.devices(db, of: names, audience: audience, app: app)
                for name in names {
                    let count = owned[name]?.count ?? 0
                    if case .tags = audience, count == 0 { continue }
                    users += 1
                    devices += count
                }
                if exhausted { return (users, devices) }
                cursor = next
            }
        }
    }

    /// Up to `limit` recipient names after `cursor`, in name order; the cursor after them; and
    /// whether none are left. With `zone`, only users in that time zone (`UTC`: those with none).
    private static func nextRecipients(_ db: SQLConnection, _ audience: Audience, after cursor: String, limit: Int, zone: String? = nil) throws
        -> (names: [String], cursor: String, exhausted: Bool) {
        func inZone(_ column: String) -> (String, [any SQLValueConvertible]) {
            guard let zone else { return ("", []) }
            return zone == "UTC" ? ("AND (\(column) IS NULL OR \(column) = 'UTC')", []) : ("AND \(column) = ?", [zone])
        }
        let names: [String]
        switch audience {
        case .all:
            let (condition, values) = inZone("timezone")
            names = try String.fetchAll(db, sql: "SELECT name FROM users WHERE name > ? \(condition) ORDER BY name LIMIT ?",
                                        arguments: SQLArguments([cursor] + values + [limit]))
        case .users(let listed):
            let start = listed.firstIndex { $0 > cursor } ?? listed.count
            let slice = Array(listed[start..<min(start + limit, listed.count)])
            // Accounts removed since the campaign was made are skipped.
            let (condition, values) = inZone("timezone")
            let existing = Set(try String.fetchAll(db, sql: "SELECT name FROM users WHERE name IN (\(sqlPlaceholders(slice.count))) \(condition)",
                                                   arguments: SQLArguments(slice.map { $0 as any SQLValueConvertible } + values)))
            return (slice.filter(existing.contains), slice.last ?? cursor, start + slice.count >= listed.count)
        case .tags:
            let (condition, values) = inZone("u.timezone")
            names = try String.fetchAll(db, sql: """
                SELECT DISTINCT r.username FROM registrations r JOIN users u ON u.name = r.username
                WHERE r.username > ? AND r.handle IS NOT NULL \(condition) ORDER BY r.username LIMIT ?
                """, arguments: SQLArguments([cursor] + values + [limit]))
        }
        return (names, names.last ?? cursor, names.count < limit)
    }

    /// The device targets of each named user: every device, or those matching the tag expression.
    private static func devices(_ db: SQLConnection, of names: [String], audience: Audience, app: String?, sparse: Bool = false) throws -> [String: [PushTarget]] {
        guard let first = names.first, let last = names.last else { return [:] }
        let wanted = Set(names)
        var devices: [String: [PushTarget]] = [:]
        // Listed users are sparse (two names can span the whole table): by name. The others
        // come in name order, a contiguous range.
        let listed = if case .users = audience { true } else { false }
        let (condition, arguments): (String, [String]) = if listed || sparse {
            ("username IN (\(sqlPlaceholders(names.count)))", names)
        } else {
            ("username BETWEEN ? AND ?", [first, last])
        }
        try db.forEach(sql: """
            SELECT id, username, handle, platform, tags, app FROM registrations
            WHERE \(condition) AND handle IS NOT NULL ORDER BY username, createdAt
            """, arguments: SQLArguments(arguments)) { row in
            let name: String = row["username"]
            guard wanted.contains(name), app == nil || (row["app"] as String) == app else { return }
            if case .tags(let expression) = audience {
                let tags = RegistrationStore.decodeTags(row["tags"])
                guard expression.matches(tags) else { return }
            }
            devices[name, default: []].append(PushTarget(registration: row["id"], target: row["handle"], platform: row["platform"], app: row["app"]))
        }
        return devices
    }

    /// Campaign `id` with its counts, or nil.
    public func progress(_ id: Int64) async throws -> CampaignProgress? {
        try await database.read { db in
            // Polled while a campaign sends (the console, scripts): its statements are compiled once.
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT \(Self.shownColumns) FROM campaigns WHERE id = ?", arguments: [id], cached: true) else { return nil }
            return try Self.progress(db, campaign: try Self.campaign(row), countedUpTo: pendingCountedUpTo)
        }
    }

    /// The newest campaigns with their counts, newest first.
    /// With `app`, only that app's campaigns.
    public func list(limit: Int = 50, before: Int64? = nil, app: String? = nil) async throws -> [CampaignProgress] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT \(Self.shownColumns) FROM campaigns WHERE id < ? \(app == nil ? "" : "AND app = ?") ORDER BY id DESC LIMIT ?",
                                arguments: SQLArguments([before ?? Int64.max] + (app.map { [$0 as any SQLValueConvertible] } ?? []) + [limit]))
                .map { try Self.progress(db, campaign: try Self.campaign($0), countedUpTo: pendingCountedUpTo) }
        }
    }

    private static func progress(_ db: SQLConnection, campaign: Campaign, countedUpTo: Int) throws -> CampaignProgress {
        // Sent, failed and displayed are counted as they happen (campaign_stats, in the same
        // transactions): summing them reads a row per minute and platform, so asking costs the
        // same at a million recipients as at ten (the console asks every few seconds while a
        // campaign sends, and a script may ask several times a second).
        if let kept = try SQLRow.fetchOne(db, sql: """
            SELECT coalesce(sum(s.sent), 0) AS sent, coalesce(sum(s.failed), 0) AS failed, coalesce(sum(s.displayed), 0) AS displayed
            FROM campaigns c LEFT JOIN campaign_stats s ON s.campaignId = c.id WHERE c.id = ? AND c.countedInStats = 1 GROUP BY c.id
            """, arguments: [campaign.id], cached: true) {
            let (sent, failed): (Int, Int) = (kept["sent"], kept["failed"])
            return CampaignProgress(campaign: campaign, pending: try pending(db, campaign: campaign, sent: sent, failed: failed, countedUpTo: countedUpTo),
                                    sent: sent, failed: failed, fetched: kept["displayed"])
        }
        var counts: [String: Int] = [:]
        for row in try SQLRow.fetchAll(db, sql: "SELECT state, count(*) AS n FROM deliveries WHERE campaignId = ? GROUP BY state", arguments: [campaign.id]) {
            counts[row["state"]] = row["n"]
        }
        let fetched = try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE campaignId = ? AND read = 1", arguments: [campaign.id]) ?? 0
        return CampaignProgress(campaign: campaign, pending: counts["pending"] ?? 0, sent: counts["sent"] ?? 0, failed: counts["failed"] ?? 0,
                                fetched: fetched)
    }

    /// The pushes of `campaign` still to send. Below `countedUpTo` they are counted in
    /// the index (exact, however they left: a user deleted mid-campaign takes theirs along);
    /// above, they are its pushes queued less those counted sent or failed, since counting a
    /// million index entries takes 75 ms on SQLite, and a script polling a campaign four times
    /// a second then took a third of a core from the sends (bench/million.sh, issue #28).
    /// Campaigns from before pushes were counted are counted row by row.
    private static func pending(_ db: SQLConnection, campaign: Campaign, sent: Int, failed: Int, countedUpTo: Int) throws -> Int {
        guard let pushes = campaign.pushes else {
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ? AND state = 'pending'", arguments: [campaign.id]) ?? 0
        }
        let counted = try Int.fetchOne(db, sql: """
            SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE campaignId = ? AND state = 'pending' LIMIT ?) AS pending
            """, arguments: [campaign.id, countedUpTo], cached: true) ?? 0
        return counted < countedUpTo ? counted : max(counted, pushes - sent - failed)
    }

    /// What a campaign is shown with (listed, polled, answered): every column but its content,
    /// whose locale names are enough (content only for a campaign made before they were kept).
    static let shownColumns = """
        id, audience, message, title, richType, payload, mode, createdBy, createdAt, recipients, devices, queued, app, sendAt,
        atLocalTime, onLocalDate, defaultLocale, cancelledAt, options, ratePerMinute, paceNextAt, pushes, countedInStats,
        localeNames, CASE WHEN localeNames IS NULL THEN content END AS content
        """

    /// A row's schedule (`sendAt`, or `atLocalTime` with `onLocalDate`).
    private static func schedule(_ row: SQLRow) throws -> CampaignSchedule? {
        if let sendAt: Double = row["sendAt"] {
            return .at(Date(timeIntervalSince1970: sendAt))
        } else if let time: String = row["atLocalTime"] {
            return .localTime(try LocalTime(time), date: try (row["onLocalDate"] as String?).map(LocalDate.init))
        }
        return nil
    }

    private static func campaign(_ row: SQLRow) throws -> Campaign {
        guard let payload = MediaID(row["payload"] as String) else { throw CoreError(.notFound, "campaign payload unreadable") }
        let schedule = try Self.schedule(row)
        let locales = try (row["content"] as String?).map { try JSONDecoder().decode([String: LocalizedContent].self, from: Data($0.utf8)) } ?? [:]
        let names = (row["localeNames"] as String?).map { $0.split(separator: ",").map(String.init) } ?? locales.keys.sorted()
        return Campaign(id: row["id"], audience: try Audience(stored: row["audience"]), message: row["message"], title: row["title"],
                        richType: row["richType"], payload: payload, mode: PushMode(rawValue: row["mode"]) ?? .alert,
                        createdBy: row["createdBy"], createdAt: Date(timeIntervalSince1970: row["createdAt"]),
                        recipients: row["recipients"], devices: row["devices"], queued: row["queued"], app: row["app"],
                        schedule: schedule, locales: locales, localeNames: names, defaultLocale: row["defaultLocale"] ?? "en",
                        cancelledAt: (row["cancelledAt"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        options: PushOptions(stored: row["options"]), ratePerMinute: row["ratePerMinute"],
                        paceNextAt: (row["paceNextAt"] as Double?).map(Date.init(timeIntervalSince1970:)), pushes: row["pushes"])
    }
}
