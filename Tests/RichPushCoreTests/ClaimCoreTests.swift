import Foundation
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

@Suite("The outbox's claim: leases, and each push's options")
struct ClaimCoreTests {
    /// Alert pushes carry a signed payload URL.
    static let links = PayloadLinks(key: try! PayloadKey(secret: String(repeating: "k", count: 32)), baseURL: "https://push.example.com", lifetime: 600)

    /// A store on `engine` with `users` users of one device each, and its campaigns (in a new directory).
    /// With `runs` false, campaigns are queued a row a push on PostgreSQL too (`SettingsStore.outboxRuns`),
    /// for tests of the rows' own leases.
    static func store(_ engine: StoreEngine, users: Int, runs: Bool = true) async throws -> (URL, DataStore, CampaignStore) {
        let dir = try Fixtures.tempDirectory()
        let names = (1...users).map { (String(format: "user%02d", $0), String?.none, String?.none) }
        let store = try await ScheduleCoreTests.store(dir, users: names, on: try await engine.locations())
        if !runs { try await store.settings.set(SettingsStore.outboxRuns, "off") }
        return (dir, store, store.campaigns(links: links, defaultImage: "logo.png"))
    }

    @Test("claims made at once by two holders never share a push; each push claimed is leased to its holder until the lease's end, in due order; what a claim returns is what it leased",
          arguments: StoreEngine.all)
    func leasedToItsHolder(engine: StoreEngine) async throws {
        let (dir, store, campaigns) = try await Self.store(engine, users: 40, runs: false)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let first = OutboxHolder(pid: 1), second = OutboxHolder(pid: 2)
        // The database's time (PostgreSQL's clock), as the claim reads it.
        let before = store.database.now()
        async let a = store.outbox.claim(limit: 15, lease: 300, holder: first)
        async let b = store.outbox.claim(limit: 15, lease: 300, holder: second)
        let (one, two) = try await (a, b)
        let after = store.database.now()
        #expect(one.count == 15 && two.count == 15)
        #expect(Set(one.map(\.id)).isDisjoint(with: two.map(\.id)))
        // Due at the same moment, so in id order.
        #expect(one.map(\.id) == one.map(\.id).sorted() && two.map(\.id) == two.map(\.id).sorted())
        #expect(one.allSatisfy { $0.campaignId == campaign.id && $0.recipient != nil && $0.mode == .alert && $0.content?.message == "hi" })
        let rows = try await store.database.read { db in
            try db.fetchAll(sql: "SELECT id, leasedBy, leaseTag, nextAttemptAt, leaseUntil, state FROM deliveries WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
        }
        #expect(rows.count == 40)
        var leased: [Int64: (Int, Int64)] = [:]
        for row in rows {
            let state: String = row["state"]
            #expect(state == "pending")
            let next: Double = row["nextAttemptAt"]
            #expect(next < before + 295, "every push keeps its due time")
            guard let by = row["leasedBy"] as Int? else {
                #expect(row["leaseUntil"] as Double? == nil)
                continue
            }
            let until: Double = row["leaseUntil"]
            #expect(until >= before + 295 && until <= after + 305, "leased until the lease's end")
            leased[row["id"]] = (by, row["leaseTag"])
        }
        #expect(leased.count == 30)
        for (jobs, holder) in [(one, first), (two, second)] {
            for job in jobs { #expect(leased[job.id].map { $0 == (holder.pid, holder.tag) } == true, "push \(job.id)") }
        }
        // The ten left are claimed next; then none.
        let rest = try await store.outbox.claim(limit: 15, lease: 300, holder: first)
        #expect(rest.count == 10 && Set(rest.map(\.id)).isDisjoint(with: leased.keys))
        #expect(try await store.outbox.claim(limit: 15, lease: 300, holder: second).isEmpty)
        // Recorded by their holders: sent.
        let labels = try await store.outbox.record(one.map { ($0, .sent) }, holder: first)
        #expect(labels == Array(repeating: "sent", count: 15))
        #expect(try await store.outbox.record(two.prefix(1).map { ($0, .sent) }, holder: first) == ["lease_lost"])
    }

    @Test("one claim over campaigns with different options (read once per claim while they repeat): each push carries its own campaign's",
          arguments: StoreEngine.all)
    func optionsPerPush(engine: StoreEngine) async throws {
        let (dir, store, campaigns) = try await Self.store(engine, users: 4)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        var chime = PushOptions(), bell = PushOptions()
        chime.sound = "chime.caf"
        bell.sound = "bell.caf"
        bell.threadId = "news"
        var expected: [Int64: PushOptions] = [:]
        for options in [chime, PushOptions(), bell, chime] {
            let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert, options: options)),
                                                      by: "root")
            _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
            expected[campaign.id] = options
        }
        let jobs = try await store.outbox.claim(limit: 100, lease: 300, holder: OutboxHolder(pid: 1))
        #expect(jobs.count == 16)
        for job in jobs {
            let campaign = try #require(job.campaignId)
            #expect(job.options == expected[campaign], "push \(job.id) of campaign \(campaign)")
            #expect(job.content?.options == expected[campaign])
        }
    }

    @Test("notifications written together with options A, none, A (encoded once while they repeat): each row stores its own writer's",
          arguments: StoreEngine.all)
    func optionsPerNotification(engine: StoreEngine) async throws {
        let (dir, store, _) = try await Self.store(engine, users: 3)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        var sound = PushOptions()
        sound.sound = "chime.caf"
        let chime = sound
        let stored = try await store.database.write { db in
            let writers = try [chime, PushOptions(), chime].map { options in
                try NotificationWriter(db, draft: NotificationDraft(message: "hi", mode: .alert, options: options), defaultImage: "logo.png",
                                       links: Self.links, now: Date())
            }
            let made = try NotificationWriter.insert(db, zip(writers, ["user01", "user02", "user03"]).map { (writer: $0, name: $1, targets: []) })
            return try made.map { try String.fetchOne(db, sql: "SELECT options FROM notifications WHERE id = ?", arguments: [$0.notification.id]) }
        }
        #expect(stored.count == 3)
        #expect(stored == [chime.stored, nil, chime.stored] && chime.stored != nil)
    }
}
