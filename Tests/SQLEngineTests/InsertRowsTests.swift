import Foundation
import RichPushTestSupport
import SQLEngine
import Testing

/// `SQLConnection.insertRows`: SQLite's multi-row VALUES, PostgreSQL's arrays by column.
@Suite("Rows inserted by column, on both engines")
struct InsertRowsTests {
    enum Engine: String, CaseIterable, CustomTestStringConvertible {
        case sqlite, postgres
        var testDescription: String { rawValue }
    }

    private static let migration = SQLMigration("rows-v1", sqlite: """
        CREATE TABLE rows (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, small INTEGER, r REAL, s TEXT, b BLOB, j TEXT);
        """, postgres: """
        CREATE TABLE rows (id BIGINT PRIMARY KEY, n BIGINT NOT NULL, small INTEGER, r DOUBLE PRECISION, s TEXT, b BYTEA, j JSONB);
        """)

    private func database(_ engine: Engine) async throws -> (SQLDatabase, URL) {
        let dir = try Fixtures.tempDirectory()
        switch engine {
        case .sqlite:
            return (try SQLDatabase.openSQLite(path: dir.appendingPathComponent("t.sqlite").path, migrations: [Self.migration]), dir)
        case .postgres:
            return (try SQLDatabase.openPostgres(url: try await Postgres.database(), migrations: [Self.migration]), dir)
        }
    }

    private static let columns = ["id", "n", "small", "r", "s", "b", "j"]

    @Test("every kind of value, NULL and empty ones, extreme numbers and text that needs quoting in SQL, goes in as it was; 25,000 rows in one call (more than one statement on both)",
          arguments: Engine.allCases.filter { $0 == .sqlite || Postgres.available })
    func roundTrips(_ engine: Engine) async throws {
        let (db, dir) = try await database(engine)
        defer { db.shutdown(); try? FileManager.default.removeItem(at: dir) }
        let first: [[SQLValue]] = [
            [.integer(1), .integer(Int64.min), .integer(Int64(Int32.max)), .real(-0.5), .text("é 🚀 \"x\" ', {}\\ NULL"), .blob(Data([0, 1, 255])),
             .text(#"{"a": [1, "b"]}"#)],
            [.integer(2), .integer(Int64.max), .integer(-1), .real(1e300), .text(""), .blob(Data()), .text("null")],
            [.integer(3), .integer(0), .null, .null, .null, .null, .null],
        ]
        let rows = first + (4...25_000).map { [SQLValue.integer(Int64($0)), .integer(Int64($0) * 3), .null, .real(Double($0) / 4), .text("r\($0)"), .null, .null] }
        let inserted = try await db.write { db in
            try db.insertRows(into: "rows", columns: Self.columns, rows)
            return db.changesCount
        }
        #expect(inserted == rows.count)
        let read = try await db.read { db in
            try db.fetchAll(sql: "SELECT id, n, small, r, s, b, \(engine == .postgres ? "j::text" : "j") AS j FROM rows ORDER BY id")
        }
        #expect(read.count == rows.count)
        // jsonb reads back normalized, as PostgreSQL stores it.
        var expected = rows
        if engine == .postgres { expected[0][6] = .text(#"{"a": [1, "b"]}"#) }
        #expect(read.prefix(3).map(\.values) == Array(expected.prefix(3)), "\(read.prefix(3).map(\.values))")
        #expect(read.map(\.values) == expected)
    }

    @Test("a value the column cannot hold is an error naming the column, and nothing of the call is left (the transaction rolls back)",
          arguments: Engine.allCases.filter { $0 == .postgres && Postgres.available })
    func refusals(_ engine: Engine) async throws {
        let (db, dir) = try await database(engine)
        defer { db.shutdown(); try? FileManager.default.removeItem(at: dir) }
        let rows: [[SQLValue]] = [
            [.integer(1), .integer(1), .null, .null, .null, .null, .null],
            [.integer(2), .text("two"), .null, .null, .null, .null, .null],
        ]
        let error = await #expect(throws: SQLEngineError.self) {
            try await db.write { db in try db.insertRows(into: "rows", columns: Self.columns, rows) }
        }
        #expect(error?.message.contains("column n") == true, "\(String(describing: error))")
        // A NULL for a NOT NULL column: PostgreSQL's own refusal.
        await #expect(throws: SQLEngineError.self) {
            try await db.write { db in try db.insertRows(into: "rows", columns: Self.columns, [[.integer(3), .null, .null, .null, .null, .null, .null]]) }
        }
        await #expect(throws: SQLEngineError.self) {
            try await db.write { db in try db.insertRows(into: "rows", columns: ["id", "nope"], [[.integer(4), .integer(1)]]) }
        }
        #expect(try await db.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM rows") } == 0)
    }
}
