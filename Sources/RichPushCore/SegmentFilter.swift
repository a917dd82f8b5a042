import Foundation

/// Which users a segment or a campaign's `{"filter":F}` selects (docs/api.md#segments): a tree of
/// conditions on users' attributes, topics, locale and devices, parsed strictly from its JSON form.
///
/// The JSON forms: `{"all":[F…]}`, `{"any":[F…]}`, `{"not":F}`,
/// `{"attribute":K,"op":"eq|ne|lt|lte|gt|gte|in|exists|missing|contains","value":V}`,
/// `{"topic":T}`, `{"platform":"apns|fcm|web"}`, `{"app":A}`, `{"locale":L}`,
/// `{"appVersion":{"op":"eq|ne|lt|lte|gt|gte","value":"2.10"}}`,
/// `{"lastSeen":{"withinDays":N}}` or `{"lastSeen":{"olderThanDays":N}}`, and `{"segment":NAME}`.
///
/// Every refusal is a `CoreError` of kind `.invalid` (400) whose message starts with the JSON path
/// of what is wrong: `filter.all[1].op: unknown operator "eqq"; one of eq, ne, …`.
///
/// What each condition means (the SQL is `SegmentCondition`'s):
/// - An attribute comparison matches only a value of the same JSON type: a string attribute never
///   matches `lt 5`, and `eq "5"` does not match the number 5. Numbers compare as 64-bit floating
///   point numbers (`5` equals `5.0`). Strings compare byte for byte.
/// - `ne` is `not eq`: it matches users whose attribute has another value (or another type) **or
///   is missing**. `{"not":{"attribute":K,"op":"lt",…}}` likewise matches users without K.
/// - `in` matches a value equal (as `eq`) to one of the list's; `contains` is a case-sensitive
///   substring test on string attributes; `exists` and `missing` look only at the key.
/// - `platform`, `app`, `appVersion` and `lastSeen` look at the user's devices that can be reached
///   (registrations with a push handle); `{"lastSeen":{"withinDays":N}}` matches a user with a
///   device seen in the last N days, `{"lastSeen":{"olderThanDays":N}}` a user who has devices and
///   none seen in the last N days (a user without devices matches neither).
/// - `locale` matches the user's locale when equal, or when the filter's is a prefix of it at a
///   subtag boundary: `fr` matches `fr` and `fr-CA`, not `fro`; `zh-Hant` matches `zh-Hant-TW`.
///   Both are compared in canonical case (`fr-ca` is read as `fr-CA`).
/// - `appVersion` compares as versions (`AppVersionKey`): `2.10` is after `2.9`, `2.1` equals
///   `2.1.0`; a device whose version does not start with a number matches no comparison.
/// - `segment` stands for that saved segment's filter (`SegmentStore` inlines it).
public indirect enum SegmentFilter: Sendable, Equatable {
    case all([SegmentFilter])
    case any([SegmentFilter])
    case not(SegmentFilter)
    /// An attribute's key and the test on its value.
    case attribute(String, AttributeTest)
    case topic(String)
    case platform(String)
    case app(String)
    /// A canonical BCP 47 tag (`UserPreferences.locale`).
    case locale(String)
    /// The comparison and the version as given.
    case appVersion(Comparison, String)
    case lastSeen(LastSeen)
    /// A saved segment's name.
    case segment(String)

    /// A comparison of two values of one type.
    public enum Comparison: String, Sendable, CaseIterable {
        case eq, ne, lt, lte, gt, gte
    }

    /// What an attribute condition asks of the value.
    public enum AttributeTest: Sendable, Equatable {
        /// `eq`, `ne` (a string, number or boolean), `lt`, `lte`, `gt`, `gte` (a number).
        case compare(Comparison, UserAttributes.Value)
        /// `in`: equal to one of these (1 to `maxListed`).
        case oneOf([UserAttributes.Value])
        case exists
        case missing
        /// A non-empty string found in a string attribute.
        case contains(String)
    }

    /// How recently a user's devices were seen.
    public enum LastSeen: Sendable, Equatable {
        /// A device seen within this many days.
        case withinDays(Int)
        /// Devices, none seen within this many days.
        case olderThanDays(Int)
    }

    /// The deepest a filter nests (`{"not":{"not":…}}` is three levels).
    public static let maxDepth = 16
    /// The most values an `in` lists.
    public static let maxListed = 100
    /// The most conditions a filter has, segments it names inlined (an `in` counts each value):
    /// what bounds the SQL it becomes.
    public static let maxConditions = 500
    /// The most days `lastSeen` counts back (a century).
    public static let maxDays = 36_500

    /// The keys of the JSON form, one of which a filter object has.
    static let kinds = ["all", "any", "not", "attribute", "topic", "platform", "app", "locale", "appVersion", "lastSeen", "segment"]
    static let attributeOperators = Comparison.allCases.map(\.rawValue) + ["in", "exists", "missing", "contains"]

    /// Parses the JSON form; refusals start with `path` (`filter`, `audience.filter`).
    public init(json: JSONValue, path: String = "filter") throws {
        try self.init(json, path: path, depth: 1)
        let count = conditionCount
        guard count <= Self.maxConditions else {
            throw Self.refusal(path, "the filter has \(count) conditions, at most \(Self.maxConditions) (an \"in\" counts each of its values)")
        }
    }

    /// Parses a value `JSONSerialization` made (or Swift values of its shapes: `[String: Any]`,
    /// `[Any]`, `String`, `Bool`, `Int`, `Double`).
    public init(json: Any, path: String = "filter") throws {
        guard let value = JSONValue(foundation: json) else { throw Self.refusal(path, "not a JSON value") }
        try self.init(json: value, path: path)
    }

    /// Parses JSON text.
    public init(jsonText: String, path: String = "filter") throws {
        guard let value = JSONValue(text: jsonText) else { throw Self.refusal(path, "not JSON") }
        try self.init(json: value, path: path)
    }

    private init(_ json: JSONValue, path: String, depth: Int) throws {
        guard depth <= Self.maxDepth else {
            throw Self.refusal(path, "filters nest at most \(Self.maxDepth) levels deep")
        }
        guard case .object(let object) = json else {
            throw Self.refusal(path, "a filter is an object with one of \(Self.kinds.joined(separator: ", ")), not \(json.kind)")
        }
        let present = Self.kinds.filter { object[$0] != nil }
        guard let kind = present.first else {
            guard let unknown = object.keys.sorted().first else {
                throw Self.refusal(path, "an empty object; a filter has one of \(Self.kinds.joined(separator: ", "))")
            }
            throw Self.unknownKey(unknown, at: path, known: Self.kinds, what: "a filter has one of")
        }
        guard present.count == 1 else {
            throw Self.refusal(path, "has both \"\(present[0])\" and \"\(present[1])\"; a filter has one of them (put several in {\"all\":[…]})")
        }
        let here = "\(path).\(kind)"
        let value = object[kind]!
        let allowed = kind == "attribute" ? ["attribute", "op", "value"] : [kind]
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw Self.unknownKey(unknown, at: path, known: allowed, what: kind == "attribute" ? "an attribute condition has" : "this filter has only")
        }
        switch kind {
        case "all", "any":
            guard case .array(let elements) = value else { throw Self.refusal(here, "must be an array of filters, not \(value.kind)") }
            guard !elements.isEmpty else { throw Self.refusal(here, "an empty list; give at least one filter") }
            let parts = try elements.enumerated().map { try SegmentFilter($1, path: "\(here)[\($0)]", depth: depth + 1) }
            self = kind == "all" ? .all(parts) : .any(parts)
        case "not":
            self = .not(try SegmentFilter(value, path: here, depth: depth + 1))
        case "attribute":
            self = try Self.attribute(object, path: path)
        case "topic":
            let topic = try Self.string(value, at: here)
            try Self.checked(here) { try TopicStore.validateName(topic) }
            self = .topic(topic)
        case "platform":
            let platform = try Self.string(value, at: here)
            guard RegistrationStore.platforms.contains(platform) else {
                throw Self.refusal(here, "\"\(platform.prefix(40))\" is not a platform; one of \(RegistrationStore.platforms.joined(separator: ", "))")
            }
            self = .platform(platform)
        case "app":
            let app = try Self.string(value, at: here)
            try Self.checked(here) { try AppName.validate(app) }
            self = .app(app)
        case "locale":
            let locale = try Self.string(value, at: here)
            self = .locale(try Self.checked(here) { try UserPreferences.locale(locale) })
        case "appVersion":
            self = try Self.appVersion(value, path: here)
        case "lastSeen":
            self = .lastSeen(try Self.lastSeen(value, path: here))
        default: // "segment"
            let name = try Self.string(value, at: here)
            try Self.checked(here) { try SegmentStore.validateName(name) }
            self = .segment(name)
        }
    }

    private static func attribute(_ object: [String: JSONValue], path: String) throws -> SegmentFilter {
        let key = try string(object["attribute"]!, at: "\(path).attribute")
        guard (try? UserAttributes.validate(key: key)) != nil else {
            throw refusal("\(path).attribute", "\"\(key.prefix(80))\" is not an attribute key: a lowercase letter, then up to 63 lowercase letters, digits or _")
        }
        let operators = attributeOperators.joined(separator: ", ")
        guard let opValue = object["op"] else { throw refusal("\(path).op", "missing; one of \(operators)") }
        guard case .string(let op) = opValue else { throw refusal("\(path).op", "must be a string, one of \(operators); not \(opValue.kind)") }
        guard attributeOperators.contains(op) else { throw refusal("\(path).op", "unknown operator \"\(op.prefix(40))\"; one of \(operators)") }
        let valuePath = "\(path).value"
        let value = object["value"]
        switch op {
        case "exists", "missing":
            guard value == nil else { throw refusal(valuePath, "\(op) takes no value") }
            return .attribute(key, op == "exists" ? .exists : .missing)
        case "contains":
            guard case .string(let text)? = value else {
                throw refusal(valuePath, "contains needs a string, not \(value?.kind ?? "nothing")")
            }
            guard !text.isEmpty else { throw refusal(valuePath, "contains needs a non-empty string") }
            try checkLength(text, at: valuePath)
            return .attribute(key, .contains(text))
        case "in":
            guard case .array(let elements)? = value, (1...maxListed).contains(elements.count) else {
                var given = ", not \(value?.kind ?? "nothing")"
                if case .array(let list)? = value { given = "; this one has \(list.count)" }
                throw refusal(valuePath, "in needs an array of 1 to \(maxListed) strings, numbers or booleans\(given)")
            }
            return .attribute(key, .oneOf(try elements.enumerated().map { index, element in
                guard let item = try scalar(element, at: "\(valuePath)[\(index)]") else {
                    throw refusal("\(valuePath)[\(index)]", "in lists strings, numbers or booleans, not \(element.kind)")
                }
                return item
            }))
        default:
            let comparison = Comparison(rawValue: op)!
            let ordered = comparison != .eq && comparison != .ne
            guard let value, let operand = try scalar(value, at: valuePath) else {
                throw refusal(valuePath, ordered ? "\(op) needs a number, not \(value?.kind ?? "nothing")"
                                                 : "\(op) compares with a string, a number or a boolean, not \(value?.kind ?? "nothing")")
            }
            if ordered {
                switch operand {
                case .integer, .number: break
                case .string, .bool: throw refusal(valuePath, "\(op) needs a number, not \(value.kind)")
                }
            }
            return .attribute(key, .compare(comparison, operand))
        }
    }

    /// A string, number or boolean as an attribute value (whole numbers as `.integer`); nil for
    /// anything else.
    private static func scalar(_ value: JSONValue, at path: String) throws -> UserAttributes.Value? {
        switch value {
        case .string(let text):
            try checkLength(text, at: path)
            return .string(text)
        case .integer(let number): return .integer(number)
        case .number(let number):
            if let whole = Int64(exactly: number) { return .integer(whole) }
            return .number(number)
        case .bool(let flag): return .bool(flag)
        case .null, .array, .object: return nil
        }
    }

    private static func checkLength(_ text: String, at path: String) throws {
        guard text.utf8.count <= UserAttributes.maxStringBytes else {
            throw refusal(path, "a string is at most \(UserAttributes.maxStringBytes) bytes of UTF-8, as an attribute's is; this one is \(text.utf8.count)")
        }
    }

    private static func appVersion(_ value: JSONValue, path: String) throws -> SegmentFilter {
        guard case .object(let object) = value else { throw refusal(path, "must be {\"op\":\"eq|ne|lt|lte|gt|gte\",\"value\":\"2.10\"}, not \(value.kind)") }
        if let unknown = object.keys.sorted().first(where: { $0 != "op" && $0 != "value" }) {
            throw unknownKey(unknown, at: path, known: ["op", "value"], what: "appVersion has")
        }
        let operators = Comparison.allCases.map(\.rawValue).joined(separator: ", ")
        guard case .string(let op)? = object["op"] else { throw refusal("\(path).op", "must be a string, one of \(operators)") }
        guard let comparison = Comparison(rawValue: op) else { throw refusal("\(path).op", "unknown operator \"\(op.prefix(40))\"; one of \(operators)") }
        guard case .string(let version)? = object["value"] else {
            throw refusal("\(path).value", "must be a version as a string, such as \"2.10\", not \(object["value"]?.kind ?? "nothing")")
        }
        guard version.utf8.count <= RegistrationStore.maxVersionBytes, AppVersionKey.ofFilterValue(version) != nil else {
            throw refusal("\(path).value", "\"\(version.prefix(40))\" is not a version: numbers separated by dots (at most 9 digits each), such as 2.10 or 10.0.1")
        }
        return .appVersion(comparison, version)
    }

    private static func lastSeen(_ value: JSONValue, path: String) throws -> LastSeen {
        guard case .object(let object) = value, object.count == 1, let entry = object.first else {
            throw refusal(path, "must be {\"withinDays\":N} or {\"olderThanDays\":N}")
        }
        let (key, days) = (entry.key, entry.value)
        guard key == "withinDays" || key == "olderThanDays" else {
            throw unknownKey(key, at: path, known: ["withinDays", "olderThanDays"], what: "lastSeen has one of")
        }
        let here = "\(path).\(key)"
        let number: Int64? = switch days {
        case .integer(let whole): whole
        case .number(let fraction): Int64(exactly: fraction)
        default: nil
        }
        guard let number else { throw refusal(here, "must be a whole number of days, not \(days.kind == "a number" ? "a fraction" : days.kind)") }
        guard number >= 0 else { throw refusal(here, "\(number) is negative; a number of days is 0 to \(maxDays)") }
        guard number <= Int64(maxDays) else { throw refusal(here, "\(number) days is more than \(maxDays)") }
        return key == "withinDays" ? .withinDays(Int(number)) : .olderThanDays(Int(number))
    }

    private static func string(_ value: JSONValue, at path: String) throws -> String {
        guard case .string(let text) = value else { throw refusal(path, "must be a string, not \(value.kind)") }
        return text
    }

    /// Runs a check of another type, its refusal prefixed with `path`.
    @discardableResult
    private static func checked<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as CoreError {
            throw refusal(path, error.message)
        }
    }

    private static func unknownKey(_ key: String, at path: String, known: [String], what: String) -> CoreError {
        let near = EditDistance.nearest(to: key, in: known).map { " (did you mean \"\($0)\"?)" } ?? ""
        return refusal("\(path).\(key.prefix(80))", "unknown key\(near); \(what) \(known.joined(separator: ", "))")
    }

    /// A 400 whose message starts with the path.
    static func refusal(_ path: String, _ message: String) -> CoreError {
        CoreError(.invalid, "\(path): \(message)")
    }

    // MARK: the JSON form

    /// The JSON form, which `init(json:)` reads back as this filter.
    public var json: JSONValue {
        switch self {
        case .all(let parts): ["all": .array(parts.map(\.json))]
        case .any(let parts): ["any": .array(parts.map(\.json))]
        case .not(let inner): ["not": inner.json]
        case .attribute(let key, let test):
            switch test {
            case .compare(let comparison, let value): ["attribute": .string(key), "op": .string(comparison.rawValue), "value": Self.json(value)]
            case .oneOf(let values): ["attribute": .string(key), "op": "in", "value": .array(values.map(Self.json))]
            case .exists: ["attribute": .string(key), "op": "exists"]
            case .missing: ["attribute": .string(key), "op": "missing"]
            case .contains(let text): ["attribute": .string(key), "op": "contains", "value": .string(text)]
            }
        case .topic(let topic): ["topic": .string(topic)]
        case .platform(let platform): ["platform": .string(platform)]
        case .app(let app): ["app": .string(app)]
        case .locale(let locale): ["locale": .string(locale)]
        case .appVersion(let comparison, let version): ["appVersion": ["op": .string(comparison.rawValue), "value": .string(version)]]
        case .lastSeen(.withinDays(let days)): ["lastSeen": ["withinDays": .integer(Int64(days))]]
        case .lastSeen(.olderThanDays(let days)): ["lastSeen": ["olderThanDays": .integer(Int64(days))]]
        case .segment(let name): ["segment": .string(name)]
        }
    }

    private static func json(_ value: UserAttributes.Value) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .integer(let number): .integer(number)
        case .number(let number): .number(number)
        case .bool(let flag): .bool(flag)
        }
    }

    /// The JSON text, keys sorted: the stored form.
    public var text: String { json.text }

    // MARK: reading the tree

    /// Its conditions (an `in` counts each value, a segment counts one until inlined).
    public var conditionCount: Int {
        switch self {
        case .all(let parts), .any(let parts): parts.reduce(0) { $0 + $1.conditionCount }
        case .not(let inner): inner.conditionCount
        case .attribute(_, .oneOf(let values)): values.count
        default: 1
        }
    }

    /// The saved segments it names (not those they name).
    public var segments: Set<String> {
        switch self {
        case .all(let parts), .any(let parts): parts.reduce(into: Set<String>()) { $0.formUnion($1.segments) }
        case .not(let inner): inner.segments
        case .segment(let name): [name]
        default: []
        }
    }
}

extension SegmentFilter: Codable {
    /// Reads the JSON form as `init(json:path:)` does, the path being where the decoder is
    /// (`filter` for `{"filter":…}`, `audience.filter` inside a campaign).
    public init(from decoder: any Decoder) throws {
        let path = decoder.codingPath.reduce(into: "") { path, key in
            if let index = key.intValue { path += "[\(index)]" } else { path += path.isEmpty ? key.stringValue : ".\(key.stringValue)" }
        }
        try self.init(json: try JSONValue(from: decoder), path: path.isEmpty ? "filter" : path)
    }

    public func encode(to encoder: any Encoder) throws {
        try json.encode(to: encoder)
    }
}
