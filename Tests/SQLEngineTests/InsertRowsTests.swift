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
        CREATE TABLE rows (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, small INTEGER, r REAL, s TEXT, b BLOB, j TEXT, c TEXT);
        """, postgres: """
        CREATE TABLE rows (id BIGINT PRIMARY KEY, n BIGINT NOT NULL, small INTEGER, r DOUBLE PRECISION, s TEXT, b BYTEA, j JSONB, c VARCHAR(3));
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

    private static let columns = ["id", "n", "small", "r", "s", "b", "j", "c"]

    @Test("every kind of value, NULL and empty ones, extreme numbers and text that needs quoting in SQL, goes in as it was; 25,000 rows in one call (more than one statement on both)",
          arguments: Engine.allCases.filter { $0 == .sqlite || Postgres.available })
    func roundTrips(_ engine: Engine) async throws {
        let (db, dir) = try await database(engine)
        defer { db.shutdown(); try? FileManager.default.removeItem(at: dir) }
        let first: [[SQLValue]] = [
            [.integer(1), .integer(Int64.min), .integer(Int64(Int32.max)), .real(-0.5), .text("é 🚀 \"x\" ', {}\\ NULL"), .blob(Data([0, 1, 255])),
             .text(#"{"a": [1, "b"]}"#), .text("abc")],
            [.integer(2), .integer(Int64.max), .integer(-1), .real(1e300), .text(""), .blob(Data()), .text("null"), .text("")],
            [.integer(3), .integer(0), .null, .null, .null, .null, .null, .null],
        ]
        let rows = first + (4...25_000).map { [SQLValue.integer(Int64($0)), .integer(Int64($0) * 3), .null, .real(Double($0) / 4), .text("r\($0)"), .null, .null, .null] }
        let inserted = try await db.write { db in
            try db.insertRows(into: "rows", columns: Self.columns, rows)
            return db.changesCount
        }
        #expect(inserted == rows.count)
        let read = try await db.read { db in
            try db.fetchAll(sql: "SELECT id, n, small, r, s, b, \(engine == .postgres ? "j::text" : "j") AS j, c FROM rows ORDER BY id")
        }
        #expect(read.count == rows.count)
        // jsonb reads back normalized, as PostgreSQL stores it.
        var expected = rows
        if engine == .postgres { expected[0][6] = .text(#"{"a": [1, "b"]}"#) }
        #expect(read.prefix(3).map(\.values) == Array(expected.prefix(3)), "\(read.prefix(3).map(\.values))")
        #expect(read.map(\.values) == expected)
    }

    @Test("values are assigned as PostgreSQL would (a real rounded half to even, an integer's digits for text); what a column cannot hold is an error naming the column, PostgreSQL's own refusals stand (a NULL for NOT NULL, a length), and nothing of a refused call is left",
          arguments: Engine.allCases.filter { $0 == .postgres && Postgres.available })
    func conversionsAndRefusals(_ engine: Engine) async throws {
        let (db, dir) = try await database(engine)
        defer { db.shutdown(); try? FileManager.default.removeItem(at: dir) }
        @Sendable func row(_ id: Int64, n: SQLValue = .integer(1), small: SQLValue = .null, s: SQLValue = .null, c: SQLValue = .null) -> [SQLValue] {
            [.integer(id), n, small, .null, s, .null, .null, c]
        }
        func refused(_ rows: [[SQLValue]], columns: [String] = Self.columns) async -> SQLEngineError? {
            await #expect(throws: SQLEngineError.self) { try await db.write { db in try db.insertRows(into: "rows", columns: columns, rows) } }
        }
        try await db.write { db in
            try db.insertRows(into: "rows", columns: Self.columns, [row(1, n: .real(2.5), small: .real(-3.5), s: .integer(42))])
        }
        let read = try await db.read { db in try db.fetchOne(sql: "SELECT n, small, s FROM rows WHERE id = 1") }
        #expect(read?.values == [.integer(2), .integer(-4), .text("42")])
        var error = await refused([row(2), row(3, n: .text("two"))])
        #expect(error?.message.contains("text for column n") == true, "\(String(describing: error))")
        #expect(error?.message.contains("two") == false)
        error = await refused([row(2, s: .real(1.5))])
        #expect(error?.message.contains("a real for column s") == true, "\(String(describing: error))")
        error = await refused([row(2), Array(row(3).prefix(7))])
        #expect(error?.message.contains("a row of 7 values for 8 columns") == true, "\(String(describing: error))")
        error = await refused([row(2, n: .null)])
        #expect(error?.sqlState == "23502", "\(String(describing: error))")
        // varchar(3): the column's length applies, as an INSERT's assignment does (an explicit cast would cut).
        error = await refused([row(2, c: .text("abcd"))])
        #expect(error?.sqlState == "22001", "\(String(describing: error))")
        error = await refused([[.integer(4), .integer(1)]], columns: ["id", "nope"])
        #expect(error?.message.contains("no column nope") == true)
        #expect(try await db.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM rows") } == 1)
    }
}
