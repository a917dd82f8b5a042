import Foundation
import SQLEngine

/// When a campaign goes out (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries).
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
    /// without fractional seconds; nil otherwise, or when it is not strictly RFC 3339's (`RFC3339`).
    public static func rfc3339(_ text: String) -> Date? {
        RFC3339.date(text)
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

extension CampaignStore {
    /// Sends what is due at `now` (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries): a scheduled campaign whose time came is queued
    /// whole; a local-time campaign, the zones whose local time came. Each campaign is leased
    /// by one node at a time (a node that dies lets its lease lapse), so every recipient is
    /// queued once, whichever nodes run this. Returns the campaigns it queued something of: a
    /// campaign whose time came, a local-time campaign with a zone that came due (or that it
    /// finished), never one whose zones it only looked at again.
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
                switch schedule {
                case .at:
                    worked.append(campaign.id)
                    if let handOff {
                        // The lease goes with it: renewed with each batch, ended by the last.
                        handOff(campaign.id)
                        claimed = nil
                        continue
                    }
                    _ = try await queue(campaign.id, addressing: addressing, batchQueued: batchQueued)
                case .localTime:
                    if try await queueZones(campaign.id, now: now, addressing: addressing, batchQueued: batchQueued) { worked.append(campaign.id) }
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

    /// The zones of a local-time campaign: each zone users are in gets its due time once; the
    /// zones due at `now` are queued, a batch of users per transaction (memory stays flat, and
    /// only what is due is pending); once the last zone anywhere is past and every zone queued,
    /// the campaign is queued. Whether a zone came due or the campaign was finished (a look at
    /// the zones, every minute until the last is due, queues nothing).
    private func queueZones(_ id: Int64, now: Date, addressing: DeliveryAddressing, batchQueued: @Sendable () -> Void) async throws -> Bool {
        try await prepare(id)
        try await database.write { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ?", arguments: [id]) else { return }
            let campaign = try Self.campaign(row)
            guard let schedule = campaign.schedule else { return }
            try Self.addZones(db, campaign: campaign, schedule: schedule, now: now)
        }
        var zoneQueued = false
        while true {
            let (more, made) = try await queueZoneBatch(id, now: now, addressing: addressing)
            if !made.isEmpty { onQueued?(made) }
            batchQueued()
            if !more { break }
            zoneQueued = true
        }
        let finished = try await database.write { db -> Bool in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ?", arguments: [id]) else { return false }
            let campaign = try Self.campaign(row)
            guard let schedule = campaign.schedule, now >= schedule.last(createdAt: campaign.createdAt) else { return false }
            let waiting = try Int.fetchOne(db, sql: "SELECT count(*) FROM campaign_zones WHERE campaignId = ? AND queued = 0", arguments: [id]) ?? 0
            guard waiting == 0 else { return false }
            try db.execute(sql: "UPDATE campaigns SET queued = 1 WHERE id = ?", arguments: [id])
            // Every push may have been recorded before this: done now, if so.
            try Insight.finishCampaigns(db, [id], now: db.now)
            return true
        }
        return zoneQueued || finished
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
}
