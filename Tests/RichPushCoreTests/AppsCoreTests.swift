import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: apps and API keys (SPEC §18)")
struct AppsCoreTests {
    @Test("a database made before apps gets the default app: its registrations and pending pushes belong to default")
    func migration() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let directory = DataDirectory(path: dir.path)
        // A database made before apps has the migrations up to apps' (later ones may build on it:
        // core-v17 indexes registrations by app).
        let before = Array(CoreDatabase.migrations.prefix { $0.identifier != "core-v8-apps" })
        #expect(before.count < CoreDatabase.migrations.count && CoreDatabase.migrations[before.count].identifier == "core-v8-apps")
        do {
            let old = try StoreDatabase.open(directory, migrations: before)
            try await old.write { db in
                try db.execute(sql: "INSERT INTO users (name, passwordHash, createdAt) VALUES ('alice', 'x', 0)")
                try db.execute(sql: "INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES ('r1', 'alice', 'apns', 'ab', '[]', 0, 0)")
            }
            #expect(try await old.read { db in try SQLRow.fetchAll(db, sql: "SELECT * FROM registrations").first?.columnIndex("app") } == nil)
        }
        let store = DataStore(directory: directory, database: try CoreDatabase.open(directory), limits: .default)
        #expect(try await store.registrations.list(for: "alice").map(\.app) == [AppName.default])
        #expect(try await store.apiKeys.list().isEmpty)
    }

    @Test("keys: rpk_ and 43 base64url characters, only the SHA-256 stored, names unique, scopes covered by admin, removal moves the sessions epoch")
    func keys() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let directory = DataDirectory(path: dir.path)
        let store = DataStore(directory: directory, database: try CoreDatabase.open(directory), limits: .default)
        let key = try await store.apiKeys.add(name: "backend", scope: .send, app: "shop-ios")
        #expect(key.hasPrefix("rpk_") && key.count == 47 && key.dropFirst(4).allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(try await store.apiKeys.add(name: "other", scope: .read, app: nil) != key)
        await #expect(throws: CoreError.self) { try await store.apiKeys.add(name: "backend", scope: .read, app: nil) }
        await #expect(throws: CoreError.self) { try await store.apiKeys.add(name: "bad name", scope: .read, app: nil) }
        await #expect(throws: CoreError.self) { try await store.apiKeys.add(name: "x", scope: .read, app: "Shop!") }
        // The table holds the hash, never the key.
        let stored = try await store.database.read { db in try SQLRow.fetchAll(db, sql: "SELECT * FROM api_keys") }
        #expect(stored.allSatisfy { row in row.values.allSatisfy { !"\($0)".contains(String(key.dropFirst(4))) } })
        #expect(try await store.apiKeys.find(token: key)?.name == "backend")
        #expect(try await store.apiKeys.find(token: key + "x") == nil)
        #expect(try await store.apiKeys.find(token: "rps_" + key.dropFirst(4)) == nil)
        #expect(APIKeyScope.admin.covers(.send) && APIKeyScope.admin.covers(.read) && !APIKeyScope.send.covers(.read) && !APIKeyScope.read.covers(.send))
        // Last used: recorded in a batch, never moved back.
        let later = Date(timeIntervalSince1970: 2_000_000_000)
        try await store.apiKeys.recordUse(["backend": later])
        try await store.apiKeys.recordUse(["backend": Date(timeIntervalSince1970: 1_000_000_000)])
        #expect(try await store.apiKeys.list().first { $0.name == "backend" }?.lastUsedAt == later)
        let epoch = try await store.users.epochs().sessions
        try await store.apiKeys.remove(name: "backend")
        #expect(try await store.users.epochs().sessions == epoch + 1)
        #expect(try await store.apiKeys.find(token: key) == nil)
        await #expect(throws: CoreError.self) { try await store.apiKeys.remove(name: "backend") }
    }

    @Test("the outbox claims by app and platform: PLATFORM is the default app's (rows from before apps included), APP/PLATFORM another's, APP/* a hub's")
    func claimCondition() {
        #expect(OutboxStore.condition(sends: ["apns"]) == "((d.app IS NULL OR d.app = 'default') AND (d.platform IS NULL OR d.platform = 'apns'))")
        #expect(OutboxStore.condition(sends: ["shop-ios/apns", "shop-android/fcm"])
            == "(d.app = 'shop-android' AND d.platform = 'fcm') OR (d.app = 'shop-ios' AND (d.platform IS NULL OR d.platform = 'apns'))")
        #expect(OutboxStore.condition(sends: ["news/*"]) == "(d.app = 'news' AND TRUE)")
        // Nothing that is not an app name or a platform reaches the SQL.
        #expect(OutboxStore.condition(sends: ["x'; DROP TABLE deliveries; --/apns", "a/b/c", "shop/fcm'"]) == "FALSE")
        #expect(OutboxStore.condition(sends: []) == "FALSE")
    }

    @Test("addressing: devices by device, a hub app's by one user tag each, the default hub's tag even without devices here")
    func addressing() {
        let devices = [PushTarget(registration: "r1", target: "t1", platform: "apns", app: "shop"),
                       PushTarget(registration: "r2", target: "t2", platform: "apns", app: "news"),
                       PushTarget(registration: "r3", target: "t3", platform: "apns", app: "news")]
        #expect(DeliveryAddressing.perDevice.targets(recipient: "alice", devices: devices, app: nil).map(\.target) == ["t1", "t2", "t3"])
        let hubNews = DeliveryAddressing(tagApps: ["news"])
        let targets = hubNews.targets(recipient: "alice", devices: devices, app: nil)
        #expect(targets.map(\.target) == ["t1", "username:alice"] && targets.map(\.app) == ["shop", "news"])
        #expect(hubNews.targets(recipient: "alice", devices: devices, app: nil, byDevice: true).count == 3)
        #expect(DeliveryAddressing.perUserTag.targets(recipient: "bob", devices: [], app: nil, alwaysTag: true).map(\.target) == ["username:bob"])
        #expect(DeliveryAddressing.perUserTag.targets(recipient: "bob", devices: [], app: "shop", alwaysTag: true).isEmpty)
    }
}

@Suite("Core: the webhook queue (SPEC §20)")
struct WebhookQueueCoreTests {
    @Test("a webhook starts with what happens after it is added; a batch is leased to one node; events still failing after 24 h are recorded as dropped; only https to a host name, unless private receivers are allowed")
    func queue() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let directory = DataDirectory(path: dir.path)
        let store = DataStore(directory: directory, database: try CoreDatabase.open(directory), limits: .default)
        let old = Date().timeIntervalSince1970 - 25 * 3600
        // Before any webhook: nothing is queued.
        try await store.database.write { db in try Insight.queueEvents(db, [Happening(type: .sent, campaign: 1)], now: old) }
        #expect(try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM events") } == 0)
        let id = try await store.webhooks.add(url: "https://hooks.example.com/richpush", events: [.sent, .failed], secret: "0123456789abcdef")
        for url in ["http://example.com/x", "ftp://127.0.0.1/x", "not a url", "http://127.0.0.1:9/x", "https://127.0.0.1/x", "https://[::1]/x",
                    "https://10.0.0.1/x", "https://2130706433/x", "https://user@hooks.example.com/x"] {
            await #expect(throws: CoreError.self) { try await store.webhooks.add(url: url, events: [], secret: "0123456789abcdef") }
        }
        // A loopback receiver is refused naming the flag that allows it, and taken with it.
        do {
            try WebhookStore.validate(url: "http://127.0.0.1:9/x")
            Issue.record("a loopback http webhook was accepted")
        } catch let error as CoreError {
            #expect(error.message.contains("--allow-private-webhooks"), "\(error.message)")
        }
        await #expect(throws: CoreError.self) { try await store.webhooks.add(url: "ftp://127.0.0.1/x", events: [], secret: "0123456789abcdef", allowPrivate: true) }
        _ = try await store.webhooks.add(url: "http://127.0.0.1:9/x", events: [.opened], secret: "0123456789abcdef", allowPrivate: true)
        await #expect(throws: CoreError.self) { try await store.webhooks.add(url: "https://a.example", events: [], secret: "short") }
        try await store.database.write { db in
            try Insight.queueEvents(db, [Happening(type: .sent, campaign: 1, notification: 10, user: "alice", platform: "apns"),
                                         Happening(type: .displayed, campaign: 1)], now: old)
            // Events carry the database's time of their write; these happened a day and more ago.
            try db.execute(sql: "UPDATE events SET at = ?", arguments: [old])
        }
        // Only the types some webhook wants are queued: displayed is nobody's.
        #expect(try await store.database.read { db in try String.fetchAll(db, sql: "SELECT type FROM events") } == ["sent"])
        let batch = try #require(try await store.webhooks.claim(holder: 1))
        #expect(batch.webhook.id == id && batch.events.map(\.type) == [.sent] && batch.events.first?.user == "alice")
        #expect(try await store.webhooks.claim(holder: 2) == nil, "leased to the first node")
        try await store.webhooks.failed(id, attempts: 0, error: "HTTP 503", backoffBase: 0)
        let state = try #require(try await store.webhooks.list().first { $0.id == id })
        #expect(state.dropped == 1 && state.delivered == 0 && state.lastError == "HTTP 503")
        #expect(try await store.webhooks.claim(holder: 1) == nil, "the dropped event is not sent again")
        // The other webhook wants none of it: its place moved past it too, and the queue empties.
        try await store.webhooks.compact()
        #expect(try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM events") } == 0)
        store.close()
    }

    @Test("a webhook just delivered to waits behind the others: under steady traffic, every webhook with events is served in turn, not the lowest id again and again")
    func servedInTurn() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let directory = DataDirectory(path: dir.path)
        let store = DataStore(directory: directory, database: try CoreDatabase.open(directory), limits: .default)
        defer { store.close() }
        var hooks: [Int64] = []
        for name in ["a", "b", "c"] {
            hooks.append(try await store.webhooks.add(url: "https://\(name).hooks.example.com/richpush", events: [.sent], secret: "0123456789abcdef"))
        }
        /// One more settled event (older than `WebhookStore.settle`), as steady traffic makes them.
        func event() async throws {
            try await store.database.write { db in
                try Insight.queueEvents(db, [Happening(type: .sent, campaign: 1)], now: Date().timeIntervalSince1970)
                try db.execute(sql: "UPDATE events SET at = ?", arguments: [Date().timeIntervalSince1970 - 10])
            }
        }
        var served: [Int64] = []
        for _ in 0..<6 {
            try await event()
            let batch = try #require(try await store.webhooks.claim(holder: 1))
            served.append(batch.webhook.id)
            try await store.webhooks.delivered(batch.webhook.id, through: batch.events.last!.id, count: batch.events.count)
            // The database's clock moves on between deliveries, as it does between real ones.
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(served == hooks + hooks, "\(served)")
    }
}
