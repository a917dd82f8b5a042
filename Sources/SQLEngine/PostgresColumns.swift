import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO

/// The column types of the tables rows are inserted into by column (`SQLConnection.insertRows`),
/// read from PostgreSQL's catalog once per table and kept for the pool's life (a migration this
/// pool runs forgets them; one another node runs is not seen: a column whose type it changed
/// fails the insert until this process restarts).
final class PostgresColumnCatalog: Sendable {
    private let tables = NIOLockedValueBox([String: [String: PostgresColumn]]())

    /// The columns of `table`, by lowercased name, read from the catalog through `session` the
    /// first time.
    func columns(of table: String, _ session: PostgresSession) throws -> [String: PostgresColumn] {
        if let known = tables.withLockedValue({ $0[table] }) { return known }
        let rows = try session.query("""
            SELECT a.attname AS name, format_type(a.atttypid, NULL) AS declared, t.typname AS type
            FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
            WHERE a.attrelid = ?::regclass AND a.attnum > 0 AND NOT a.attisdropped
            """, [.text(table)])
        var columns: [String: PostgresColumn] = [:]
        for row in rows {
            let name: String = row["name"]
            let type: String = row["type"]
            columns[name] = PostgresColumn(declared: row["declared"], wire: PostgresColumn.Wire(type: type),
                                           exact: ["int8", "float8", "text", "bytea"].contains(type))
        }
        tables.withLockedValue { $0[table] = columns }
        return columns
    }

    /// Forgets every table's columns (after a migration this pool ran).
    func forget() {
        tables.withLockedValue { $0.removeAll() }
    }
}

/// A column's declared type, and the type its values travel as in an array.
struct PostgresColumn: Sendable {
    /// The type as `format_type` names it without its modifier (`integer`, `jsonb`, `character
    /// varying`): what values sent as another type are cast to (explicitly, so text becomes
    /// `jsonb`); the INSERT's assignment then applies the modifier (a length) and its errors.
    var declared: String
    /// How its values are sent.
    var wire: Wire
    /// The values are sent as the column's own type: no cast.
    var exact: Bool

    /// The four kinds of `SQLValue`, as PostgreSQL arrays: every other type travels as text and
    /// is cast to its own.
    enum Wire: Sendable {
        case int8, float8, text, bytea

        init(type: String) {
            switch type {
            case "int2", "int4", "int8", "oid": self = .int8
            case "float4", "float8": self = .float8
            case "bytea": self = .bytea
            default: self = .text
            }
        }

        /// The array's type, as the statement casts its parameter.
        var arrayName: String {
            switch self {
            case .int8: "int8[]"
            case .float8: "float8[]"
            case .text: "text[]"
            case .bytea: "bytea[]"
            }
        }
    }
}

extension PostgresSession {
    /// Inserts `rows` (each the values of `columns`, in order) into `table` with an array per
    /// column, the same statement for any number of rows (one per 10,000):
    /// `INSERT … SELECT … FROM unnest($1, $2, …)`. A multi-row VALUES list of 500 rows of 12
    /// columns was 6,000 parameters, each parsed, planned and bound: 6 µs of PostgreSQL's CPU a
    /// push for planning alone (issue #51). `table` and `columns` are the caller's own names, put
    /// in the SQL as they are. Each value travels as its column's kind (an integer for a text
    /// column as its digits, a real for an integer column rounded half to even, as PostgreSQL
    /// assigns); one that cannot (text for an integer column, a real for a text column) is an
    /// error naming the column and the value's kind. What PostgreSQL itself refuses (a NULL in a
    /// NOT NULL column, text that is not JSON for `jsonb`) is its own error.
    func insertRows(into table: String, columns: [String], _ rows: [[SQLValue]]) throws -> Int {
        let known = try catalog.columns(of: table, self)
        let types = try columns.map { name in
            guard let column = known[name.lowercased()] else { throw SQLEngineError("insert into \(table): no column \(name)") }
            return column
        }
        var sql = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) SELECT "
        sql += types.indices.map { types[$0].exact ? "v\($0)" : "v\($0)::\(types[$0].declared)" }.joined(separator: ", ")
        sql += " FROM unnest(" + types.indices.map { "?::\(types[$0].wire.arrayName)" }.joined(separator: ", ") + ") AS u("
        sql += types.indices.map { "v\($0)" }.joined(separator: ", ") + ")"
        var inserted = 0
        for chunk in rows.sqlBatches(of: 10_000) {
            var binds = PostgresBindings(capacity: columns.count)
            for (index, column) in types.enumerated() {
                binds.append(try PostgresColumnArray(column.wire, values: chunk.lazy.map { $0[index] }, table: table, column: columns[index]))
            }
            inserted += try run(sql, binds).metadata.rows ?? 0
        }
        return inserted
    }
}

/// One column's values as a one-dimensional PostgreSQL array in binary form: dimensions, a
/// null flag, the element type, then each element's length (-1 for NULL) and bytes.
struct PostgresColumnArray: PostgresDynamicTypeEncodable {
    private var bytes: ByteBuffer
    let psqlType: PostgresDataType
    var psqlFormat: PostgresFormat { .binary }

    init(_ wire: PostgresColumn.Wire, values: some Collection<SQLValue>, table: String, column: String) throws {
        let element: PostgresDataType
        switch wire {
        case .int8: (psqlType, element) = (.int8Array, .int8)
        case .float8: (psqlType, element) = (.float8Array, .float8)
        case .text: (psqlType, element) = (.textArray, .text)
        case .bytea: (psqlType, element) = (.byteaArray, .bytea)
        }
        var buffer = ByteBufferAllocator().buffer(capacity: 20 + values.count * 12)
        buffer.writeInteger(Int32(1))
        let hasNull = buffer.writerIndex
        buffer.writeInteger(Int32(0))
        buffer.writeInteger(element.rawValue)
        buffer.writeInteger(Int32(values.count))
        buffer.writeInteger(Int32(1))
        var nulls = false
        for value in values {
            func refuse() -> SQLEngineError { SQLEngineError("insert into \(table): \(value.kind) for column \(column) (\(wire))") }
            switch (wire, value) {
            case (_, .null):
                nulls = true
                buffer.writeInteger(Int32(-1))
            case (.int8, .integer(let integer)):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(integer)
            case (.int8, .real(let real)):
                guard let integer = Int64(exactly: real.rounded(.toNearestOrEven)) else { throw refuse() }
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(integer)
            case (.float8, .real(let real)):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(real.bitPattern)
            case (.float8, .integer(let integer)):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(Double(integer).bitPattern)
            case (.text, .text(let text)):
                Self.write(text, into: &buffer)
            case (.text, .integer(let integer)):
                Self.write(String(integer), into: &buffer)
            case (.bytea, .blob(let data)):
                buffer.writeInteger(Int32(data.count))
                buffer.writeBytes(data)
            default:
                throw refuse()
            }
        }
        if nulls { buffer.setInteger(Int32(1), at: hasNull) }
        bytes = buffer
    }

    private static func write(_ text: String, into buffer: inout ByteBuffer) {
        let lengthAt = buffer.writerIndex
        buffer.writeInteger(Int32(0))
        let written = buffer.writeString(text)
        buffer.setInteger(Int32(written), at: lengthAt)
    }

    func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        var copy = bytes
        byteBuffer.writeBuffer(&copy)
    }
}

extension SQLValue {
    /// The value's kind, for errors that should not repeat the value itself.
    var kind: String {
        switch self {
        case .null: "NULL"
        case .integer: "an integer"
        case .real: "a real"
        case .text: "text"
        case .blob: "a blob"
        }
    }
}

/// A column of values bound as one one-dimensional PostgreSQL array (`?::int8[]` and so on), for
/// statements that write or read many rows' values at once (`SQLConnection.execute(sql:arrays:)`).
public struct SQLArray: Sendable {
    /// The array's element type.
    public enum Kind: Sendable {
        case int8, float8, text, bytea
    }

    /// The element type.
    public var kind: Kind
    /// The elements, each of `kind` (an integer for `text` travels as its digits) or NULL.
    public var values: [SQLValue]

    /// An array of `values` as `kind`.
    public init(_ kind: Kind, _ values: [SQLValue]) {
        self.kind = kind
        self.values = values
    }

    var wire: PostgresColumn.Wire {
        switch kind {
        case .int8: .int8
        case .float8: .float8
        case .text: .text
        case .bytea: .bytea
        }
    }
}

/// A statement's argument: one value, or a column of values as one array (`SQLArray`).
public enum SQLParameter: Sendable {
    case value(SQLValue)
    case array(SQLArray)
}

extension PostgresSession {
    /// Runs `sql` with `parameters` bound to its `?` placeholders in order.
    func run(_ sql: String, parameters: [SQLParameter]) throws -> PostgresQueryResult {
        var binds = PostgresBindings(capacity: parameters.count)
        for (index, parameter) in parameters.enumerated() {
            switch parameter {
            case .value(let value): Self.append(value, to: &binds)
            case .array(let array):
                binds.append(try PostgresColumnArray(array.wire, values: array.values, table: "statement", column: "argument \(index + 1)"))
            }
        }
        return try run(sql, binds)
    }

    /// `run(_:parameters:)`'s rows, and how many rows it changed.
    func rows(_ sql: String, parameters: [SQLParameter]) throws -> (rows: [SQLRow], changed: Int) {
        let result = try run(sql, parameters: parameters)
        return (try rows(of: result), result.metadata.rows ?? 0)
    }
}
