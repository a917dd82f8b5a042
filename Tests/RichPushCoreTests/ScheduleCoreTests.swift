import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: scheduled and local-time campaigns, cancel, locales, idempotency (SPEC §19)")
struct ScheduleCoreTests {
    static func date(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }

    /// A store with the default image and `users` (name, zone, locale), each with one device.
    static func store(_ dir: URL, users: [(String, String?, String?)], on locations: StoreEngine.Locations? = nil) async throws -> DataStore {
        let store = try await DataStore.open(path: dir.path, database: locations?.database, blobs: locations?.blobs,
                                             environment: locations?.environment ?? ProcessInfo.processInfo.environment)
        _ = try await store.media.ingest(file: Fixtures.media.appendingPathComponent("logo.png").path, name: "logo.png")
        _ = try await store.users(cost: 4).importUsers(users.map { .init(name: $0.0, secret: .password("pw"), admin: false, timezone: $0.1, locale: $0.2) })
        for (index, user) in users.enumerated() {
            let registration = try await store.registrations.create(for: user.0)
            _ = try await store.registrations.update(id: registration.id, for: user.0,
                                                     with: DeviceRegistration(platform: "apns", handle: String(format: "%064x", index + 1), tags: []))
        }
        return store
    }

    static func recipients(_ store: DataStore, campaign: Int64) async throws -> Set<String> {
        Set(try await store.database.read { db in
            try String.fetchAll(db, sql: "SELECT recipient FROM notifications WHERE campaignId = ?", arguments: [campaign])
        })
    }

    @Test("09:00 on a date in each user's zone: both sides of the date line and across a DST change, each queued at their own 09:00 and not a second before, by two nodes at once, through a restart; only what is due is pending",
          arguments: StoreEngine.all)
    func localTime(engine: StoreEngine) async throws {
        let locations = try await engine.locations()
        func open(_ dir: URL) async throws -> DataStore {
            try await DataStore.open(path: dir.path, database: locations.database, blobs: locations.blobs, environment: locations.environment)
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // 2026-03-29: Europe's clocks go forward at 01:00 UTC (Paris is UTC+2 by 09:00); New York has been on EDT since 03-08.
        let zones: [(user: String, zone: String?, due: String)] = [
            ("kiri", "Pacific/Kiritimati", "2026-03-28T19:00:00Z"), // UTC+14: first
            ("tokyo", "Asia/Tokyo", "2026-03-29T00:00:00Z"),
            ("paris", "Europe/Paris", "2026-03-29T07:00:00Z"),
            ("nozone", nil, "2026-03-29T09:00:00Z"),                 // no zone: UTC
            ("newyork", "America/New_York", "2026-03-29T13:00:00Z"),
            ("pago", "Pacific/Pago_Pago", "2026-03-29T20:00:00Z"),  // UTC-11: last
        ]
        var store = try await Self.store(dir, users: zones.map { ($0.user, $0.zone, nil) }, on: locations)
        var campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        // A second node on the same store runs the scheduler at the same moments.
        let otherDir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: otherDir) }
        var other = engine == .shared ? try await open(otherDir) : try await open(dir)
        var otherCampaigns = other.campaigns(links: nil, defaultImage: "logo.png")
        func tick(_ now: Date) async throws {
            let (one, two) = (campaigns, otherCampaigns)
            async let mine = one.runDue(now: now, addressing: .perDevice)
            async let theirs = two.runDue(now: now, addressing: .perDevice)
            _ = try await (mine, theirs)
        }
        let created = Self.date("2026-03-27T12:00:00Z")
        let schedule = CampaignSchedule.localTime(try LocalTime("09:00"), date: try LocalDate("2026-03-29"))
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "Good morning"), schedule: schedule),
                                                  by: "root", now: created)
        #expect(try await campaigns.progress(campaign.id)?.status == .scheduled)
        #expect(try await campaigns.runDue(now: created, addressing: .perDevice).isEmpty)
        var expected: Set<String> = []
        for (index, entry) in zones.enumerated() {
            let due = Self.date(entry.due)
            try await tick(due.addingTimeInterval(-1))
            #expect(try await Self.recipients(store, campaign: campaign.id) == expected, "before \(entry.user)'s 09:00")
            try await tick(due)
            expected.insert(entry.user)
            #expect(try await Self.recipients(store, campaign: campaign.id) == expected, "at \(entry.user)'s 09:00")
            let progress = try #require(try await campaigns.progress(campaign.id))
            #expect(progress.pending == expected.count, "only what is due is pending")
            #expect(progress.status == .sending && !progress.campaign.queued)
            if index == 1 {
                // Two minutes on, the zones are looked at again and nothing is due: runDue says
                // it queued nothing (it used to name the campaign, and the log said it was queueing).
                #expect(try await campaigns.runDue(now: due.addingTimeInterval(120), addressing: .perDevice).isEmpty)
            }
            if index == 2 {
                // A restart between zones: the schedule lives in the database.
                store.close()
                other.close()
                store = try await open(dir)
                other = engine == .shared ? try await open(otherDir) : try await open(dir)
                campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
                otherCampaigns = other.campaigns(links: nil, defaultImage: "logo.png")
            }
        }
        try await tick(Self.date("2026-03-29T21:00:00Z"))
        let done = try #require(try await campaigns.progress(campaign.id))
        #expect(done.campaign.queued && done.campaign.recipients == zones.count && done.campaign.devices == zones.count)
        // Nobody twice, whatever runs later.
        try await campaigns.runDue(now: Self.date("2026-03-30T21:00:00Z"), addressing: .perDevice)
        #expect(try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications") } == zones.count)
        #expect(try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries") } == zones.count)
        store.close()
        other.close()
    }

    @Test("a date's 09:00 that had already passed in a zone when the campaign was made is skipped there, never sent at another hour")
    func passedZone() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(dir, users: [("tokyo", "Asia/Tokyo", nil), ("newyork", "America/New_York", nil)])
        defer { store.close() }
        let campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        // 12:00 UTC: 21:00 in Tokyo (09:00 has passed), 08:00 in New York (09:00 is at 13:00 UTC).
        let created = Self.date("2026-06-01T12:00:00Z")
        let schedule = CampaignSchedule.localTime(try LocalTime("09:00"), date: try LocalDate("2026-06-01"))
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), schedule: schedule), by: "root", now: created)
        try await campaigns.runDue(now: created, addressing: .perDevice)
        #expect(try await Self.recipients(store, campaign: campaign.id).isEmpty)
        try await campaigns.runDue(now: Self.date("2026-06-01T13:00:00Z"), addressing: .perDevice)
        #expect(try await Self.recipients(store, campaign: campaign.id) == ["newyork"])
        try await campaigns.runDue(now: Self.date("2026-06-02T00:00:00Z"), addressing: .perDevice)
        let done = try #require(try await campaigns.progress(campaign.id))
        #expect(done.campaign.queued && done.campaign.recipients == 1)
        // A date whose 09:00 has passed everywhere is refused.
        await #expect(throws: CoreError.self) {
            try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), schedule: schedule), by: "root",
                                       now: Self.date("2026-06-01T22:00:00Z"))
        }
    }

    @Test("the due time of a zone: the next 09:00 after the campaign is made, a date's 09:00, and a time a DST change skips")
    func dueTimes() throws {
        let nine = CampaignSchedule.localTime(try LocalTime("09:00"), date: nil)
        let tokyo = TimeZone(identifier: "Asia/Tokyo")!
        // Made at 10:00 in Tokyo: tomorrow's 09:00; made at 08:00: today's.
        #expect(nine.due(in: tokyo, createdAt: Self.date("2026-06-01T01:00:00Z")) == Self.date("2026-06-02T00:00:00Z"))
        #expect(nine.due(in: tokyo, createdAt: Self.date("2026-05-31T23:00:00Z")) == Self.date("2026-06-01T00:00:00Z"))
        // 02:30 does not exist in New York on 2026-03-08: the moment after the gap.
        let gap = CampaignSchedule.localTime(try LocalTime("02:30"), date: try LocalDate("2026-03-08"))
        let ny = gap.due(in: TimeZone(identifier: "America/New_York")!, createdAt: Self.date("2026-03-01T00:00:00Z"))
        #expect(ny >= Self.date("2026-03-08T07:00:00Z") && ny <= Self.date("2026-03-08T07:30:00Z"), "\(ny)")
        #expect(throws: CoreError.self) { try LocalTime("24:00") }
        #expect(throws: CoreError.self) { try LocalTime("9:00") }
        #expect(throws: CoreError.self) { try LocalDate("2026-02-30") }
        #expect(throws: CoreError.self) { try LocalTime("+1:30") }
        #expect(throws: CoreError.self) { try LocalDate("2026-+1-05") }
        // Month and year ends roll over.
        #expect(nine.due(in: tokyo, createdAt: Self.date("2026-12-31T02:00:00Z")) == Self.date("2027-01-01T00:00:00Z"))
    }

    @Test("sendAt: scheduled until its time, then queued whole; in the past is refused; a year away too")
    func sendAt() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(dir, users: [("a", nil, nil), ("b", "Asia/Tokyo", nil)])
        defer { store.close() }
        let campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        // Whole seconds: a Date read back from seconds since 1970 may differ from one made by adding by a rounding step.
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let at = now.addingTimeInterval(3600)
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), schedule: .at(at)), by: "root", now: now)
        #expect(try await campaigns.runDue(now: at.addingTimeInterval(-1), addressing: .perDevice).isEmpty)
        #expect(try await campaigns.progress(campaign.id)?.status == .scheduled)
        // Not an unfinished campaign of a dead process either.
        #expect(try await campaigns.resumeUnfinished(addressing: .perDevice).isEmpty)
        #expect(try await campaigns.runDue(now: at, addressing: .perDevice) == [campaign.id])
        let sent = try #require(try await campaigns.progress(campaign.id))
        #expect(sent.campaign.queued && sent.campaign.recipients == 2 && sent.pending == 2 && sent.status == .sending)
        await #expect(throws: CoreError.self) {
            try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), schedule: .at(now.addingTimeInterval(-3600))), by: "root", now: now)
        }
        await #expect(throws: CoreError.self) {
            try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), schedule: .at(now.addingTimeInterval(400 * 86_400))), by: "root", now: now)
        }
    }

    @Test("progress: a campaign's counts come from its counters (no count over its audience), an older campaign's from its rows")
    func progressCounts() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(dir, users: [("a", nil, nil), ("b", nil, nil)])
        defer { store.close() }
        let campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let holder = OutboxHolder(pid: Int(getpid()))
        let claimed = try await store.outbox.claim(limit: 10, lease: 60, holder: holder)
        _ = try await store.outbox.record([(try #require(claimed.first), .sent)], holder: holder)
        try await store.notifications(links: nil).markRead(ids: [try #require(claimed.first).notificationId])
        let progress = try #require(try await campaigns.progress(campaign.id))
        #expect(progress.sent == 1 && progress.pending == 1 && progress.failed == 0 && progress.fetched == 1, "\(progress)")
        // A change behind the outbox's back is not seen: the counters are what it recorded.
        try await store.database.write { db in try db.execute(sql: "UPDATE deliveries SET state = 'sent'") }
        #expect(try await campaigns.progress(campaign.id)?.sent == 1)
        // A campaign made before the counters were complete (core-v12) is counted row by row.
        try await store.database.write { db in try db.execute(sql: "UPDATE campaigns SET countedInStats = 0") }
        let counted = try #require(try await campaigns.progress(campaign.id))
        #expect(counted.sent == 2 && counted.pending == 0 && counted.fetched == 1, "\(counted)")
    }

    /// A store of `engine` in `dir` with users a, b and c (a device each), and a campaign to all
    /// three, queued.
    static func queuedToThree(_ engine: StoreEngine, _ dir: URL) async throws -> (DataStore, CampaignStore, Campaign) {
        let store = try await Self.store(dir, users: [("a", nil, nil), ("b", nil, nil), ("c", nil, nil)], on: try await engine.locations())
        let campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        return (store, campaigns, campaign)
    }

    /// When campaign `campaign` was marked done, or nil.
    static func doneAt(_ store: DataStore, campaign: Int64) async throws -> Double? {
        try await store.database.read { db in try Double.fetchOne(db, sql: "SELECT doneAt FROM campaigns WHERE id = ?", arguments: [campaign]) }
    }

    @Test("a campaign moved to another image keeps its reference to the old one while a notification taken back still names it: removing the old image's name keeps its blob, and collecting garbage succeeds and keeps it",
          arguments: StoreEngine.all)
    func repointedKeepsRetractedImage(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (store, campaigns, campaign) = try await Self.queuedToThree(engine, dir)
        defer { store.close() }
        let old = campaign.payload
        let taken = try #require(try await store.database.read { db in
            try Int64.fetchOne(db, sql: "SELECT id FROM notifications WHERE campaignId = ? AND recipient = 'a'", arguments: [campaign.id])
        })
        _ = try await store.notifications(links: nil).retract(taken)
        _ = try await store.media.ingest(bytes: PNGBuilder.rgb(width: 9, height: 9), name: "other.png")
        var change = ContentChange()
        change.payload = "other.png"
        _ = try await campaigns.change(campaign.id, change)
        let named = try await store.database.read { db in
            try String.fetchAll(db, sql: "SELECT payload FROM notifications WHERE campaignId = ? ORDER BY recipient", arguments: [campaign.id])
        }
        #expect(named.first == old.hex && named.dropFirst().allSatisfy { $0 != old.hex } && named.count == 3, "\(named)")
        // The name goes; the blob stays, referenced (before: the delete of a blob a notification names was refused, an error).
        let removal = try await store.media.remove("logo.png")
        #expect(removal.name == "logo.png" && removal.deletedBlob == nil)
        let report = try await store.media.collectGarbage(grace: 0, now: Date().addingTimeInterval(10))
        #expect(!report.removed.contains(old))
        #expect(try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM media WHERE sha256 = ?", arguments: [old.hex]) } == 1)
        // Changed again, to an image no notification named: the one it leaves is no longer referenced.
        change.payload = "logo.png"
        _ = try await store.media.ingest(bytes: PNGBuilder.rgb(width: 10, height: 10), name: "logo.png")
        _ = try await campaigns.change(campaign.id, change)
        let refs = try await store.database.read { db in
            try String.fetchAll(db, sql: "SELECT sha256 FROM media_refs WHERE owner = ? ORDER BY sha256", arguments: ["campaign:\(campaign.id)"])
        }
        #expect(refs.count == 2 && refs.contains(old.hex), "\(refs)")
    }

    @Test("a user removed mid-campaign takes their pending push out of the outbox and out of the pushes queued; the campaign is done once the rest are sent",
          arguments: StoreEngine.all)
    func removedMidCampaign(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (store, campaigns, campaign) = try await Self.queuedToThree(engine, dir)
        defer { store.close() }
        try await store.users.remove(name: "b")
        // The campaign's pushes, rows or runs as the engine queued them.
        let listed = try await store.deliveries.list(campaign: campaign.id)
        let left = try await store.database.read { db in
            try listed.map { try String.fetchOne(db, sql: "SELECT recipient FROM notifications WHERE id = ?", arguments: [$0.notificationId]) ?? "(none)" }
        }
        #expect(left.sorted() == ["a", "c"])
        var progress = try #require(try await campaigns.progress(campaign.id))
        #expect(progress.pending == 2 && progress.campaign.pushes == 2 && progress.status == .sending)
        let holder = OutboxHolder(pid: Int(getpid()))
        let claimed = try await store.outbox.claim(limit: 10, lease: 60, holder: holder)
        #expect(claimed.count == 2)
        _ = try await store.outbox.record(claimed.map { ($0, .sent) }, holder: holder)
        progress = try #require(try await campaigns.progress(campaign.id))
        #expect(progress.pending == 0 && progress.sent == 2 && progress.status == .done)
        #expect(try await Self.doneAt(store, campaign: campaign.id) != nil)
    }

    @Test("one notification of a campaign changed: its replacement is a push beyond those queued, so the campaign's pending pushes are counted in the outbox; a failed replacement does not make it look done",
          arguments: StoreEngine.all)
    func revisedMidCampaign(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (store, campaigns, campaign) = try await Self.queuedToThree(engine, dir)
        defer { store.close() }
        let holder = OutboxHolder(pid: Int(getpid()))
        let claimed = try await store.outbox.claim(limit: 10, lease: 60, holder: holder)
        try #require(claimed.count == 3)
        let sent = try #require(claimed.first { $0.recipient == "a" })
        _ = try await store.outbox.record([(sent, .sent)], holder: holder)
        // a's notification changed: a's device gets a replacement (b's and c's pushes are in flight).
        _ = try await store.notifications(links: nil).change(sent.notificationId, ContentChange(message: "changed"), defaultImage: "logo.png")
        let replacement = try await store.outbox.claim(limit: 10, lease: 60, holder: holder)
        try #require(replacement.count == 1 && replacement[0].kind == .update(alertAgain: false))
        _ = try await store.outbox.record([(replacement[0], .failed(reason: "400 BadDeviceToken", prune: false, deadSince: nil))], holder: holder)
        // The counters say 3 queued, 1 sent, 1 failed: one left. Two are.
        var progress = try #require(try await campaigns.progress(campaign.id))
        #expect(progress.pending == 2 && progress.status == .sending, "\(progress)")
        _ = try await store.outbox.record(claimed.filter { $0.recipient != "a" }.map { ($0, .sent) }, holder: holder)
        progress = try #require(try await campaigns.progress(campaign.id))
        #expect(progress.pending == 0 && progress.status == .done, "\(progress)")
        #expect(try await Self.doneAt(store, campaign: campaign.id) != nil)
    }

    @Test("cancel: nothing more is queued, pending pushes and the inbox entries of users who got nothing go, sent pushes stay; a done campaign is 409")
    func cancel() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(dir, users: [("a", nil, nil), ("b", nil, nil), ("c", nil, nil)])
        defer { store.close() }
        var campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        campaigns.batchSize = 2
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice, maxBatches: 1) // a and b queued, c not yet
        // a's push goes out (claimed and recorded as the outbox does); b's is claimed by a holder
        // whose lease then lapses, so it was never handed to a push service.
        let holder = OutboxHolder(pid: Int(getpid()))
        let claimed = try await store.outbox.claim(limit: 10, lease: 60, holder: holder)
        let first = try #require(claimed.first { $0.target == String(format: "%064x", 1) })
        _ = try await store.outbox.record([(first, .sent)], holder: holder)
        try await store.database.write { db in
            try db.execute(sql: "UPDATE deliveries SET nextAttemptAt = 0, leaseUntil = 0 WHERE state = 'pending'")
        }
        let cancelled = try await campaigns.cancel(campaign.id)
        #expect(cancelled.status == .cancelled && cancelled.sent == 1 && cancelled.pending == 0 && cancelled.campaign.recipients == 1)
        #expect(try await Self.recipients(store, campaign: campaign.id) == ["a"])
        // Nothing more is queued, by anyone.
        #expect(try await campaigns.queue(campaign.id, addressing: .perDevice).queued)
        #expect(try await campaigns.resumeUnfinished(addressing: .perDevice).isEmpty)
        #expect(try await Self.recipients(store, campaign: campaign.id) == ["a"])
        #expect(try await campaigns.cancel(campaign.id).status == .cancelled)
        // Done: nothing to cancel.
        let other = try await campaigns.create(CampaignDraft(audience: .users(["b"]), content: NotificationDraft()), by: "root")
        _ = try await campaigns.queue(other.id, addressing: .perDevice)
        let otherPushes = try await store.outbox.claim(limit: 10, lease: 60, holder: holder).filter { $0.campaignId == other.id }
        try #require(otherPushes.count == 1)
        _ = try await store.outbox.record(otherPushes.map { ($0, .sent) }, holder: holder)
        await #expect(throws: CoreError.self) { try await campaigns.cancel(other.id) }
    }

    @Test("locales: each recipient gets theirs, fr-CA falling back to fr, others to the default locale; every locale's push must fit")
    func locales() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(dir, users: [("quebec", nil, "fr-CA"), ("lyon", nil, "fr"), ("berlin", nil, "de"), ("plain", nil, nil),
                                                     ("mexico", nil, "es-MX")])
        defer { store.close() }
        let campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        let content: [String: LocalizedContent] = ["en": .init(title: "Sale", message: "Half price"), "fr": .init(title: "Soldes", message: "Moitié prix"),
                                                   "es": .init(title: "Rebajas", message: "Mitad de precio")]
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), locales: content), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let messages = Dictionary(uniqueKeysWithValues: try await store.database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT recipient, message, title FROM notifications").map { ($0["recipient"] as String, "\($0["title"] as String? ?? ""): \($0["message"] as String)") }
        })
        #expect(messages == ["quebec": "Soldes: Moitié prix", "lyon": "Soldes: Moitié prix", "berlin": "Sale: Half price", "plain": "Sale: Half price",
                             "mexico": "Rebajas: Mitad de precio"])
        // No content for the default locale and no message: refused; a locale too long for a push: refused.
        await #expect(throws: CoreError.self) {
            try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), locales: ["fr": .init(message: "Bonjour")]), by: "root")
        }
        await #expect(throws: CoreError.self) {
            try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), locales: ["en": .init(message: String(repeating: "x", count: 5000))]), by: "root")
        }
        await #expect(throws: CoreError.self) {
            try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(), locales: ["not a tag": .init(message: "x")]), by: "root")
        }
        // The words of the options a phone shows are localised too (docs/api.md#options-badges-and-paced-sends): the subtitle and
        // the buttons' titles, by button id; a button not among the options' is refused.
        let links = PayloadLinks(key: try PayloadKey(secret: String(repeating: "k", count: 32)), baseURL: "http://x", lifetime: 60)
        let buttons = NotificationDraft(message: "Half price", title: "Sale", mode: .alert,
                                        options: PushOptions(subtitle: "Today only", actions: [.init(id: "buy", title: "Buy"), .init(id: "later", title: "Later")]))
        let shop = store.campaigns(links: links, defaultImage: "logo.png")
        let worded = try await shop.create(CampaignDraft(audience: .users(["lyon", "berlin"]), content: buttons,
                                                         locales: ["fr": .init(title: "Soldes", subtitle: "Aujourd'hui seulement", actions: ["buy": "Acheter"])]),
                                           by: "root")
        _ = try await shop.queue(worded.id, addressing: .perDevice)
        let options = Dictionary(uniqueKeysWithValues: try await store.database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT recipient, options FROM notifications WHERE campaignId = ?", arguments: [worded.id])
                .map { ($0["recipient"] as String, PushOptions(stored: $0["options"])) }
        })
        #expect(options["lyon"]?.subtitle == "Aujourd'hui seulement" && options["lyon"]?.actions?.map(\.title) == ["Acheter", "Later"])
        #expect(options["berlin"]?.subtitle == "Today only" && options["berlin"]?.actions?.map(\.title) == ["Buy", "Later"])
        do {
            _ = try await shop.create(CampaignDraft(audience: .all, content: buttons, locales: ["fr": .init(actions: ["sell": "Vendre"])]), by: "root")
            Issue.record("a title for a button the options do not have was taken")
        } catch let error as CoreError {
            #expect(error.kind == .unprocessable && error.message.contains("content.fr.actions") && error.message.contains("sell"), "\(error)")
        }
        await #expect(throws: CoreError.self) {
            try await shop.create(CampaignDraft(audience: .all, content: buttons, locales: ["fr": .init(actions: ["buy": String(repeating: "x", count: 5000)])]), by: "root")
        }
        #expect(try UserPreferences.locale("zh_hant_tw") == "zh-Hant-TW" && (try UserPreferences.locale("ES-419")) == "es-419")
        #expect(UserPreferences.fallbacks("zh-Hant-TW") == ["zh-Hant-TW", "zh-Hant", "zh"])
        #expect(throws: CoreError.self) { try UserPreferences.timezone("Mars/Olympus") }
    }

    @Test("Idempotency-Key: the same key and body make one campaign, another body is 422, another caller's key is theirs")
    func idempotency() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(dir, users: [("a", nil, nil)])
        defer { store.close() }
        let campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        let body = Data(#"{"audience":{"all":true}}"#.utf8)
        let key = try IdempotencyKey(owner: "root", route: "POST /api/admin/campaigns", key: "k-1", body: body)
        let first = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "root", idempotency: key)
        do {
            _ = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "root", idempotency: key)
            Issue.record("a second campaign was made")
        } catch let replay as IdempotentReplay {
            #expect(replay.resource == first.id)
        }
        let other = try IdempotencyKey(owner: "root", route: "POST /api/admin/campaigns", key: "k-1", body: Data(#"{"audience":{"users":["a"]}}"#.utf8))
        await #expect(throws: CoreError.self) { try await store.idempotency.resource(for: other) }
        let theirs = try IdempotencyKey(owner: "key:backend", route: "POST /api/admin/campaigns", key: "k-1", body: body)
        #expect(try await store.idempotency.resource(for: theirs) == nil)
        // A day later the key is free again.
        #expect(try await store.idempotency.resource(for: key, now: Date().addingTimeInterval(IdempotencyKey.lifetime + 60)) == nil)
        #expect(throws: CoreError.self) { try IdempotencyKey(owner: "root", route: "r", key: String(repeating: "k", count: 256), body: body) }
    }
}
