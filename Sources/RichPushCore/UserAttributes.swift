import Foundation

/// A user's attributes (docs/api.md#attributes-devices-versions-and-topics): at most 50 keys, each a
/// lowercase letter then up to 63 lowercase letters, digits or `_`, each value a string of at most
/// 256 bytes of UTF-8, a number or a boolean.
///
/// Its JSON form is an object of those values. Decoding checks every rule and throws a `CoreError`
/// (400) naming the first key that breaks one, keys taken in byte order, so that a request body,
/// an import line and a stored row are read by the same code.
public struct UserAttributes: Sendable, Equatable, Codable {
    /// One attribute's value: nothing else is taken (no null, no array, no object).
    public enum Value: Sendable, Equatable, Codable {
        case string(String)
        /// A whole number, kept exactly (`42`, never `42.0`).
        case integer(Int64)
        /// Any other number.
        case number(Double)
        case bool(Bool)

        /// Reads a string, a number or a boolean; anything else is a `DecodingError`.
        public init(from decoder: any Decoder) throws {
            switch try UserAttributes.Raw(from: decoder) {
            case .value(let value): self = value
            case .null, .other:
                throw DecodingError.typeMismatch(Value.self, .init(codingPath: decoder.codingPath,
                                                                   debugDescription: "a string, a number, true or false"))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let text): try container.encode(text)
            case .integer(let number): try container.encode(number)
            case .number(let number): try container.encode(number)
            case .bool(let flag): try container.encode(flag)
            }
        }
    }

    /// A JSON merge patch of attributes (RFC 7396): a key with a value sets it, a key with `null`
    /// removes it, a key left out stays as it is.
    public struct Patch: Sendable, Equatable, Decodable {
        /// Key → the new value, or nil to remove the key.
        public private(set) var changes: [String: Value?]

        /// An empty patch (it changes nothing).
        public init() {
            changes = [:]
        }

        /// A patch of `changes`, each key and value checked as a body's would be.
        public init(_ changes: [String: Value?]) throws {
            for (key, value) in changes.sorted(by: { $0.key < $1.key }) {
                try UserAttributes.validate(key: key)
                if let value { try UserAttributes.validate(value, key: key) }
            }
            self.changes = changes
        }

        /// Reads a JSON object; `null` values are removals.
        public init(from decoder: any Decoder) throws {
            changes = try UserAttributes.read(decoder, allowingNull: true)
        }
    }

    /// The attributes by key.
    public private(set) var values: [String: Value]

    /// The most attributes one user has.
    public static let maxCount = 50
    /// The longest string value, in bytes of UTF-8.
    public static let maxStringBytes = 256
    /// What a key looks like (the same rule as `validate(key:)`).
    public static let keyPattern = "^[a-z][a-z0-9_]{0,63}$"

    /// No attributes.
    public init() {
        values = [:]
    }

    /// These values, each key and value checked (400 naming the key), at most `maxCount` of them.
    public init(_ values: [String: Value]) throws {
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            try Self.validate(key: key)
            try Self.validate(value, key: key)
        }
        try Self.checkCount(values.count)
        self.values = values
    }

    /// Reads a JSON object, checking every rule (a `CoreError` naming the key that breaks one).
    public init(from decoder: any Decoder) throws {
        let read = try Self.read(decoder, allowingNull: false)
        try Self.checkCount(read.count)
        values = read.compactMapValues { $0 }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(values)
    }

    /// The value of `key`, or nil.
    public subscript(key: String) -> Value? { values[key] }

    /// Whether there is none.
    public var isEmpty: Bool { values.isEmpty }

    /// These attributes with `patch` applied (RFC 7396); 400 when the result would have more
    /// than `maxCount`.
    public func merging(_ patch: Patch) throws -> UserAttributes {
        var merged = values
        for (key, value) in patch.changes { merged[key] = value }
        guard merged.count <= Self.maxCount else {
            throw CoreError(.invalid, "the attributes would be \(merged.count), at most \(Self.maxCount): remove some (a key set to null in a PATCH removes it)")
        }
        var result = UserAttributes()
        result.values = merged
        return result
    }

    // MARK: rules

    /// Checks a key: a lowercase letter, then up to 63 lowercase letters, digits or `_`.
    public static func validate(key: String) throws {
        let bytes = Array(key.utf8)
        guard let first = bytes.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first), bytes.count <= 64,
              bytes.allSatisfy({ (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_") })
        else {
            throw CoreError(.invalid, "attribute \"\(key.prefix(80))\": a key is a lowercase letter, then up to 63 lowercase letters, digits or _")
        }
    }

    /// Checks a value of `key`: a string of at most `maxStringBytes` bytes, a finite number (JSON
    /// has no other), or a boolean.
    public static func validate(_ value: Value, key: String) throws {
        switch value {
        case .string(let text) where text.utf8.count > maxStringBytes:
            throw CoreError(.invalid, "attribute \"\(key)\": a string is at most \(maxStringBytes) bytes of UTF-8; this one is \(text.utf8.count)")
        case .number(let number) where !number.isFinite:
            throw CoreError(.invalid, "attribute \"\(key)\": a number is finite")
        default:
            break
        }
    }

    private static func checkCount(_ count: Int) throws {
        guard count <= maxCount else {
            throw CoreError(.invalid, "\(count) attributes, at most \(maxCount) a user: leave some out")
        }
    }

    // MARK: the JSON form

    /// A JSON value as read, before the rules: never fails on its own, so that the rule it
    /// breaks is told with its key.
    fileprivate enum Raw: Decodable {
        case value(Value)
        case null
        /// An array or an object.
        case other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let flag = try? container.decode(Bool.self) {
                self = .value(.bool(flag))
            } else if let text = try? container.decode(String.self) {
                self = .value(.string(text))
            } else if let whole = try? container.decode(Int64.self) {
                self = .value(.integer(whole))
            } else if let number = try? container.decode(Double.self) {
                self = .value(.number(number))
            } else {
                self = .other
            }
        }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Every key of the object `decoder` holds, checked in byte order; nil values are nulls
    /// (refused unless `allowingNull`).
    fileprivate static func read(_ decoder: any Decoder, allowingNull: Bool) throws -> [String: Value?] {
        let container = try decoder.container(keyedBy: Key.self)
        var values: [String: Value?] = [:]
        for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
            let name = key.stringValue
            try validate(key: name)
            switch try container.decode(Raw.self, forKey: key) {
            case .value(let value):
                try validate(value, key: name)
                values[name] = .some(value)
            case .null:
                guard allowingNull else {
                    throw CoreError(.invalid, "attribute \"\(name)\": null removes an attribute, which only PATCH does; leave the key out instead")
                }
                values[name] = .some(nil)
            case .other:
                throw CoreError(.invalid, "attribute \"\(name)\": a value is a string, a number, true or false (not an array or an object)")
            }
        }
        return values
    }

    // MARK: the stored form

    /// The stored form: JSON, keys sorted; nil when there is none.
    var stored: String? {
        guard !values.isEmpty else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try! encoder.encode(self), as: UTF8.self)
    }

    /// Reads the stored form (nil: none).
    init(stored: String?) throws {
        if let stored {
            self = try JSONDecoder().decode(UserAttributes.self, from: Data(stored.utf8))
        } else {
            self = UserAttributes()
        }
    }
}
