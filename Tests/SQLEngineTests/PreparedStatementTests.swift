import Foundation
import RichPushTestSupport
import SQLEngine
import Testing

/// PostgreSQL's prepared statements under `fetchAll(cached: true)`: parsed once per connection,
/// and planned once when the plan does not depend on the arguments.
@Suite("Queries run often are prepared once per PostgreSQL connection", .enabled(if: Postgres.available, "PostgreSQL is not installed"))
struct PreparedStatementTests {
    private static let migration = SQLMigration("prepared-v1", sqlite: "CREATE TABLE t (id INTEGER PRIMARY KEY)", postgres: """
        CREATE TABLE t (id BIGINT PRIMARY KEY, r DOUBLE PRECISION NOT NULL, s TEXT NOT NULL, b BYTEA, n BIGINT);
        INSERT INTO t VALUES (1, 0.5, 'a', '\\x00ff', NULL), (2, 1.5, 'a', NULL, 7), (3, 2.5, 'b', '\\x01', 8), (4, 3.0, 'a', '', NULL);
        """)

    /// A database of its own, through one connection (so every transaction sees the statements the last one prepared).
    private func database() async throws -> SQLDatabase {
        try SQLDatabase.openPostgres(url: try await Postgres.database() + "&pool=1", migrations: [Self.migration])
    }

    /// The statements prepared on the connection the transaction runs on, as PostgreSQL lists them.
    private static func prepared(_ db: SQLConnection, like pattern: String) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT statement FROM pg_prepared_statements WHERE statement LIKE ? ORDER BY prepare_time", arguments: [pattern])
    }

    @Test("a cached query answers as the unnamed one does, for a real, an integer against a real column, text, bytes and NULL; it is prepared once with its arguments' types, and the same text with other types is another statement")
    func sameAnswers() async throws {
        let database = try await database()
        defer { database.shutdown() }
        let sql = "SELECT id, r, s, b, n FROM t WHERE r <= ? AND s = ? ORDER BY id"
        let cases: [SQLArguments] = [[2.5, "a"], [Int64(3), "a"], [0.1, "a"], [9.0, "b"]]
        try await database.write { db in
            for arguments in cases {
                let unnamed = try db.fetchAll(sql: sql, arguments: arguments).map(\.values)
                for _ in 0..<3 {
                    let cached = try db.fetchAll(sql: sql, arguments: arguments, cached: true)
                    #expect(cached.map(\.values) == unnamed, "\(arguments.values)")
                }
            }
            #expect(try db.fetchAll(sql: sql, arguments: [2.5, "a"], cached: true).map { $0["id"] as Int64 } == [1, 2])
            #expect(try db.fetchAll(sql: sql, arguments: [Int64(3), "a"], cached: true).map { $0["id"] as Int64 } == [1, 2, 4])
            // Four calls each, two statements: one per types (the real, the integer).
            #expect(try Self.prepared(db, like: "%FROM t WHERE r <=%") == [
                "SELECT id, r, s, b, n FROM t WHERE r <= $1::float8 AND s = $2::text ORDER BY id",
                "SELECT id, r, s, b, n FROM t WHERE r <= $1::int8 AND s = $2::text ORDER BY id",
            ])
            // Bytes (empty ones too) and NULL, whose type PostgreSQL infers.
            let bytes = "SELECT id FROM t WHERE b = ? ORDER BY id"
            #expect(try db.fetchAll(sql: bytes, arguments: [Data([0, 255])], cached: true).map { $0["id"] as Int64 } == [1])
            #expect(try db.fetchAll(sql: bytes, arguments: [Data()], cached: true).map { $0["id"] as Int64 } == [4])
            let null = "SELECT id FROM t WHERE n IS NOT DISTINCT FROM ? ORDER BY id"
            #expect(try db.fetchAll(sql: null, arguments: [SQLValue.null], cached: true).map { $0["id"] as Int64 } == [1, 4])
            #expect(try db.fetchAll(sql: null, arguments: [Int64(8)], cached: true).map { $0["id"] as Int64 } == [3])
            #expect(try Self.prepared(db, like: "%IS NOT DISTINCT FROM%") == [
                "SELECT id FROM t WHERE n IS NOT DISTINCT FROM $1 ORDER BY id", "SELECT id FROM t WHERE n IS NOT DISTINCT FROM $1::int8 ORDER BY id",
            ])
            // A question mark in a string is not a placeholder.
            #expect(try db.fetchAll(sql: "SELECT '?' AS q, id FROM t WHERE id = ?", arguments: [Int64(2)], cached: true).map { $0["q"] as String } == ["?"])
            // Not cached: not prepared.
            _ = try db.fetchAll(sql: "SELECT id FROM t WHERE s = ?", arguments: ["uncached"])
            #expect(try Self.prepared(db, like: "%uncached%").isEmpty && Self.prepared(db, like: "SELECT id FROM t WHERE s = %").isEmpty)
        }
    }

    @Test("every type a column can hold reads as the same value through a cached query as through the unnamed one: integers of each width with their sign, reals, text of each kind, bytes, booleans, numerics, a uuid, jsonb and NULL")
    func everyType() async throws {
        let database = try await database()
        defer { database.shutdown() }
        let sql = """
            SELECT -2::int2 AS a, -70000::int4 AS b, -5000000000::int8 AS c, 9223372036854775807::int8 AS d, -1.25::float8 AS e,
                   0.5::float4 AS f, 'é?'::text AS g, 'v'::varchar(3) AS h, 'n'::name AS i, 'x'::char(2) AS j, '\\x00ff'::bytea AS k,
                   ''::bytea AS l, NULL::int4 AS m, NULL::text AS n, true AS o, false AS p, 12.5::numeric AS q, 7::numeric AS r,
                   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS s, '{"a":1}'::jsonb AS t, ?::int8 AS u
            """
        let expected: [SQLValue] = [
            .integer(-2), .integer(-70000), .integer(-5_000_000_000), .integer(.max), .real(-1.25),
            .real(0.5), .text("é?"), .text("v"), .text("n"), .text("x "), .blob(Data([0, 255])),
            .blob(Data()), .null, .null, .integer(1), .integer(0), .real(12.5), .integer(7),
            .text("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"), .text(#"{"a": 1}"#), .integer(-1),
        ]
        try await database.write { db in
            #expect(try db.fetchAll(sql: sql, arguments: [Int64(-1)]).map(\.values) == [expected])
            for _ in 0..<2 {
                #expect(try db.fetchAll(sql: sql, arguments: [Int64(-1)], cached: true).map(\.values) == [expected])
            }
            let rows = try db.fetchAll(sql: "SELECT id, r, s, b, n FROM t ORDER BY id", arguments: [])
            #expect(rows.map(\.values) == [
                [.integer(1), .real(0.5), .text("a"), .blob(Data([0, 255])), .null], [.integer(2), .real(1.5), .text("a"), .null, .integer(7)],
                [.integer(3), .real(2.5), .text("b"), .blob(Data([1])), .integer(8)], [.integer(4), .real(3.0), .text("a"), .blob(Data()), .null],
            ])
        }
    }

    @Test("a column added under a prepared statement (another node's migration): the next call is prepared anew and reads the new column, and its transaction is not refused")
    func columnAdded() async throws {
        let database = try await database()
        defer { database.shutdown() }
        let sql = "SELECT * FROM t WHERE id = ?"
        let before = try await database.write { db in try db.fetchAll(sql: sql, arguments: [Int64(3)], cached: true) }
        #expect(before.first?.values.count == 5)
        try await database.write { db in try db.execute(sql: "ALTER TABLE t ADD COLUMN extra TEXT NOT NULL DEFAULT 'added'") }
        let after = try await database.write { db -> ([SQLRow], [String]) in
            (try db.fetchAll(sql: sql, arguments: [Int64(3)], cached: true), try Self.prepared(db, like: "SELECT * FROM t%"))
        }
        #expect(after.0.first?.values.count == 6)
        #expect(after.0.first.map { $0["extra"] as String } == "added")
        // The stale statement stays on the server, unused: the new one is prepared beside it.
        #expect(after.1.count == 2, "\(after.1)")
    }

    @Test("past 128 statements on one connection, a cached query runs unnamed, with the same answer")
    func bounded() async throws {
        let database = try await database()
        defer { database.shutdown() }
        try await database.write { db in
            for index in 0..<140 {
                let rows = try db.fetchAll(sql: "SELECT id, \(index) AS k FROM t WHERE id = ?", arguments: [Int64(index % 4 + 1)], cached: true)
                #expect(rows.map { [$0["id"] as Int64, $0["k"] as Int64] } == [[Int64(index % 4 + 1), Int64(index)]])
            }
            #expect(try Self.prepared(db, like: "SELECT id, % AS k FROM t WHERE id = %").count == 128)
        }
    }
}
