import GRDB
import GRDBSQLite

/// SQLite's statements run from `SQLValue`s and read into them without GRDB's argument and row
/// types between (issue #51): GRDB's `StatementArguments` boxes every value, checks and converts
/// it again to bind it, and its `Row.fetchAll` copies each row with its column names. A
/// campaign's batch binds thousands of values at once, and that conversion was 2.5% of `serve`'s
/// CPU. GRDB still runs the statement (`execute`, its cursor), so its transaction and
/// observation bookkeeping is unchanged.
extension GRDB.Statement {
    /// Runs this statement once with `values` bound to its placeholders, in order.
    func run(_ values: [SQLValue]) throws {
        try bind(values)
        defer { unbind() }
        try execute()
    }

    /// Every row this statement returns with `values` bound, as `SQLValue`s.
    func rows(_ values: [SQLValue]) throws -> [[SQLValue]] {
        try bind(values)
        defer { unbind() }
        var rows: [[SQLValue]] = []
        let columns = CInt(columnCount)
        // GRDB's cursor steps the statement; each row's columns are read where it stands (a
        // `Row`'s values would come with their column names, a string each).
        let cursor = try GRDB.Row.fetchCursor(self)
        while try cursor.next() != nil {
            var row: [SQLValue] = []
            row.reserveCapacity(Int(columns))
            for index in 0..<columns {
                row.append(DatabaseValue(sqliteStatement: sqliteStatement, index: index).sqlValue)
            }
            rows.append(row)
        }
        return rows
    }

    /// Resets the statement and binds `values`, which must be as many as its placeholders.
    private func bind(_ values: [SQLValue]) throws {
        // GRDB drops a statement whose step failed from its cache, so a reset here finds no
        // error to report; should one ever be left, it is dropped here rather than crash the
        // `try!` reset inside `setUncheckedArguments`.
        _ = sqlite3_reset(sqliteStatement)
        setUncheckedArguments(StatementArguments()) // resets it and clears the last bindings
        let placeholders = Int(sqlite3_bind_parameter_count(sqliteStatement))
        guard values.count == placeholders else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE,
                                message: "wrong number of statement arguments: \(values.count) values for \(placeholders) placeholders", sql: sql)
        }
        for (offset, value) in values.enumerated() {
            let index = CInt(offset + 1)
            let code = switch value {
            case .null: sqlite3_bind_null(sqliteStatement, index)
            case .integer(let integer): sqlite3_bind_int64(sqliteStatement, index, integer)
            case .real(let real): sqlite3_bind_double(sqliteStatement, index, real)
            case .text(let text): text.bind(to: sqliteStatement, at: index) // GRDB's own binding, a copy
            case .blob(let blob): blob.bind(to: sqliteStatement, at: index)
            }
            guard code == SQLITE_OK else {
                unbind() // the copies bound so far
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot bind argument \(index)", sql: sql)
            }
        }
    }

    /// Lets go of the bound copies (a batch's strings and blobs), as GRDB does after a run.
    private func unbind() {
        _ = sqlite3_clear_bindings(sqliteStatement)
    }
}
