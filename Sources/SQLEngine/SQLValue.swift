import Foundation

/// One value as both engines store it: SQLite's storage classes, which PostgreSQL's
/// `BIGINT`, `DOUBLE PRECISION`, `TEXT` and `BYTEA` columns map onto one to one.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// A Swift type that binds to and reads from a `SQLValue`.
///
/// Reading is as strict as the column: an integer column reads as `Int`, `Int64`, `Bool` or
/// `Double`; a real column as `Double`; text as `String`; a blob as `Data`.
public protocol SQLValueConvertible: Sendable {
    /// The value to bind.
    var sqlValue: SQLValue { get }
    /// The Swift value of `value`, or nil when it is of another kind.
    static func fromSQL(_ value: SQLValue) -> Self?
}

extension Int64: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { .integer(self) }
    @inlinable public static func fromSQL(_ value: SQLValue) -> Int64? {
        switch value {
        case .integer(let value): value
        case .real(let value): Int64(exactly: value)
        default: nil
        }
    }
}

extension Int: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { .integer(Int64(self)) }
    @inlinable public static func fromSQL(_ value: SQLValue) -> Int? { Int64.fromSQL(value).map(Int.init) }
}

extension Int32: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { .integer(Int64(self)) }
    @inlinable public static func fromSQL(_ value: SQLValue) -> Int32? { Int64.fromSQL(value).flatMap { Int32(exactly: $0) } }
}

extension Bool: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
    @inlinable public static func fromSQL(_ value: SQLValue) -> Bool? { Int64.fromSQL(value).map { $0 != 0 } }
}

extension Double: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { .real(self) }
    @inlinable public static func fromSQL(_ value: SQLValue) -> Double? {
        switch value {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }
}

extension String: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { .text(self) }
    @inlinable public static func fromSQL(_ value: SQLValue) -> String? {
        if case .text(let value) = value { return value }
        return nil
    }
}

extension Data: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { .blob(self) }
    @inlinable public static func fromSQL(_ value: SQLValue) -> Data? {
        if case .blob(let value) = value { return value }
        return nil
    }
}

extension Optional: SQLValueConvertible where Wrapped: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { self?.sqlValue ?? .null }
    @inlinable public static func fromSQL(_ value: SQLValue) -> Wrapped?? {
        if case .null = value { return .some(nil) }
        return Wrapped.fromSQL(value).map { .some($0) }
    }
}

extension SQLValue: SQLValueConvertible {
    @inlinable public var sqlValue: SQLValue { self }
    @inlinable public static func fromSQL(_ value: SQLValue) -> SQLValue? { value }
}

/// The values bound to a statement's `?` placeholders, in order.
public struct SQLArguments: Sendable, ExpressibleByArrayLiteral {
    /// The values.
    public var values: [SQLValue]

    /// Binds `values` in order.
    public init(_ values: [any SQLValueConvertible]) {
        self.values = values.map(\.sqlValue)
    }

    /// Binds `values` in order.
    public init(values: [SQLValue]) {
        self.values = values
    }

    public init(arrayLiteral elements: (any SQLValueConvertible)...) {
        self.init(elements)
    }
}

/// One result row. Columns are found by name without regard to case (PostgreSQL folds
/// unquoted names to lower case, SQLite keeps them as written).
public struct SQLRow: Sendable {
    /// The row's values, in column order.
    public let values: [SQLValue]
    @usableFromInline let columns: SQLColumns

    init(values: [SQLValue], columns: SQLColumns) {
        self.values = values
        self.columns = columns
    }

    /// The value of `column` (a programming error when there is no such column or its value
    /// has another type, as with GRDB).
    @inlinable public subscript<T: SQLValueConvertible>(_ column: String) -> T {
        guard let index = columns.index(of: column) else { preconditionFailure("no column '\(column)' in \(columns.names)") }
        return self[index]
    }

    /// The value at `index`.
    @inlinable public subscript<T: SQLValueConvertible>(_ index: Int) -> T {
        guard let value = T.fromSQL(values[index]) else {
            preconditionFailure("column \(columns.names[index]) holds \(values[index]), not \(T.self)")
        }
        return value
    }

    /// The column names, in order (as the engine spells them).
    public var columnNames: [String] { columns.names }

    /// Where `column` is, or nil.
    public func columnIndex(_ column: String) -> Int? { columns.index(of: column) }
}

/// Column names of a result, shared by its rows.
@usableFromInline final class SQLColumns: Sendable {
    @usableFromInline let names: [String]
    /// Each name's bytes, ASCII letters lowercased.
    private let folded: [[UInt8]]

    init(_ names: [String]) {
        self.names = names
        folded = names.map { $0.utf8.map(Self.fold) }
    }

    /// The first column named `name`, ASCII letters in either case (PostgreSQL answers names
    /// lowercased, SQLite as the SQL spells them): a scan of the names, comparing lengths
    /// first. A dictionary of the names took two hashes and a lowercased copy of every
    /// camelCase name read on PostgreSQL: without it, hashing's share of `serve`'s samples in a
    /// campaign fell from 4.4% to 2.9% (issue #51).
    @usableFromInline func index(of name: String) -> Int? {
        var name = name
        return name.withUTF8 { wanted in
            for (index, candidate) in folded.enumerated() where candidate.count == wanted.count {
                var equal = true
                for offset in 0..<wanted.count where candidate[offset] != Self.fold(wanted[offset]) {
                    equal = false
                    break
                }
                if equal { return index }
            }
            return nil
        }
    }

    private static func fold(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}
