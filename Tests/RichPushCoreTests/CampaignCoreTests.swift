import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

/// A data directory with the whole schema and the sample logo named `logo.png`.
struct CoreFixture {
    let dir: URL
    let directory: DataDirectory
    let database: SQLDatabase
    let users: UserStore

    init() async throws {
        dir = try Fixtures.tempDirectory()
        directory = DataDirectory(path: dir.path)
        database = try CoreDatabase.open(directory)
        users = UserStore(database: database, cost: 4)
        _ = try await MediaStore(directory: directory, database: database)
            .ingest(file: Fixtures.media.appendingPathComponent("logo.png").path, name: "logo.png")
    }

    func cleanup() { try? FileManager.default.removeItem(at: dir) }

    /// Accounts `prefix0001…` imported with one ready-made hash (no bcrypt per account).
    func importUsers(_ count: Int, prefix: String = "user") async throws -> [String] {
        try await users.add(name: "\(prefix)-template", password: "secret")
        let hash = try #require(try await users.credentials(of: "\(prefix)-template")).passwordHash
        try await users.remove(name: "\(prefix)-template")
        let names = (1...count).map { String(format: "\(prefix)%05d", $0) }
        _ = try await users.importUsers(names.map { UserImport.Entry(name: $0, secret: .bcrypt(hash), admin: false) })
        return names
    }

    /// Registers one device per name, with `tags`, token derived from the index.
    func registerDevices(_ names: [String], tags: (Int) -> [String] = { _ in [] }) async throws {
        let registrations = RegistrationStore(database: database)
        for (i, name) in names.enumerated() {
            let r = try await registrations.create(for: name)
            _ = try await registrations.update(id: r.id, for: name, with: DeviceRegistration(platform: "apns", handle: String(format: "%064x", i + 1), tags: tags(i)))
        }
    }

    var links: PayloadLinks { PayloadLinks(key: try! PayloadKey(directory: directory), baseURL: "https://push.example.com", lifetime: 3600) }

    /// The campaign store over this directory, `batchSize` recipients per transaction, pending
    /// counted row by row below `pendingCountedUpTo`.
    func campaigns(batchSize: Int = 500, pendingCountedUpTo: Int = 10_000) -> CampaignStore {
        var store = CampaignStore(database: database, links: links, defaultImage: "logo.png")
        store.batchSize = batchSize
        store.pendingCountedUpTo = pendingCountedUpTo
        return store
    }

    /// Nine users with a device each and an alert campaign to all of them, queued in batches of
    /// two with `ahead` 4, in a task the caller cancels; returned once its first two batches are
    /// in (4 pushes), with the campaign store.
    func campaignQueuedAhead() async throws -> (CampaignStore, Campaign, Task<Campaign, any Error>) {
        try await registerDevices(try await importUsers(9))
        let store = campaigns(batchSize: 2)
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "admin")
        let queueing = Task { try await store.queue(campaign.id, addressing: .perDevice, ahead: 4) }
        #expect(try await eventually { try await store.progress(campaign.id)?.campaign.devices == 4 })
        return (store, campaign, queueing)
    }
}

@Suite("Core: accounts, sessions, payload URLs, campaigns")
struct CampaignCoreTests {
    @Test("users import: a given bcrypt hash ($2a$, $2b$, $2y$) is stored as it is and verifies; bad lines say what is wrong")
    func importLines() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        try await f.users.add(name: "template", password: "hunter2")
        let hash = try #require(try await f.users.credentials(of: "template")).passwordHash
        #expect(hash.hasPrefix("$2b$04$"))
        let y = "$2y$" + hash.dropFirst(4), a = "$2a$" + hash.dropFirst(4)
        let entries = try [
            #"{"name":"yann","bcrypt":"\#(y)"}"#, #"{"name":"anna","bcrypt":"\#(a)","admin":true}"#,
            #"{"name":"pat","password":"plain"}"#, #"{"name":"template","password":"other"}"#,
        ].map(UserImport.parse)
        let summary = try await f.users.importUsers(entries)
        #expect(summary == UserStore.ImportSummary(imported: 3, skipped: 1))
        #expect(try await f.users.credentials(of: "yann")?.passwordHash == y)
        #expect(try await f.users.verify(name: "yann", password: "hunter2"))
        #expect(try await f.users.verify(name: "anna", password: "hunter2"))
        #expect(!(try await f.users.verify(name: "yann", password: "hunter3")))
        #expect(try await f.users.verify(name: "pat", password: "plain"))
        #expect(try await f.users.verify(name: "template", password: "hunter2"))
        #expect(try await f.users.list().first { $0.name == "anna" }?.admin == true)
        let bad: [(String, String)] = [
            ("not json", "not a JSON object"), (#"{"password":"x"}"#, "\"name\" is missing"),
            (#"{"name":"a b","password":"x"}"#, "invalid user name"), (#"{"name":"n"}"#, "give \"password\" or \"bcrypt\""),
            (#"{"name":"n","password":"x","bcrypt":"\#(hash)"}"#, "not both"), (#"{"name":"n","bcrypt":"$2x$04$abc"}"#, "not a bcrypt hash"),
            (#"{"name":"n","password":"x","admin":"yes"}"#, "\"admin\" must be true or false"), (#"{"name":"n","password":7}"#, "must be a string"),
        ]
        for (line, message) in bad {
            #expect { _ = try UserImport.parse(line) } throws: { ($0 as? CoreError)?.message.contains(message) == true }
        }
    }

    @Test("sessions: only the token's hash is stored; expiry, revoke, passwd and rm end them")
    func sessions() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        try await f.users.add(name: "alice", password: "pw", admin: true)
        try await f.users.add(name: "bob", password: "pw")
        let sessions = SessionStore(database: f.database)
        let a = try await sessions.create(for: "alice", lifetime: 3600)
        #expect(a.token.hasPrefix("rps_") && a.token.count == 47)
        #expect(try await sessions.owner(of: a.token) == SessionOwner(username: "alice", admin: true, expires: a.expires))
        #expect(try await sessions.owner(of: a.token, now: a.expires.addingTimeInterval(1)) == nil)
        #expect(try await sessions.owner(of: a.token + "x") == nil)
        let stored = try await f.database.read { db in try Data.fetchAll(db, sql: "SELECT tokenHash FROM sessions") }
        #expect(stored.count == 1 && !stored[0].contains(Data(a.token.utf8)))
        let epoch = try await f.users.epochs().sessions
        #expect(try await sessions.revoke(a.token))
        #expect(try await f.users.epochs().sessions == epoch + 1)
        #expect(try await sessions.owner(of: a.token) == nil)
        let b1 = try await sessions.create(for: "bob", lifetime: 3600), b2 = try await sessions.create(for: "bob", lifetime: 3600)
        try await f.users.setPassword(name: "bob", password: "new")
        #expect(try await sessions.owner(of: b1.token) == nil)
        #expect(try await sessions.owner(of: b2.token) == nil)
        #expect(try await f.users.verify(name: "bob", password: "new"))
        let b3 = try await sessions.create(for: "bob", lifetime: 3600)
        try await f.users.remove(name: "bob")
        #expect(try await sessions.owner(of: b3.token) == nil)
    }

    @Test("payload URLs: bound to one notification and its image, refused when any character changes or after the key is rotated")
    func payloadLinks() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let key = try PayloadKey(directory: f.directory)
        let path = f.dir.appendingPathComponent("payload.key").path
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        #expect(try PayloadKey(directory: f.directory).key == key.key) // a second opener reads the same key
        let links = PayloadLinks(key: key, baseURL: "https://push.example.com/", lifetime: 600)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let logo = MediaID(hashing: Array("logo".utf8)), other = MediaID(hashing: Array("other".utf8))
        let url = links.url(notification: 42, payload: logo, now: now)
        #expect(url.hasPrefix("https://push.example.com/p/"))
        let token = String(url.dropFirst("https://push.example.com/p/".count))
        #expect(token.count == PayloadLinks.tokenLength)
        let claims = try #require(PayloadLinks.claims(token))
        #expect(claims.notification == 42 && claims.expires == 1_800_000_600 && claims.payload == logo)
        #expect(links.isAuthentic(claims))
        // Another notification or image is another token; a changed byte anywhere is refused.
        #expect(links.token(notification: 43, payload: logo, expires: 1_800_000_600) != token)
        #expect(links.token(notification: 42, payload: other, expires: 1_800_000_600) != token)
        for index in 0..<token.count {
            var flipped = Array(token)
            flipped[index] = flipped[index] == "A" ? "B" : "A" // at the last index, B changes only unused bits: still refused
            #expect(PayloadLinks.claims(String(flipped)).map { links.isAuthentic($0) } != true, "\(index)")
        }
        #expect(PayloadLinks.claims(token + "A") == nil && PayloadLinks.claims("") == nil && PayloadLinks.claims(String(repeating: "é", count: 86)) == nil)
        try PayloadKey.rotate(directory: f.directory)
        #expect(try await key.reloadIfChanged())
        #expect(!links.isAuthentic(claims))
        #expect(throws: CoreError.self) { try PayloadKey(secret: "short") }
    }

    @Test("the alert push is SPEC §11's shape byte for byte; without a title there is no \"title\"")
    func alertPush() throws {
        let push = AlertPush(id: 7, title: "Sale", message: "20% off", richType: "img", richUrl: "https://h/p/abc").encoded()
        #expect(String(decoding: push, as: UTF8.self) == #"{"aps":{"alert":{"title":"Sale","body":"20% off"},"mutable-content":1,"sound":"default"},"richId":"7","richMessage":"20% off","richType":"img","richUrl":"https://h/p/abc"}"#)
        let bare = AlertPush(id: 8, title: nil, message: "a \"q\"\n🎉", richType: "img", richUrl: "https://h/p/x").encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: bare) as? [String: Any])
        let aps = try #require(object["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: Any])?.keys.sorted() == ["body"])
        #expect((aps["alert"] as? [String: Any])?["body"] as? String == "a \"q\"\n🎉")
        #expect(object["richMessage"] as? String == "a \"q\"\n🎉")
    }

    @Test("a campaign to everyone queues in batches: one inbox entry per user, one delivery per device, each push its own richId and URL")
    func campaignAll() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(1_203)
        try await f.registerDevices(Array(names.prefix(1_000)))
        var store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        store.batchSize = 500
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", title: "T", mode: .alert)), by: "admin")
        let batches = Counter()
        let queued = try await store.queue(campaign.id, addressing: .perDevice) { batches.increment() }
        #expect(queued.queued && queued.recipients == 1_203 && queued.devices == 1_000)
        #expect(batches.value == 3)
        let progress = try #require(try await store.progress(campaign.id))
        #expect(progress.pending == 1_000 && progress.sent == 0 && progress.fetched == 0 && progress.status == .sending)
        let rows = try await f.database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT id, recipient, push FROM notifications WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
                .map { (id: $0["id"] as Int64, recipient: $0["recipient"] as String, push: $0["push"] as Data) }
        }
        #expect(rows.count == 1_203 && Set(rows.map(\.recipient)).count == 1_203)
        let first = try #require(try JSONSerialization.jsonObject(with: rows[0].push) as? [String: Any])
        #expect(first["richId"] as? String == String(rows[0].id))
        let url = try #require(first["richUrl"] as? String)
        let claims = try #require(PayloadLinks.claims(String(url.split(separator: "/").last!)))
        #expect(claims.notification == rows[0].id && f.links.isAuthentic(claims))
        // Queueing again changes nothing: the cursor says everyone is queued.
        _ = try await store.queue(campaign.id, addressing: .perDevice)
        #expect(try await store.progress(campaign.id)?.pending == 1_000)
    }

    @Test("progress: pending is the pushes queued less those counted sent or failed, a removed user's pending pushes gone from both")
    func pendingAtScale() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(8)
        try await f.registerDevices(names)
        let store = f.campaigns(pendingCountedUpTo: 4)
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "admin")
        _ = try await store.queue(campaign.id, addressing: .perDevice)
        #expect(try await store.progress(campaign.id)?.pending == 8)
        let outbox = OutboxStore(database: f.database)
        let holder = OutboxHolder(pid: Int(getpid()))
        let jobs = try await outbox.claim(limit: 3, lease: 30, holder: holder)
        try #require(jobs.count == 3)
        _ = try await outbox.record([(jobs[0], .sent), (jobs[1], .sent), (jobs[2], .failed(reason: "BadDeviceToken", prune: false, deadSince: nil))],
                                    holder: holder)
        var progress = try #require(try await store.progress(campaign.id))
        #expect(progress.pending == 5 && progress.sent == 2 && progress.failed == 1 && progress.status == .sending)
        // A user removed mid-campaign takes their pending push along, and out of the pushes
        // queued: above the threshold the figure is 8 - 1 - 2 - 1...
        let leaving = try #require(try await f.database.read { db in
            try String.fetchOne(db, sql: """
                SELECT n.recipient FROM deliveries d JOIN notifications n ON n.id = d.notificationId
                WHERE d.campaignId = ? AND d.state = 'pending' ORDER BY d.id DESC LIMIT 1
                """, arguments: [campaign.id])
        })
        try await f.users.remove(name: leaving)
        #expect(try await store.progress(campaign.id)?.pending == 4)
        #expect(try await store.progress(campaign.id)?.campaign.pushes == 7)
        // ...and below it: 3 left.
        let next = try await outbox.claim(limit: 1, lease: 30, holder: holder)
        _ = try await outbox.record([(try #require(next.first), .sent)], holder: holder)
        progress = try #require(try await store.progress(campaign.id))
        #expect(progress.pending == 3 && progress.sent == 3)
        // The last ones sent: done, whatever the counters say.
        let last = try await outbox.claim(limit: 10, lease: 30, holder: holder)
        #expect(last.count == 3)
        _ = try await outbox.record(last.map { ($0, .sent) }, holder: holder)
        progress = try #require(try await store.progress(campaign.id))
        #expect(progress.pending == 0 && progress.status == .done)
    }

    @Test("the outbox by platform: rows naming theirs are counted as they are, older rows by their registration's, tag pushes and vanished registrations by name")
    func pendingByPlatform() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(5)
        try await f.registerDevices(names)
        let store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "admin")
        _ = try await store.queue(campaign.id, addressing: .perDevice)
        try await f.database.write { db in
            let ids = try Int64.fetchAll(db, sql: "SELECT id FROM deliveries WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
            // From before deliveries named a platform: one whose registration is FCM's, one addressed to a tag, one whose registration is gone.
            try db.execute(sql: "UPDATE deliveries SET platform = NULL WHERE id IN (?, ?, ?)", arguments: [ids[0], ids[1], ids[2]])
            try db.execute(sql: "UPDATE registrations SET platform = 'fcm' WHERE id = (SELECT registrationId FROM deliveries WHERE id = ?)", arguments: [ids[0]])
            try db.execute(sql: "UPDATE deliveries SET registrationId = NULL WHERE id = ?", arguments: [ids[1]])
            try db.execute(sql: "UPDATE deliveries SET registrationId = 'gone' WHERE id = ?", arguments: [ids[2]])
            try db.execute(sql: "UPDATE deliveries SET platform = 'web' WHERE id = ?", arguments: [ids[3]])
        }
        #expect(try await DeliveryStore(database: f.database).pendingByPlatform() == ["fcm": 1, "tag": 1, "unregistered": 1, "web": 1, "apns": 1])
    }

    @Test("queueing ahead of the sends: a batch is queued only while fewer than `ahead` pushes wait; sends let it go on, to everyone once")
    func queueAhead() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        // Two batches, then it waits: 4 pending, and it stays there while nothing is sent.
        let (store, campaign, queueing) = try await f.campaignQueuedAhead()
        defer { queueing.cancel() }
        try await Task.sleep(for: .milliseconds(300))
        var progress = try #require(try await store.progress(campaign.id))
        #expect(progress.campaign.devices == 4 && progress.pending == 4 && !progress.campaign.queued)
        // Sent pushes make room: 3 sent, so two more batches (1 + 2 + 2 = 5 >= 4 pending).
        let outbox = OutboxStore(database: f.database)
        let holder = OutboxHolder(pid: Int(getpid()))
        let first = try await outbox.claim(limit: 3, lease: 30, holder: holder)
        _ = try await outbox.record(first.map { ($0, .sent) }, holder: holder)
        #expect(try await eventually { try await store.progress(campaign.id)?.campaign.devices == 8 })
        try await Task.sleep(for: .milliseconds(300))
        progress = try #require(try await store.progress(campaign.id))
        #expect(progress.campaign.devices == 8 && progress.pending == 5)
        // Sending the rest lets the last batch in; the campaign ends queued, everyone once.
        var sent = 3, rounds = 0
        while sent < 9, rounds < 200 {
            rounds += 1
            let jobs = try await outbox.claim(limit: 10, lease: 30, holder: holder)
            _ = try await outbox.record(jobs.map { ($0, .sent) }, holder: holder)
            sent += jobs.count
            if jobs.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        let finished = try await eventually { try await store.progress(campaign.id)?.campaign.queued ?? false }
        #expect(finished)
        if !finished { queueing.cancel() }
        let done = try await queueing.value
        #expect(done.queued && done.devices == 9 && done.recipients == 9)
        let recipients = try await f.database.read { db in
            try String.fetchAll(db, sql: "SELECT recipient FROM notifications WHERE campaignId = ?", arguments: [campaign.id])
        }
        #expect(recipients.count == 9 && Set(recipients).count == 9)
    }

    @Test("queueing ahead: pushes that leave the outbox unsent with their users make room at once; pushes gone uncounted, within about a second")
    func queueAheadDeletedUsers() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let (store, campaign, queueing) = try await f.campaignQueuedAhead()
        defer { queueing.cancel() }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await store.progress(campaign.id)?.campaign.devices == 4)
        // Two of the four waiting go with their users, out of the pushes queued too: nothing is
        // sent, and the next batch follows at the next look.
        let waiting = try await f.database.read { db in
            try String.fetchAll(db, sql: "SELECT recipient FROM notifications WHERE campaignId = ? ORDER BY id LIMIT 2", arguments: [campaign.id])
        }
        for name in waiting { try await f.users.remove(name: name) }
        #expect(try await eventually(within: 5) { try await store.progress(campaign.id)?.campaign.devices == 6 })
        #expect(try await store.progress(campaign.id)?.pending == 4)
        // Two more leave the outbox without a trace in the counters (no path of this version
        // does so): the counters say four wait, the outbox two. The next batch follows once the
        // outbox is counted, within about a second.
        try await f.database.write { db in
            try db.execute(sql: "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE campaignId = ? ORDER BY id LIMIT 2)",
                           arguments: [campaign.id])
        }
        let start = ContinuousClock.now
        #expect(try await eventually(within: 5) { try await store.progress(campaign.id)?.campaign.devices == 8 })
        #expect(ContinuousClock.now - start < .seconds(3))
    }

    @Test("queueing ahead stops waiting when the pushes waiting do not move (no node sends them): everyone is queued; a paced campaign is queued whole at once")
    func queueAheadStalls() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(6)
        try await f.registerDevices(names)
        let store = f.campaigns(batchSize: 1)
        let content = NotificationDraft(message: "hi", mode: .alert)
        let clock = ContinuousClock()
        let unsent = try await store.create(CampaignDraft(audience: .all, content: content), by: "admin")
        var started = clock.now
        let queued = try await store.queue(unsent.id, addressing: .perDevice, ahead: 2, stalled: .milliseconds(300))
        #expect(queued.queued && queued.devices == 6 && queued.recipients == 6)
        #expect(clock.now - started >= .milliseconds(300))
        let paced = try await store.create(CampaignDraft(audience: .all, content: content, ratePerMinute: 60), by: "admin")
        started = clock.now
        let whole = try await store.queue(paced.id, addressing: .perDevice, ahead: 2, stalled: .seconds(30))
        #expect(whole.queued && whole.devices == 6)
        #expect(clock.now - started < .seconds(10), "a paced campaign waited for its sends")
    }

    @Test("queueing ahead keeps waiting while sends go out, however slowly: each send restarts the stall window")
    func queueAheadSlowSends() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(2)
        // Twelve devices each: a batch of one user puts 12 pushes in, and it takes 11 sends,
        // 2.75 s apart in all, to bring the waiting below 2 again: longer than the 2 s stall
        // window, which one send round (250 ms on an idle machine) must not outlast. Were the
        // window counted from the batch instead of the last send, it would fire with 4 waiting
        // and queue 12 more (16 waiting).
        try await f.registerDevices(Array(repeating: names, count: 12).flatMap { $0 })
        let store = f.campaigns(batchSize: 1)
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "admin")
        let queueing = Task { try await store.queue(campaign.id, addressing: .perDevice, ahead: 2, stalled: .seconds(2)) }
        defer { queueing.cancel() }
        let outbox = OutboxStore(database: f.database)
        let holder = OutboxHolder(pid: Int(getpid()))
        var sent = 0, mostWaiting = 0, rounds = 0
        var last = ContinuousClock.now, longestGap = Duration.zero
        while sent < 24, rounds < 300 {
            rounds += 1
            try await Task.sleep(for: .milliseconds(250))
            let progress = try #require(try await store.progress(campaign.id))
            mostWaiting = max(mostWaiting, progress.campaign.devices - sent)
            let jobs = try await outbox.claim(limit: 1, lease: 30, holder: holder)
            _ = try await outbox.record(jobs.map { ($0, .sent) }, holder: holder)
            sent += jobs.count
            longestGap = max(longestGap, .now - last)
            last = .now
        }
        #expect(sent == 24)
        // On a machine so loaded that one round took most of the window, the stall may rightly
        // fire: the bound is judged only when every send came well within it.
        if longestGap < .milliseconds(1800) {
            #expect(mostWaiting <= 13, "\(mostWaiting) queued ahead of the sends: the stall fired though sends went on")
        } else {
            print("queueAheadSlowSends: a send round took \(longestGap), near the 2 s window: the bound on waiting is not judged")
        }
        let done = try await queueing.value
        #expect(done.queued && done.devices == 24)
    }

    @Test("a campaign whose counters say pushes are left is not marked done when its last push is recorded, but by the sweep, which looks at the outbox and mends the counters")
    func finishedDespiteCounters() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(3)
        try await f.registerDevices(names)
        let store = f.campaigns()
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "admin")
        _ = try await store.queue(campaign.id, addressing: .perDevice)
        // A push gone from the outbox without a trace in the counters (no path of this version does so).
        try await f.database.write { db in
            try db.execute(sql: "DELETE FROM deliveries WHERE id = (SELECT min(id) FROM deliveries WHERE campaignId = ?)", arguments: [campaign.id])
        }
        let outbox = OutboxStore(database: f.database)
        let holder = OutboxHolder(pid: Int(getpid()))
        let jobs = try await outbox.claim(limit: 10, lease: 30, holder: holder)
        try #require(jobs.count == 2)
        _ = try await outbox.record(jobs.map { ($0, .sent) }, holder: holder)
        var progress = try #require(try await store.progress(campaign.id))
        #expect(progress.pending == 1 && progress.status == .sending)
        #expect(try await store.finishStragglers() == [campaign.id])
        progress = try #require(try await store.progress(campaign.id))
        #expect(progress.status == .done && progress.sent == 2)
    }

    @Test("progress through a hub (a push per user, not per device): pending is the pushes queued less those sent")
    func pendingThroughHub() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(4)
        // Two devices each: 8 devices, 4 pushes (one per user's tag).
        try await f.registerDevices(names + names)
        let store = f.campaigns(pendingCountedUpTo: 2)
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "admin")
        let queued = try await store.queue(campaign.id, addressing: .perUserTag)
        #expect(queued.devices == 8 && queued.pushes == 4)
        #expect(try await store.progress(campaign.id)?.pending == 4)
        let outbox = OutboxStore(database: f.database)
        let holder = OutboxHolder(pid: Int(getpid()))
        let jobs = try await outbox.claim(limit: 1, lease: 30, holder: holder)
        _ = try await outbox.record(jobs.map { ($0, .sent) }, holder: holder)
        #expect(try await store.progress(campaign.id)?.pending == 3)
    }

    @Test("a campaign's notifications take ids after the largest ever used, a deleted one's too, and each push names its own row")
    func campaignIDs() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(7)
        try await f.registerDevices(names)
        let notifications = NotificationStore(database: f.database)
        _ = try await notifications.create(for: names[0], draft: NotificationDraft(), defaultImage: "logo.png")
        let deleted = try await notifications.create(for: names[0], draft: NotificationDraft(), defaultImage: "logo.png").notification.id
        try await f.database.write { db in try db.execute(sql: "DELETE FROM notifications WHERE id = ?", arguments: [deleted]) }
        var store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        store.batchSize = 3 // batches of 3, 3 and 1: the last goes one at a time
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", title: "T", mode: .alert)), by: "admin")
        _ = try await store.queue(campaign.id, addressing: .perDevice)
        let rows = try await f.database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT id, push FROM notifications WHERE campaignId = ? ORDER BY id", arguments: [campaign.id])
                .map { (id: $0["id"] as Int64, push: $0["push"] as Data) }
        }
        #expect(rows.count == 7 && rows.allSatisfy { $0.id > deleted })
        for row in rows {
            let push = try #require(try JSONSerialization.jsonObject(with: row.push) as? [String: Any])
            #expect(push["richId"] as? String == String(row.id))
            let url = try #require(push["richUrl"] as? String)
            #expect(PayloadLinks.claims(String(url.split(separator: "/").last!))?.notification == row.id)
        }
        let pushIDs = try await f.database.read { db in
            try Int64.fetchAll(db, sql: "SELECT notificationId FROM deliveries WHERE campaignId = ? ORDER BY notificationId", arguments: [campaign.id])
        }
        #expect(pushIDs == rows.map(\.id))
        // The sequence moved past them: the next notification comes after.
        let next = try await notifications.create(for: names[1], draft: NotificationDraft(), defaultImage: "logo.png").notification.id
        #expect(next > rows.last!.id)
    }

    @Test("a tag campaign reaches only matching devices; recipients are their owners")
    func campaignTags() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(30)
        try await f.registerDevices(names) { i in i % 3 == 0 ? ["sports", "lang:en"] : (i % 3 == 1 ? ["sports"] : ["news"]) }
        // A second device of user00001, without tags: not reached by a tag campaign.
        let registrations = RegistrationStore(database: f.database)
        let r = try await registrations.create(for: names[0])
        _ = try await registrations.update(id: r.id, for: names[0], with: DeviceRegistration(platform: "apns", handle: String(repeating: "ab", count: 32), tags: []))
        let store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        let c = try await store.create(CampaignDraft(audience: .tags(try TagExpression("sports && !lang:en")), content: NotificationDraft(mode: .silent)), by: "a")
        let done = try await store.queue(c.id, addressing: .perDevice)
        #expect(done.recipients == 10 && done.devices == 10)
        let all = try await store.create(CampaignDraft(audience: .tags(try TagExpression("username:\(names[0])")), content: NotificationDraft()), by: "a")
        #expect(try await store.queue(all.id, addressing: .perDevice).devices == 2)
        // Through Notification Hubs a tag campaign still addresses devices (their installations), not users.
        let hub = try await store.create(CampaignDraft(audience: .tags(try TagExpression("news")), content: NotificationDraft()), by: "a")
        #expect(try await store.queue(hub.id, addressing: .perUserTag).devices == 10)
        let targets = try await DeliveryStore(database: f.database).list(campaign: hub.id)
        #expect(targets.count == 10 && targets.allSatisfy { $0.registrationId != nil })
        let everyone = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "a")
        _ = try await store.queue(everyone.id, addressing: .perUserTag)
        let tagTargets = try await DeliveryStore(database: f.database).list(campaign: everyone.id)
        #expect(tagTargets.count == 30 && tagTargets.allSatisfy { $0.target.hasPrefix("username:") && $0.registrationId == nil })
    }

    @Test("a user list: unknown names are refused up front (400) listing them; duplicates count once")
    func campaignUsers() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(5)
        let store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        await #expect { try await store.create(CampaignDraft(audience: try .listing([names[0], "ghost", "nobody"]), content: NotificationDraft()), by: "a") }
            throws: { ($0 as? CoreError)?.kind == .unprocessable && ($0 as? CoreError)?.message.contains("ghost, nobody") == true }
        #expect(try await f.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM campaigns") } == 0)
        let c = try await store.create(CampaignDraft(audience: try .listing([names[1], names[3], names[1]]), content: NotificationDraft()), by: "a")
        #expect(try await store.queue(c.id, addressing: .perDevice).recipients == 2)
        await #expect(throws: CoreError.self) { try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(payload: "missing.png")), by: "a") }
        #expect(throws: CoreError.self) { try Audience.listing([]) }
        #expect(throws: CoreError.self) { try Audience(json: ["all": true, "users": ["x"]]) }
    }

    @Test("a campaign left half-queued by a process that died is finished by the next one, nobody queued twice")
    func campaignResume() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(25)
        try await f.registerDevices(names)
        var store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        store.batchSize = 10
        let c = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "a")
        let partial = try await store.queue(c.id, addressing: .perDevice, maxBatches: 1)
        #expect(!partial.queued && partial.recipients == 10)
        // Our own unfinished campaign is not someone else's to resume.
        #expect(try await store.resumeUnfinished(addressing: .perDevice).isEmpty)
        // Pretend its process died: another holder's mark, and its lease lapsed (no batch renews it).
        try await f.database.write { db in try db.execute(sql: "UPDATE campaigns SET queuedBy = 4194305, leaseUntil = 0 WHERE id = ?", arguments: [c.id]) }
        #expect(try await store.resumeUnfinished(addressing: .perDevice) == [c.id])
        let progress = try #require(try await store.progress(c.id))
        #expect(progress.campaign.queued && progress.campaign.recipients == 25 && progress.pending == 25)
        let recipients = try await f.database.read { db in
            try String.fetchAll(db, sql: "SELECT recipient FROM notifications WHERE campaignId = ?", arguments: [c.id])
        }
        #expect(recipients.sorted() == names)
    }

    @Test("a stopping node ends only its own lease: a campaign another node has taken over keeps that node's lease")
    func leaseLapseOwnOnly() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        try await f.registerDevices(try await f.importUsers(3))
        var store = CampaignStore(database: f.database, links: f.links, defaultImage: "logo.png")
        store.batchSize = 1
        let c = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "a")
        _ = try await store.queue(c.id, addressing: .perDevice, maxBatches: 1)
        func lease() async throws -> Double? {
            try await f.database.read { db in try Double.fetchOne(db, sql: "SELECT leaseUntil FROM campaigns WHERE id = ?", arguments: [c.id]) }
        }
        // Another node took it over (this one's lease had lapsed) and holds it now.
        let theirs = Date().timeIntervalSince1970 + 100
        try await f.database.write { db in try db.execute(sql: "UPDATE campaigns SET queuedBy = 4194305, leaseUntil = ? WHERE id = ?", arguments: [theirs, c.id]) }
        try await store.letLeaseLapse(c.id)
        #expect(try await lease() == theirs)
        #expect(try await store.resumeUnfinished(addressing: .perDevice).isEmpty)
        // Its own lease ends at once: a campaign this process resumed (the other node died) ...
        try await f.database.write { db in try db.execute(sql: "UPDATE campaigns SET leaseUntil = 0 WHERE id = ?", arguments: [c.id]) }
        #expect(try await store.resumeUnfinished(addressing: .perDevice, handOff: { _ in }) == [c.id])
        #expect(try await lease() ?? 0 > Date().timeIntervalSince1970)
        try await store.letLeaseLapse(c.id)
        #expect(try await lease() == 0)
        // ... and one it made.
        let made = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft()), by: "a")
        try await store.letLeaseLapse(made.id)
        #expect(try await f.database.read { db in try Double.fetchOne(db, sql: "SELECT leaseUntil FROM campaigns WHERE id = ?", arguments: [made.id]) } == 0)
    }

    @Test("a removed user's inbox and pending pushes go with them: a new account of the same name starts empty")
    func recreatedUser() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        try await f.users.add(name: "alice", password: "pw")
        try await f.registerDevices(["alice"])
        let store = NotificationStore(database: f.database)
        let made = try await store.create(for: "alice", draft: NotificationDraft(message: "private"), defaultImage: "logo.png")
        try await f.users.remove(name: "alice")
        try await f.users.add(name: "alice", password: "new")
        #expect(try await store.list(for: "alice").isEmpty)
        #expect(try await store.find(id: made.notification.id, for: "alice") == nil)
        #expect(try await DeliveryStore(database: f.database).list(notification: made.notification.id).isEmpty)
        let refs = try await f.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM media_refs WHERE owner LIKE 'notification:%'") }
        #expect(refs == 0)
    }
}

/// A thread-safe counter for callbacks.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
