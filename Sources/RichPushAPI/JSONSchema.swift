import Foundation
import RichPushCore

/// A JSON Schema (the 2020-12 dialect OpenAPI 3.1 uses), as much of it as the API's bodies need.
///
/// Object schemas of `Decodable` types are read off the types themselves by ``JSONSchema/of(_:)``,
/// so the description and the code that encodes or decodes the bodies cannot drift apart.
public struct JSONSchema: Sendable, Equatable, Encodable {
    /// `string`, `integer`, `number`, `boolean`, `array` or `object`; nil for a `$ref` or `oneOf`.
    public var type: String?
    public var format: String?
    public var description: String?
    public var properties: [String: JSONSchema]?
    public var required: [String]?
    /// The element schema of an array (one element, as `items` holds one schema).
    public var items: [JSONSchema]?
    public var enumeration: [String]?
    /// `const`, for the one boolean that must be true.
    public var constant: Bool?
    public var oneOf: [JSONSchema]?
    public var reference: String?
    public var minimum: Int64?
    public var maximum: Int64?
    public var minLength: Int?
    public var maxLength: Int?
    public var minItems: Int?
    public var maxItems: Int?
    /// The most keys an object (a map) may have.
    public var maxProperties: Int?
    public var pattern: String?
    public var additionalProperties: Bool?
    /// A map's values (`additionalProperties` as a schema; one element, as `items`) and keys.
    public var valuesSchema: [JSONSchema]?
    public var propertyNames: [JSONSchema]?
    /// Null is a value too (`type: [T, "null"]`): Swift's `decodeIfPresent` reads null as absent.
    public var nullable = false

    /// An empty schema (anything).
    public init() {}

    public static func type(_ type: String, format: String? = nil) -> JSONSchema {
        var schema = JSONSchema()
        schema.type = type
        schema.format = format
        return schema
    }

    public static let string = type("string")
    public static let integer = type("integer", format: "int64")
    public static let number = type("number", format: "double")
    public static let boolean = type("boolean")
    /// A string of bytes, as an upload or an image response carries.
    public static let binary = JSONSchema.string.with { $0.format = "binary" }

    public static func array(of items: JSONSchema) -> JSONSchema {
        JSONSchema.type("array").with { $0.items = [items] }
    }

    public static func ref(_ name: String) -> JSONSchema {
        JSONSchema().with { $0.reference = "#/components/schemas/\(name)" }
    }

    public static func oneOf(_ schemas: [JSONSchema]) -> JSONSchema {
        JSONSchema().with { $0.oneOf = schemas }
    }

    /// A copy changed by `change`.
    public func with(_ change: (inout JSONSchema) -> Void) -> JSONSchema {
        var copy = self
        change(&copy)
        return copy
    }

    /// The schema of `type`'s JSON form, found by decoding it from a reader that records what is asked for:
    /// `decode` makes a required property, `decodeIfPresent` an optional one.
    public static func of<T: Decodable>(_ type: T.Type) throws -> JSONSchema {
        try SchemaReader.read(type).schema
    }

    private enum CodingKeys: String, CodingKey {
        case type, format, description, properties, required, items, oneOf, minimum, maximum, minLength, maxLength
        case minItems, maxItems, maxProperties, pattern, additionalProperties, anyOf, propertyNames
        case enumeration = "enum"
        case constant = "const"
        case reference = "$ref"
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if nullable && (type == nil || constant != nil) {
            // A $ref, a oneOf or a const has no type to widen: null is the other choice.
            try container.encode([with { $0.nullable = false }, .type("null")], forKey: .anyOf)
            return
        }
        try container.encodeIfPresent(reference, forKey: .reference)
        if nullable, let type {
            try container.encode([type, "null"], forKey: .type)
        } else {
            try container.encodeIfPresent(type, forKey: .type)
        }
        try container.encodeIfPresent(format, forKey: .format)
        try container.encodeIfPresent(description, forKey: .description)
        try container.encodeIfPresent(properties, forKey: .properties)
        try container.encodeIfPresent(required, forKey: .required)
        try container.encodeIfPresent(items?.first, forKey: .items)
        if let enumeration, nullable {
            try container.encode(enumeration.map(Optional.some) + [nil], forKey: .enumeration)
        } else {
            try container.encodeIfPresent(enumeration, forKey: .enumeration)
        }
        try container.encodeIfPresent(constant, forKey: .constant)
        try container.encodeIfPresent(oneOf, forKey: .oneOf)
        try container.encodeIfPresent(minimum, forKey: .minimum)
        try container.encodeIfPresent(maximum, forKey: .maximum)
        try container.encodeIfPresent(minLength, forKey: .minLength)
        try container.encodeIfPresent(maxLength, forKey: .maxLength)
        try container.encodeIfPresent(minItems, forKey: .minItems)
        try container.encodeIfPresent(maxItems, forKey: .maxItems)
        try container.encodeIfPresent(maxProperties, forKey: .maxProperties)
        try container.encodeIfPresent(pattern, forKey: .pattern)
        if let values = valuesSchema?.first {
            try container.encode(values, forKey: .additionalProperties)
        } else {
            try container.encodeIfPresent(additionalProperties, forKey: .additionalProperties)
        }
        try container.encodeIfPresent(propertyNames?.first, forKey: .propertyNames)
    }
}

/// A type whose schema is declared rather than read, with a value the reader can return for it:
/// enumerations, and values whose decoding checks their contents.
public protocol DeclaredSchema: Decodable {
    static var declaredSchema: JSONSchema { get }
    /// Any valid value.
    static var schemaExample: Self { get }
}

/// A type whose schema is read from it and then narrowed: patterns and ranges its decoding
/// cannot show but the code that checks the values enforces.
public protocol SchemaRefining: Decodable {
    static func refine(_ schema: inout JSONSchema)
}

/// String enumerations declare every raw value.
public protocol SchemaEnumeration: DeclaredSchema, CaseIterable, RawRepresentable where RawValue == String {}

extension SchemaEnumeration {
    public static var declaredSchema: JSONSchema { JSONSchema.string.with { $0.enumeration = allCases.map(\.rawValue) } }
    public static var schemaExample: Self { allCases.first! }
}

extension PushMode: SchemaEnumeration {}
extension Campaign.Status: SchemaEnumeration {}

/// Records the schema of one value while its `init(from:)` runs.
private final class SchemaReader: Decoder {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    /// Set by the container the value asked for.
    var schema = JSONSchema()
    /// How deep in the value this reader is: a type that contains itself is refused, not recursed into forever.
    let depth: Int

    init(depth: Int) { self.depth = depth }

    /// The schema of `type` and a value of it.
    static func read<T: Decodable>(_ type: T.Type, depth: Int = 0) throws -> (value: T, schema: JSONSchema) {
        guard depth < 16 else { throw SchemaReaderError("\(type) nests 16 deep: a recursive type is not described") }
        switch type {
        case is String.Type: return ("" as! T, .string)
        case is Bool.Type: return (false as! T, .boolean)
        case is Int.Type: return (0 as! T, .integer)
        case is Int64.Type: return (Int64(0) as! T, .integer)
        case is Int32.Type: return (Int32(0) as! T, .type("integer", format: "int32"))
        case is Double.Type: return (0.0 as! T, .number)
        case is Float.Type: return (Float(0) as! T, .type("number", format: "float"))
        case is Int8.Type, is Int16.Type, is UInt.Type, is UInt8.Type, is UInt16.Type, is UInt32.Type, is UInt64.Type:
            throw SchemaReaderError("\(type) is not described; use Int, Int32 or Int64")
        default: break
        }
        if let declared = type as? any DeclaredSchema.Type {
            return (declared.schemaExample as! T, declared.declaredSchema)
        }
        let reader = SchemaReader(depth: depth)
        let value = try T(from: reader)
        if let refining = type as? any SchemaRefining.Type { refining.refine(&reader.schema) }
        return (value, reader.schema)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if schema.type != "object" { // a second keyed container adds to the first
            schema = .type("object")
            schema.properties = [:]
            // Bodies are strict (RequestBody.decode refuses a field it does not know), and answers
            // carry exactly their type's fields.
            schema.additionalProperties = false
        }
        return KeyedDecodingContainer(Keyed<Key>(reader: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        schema = .type("array")
        return Unkeyed(reader: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(reader: self) }

    /// A property found: required unless asked for with `decodeIfPresent`.
    func property(_ key: String, _ property: JSONSchema, required: Bool) {
        schema.properties?[key] = required ? property : property.with { $0.nullable = true }
        if required { schema.required = Array(Set((schema.required ?? []) + [key])).sorted() }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let reader: SchemaReader
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }
        func contains(_ key: Key) -> Bool { true }
        func decodeNil(forKey key: Key) throws -> Bool { false }

        private func decode<T: Decodable>(_ type: T.Type, _ key: Key, required: Bool) throws -> T {
            let (value, schema) = try SchemaReader.read(type, depth: reader.depth + 1)
            reader.property(key.stringValue, schema, required: required)
            return value
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decode(type, key, required: true) }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try decode(type, key, required: false) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try decode(type, key, required: false) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try decode(type, key, required: false) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try decode(type, key, required: false) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try decode(type, key, required: false) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try decode(type, key, required: false) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try decode(type, key, required: false) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try decode(type, key, required: false) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try decode(type, key, required: false) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try decode(type, key, required: false) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try decode(type, key, required: false) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try decode(type, key, required: false) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try decode(type, key, required: false) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try decode(type, key, required: false) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decode(type, key, required: true) }
        func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try decode(type, key, required: false) }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            throw SchemaReaderError("nested containers are not described; give \(key.stringValue) a type of its own")
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            throw SchemaReaderError("nested containers are not described; give \(key.stringValue) a type of its own")
        }

        func superDecoder() throws -> any Decoder { throw SchemaReaderError("superDecoder is not described") }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw SchemaReaderError("superDecoder is not described") }
    }

    /// Hands out one element, whose schema becomes `items`.
    struct Unkeyed: UnkeyedDecodingContainer {
        let reader: SchemaReader
        var codingPath: [any CodingKey] { [] }
        var count: Int? { 1 }
        var currentIndex = 0
        var isAtEnd: Bool { currentIndex > 0 }

        mutating func decodeNil() throws -> Bool { false }

        private mutating func element<T: Decodable>(_ type: T.Type) throws -> T {
            currentIndex += 1 // first: a decoder that skips elements it cannot read must still reach the end
            let (value, schema) = try SchemaReader.read(type, depth: reader.depth + 1)
            reader.schema.items = [schema]
            return value
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try element(type) }
        mutating func decode(_ type: Bool.Type) throws -> Bool { try element(type) }
        mutating func decode(_ type: String.Type) throws -> String { try element(type) }
        mutating func decode(_ type: Double.Type) throws -> Double { try element(type) }
        mutating func decode(_ type: Float.Type) throws -> Float { try element(type) }
        mutating func decode(_ type: Int.Type) throws -> Int { try element(type) }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try element(type) }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try element(type) }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try element(type) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try element(type) }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try element(type) }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try element(type) }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try element(type) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try element(type) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try element(type) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            throw SchemaReaderError("nested containers are not described")
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            throw SchemaReaderError("nested containers are not described")
        }

        mutating func superDecoder() throws -> any Decoder { throw SchemaReaderError("superDecoder is not described") }
    }

    struct Single: SingleValueDecodingContainer {
        let reader: SchemaReader
        var codingPath: [any CodingKey] { [] }
        func decodeNil() -> Bool { false }

        private func value<T: Decodable>(_ type: T.Type) throws -> T {
            let (value, schema) = try SchemaReader.read(type, depth: reader.depth + 1)
            reader.schema = schema
            return value
        }

        func decode<T: Decodable>(_ type: T.Type) throws -> T { try value(type) }
        func decode(_ type: Bool.Type) throws -> Bool { try value(type) }
        func decode(_ type: String.Type) throws -> String { try value(type) }
        func decode(_ type: Double.Type) throws -> Double { try value(type) }
        func decode(_ type: Float.Type) throws -> Float { try value(type) }
        func decode(_ type: Int.Type) throws -> Int { try value(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try value(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try value(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try value(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try value(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try value(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try value(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try value(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try value(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try value(type) }
    }
}

/// A type the schema reader cannot describe (a programming error, caught by the OpenAPI tests).
struct SchemaReaderError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
