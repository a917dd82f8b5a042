import Foundation

/// Any JSON value, as read: what a segment filter is parsed from (`SegmentFilter(json:path:)`),
/// so that its rules can name the path of whatever breaks one instead of failing in a decoder.
///
/// Numbers keep their kind as `UserAttributes.Value` does: a whole number that fits in 64 bits
/// is `.integer`, any other `.number`. Booleans are never numbers (`true` is not `1`).
public indirect enum JSONValue: Sendable, Equatable, Codable {
    case null
    case bool(Bool)
    case string(String)
    case integer(Int64)
    case number(Double)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Reads any JSON value.
    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: FieldKey.self) {
            var object: [String: JSONValue] = [:]
            for key in container.allKeys {
                object[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
            }
            self = .object(object)
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var array: [JSONValue] = []
            while !container.isAtEnd { array.append(try container.decode(JSONValue.self)) }
            self = .array(array)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let whole = try? container.decode(Int64.self) {
            self = .integer(whole)
        } else {
            self = .number(try container.decode(Double.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .integer(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .number(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .array(let array):
            var container = encoder.unkeyedContainer()
            for element in array { try container.encode(element) }
        case .object(let object):
            var container = encoder.container(keyedBy: FieldKey.self)
            for (key, value) in object { try container.encode(value, forKey: FieldKey(stringValue: key)) }
        }
    }

    /// Parses JSON text (a fragment such as `5` or `"x"` too); nil when it is not JSON.
    public init?(text: String) {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else { return nil }
        self = value
    }

    /// A value `JSONSerialization` made, or Swift values of the same shapes (`[String: Any]`,
    /// `[Any]`, `String`, `Bool`, `Int`, `Double`, `NSNull`); nil for anything else. It goes
    /// through `JSONSerialization`'s own writer, which alone tells its booleans from its numbers
    /// on every platform.
    public init?(foundation value: Any) {
        guard JSONSerialization.isValidJSONObject([value]),
              let data = try? JSONSerialization.data(withJSONObject: [value]),
              case .array(let wrapped)? = try? JSONDecoder().decode(JSONValue.self, from: data), let first = wrapped.first
        else { return nil }
        self = first
    }

    /// The compact JSON text, keys sorted.
    public var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data("null".utf8), as: UTF8.self)
    }

    /// What kind of value this is, for a person: "a string", "an array", ….
    public var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .string: "a string"
        case .integer, .number: "a number"
        case .array: "an array"
        case .object: "an object"
        }
    }

    struct FieldKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
