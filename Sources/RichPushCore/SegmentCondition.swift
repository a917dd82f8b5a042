import SQLEngine

/// A segment filter as SQL: a condition over the `users` table aliased `u`, with its arguments
/// in the order of its placeholders, for one engine. The database selects the users; nothing
/// walks the users in Swift.
///
/// Every part is true or false, never NULL (a missing attribute, a NULL locale), so that `NOT`
/// turns each into its opposite. Attributes are read from the JSON text of `users.attributes`:
/// on SQLite with `json_type` and `json_extract` (path `$."key"`), on PostgreSQL with
/// `jsonb_typeof` and `->`/`->>` on `u.attributes_json` (the attributes as `jsonb`, a stored
/// generated column: parsed once when written, not once per row and read). A typed comparison sits in a `CASE` that
/// checks the type first: PostgreSQL does not promise to evaluate `AND`'s sides in order, and a
/// cast of a string to a number would fail. Topics and devices are `EXISTS` subqueries on
/// `topics` and `registrations` by `username = u.name` (aliases `st` and `sd`, so that they can sit
/// inside a query of its own that uses `r`); a device counts when it has a push handle.
///
/// The filter must have no `segment` left (`SegmentStore.resolve`).
struct SegmentCondition: Sendable {
    /// The condition, with `?` placeholders.
    let sql: String
    /// Its arguments, in order.
    let arguments: [SQLValue]

    /// Compiles `filter` for `dialect`; `now` (seconds since 1970) is what `lastSeen` counts back from.
    init(_ filter: SegmentFilter, dialect: SQLDialect, now: Double) throws {
        let builder = Builder(dialect: dialect, now: now)
        sql = try builder.condition(filter)
        arguments = builder.arguments
    }

    /// Writes the SQL left to right, collecting each argument as its placeholder is written.
    private final class Builder {
        let postgres: Bool
        let now: Double
        var arguments: [SQLValue] = []
        /// False in the engine's own words (SQLite's booleans are integers).
        let no: String

        init(dialect: SQLDialect, now: Double) {
            postgres = dialect == .postgres
            self.now = now
            no = postgres ? "FALSE" : "0"
        }

        func bind(_ value: SQLValue) -> String {
            arguments.append(value)
            return "?"
        }

        func condition(_ filter: SegmentFilter) throws -> String {
            switch filter {
            case .all(let parts):
                let each = try parts.map(condition)
                return "(" + each.joined(separator: " AND ") + ")"
            case .any(let parts):
                let each = try parts.map(condition)
                return "(" + each.joined(separator: " OR ") + ")"
            case .not(let inner):
                let negated = try condition(inner)
                return "(NOT \(negated))"
            case .attribute(let key, let test):
                return attribute(key, test)
            case .topic(let topic):
                return "EXISTS (SELECT 1 FROM topics st WHERE st.username = u.name AND st.topic = \(bind(.text(topic))))"
            case .platform(let platform):
                return device("sd.platform = \(bind(.text(platform)))")
            case .app(let app):
                return device("sd.app = \(bind(.text(app)))")
            case .locale(let locale):
                // Equal, or a prefix at a subtag boundary: "fr" is "fr" or starts with "fr-".
                let prefix = locale + "-"
                return "COALESCE(u.locale = \(bind(.text(locale))) OR substr(u.locale, 1, CAST(\(bind(.integer(Int64(prefix.count)))) AS INTEGER)) = \(bind(.text(prefix))), \(no))"
            case .appVersion(let comparison, let version):
                guard let key = AppVersionKey.ofFilterValue(version) else {
                    throw SegmentFilter.refusal("appVersion", "\"\(version.prefix(40))\" is not a version")
                }
                // '' is a version that has no key (it does not start with a number).
                return device("sd.appVersionKey <> '' AND sd.appVersionKey \(Self.sql(comparison)) \(bind(.text(key)))")
            case .lastSeen(.withinDays(let days)):
                return device("sd.lastSeen >= \(bind(.real(now - Double(days) * 86_400)))")
            case .lastSeen(.olderThanDays(let days)):
                return "(\(device(nil)) AND NOT \(device("sd.lastSeen >= \(bind(.real(now - Double(days) * 86_400)))")))"
            case .segment(let name):
                throw SegmentFilter.refusal("segment", "segment \"\(name)\" was not inlined")
            }
        }

        /// A device of the user's that can be reached, and `condition` on it (`sd`).
        func device(_ condition: String?) -> String {
            "EXISTS (SELECT 1 FROM registrations sd WHERE sd.username = u.name AND sd.handle IS NOT NULL\(condition.map { " AND \($0)" } ?? ""))"
        }

        static func sql(_ comparison: SegmentFilter.Comparison) -> String {
            switch comparison {
            case .eq: "="
            case .ne: "<>"
            case .lt: "<"
            case .lte: "<="
            case .gt: ">"
            case .gte: ">="
            }
        }

        // MARK: attributes

        /// The attribute's JSON type, as the engine names it (binds the key).
        func type(_ key: String) -> String {
            postgres ? "jsonb_typeof(u.attributes_json -> CAST(\(bind(.text(key))) AS TEXT))"
                     : "json_type(u.attributes, \(bind(.text(Self.path(key)))))"
        }

        /// The attribute as text: a string's characters, `true`/`false` on PostgreSQL (binds the key).
        func text(_ key: String) -> String {
            postgres ? "(u.attributes_json ->> CAST(\(bind(.text(key))) AS TEXT))"
                     : "json_extract(u.attributes, \(bind(.text(Self.path(key)))))"
        }

        /// The attribute as a number; only where its type is a number (binds the key).
        func number(_ key: String) -> String {
            postgres ? "CAST(u.attributes_json ->> CAST(\(bind(.text(key))) AS TEXT) AS DOUBLE PRECISION)"
                     : "json_extract(u.attributes, \(bind(.text(Self.path(key)))))"
        }

        func isString(_ key: String) -> String { "\(type(key)) = \(postgres ? "'string'" : "'text'")" }
        func isNumber(_ key: String) -> String { postgres ? "\(type(key)) = 'number'" : "\(type(key)) IN ('integer', 'real')" }

        /// The attribute is `flag` (never NULL).
        func isBool(_ key: String, _ flag: Bool) -> String {
            postgres ? "COALESCE(\(type(key)) = 'boolean' AND \(text(key)) = '\(flag)', FALSE)"
                     : "COALESCE(\(type(key)) = '\(flag)', 0)"
        }

        /// A key's JSON path for SQLite; keys are `[a-z0-9_]`, quoted all the same.
        static func path(_ key: String) -> String { "$.\"\(key)\"" }

        func attribute(_ key: String, _ test: SegmentFilter.AttributeTest) -> String {
            switch test {
            case .compare(.ne, let value):
                return "(NOT \(attribute(key, .compare(.eq, value))))"
            case .compare(let comparison, .string(let text)):
                return "CASE WHEN \(isString(key)) THEN \(self.text(key)) \(Self.sql(comparison)) \(bind(.text(text))) ELSE \(no) END"
            case .compare(let comparison, .integer(let number)):
                return "CASE WHEN \(isNumber(key)) THEN \(self.number(key)) \(Self.sql(comparison)) \(bind(.real(Double(number)))) ELSE \(no) END"
            case .compare(let comparison, .number(let number)):
                return "CASE WHEN \(isNumber(key)) THEN \(self.number(key)) \(Self.sql(comparison)) \(bind(.real(number))) ELSE \(no) END"
            case .compare(_, .bool(let flag)):
                return isBool(key, flag) // only eq reaches here with a boolean (ne is not eq; lt… need numbers)
            case .oneOf(let values):
                var parts: [String] = []
                let strings = values.compactMap { value -> String? in
                    if case .string(let text) = value { return text }
                    return nil
                }
                let numbers = values.compactMap { value -> Double? in
                    switch value {
                    case .integer(let number): return Double(number)
                    case .number(let number): return number
                    case .string, .bool: return nil
                    }
                }
                if !strings.isEmpty {
                    parts.append("CASE WHEN \(isString(key)) THEN \(text(key)) IN (\(strings.map { bind(.text($0)) }.joined(separator: ", "))) ELSE \(no) END")
                }
                if !numbers.isEmpty {
                    parts.append("CASE WHEN \(isNumber(key)) THEN \(number(key)) IN (\(numbers.map { bind(.real($0)) }.joined(separator: ", "))) ELSE \(no) END")
                }
                for flag in [true, false] where values.contains(.bool(flag)) {
                    parts.append(isBool(key, flag))
                }
                return "(" + parts.joined(separator: " OR ") + ")"
            case .exists:
                return postgres ? "((u.attributes_json -> CAST(\(bind(.text(key))) AS TEXT)) IS NOT NULL)" : "(\(type(key)) IS NOT NULL)"
            case .missing:
                return postgres ? "((u.attributes_json -> CAST(\(bind(.text(key))) AS TEXT)) IS NULL)" : "(\(type(key)) IS NULL)"
            case .contains(let fragment):
                // Bound in the order the placeholders are written: the type check's key first.
                let check = isString(key)
                let found = postgres ? "strpos(\(text(key)), \(bind(.text(fragment)))) > 0" : "instr(\(text(key)), \(bind(.text(fragment)))) > 0"
                return "CASE WHEN \(check) THEN \(found) ELSE \(no) END"
            }
        }
    }
}
