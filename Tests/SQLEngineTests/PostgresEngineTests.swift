import Foundation
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Synchronization
import Testing

@Suite("The PostgreSQL engine under the stores", .enabled(if: Postgres.available, "PostgreSQL is not installed"))
struct PostgresEngineTests {
    /// A fresh store on a database of its own, and that database's name.
    func store() async throws -> (DataStore, String, URL) {
        let url = try await Postgres.database()
        let dir = try Fixtures.tempDirectory()
        let data = try await DataStore.open(path: dir.path, database: url)
        return (data, String(url.split(separator: "/").last!.split(separator: "?").first!), dir)
    }

    @Test("migrations run once, whoever starts first: eight stores opening one new database at once make one schema")
    func migrationsOnce() async throws {
        let url = try await Postgres.database()
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let stores = try await withThrowingTaskGroup(of: DataStore.self) { group in
            for index in 0..<8 { group.addTask { try await DataStore.open(path: dir.appendingPathComponent("\(index)").path, database: url) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        defer { stores.forEach { $0.close() } }
        let applied = try await stores[0].database.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM richpush_migrations ORDER BY identifier") }
        #expect(applied == CoreDatabase.migrations.map(\.identifier).sorted())
        try await stores[3].users(cost: 4).add(name: "alice", password: "pw")
        #expect(try await stores[6].users.list().map(\.name) == ["alice"])
    }

    @Test("writes that race (serializable transactions, retried when they lose) lose nothing: 40 registrations of one user at once, each updated")
    func serializableRetries() async throws {
        let (data, _, dir) = try await store()
        defer { data.close(); try? FileManager.default.removeItem(at: dir) }
        try await data.users(cost: 4).add(name: "alice", password: "pw")
        let registrations = data.registrations
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    let registration = try await registrations.create(for: "alice")
                    _ = try await registrations.update(id: registration.id, for: "alice", with: DeviceRegistration(
                        platform: "apns", handle: String(format: "%064x", index), tags: ["n\(index)"]))
                }
            }
            try await group.waitForAll()
        }
        let made = try await registrations.list(for: "alice")
        #expect(made.count == 40 && Set(made.compactMap(\.handle)).count == 40)
    }

    @Test("connections the server drops (a restart, a failover) are replaced: the next transaction works")
    func droppedConnections() async throws {
        let (data, name, dir) = try await store()
        defer { data.close(); try? FileManager.default.removeItem(at: dir) }
        try await data.users(cost: 4).add(name: "alice", password: "pw")
        let server = try await Postgres.running()
        let killed = try await onOwnThread {
            try server.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '\(name)' AND pid <> pg_backend_pid()")
        }
        #expect(killed.status == 0 && (Int(killed.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0, "\(killed.output)")
        #expect(try await data.users.list().map(\.name) == ["alice"])
        try await data.users(cost: 4).add(name: "bob", password: "pw")
        #expect(try await data.users.list().map(\.name) == ["alice", "bob"])
    }

    @Test("a notification's image is checked per statement as its key did: a missing one refused (23503) on insert, in a batch and on change; an image in use cannot be deleted, renamed or truncated")
    func payloadChecked() async throws {
        let (data, _, dir) = try await store()
        defer { data.close(); try? FileManager.default.removeItem(at: dir) }
        let image = try await data.media.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8), name: "logo.png").item.id.hex
        let created = try await data.notifications(links: nil).create(for: "alice", draft: NotificationDraft(), defaultImage: "logo.png")
        let missing = String(repeating: "0", count: 64)
        func refused(_ sql: String, _ arguments: SQLArguments) async -> SQLEngineError? {
            await #expect(throws: SQLEngineError.self) { try await data.database.write { db in try db.execute(sql: sql, arguments: arguments) } }
        }
        let insert = "INSERT INTO notifications (recipient, message, richType, payload, push, createdAt) VALUES "
        // One row; and a batch where one row of three names a missing image.
        var error = await refused(insert + "('bob', 'm', 'img', ?, '', 0)", [missing])
        #expect(error?.sqlState == "23503" && error?.message.contains(missing) == true, "\(String(describing: error))")
        error = await refused(insert + "('bob', 'm', 'img', ?, '', 0), ('bob', 'm', 'img', ?, '', 0), ('bob', 'm', 'img', ?, '', 0)",
                              [image, missing, image])
        #expect(error?.sqlState == "23503")
        error = await refused("UPDATE notifications SET payload = ? WHERE id = ?", [missing, created.notification.id])
        #expect(error?.sqlState == "23503")
        // The media store refuses first (its references); the database refuses what they miss.
        try await data.database.write { db in try db.execute(sql: "DELETE FROM media_refs") }
        error = await refused("DELETE FROM media WHERE sha256 = ?", [image])
        #expect(error?.sqlState == "23503" && error?.message.contains("notifications") == true, "\(String(describing: error))")
        error = await refused("UPDATE media SET sha256 = ? WHERE sha256 = ?", [missing, image])
        #expect(error?.sqlState == "23503")
        error = await refused("TRUNCATE media CASCADE", [])
        #expect(error?.sqlState == "23503")
        // Nothing of the refused statements is left, and a good batch goes in.
        try await data.database.write { db in
            try db.execute(sql: insert + "('bob', 'm', 'img', ?, '', 0), ('carol', 'm', 'img', ?, '', 0)", arguments: [image, image])
        }
        let rows = try await data.database.read { db in try String.fetchAll(db, sql: "SELECT payload FROM notifications ORDER BY id") }
        #expect(rows == [image, image, image])
    }

    @Test("an image deleted while a notification naming it is inserted (either first; the inserter serializable, as every path inserts, or read committed): exactly the first wins, and no notification is left naming a missing image",
          arguments: [true, false], [SQLIsolation.serializable, .readCommitted])
    func payloadRace(insertFirst: Bool, inserter: SQLIsolation) async throws {
        let (data, _, dir) = try await store()
        defer { data.close(); try? FileManager.default.removeItem(at: dir) }
        let image = try await data.media.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8), name: "logo.png").item.id.hex
        // Past the media store's own refusal (its references): the database's check alone.
        try await data.database.write { db in try db.execute(sql: "DELETE FROM media_refs") }
        let database = data.database
        let firstRan = Flag()
        /// Runs `sql` in a transaction held open 300 ms after it ran when it goes first, and once
        /// the first's statement ran when it goes second; false when refused for the image (23503).
        @Sendable func run(_ sql: String, first: Bool, isolation: SQLIsolation) async throws -> Bool {
            if !first {
                let clock = ContinuousClock(), start = clock.now
                while !firstRan.value.withLock({ $0 }) && clock.now - start < .seconds(10) { try await Task.sleep(for: .milliseconds(5)) }
            }
            do {
                try await database.write(isolation: isolation) { db in
                    try db.execute(sql: sql, arguments: [image])
                    if first {
                        firstRan.value.withLock { $0 = true }
                        Thread.sleep(forTimeInterval: 0.3)
                    }
                }
                return true
            } catch let error as SQLEngineError where error.sqlState == "23503" {
                return false
            }
        }
        async let inserted = run("INSERT INTO notifications (recipient, message, richType, payload, push, createdAt) VALUES ('bob', 'm', 'img', ?, '', 0)",
                                 first: insertFirst, isolation: inserter)
        async let deleted = run("DELETE FROM media WHERE sha256 = ?", first: !insertFirst, isolation: .serializable)
        let outcome = (inserted: try await inserted, deleted: try await deleted)
        #expect(outcome.inserted == insertFirst && outcome.deleted == !insertFirst, "\(outcome)")
        let dangling = try await database.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications n WHERE NOT EXISTS (SELECT 1 FROM media m WHERE m.sha256 = n.payload)")
        }
        #expect(dangling == 0)
    }

    @Test("text sorts byte-wise, as on SQLite, whatever the database's locale")
    func byteOrder() async throws {
        let (data, _, dir) = try await store()
        defer { data.close(); try? FileManager.default.removeItem(at: dir) }
        for name in ["b", "B", "a", "_z", "A"] { try await data.users(cost: 4).add(name: name, password: "pw") }
        #expect(try await data.users.list().map(\.name) == ["A", "B", "_z", "a", "b"])
    }
}

/// A flag set on one thread and read on another.
private final class Flag: Sendable {
    let value = Mutex(false)
}
