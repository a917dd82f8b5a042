import Foundation
import GRDB

/// Which engine runs the SQL.
public enum SQLDialect: String, Sendable {
    /// The embedded store: one SQLite file.
    case sqlite
    /// A PostgreSQL server shared by many nodes.
    case postgres
}

/// A connection inside one `SQLDatabase.read` or `.write`: statements run in that transaction.
///
/// SQL is written once for both engines with `?` placeholders; the few statements that differ
/// look at `dialect`. It is valid only inside the closure it was given to.
public final class SQLConnection {
    /// The engine.
    public let dialect: SQLDialect
    /// Rows changed by the last `execute`.
    public private(set) var changesCount = 0
    /// The time at the transaction's start by the database's clock (`SQLDatabase.now()`), in
    /// seconds since 1970: what every node compares leases and marks on.
    public let now: Double
    private let backend: Backend

    enum Backend {
        case sqlite(GRDB.Database)
        case postgres(PostgresSession)
    }

    init(sqlite db: GRDB.Database) {
        self.dialect = .sqlite
        self.backend = .sqlite(db)
        self.now = Date().timeIntervalSince1970
    }

    init(postgres session: PostgresSession, now: Double) {
        self.dialect = .postgres
        self.backend = .postgres(session)
        self.now = now
    }

    /// Runs one statement; `cached` keeps SQLite's compiled statement for the next call (for
    /// statements run often whose text does not vary).
    public func execute(sql: String, arguments: SQLArguments = [], cached: Bool = false) throws {
        switch backend {
        case .sqlite(let db):
            let statement = cached ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
            try statement.run(arguments.values)
            changesCount = db.changesCount
        case .postgres(let session):
            changesCount = try session.execute(sql, arguments.values)
        }
    }

    /// PostgreSQL only: runs one statement with `parameters` bound to its `?` placeholders in
    /// order, an array (`SQLArray`) as a one-dimensional array of its kind (`?::int8[]`);
    /// `changesCount` is the rows it changed. One statement writes any number of rows' values
    /// (`unnest`, `array_agg`).
    public func execute(sql: String, parameters: [SQLParameter]) throws {
        guard case .postgres(let session) = backend else { throw SQLEngineError("arrays as parameters are PostgreSQL's alone") }
        changesCount = try session.rows(sql, parameters: parameters).changed
    }

    /// PostgreSQL only: `execute(sql:parameters:)` for a statement that returns rows (`RETURNING`).
    public func fetchAll(sql: String, parameters: [SQLParameter]) throws -> [SQLRow] {
        guard case .postgres(let session) = backend else { throw SQLEngineError("arrays as parameters are PostgreSQL's alone") }
        let (rows, changed) = try session.rows(sql, parameters: parameters)
        changesCount = changed
        return rows
    }

    /// Inserts `rows`, each the values of `columns` in order, into `table`; `changesCount` is
    /// the rows inserted. `table` and `columns` are put in the SQL as they are: the caller's own
    /// names, never input. SQLite: one multi-row INSERT per 500 rows, a whole 500's compiled
    /// once and cached. PostgreSQL: an array per column (`unnest`), one statement per 10,000
    /// rows whose text is the same for any number, each value sent as its column's kind.
    public func insertRows(into table: String, columns: [String], _ rows: [[SQLValue]]) throws {
        guard !rows.isEmpty else {
            changesCount = 0
            return
        }
        if let row = rows.first(where: { $0.count != columns.count }) {
            throw SQLEngineError("insert into \(table): a row of \(row.count) values for \(columns.count) columns")
        }
        switch backend {
        case .sqlite(let db):
            let size = 500
            var inserted = 0
            let tuple = "(" + sqlPlaceholders(columns.count) + ")"
            for chunk in rows.sqlBatches(of: size) {
                let sql = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES "
                    + Array(repeating: tuple, count: chunk.count).joined(separator: ", ")
                let statement = chunk.count == size ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
                try statement.run(chunk.flatMap { $0 })
                inserted += db.changesCount
            }
            changesCount = inserted
        case .postgres(let session):
            changesCount = try session.insertRows(into: table, columns: columns, rows)
        }
    }

    /// Tells every process listening on `channel` (`SQLDatabase.listen`) once this transaction
    /// commits. PostgreSQL's NOTIFY; nothing on SQLite, whose readers poll.
    public func notify(_ channel: String) throws {
        if case .postgres(let session) = backend {
            _ = try session.execute("SELECT pg_notify(?, '')", [.text(channel)])
        }
    }

    /// Every row of a query; `cached` keeps SQLite's compiled statement for the next call, and
    /// PostgreSQL's prepared statement on the connection (for statements run often whose text
    /// does not vary).
    public func fetchAll(sql: String, arguments: SQLArguments = [], cached: Bool = false) throws -> [SQLRow] {
        switch backend {
        case .sqlite(let db):
            let statement = cached ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
            let columns = SQLColumns(statement.columnNames)
            return try statement.rows(arguments.values).map { SQLRow(values: $0, columns: columns) }
        case .postgres(let session):
            return try session.query(sql, arguments.values, prepared: cached)
        }
    }

    /// The first row of a query, or nil.
    public func fetchOne(sql: String, arguments: SQLArguments = []) throws -> SQLRow? {
        try fetchAll(sql: sql, arguments: arguments).first
    }

    /// Calls `body` with each row of a query in turn, without holding them all (SQLite); on
    /// PostgreSQL the rows arrive together.
    public func forEach(sql: String, arguments: SQLArguments = [], _ body: (SQLRow) throws -> Void) throws {
        switch backend {
        case .sqlite(let db):
            let statement = try db.makeStatement(sql: sql)
            let columns = SQLColumns(statement.columnNames)
            let cursor = try GRDB.Row.fetchCursor(statement, arguments: StatementArguments(arguments))
            while let row = try cursor.next() {
                try body(SQLRow(values: row.databaseValues.map(\.sqlValue), columns: columns))
            }
        case .postgres(let session):
            for row in try session.query(sql, arguments.values) { try body(row) }
        }
    }
}

extension SQLConnection {
    /// `column` is one of a list of ids given as one argument (`idList(_:)`): the statement's
    /// text is the same for any number of ids, so it is compiled once and cached, where an
    /// `IN (?, ?, …)` list is a new statement for every count (its compiling was 2% of `serve`'s
    /// CPU during a campaign). SQLite reads the list with `json_each`, PostgreSQL as an array.
    public func idIn(_ column: String) -> String {
        dialect == .postgres ? "\(column) = ANY(string_to_array(?, ',')::bigint[])" : "\(column) IN (SELECT value FROM json_each(?))"
    }

    /// The argument for `idIn`: the ids as `1,2,3` (PostgreSQL) or `[1,2,3]` (SQLite).
    public func idList(_ ids: some Sequence<Int64>) -> String {
        let list = ids.map(String.init).joined(separator: ",")
        return dialect == .postgres ? list : "[\(list)]"
    }
}

/// `count` comma-separated placeholders, for `IN (…)` lists.
public func sqlPlaceholders(_ count: Int) -> String {
    Array(repeating: "?", count: count).joined(separator: ", ")
}

extension Array {
    /// The array in runs of at most `size` (500 by default: an `IN (…)` list or a multi-row
    /// INSERT of that many stays far under both engines' limits on parameters).
    public func sqlBatches(of size: Int = 500) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}

extension SQLRow {
    /// Every row of a query; `cached` as for `SQLConnection.fetchAll`.
    public static func fetchAll(_ db: SQLConnection, sql: String, arguments: SQLArguments = [], cached: Bool = false) throws -> [SQLRow] {
        try db.fetchAll(sql: sql, arguments: arguments, cached: cached)
    }

    /// The first row of a query, or nil; `cached` as for `SQLConnection.fetchAll`.
    public static func fetchOne(_ db: SQLConnection, sql: String, arguments: SQLArguments = [], cached: Bool = false) throws -> SQLRow? {
        try db.fetchAll(sql: sql, arguments: arguments, cached: cached).first
    }
}

extension SQLValueConvertible {
    /// The first column of every row (rows whose value is NULL or of another kind are left out);
    /// `cached` as for `SQLConnection.fetchAll`.
    @inlinable public static func fetchAll(_ db: SQLConnection, sql: String, arguments: SQLArguments = [], cached: Bool = false) throws -> [Self] {
        try db.fetchAll(sql: sql, arguments: arguments, cached: cached).compactMap { $0.values.first.flatMap(Self.fromSQL) }
    }

    /// The first column of the first row, or nil when there is none or it is NULL; `cached` as
    /// for `SQLConnection.fetchAll`.
    @inlinable public static func fetchOne(_ db: SQLConnection, sql: String, arguments: SQLArguments = [], cached: Bool = false) throws -> Self? {
        try db.fetchAll(sql: sql, arguments: arguments, cached: cached).first?.values.first.flatMap(Self.fromSQL)
    }
}

extension StatementArguments {
    init(_ arguments: SQLArguments) {
        self.init(arguments.values.map { value -> (any DatabaseValueConvertible)? in
            switch value {
            case .null: nil
            case .integer(let value): value
            case .real(let value): value
            case .text(let value): value
            case .blob(let value): value
            }
        })
    }
}

extension DatabaseValue {
    var sqlValue: SQLValue {
        switch storage {
        case .null: .null
        case .int64(let value): .integer(value)
        case .double(let value): .real(value)
        case .string(let value): .text(value)
        case .blob(let value): .blob(value)
        }
    }
}
