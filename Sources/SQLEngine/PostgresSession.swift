import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

/// A PostgreSQL error, with the server's SQLSTATE and message (PostgresNIO's own description
/// hides them).
public struct SQLEngineError: Error, CustomStringConvertible, Sendable {
    /// The five-character SQLSTATE, when the server sent one.
    public var sqlState: String?
    /// What went wrong.
    public var message: String

    public var description: String { sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message }

    /// The server could not be reached, or the connection was lost before it answered (as
    /// opposed to an answer that is an error): the database is down, not the statement wrong.
    public internal(set) var unreachable = false

    /// The transaction lost a race with another and may be run again.
    var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// A prepared statement the server no longer takes as it was prepared (another node's
    /// migration changed its result's columns, or the server forgot it): the transaction may
    /// be run again once, with the statement prepared anew.
    var staleStatement = false

    init(_ message: String, sqlState: String? = nil, unreachable: Bool = false) {
        self.message = message
        self.sqlState = sqlState
        self.unreachable = unreachable
    }

    init(_ error: any Error, sql: String? = nil) {
        if let error = error as? SQLEngineError {
            self = error
        } else if let error = error as? PostgresError {
            // The older API's errors (prepared statements run through `PreparedQuery`).
            switch error {
            case .server(let answer):
                var message = answer.fields[.message] ?? "PostgreSQL: \(error)"
                if let detail = answer.fields[.detail] { message += ": \(detail)" }
                if let sql { message += " in: \(sql.prefix(200))" }
                self.init(message, sqlState: answer.fields[.sqlState])
            case .connectionClosed:
                self.init("PostgreSQL: the connection was closed", unreachable: true)
            case .protocol(let message):
                self.init("PostgreSQL: \(message)")
            }
        } else if let error = error as? PSQLError {
            let state = error.serverInfo?[.sqlState]
            var message = error.serverInfo?[.message] ?? "PostgreSQL: \(error.code)"
            if let detail = error.serverInfo?[.detail] { message += ": \(detail)" }
            if let sql, error.serverInfo != nil { message += " in: \(sql.prefix(200))" }
            let lost: [PSQLError.Code] = [.connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown]
            self.init(message, sqlState: state, unreachable: error.serverInfo == nil && lost.contains(error.code))
        } else {
            self.init("PostgreSQL: \(error)")
        }
    }
}

/// The statements prepared on one pooled connection, by their text and their arguments' types:
/// PostgreSQL parses each once per connection, and plans it once when its plan does not depend
/// on the arguments (docs/design/outbox.md#statements-prepared-once). Used only by the thread
/// that holds the connection.
final class PreparedStatements: @unchecked Sendable {
    /// At most this many on one connection; a statement past them runs unnamed, as before.
    static let limit = 128
    var byKey: [String: PreparedQuery] = [:]
}

/// A pooled connection and the statements prepared on it.
struct PooledConnection: Sendable {
    let connection: PostgresConnection
    let statements: PreparedStatements
}

/// One pooled PostgreSQL connection used from a thread of the database's pool: every call
/// blocks that thread until the server answers (never an event loop's thread).
final class PostgresSession {
    let connection: PostgresConnection
    let statements: PreparedStatements
    let logger: Logger
    /// Sees every statement start and end, so a stalled server is noticed (see `StatementWatch`).
    let watch: StatementWatch
    /// The pool's column types, for `insertRows`.
    let catalog: PostgresColumnCatalog

    init(pooled: PooledConnection, logger: Logger, watch: StatementWatch, catalog: PostgresColumnCatalog) {
        self.connection = pooled.connection
        self.statements = pooled.statements
        self.logger = logger
        self.watch = watch
        self.catalog = catalog
    }

    /// Runs a statement; returns the rows it changed.
    func execute(_ sql: String, _ values: [SQLValue]) throws -> Int {
        let result = try run(sql, values)
        return result.metadata.rows ?? 0
    }

    /// Runs a query and returns its rows; `prepared`, it is prepared on this connection the
    /// first time and run by name after (for statements run often whose text does not vary).
    func query(_ sql: String, _ values: [SQLValue], prepared: Bool = false) throws -> [SQLRow] {
        try rows(of: prepared ? try runPrepared(sql, values) : try run(sql, values).rows)
    }

    /// `rows` as `SQLRow`s.
    func rows(of result: PostgresQueryResult) throws -> [SQLRow] {
        try rows(of: result.rows)
    }

    /// Walks each row's cells in order (a random-access row would build two arrays a row first,
    /// which a profile of a campaign showed).
    private func rows(of rows: [PostgresRow]) throws -> [SQLRow] {
        guard let first = rows.first else { return [] }
        let columns = SQLColumns(first.map(\.columnName))
        let width = columns.names.count
        var result: [SQLRow] = []
        result.reserveCapacity(rows.count)
        for row in rows {
            var values: [SQLValue] = []
            values.reserveCapacity(width)
            for cell in row { values.append(try Self.value(of: cell)) }
            result.append(SQLRow(values: values, columns: columns))
        }
        return result
    }

    /// Runs statements separated by semicolons, without arguments, one at a time (PostgresNIO
    /// speaks only the extended protocol, which takes one statement per message).
    func script(_ sql: String) throws {
        for statement in Placeholders.statements(sql) {
            _ = try execute(statement, [])
        }
    }

    /// Runs `sql` as a statement prepared on this connection, parsed with its arguments' types
    /// (as the unnamed one is), so it means the same.
    private func runPrepared(_ sql: String, _ values: [SQLValue]) throws -> [PostgresRow] {
        let key = Placeholders.key(sql, values)
        let statement: PreparedQuery
        if let known = statements.byKey[key] {
            statement = known
        } else {
            guard statements.byKey.count < PreparedStatements.limit else { return try run(sql, values).rows }
            let text = Placeholders.numbered(sql, typedAs: values)
            statement = try wait(sql) { connection.prepare(query: text) }
            statements.byKey[key] = statement
        }
        do {
            return try wait(sql) { statement.execute(values.map(Self.data)) }
        } catch var error as SQLEngineError where error.sqlState == "0A000" || error.sqlState == "26000" {
            // "cached plan must not change result type" (a column added or dropped under it),
            // or a statement the server does not have: forget them all.
            statements.byKey.removeAll()
            error.staleStatement = true
            throw error
        }
    }

    /// Waits for `start`'s answer, watched as `run`'s is.
    private func wait<Answer: Sendable>(_ sql: String, _ start: () -> EventLoopFuture<Answer>) throws -> Answer {
        let answer = connection.eventLoop.makePromise(of: Answer.self)
        let ticket = watch.begin(connection, answer)
        defer { watch.end(ticket) }
        start().cascade(to: answer)
        do {
            return try answer.futureResult.wait()
        } catch {
            throw SQLEngineError(error, sql: sql)
        }
    }

    /// A value as the older API binds it: the same types, in binary, as `bindings` gives.
    private static func data(_ value: SQLValue) -> PostgresData {
        switch value {
        case .null: PostgresData(type: .null, value: nil)
        case .integer(let value): PostgresData(int64: value)
        case .real(let value): PostgresData(double: value)
        case .text(let value): PostgresData(string: value)
        case .blob(let value): PostgresData(bytes: value)
        }
    }

    private func run(_ sql: String, _ values: [SQLValue]) throws -> PostgresQueryResult {
        try run(sql, Self.bindings(values))
    }

    private static func bindings(_ values: [SQLValue]) -> PostgresBindings {
        var binds = PostgresBindings(capacity: values.count)
        for value in values { append(value, to: &binds) }
        return binds
    }

    /// Binds `value` as its own type, in binary.
    static func append(_ value: SQLValue, to binds: inout PostgresBindings) {
        switch value {
        case .null: binds.appendNull()
        case .integer(let value): binds.append(value)
        case .real(let value): binds.append(value)
        case .text(let value): binds.append(value)
        case .blob(let value): binds.append(ByteBuffer(bytes: value))
        }
    }

    /// Runs `sql` (with `?` placeholders) with `binds`.
    func run(_ sql: String, _ binds: PostgresBindings) throws -> PostgresQueryResult {
        let translated = Placeholders.numbered(sql)
        // Waited for through a promise the watch can fail: a stalled server's statement, or one
        // whose connection was lost without its future ever completing.
        let answer = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
        let ticket = watch.begin(connection, answer)
        defer { watch.end(ticket) }
        connection.query(PostgresQuery(unsafeSQL: translated, binds: binds), logger: logger).cascade(to: answer)
        do {
            return try answer.futureResult.wait()
        } catch {
            throw SQLEngineError(error, sql: sql)
        }
    }

    /// A cell as a value. Every cell arrives in binary (PostgresNIO's Bind asks for it), so the
    /// common types are read straight from their bytes; the rest (numeric, uuid, json…) go
    /// through PostgresNIO's own decoding.
    private static func value(of cell: PostgresCell) throws -> SQLValue {
        guard var bytes = cell.bytes else { return .null }
        let size = bytes.readableBytes
        switch cell.dataType {
        case .int8 where size == 8: return .integer(bytes.readInteger(as: Int64.self)!)
        case .int4 where size == 4: return .integer(Int64(bytes.readInteger(as: Int32.self)!))
        case .int2 where size == 2: return .integer(Int64(bytes.readInteger(as: Int16.self)!))
        case .float8 where size == 8: return .real(Double(bitPattern: bytes.readInteger(as: UInt64.self)!))
        case .text, .varchar, .name, .bpchar: return .text(bytes.readString(length: size)!)
        case .bytea: return .blob(Data(bytes.readBytes(length: size)!))
        default: return try decoded(cell)
        }
    }

    /// A cell (not NULL) of any other type, or of an integer's or a real's with a length not its
    /// own (PostgresNIO's error then names it), through PostgresNIO's decoding.
    private static func decoded(_ cell: PostgresCell) throws -> SQLValue {
        // PostgresNIO's Bind asks for every result column in binary, but a statement prepared
        // through `PreparedQuery` keeps the Describe's formats (text) for its cells.
        var cell = cell
        cell.format = .binary
        switch cell.dataType {
        case .int2, .int4, .int8, .oid: return .integer(try cell.decode(Int64.self))
        case .float4, .float8: return .real(try cell.decode(Double.self))
        case .bool: return .integer(try cell.decode(Bool.self) ? 1 : 0)
        case .numeric:
            let decimal = try cell.decode(Decimal.self)
            let double = NSDecimalNumber(decimal: decimal).doubleValue
            if let integer = Int64(exactly: double) { return .integer(integer) }
            return .real(double)
        default: return .text(try cell.decode(String.self))
        }
    }
}

/// Rewrites SQLite's `?` placeholders as PostgreSQL's `$1, $2, …`, and splits scripts into
/// statements, looking only at SQL itself: quoted strings, quoted names, `--` comments and `$$`
/// bodies are left alone. Rewritten statements are remembered per text.
enum Placeholders {
    private static let cache = NIOLockedValueBox([String: String]())

    /// The key of `sql` run with `values`: the text and the types of its arguments.
    static func key(_ sql: String, _ values: [SQLValue]) -> String {
        var key = sql
        key.reserveCapacity(sql.utf8.count + values.count + 1)
        key.append("\u{0}")
        for value in values { key.append(typeLetter(value)) }
        return key
    }

    private static func typeLetter(_ value: SQLValue) -> Character {
        switch value {
        case .null: "n"
        case .integer: "i"
        case .real: "r"
        case .text: "t"
        case .blob: "b"
        }
    }

    /// `numbered(sql)` with each placeholder cast to its argument's type (`$1::int8`), which
    /// types it as the unnamed statement's Parse message does; a NULL's is left to PostgreSQL.
    static func numbered(_ sql: String, typedAs values: [SQLValue]) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 8 * values.count)
        var number = 0
        scan(sql) { character, inCode in
            guard inCode && character == "?" else { result.append(character); return }
            let cast: String = switch number < values.count ? values[number] : .null {
            case .null: ""
            case .integer: "::int8"
            case .real: "::float8"
            case .text: "::text"
            case .blob: "::bytea"
            }
            number += 1
            result += "$\(number)\(cast)"
        }
        return result
    }

    static func numbered(_ sql: String) -> String {
        if let known = cache.withLockedValue({ $0[sql] }) { return known }
        var result = ""
        result.reserveCapacity(sql.utf8.count + 8)
        var number = 0
        scan(sql) { character, inCode in
            if inCode && character == "?" {
                number += 1
                result += "$\(number)"
            } else {
                result.append(character)
            }
        }
        cache.withLockedValue { cache in
            if cache.count > 4096 { cache.removeAll() }
            cache[sql] = result
        }
        return result
    }

    /// The statements of a script: split at semicolons in the SQL itself.
    static func statements(_ script: String) -> [String] {
        var statements: [String] = []
        var current = ""
        func finish() {
            let trimmed = current.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty { statements.append(trimmed) }
            current = ""
        }
        scan(script) { character, inCode in
            if inCode && character == ";" { finish() } else { current.append(character) }
        }
        finish()
        return statements
    }

    /// Calls `visit` with each character of `sql` and whether it is SQL itself (not inside a
    /// quoted string or name, a `--` comment or a `$$` body; the delimiters count as inside).
    private static func scan(_ sql: String, _ visit: (Character, Bool) -> Void) {
        var quote: Character?
        var dollar = false
        var lineComment = false
        var previous: Character = " "
        for character in sql {
            var inCode = false
            if lineComment {
                if character == "\n" { lineComment = false }
            } else if dollar {
                if character == "$" && previous == "$" { dollar = false; previous = " "; visit(character, false); continue }
            } else if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "-" && previous == "-" {
                lineComment = true
            } else if character == "$" && previous == "$" {
                dollar = true
                previous = " "
                visit(character, false)
                continue
            } else {
                inCode = true
            }
            visit(character, inCode)
            previous = character
        }
    }
}
