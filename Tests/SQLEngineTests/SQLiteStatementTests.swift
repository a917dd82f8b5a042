import Foundation
import RichPushTestSupport
import SQLEngine
import Testing

/// SQLEngine's statements on SQLite, bound from `SQLValue`s and read column by column
/// (`SQLiteStatements.swift`), against a real SQLite file.
@Suite("SQLite statements bound and read without GRDB's argument and row types")
struct SQLiteStatementTests {
    private func database() throws -> (SQLDatabase, URL) {
        let dir = try Fixtures.tempDirectory()
        let migration = SQLMigration("t-v1", sqlite: """
            CREATE TABLE t (id INTEGER PRIMARY KEY, key TEXT UNIQUE, n INTEGER, r REAL, s TEXT, b BLOB);
            """)
        return (try SQLDatabase.openSQLite(path: dir.appendingPathComponent("t.sqlite").path, migrations: [migration]), dir)
    }

    @Test("commits are synced as they are made: the writer and every reader run with synchronous = FULL (GRDB's pool sets NORMAL on its writer)")
    func durableCommits() async throws {
        let (db, dir) = try database()
        defer { try? FileManager.default.removeItem(at: dir) }
        // 2 is FULL (1 NORMAL): in WAL mode, FULL syncs the log at every commit.
        #expect(try await db.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") } == 2)
        #expect(try await db.read { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") } == 2)
    }

    @Test("every kind of value round-trips, NULL and empty ones included, through a cached statement run many times and a RETURNING; more than 20 arguments at once")
    func roundTrips() async throws {
        let (db, dir) = try database()
        defer { try? FileManager.default.removeItem(at: dir) }
        let rows: [[SQLValue]] = [
            [.text("a"), .integer(Int64.min), .real(-0.5), .text("é 🚀 \"x\""), .blob(Data([0, 1, 255]))],
            [.text("b"), .integer(Int64.max), .real(1e300), .text(""), .blob(Data())],
            [.text("c"), .null, .null, .null, .null],
        ]
        let returned = try await db.write { db -> [SQLRow] in
            var returned: [SQLRow] = []
            for row in rows {
                returned += try db.fetchAll(sql: "INSERT INTO t (key, n, r, s, b) VALUES (?, ?, ?, ?, ?) RETURNING id, key", arguments: SQLArguments(values: row),
                                            cached: true)
            }
            // 30 arguments in one statement.
            try db.execute(sql: "INSERT INTO t (key, n) VALUES " + Array(repeating: "(?, ?)", count: 15).joined(separator: ", "),
                           arguments: SQLArguments(values: (0..<15).flatMap { [SQLValue.text("m\($0)"), .integer(Int64($0))] }))
            return returned
        }
        #expect(returned.map { $0["key"] as String } == ["a", "b", "c"])
        let read = try await db.read { db in try db.fetchAll(sql: "SELECT key, n, r, s, b FROM t WHERE key IN (?, ?, ?) ORDER BY key",
                                                              arguments: ["a", "b", "c"], cached: true) }
        // An empty string and an empty blob stay empty, not NULL. (Text stops at a NUL character, as
        // GRDB reads it with `String(cString:)`, before this change too.)
        #expect(read.map(\.values) == rows, "\(read.map(\.values))")
        let many = try await db.read { db in try Int64.fetchAll(db, sql: "SELECT n FROM t WHERE key LIKE 'm%' ORDER BY n") }
        #expect(many == Array(0..<15))
    }

    @Test("the wrong number of arguments is an error, not NULLs; a cached statement that failed (a UNIQUE violation) is used again at once without harm")
    func failures() async throws {
        let (db, dir) = try database()
        defer { try? FileManager.default.removeItem(at: dir) }
        await #expect(throws: (any Error).self) {
            try await db.write { db in try db.execute(sql: "INSERT INTO t (key, n) VALUES (?, ?)", arguments: ["x"], cached: true) }
        }
        await #expect(throws: (any Error).self) {
            try await db.write { db in try db.execute(sql: "INSERT INTO t (key, n) VALUES (?, ?)", arguments: ["x", 1, 2], cached: true) }
        }
        let insert = "INSERT INTO t (key, n) VALUES (?, ?)"
        try await db.write { db in try db.execute(sql: insert, arguments: ["k", 1], cached: true) }
        for attempt in 0..<3 {
            await #expect(throws: (any Error).self, "attempt \(attempt)") {
                try await db.write { db in try db.execute(sql: insert, arguments: ["k", 2], cached: true) }
            }
            try await db.write { db in try db.execute(sql: insert, arguments: SQLArguments(values: [.text("k\(attempt)"), .integer(Int64(attempt))]), cached: true) }
        }
        let keys = try await db.read { db in try String.fetchAll(db, sql: "SELECT key FROM t ORDER BY key") }
        #expect(keys == ["k", "k0", "k1", "k2"])
    }

    @Test("columns are found by name in either case of ASCII letters (PostgreSQL answers them lowercased), the first of two alike; a name that differs in length or a letter is not found")
    func columnNames() async throws {
        let (db, dir) = try database()
        defer { try? FileManager.default.removeItem(at: dir) }
        let row = try #require(try await db.read { db in
            try db.fetchOne(sql: "SELECT 1 AS notificationId, 2 AS NOTIFICATIONID, 3 AS id, 4 AS \"naïve\", 5 AS \"a_b\"")
        })
        #expect(row["notificationId"] as Int == 1 && row["notificationid"] as Int == 1 && row["NotificationID"] as Int == 1)
        #expect(row["id"] as Int == 3 && row["ID"] as Int == 3 && row["naïve"] as Int == 4 && row["A_B"] as Int == 5)
        #expect(row.columnIndex("notificationI") == nil && row.columnIndex("notificationIdx") == nil && row.columnIndex("notificationIe") == nil)
        #expect(row.columnIndex("a-b") == nil && row.columnIndex("") == nil)
    }
}
