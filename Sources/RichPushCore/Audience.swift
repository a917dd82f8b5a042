import Foundation
import SQLEngine

/// Who a campaign is for (docs/api.md#campaigns).
public enum Audience: Sendable, Equatable {
    /// Every account.
    case all
    /// These accounts (sorted, without duplicates).
    case users([String])
    /// Every device whose registration tags match a Notification Hubs tag expression; each
    /// device's owner is a recipient.
    case tags(TagExpression)
    /// The users a saved segment selects (docs/api.md#segments). A campaign never keeps this: it
    /// is made `.filter` (the segment's filter, inlined) when the campaign is created, so that a
    /// later change of the segment does not change a campaign already made.
    case segment(String)
    /// The users a filter selects (docs/api.md#segments), every one of them a recipient whether
    /// or not they have devices, as with `.all`; a campaign's has every segment it named inlined.
    case filter(SegmentFilter)

    /// The forms, for refusals.
    static let forms = "{\"all\":true}, {\"users\":[names]}, {\"tags\":\"expression\"}, {\"segment\":\"name\"} or {\"filter\":{…}}"

    /// Parses the JSON form `{"all":true}`, `{"users":[…]}`, `{"tags":"<expression>"}`,
    /// `{"segment":"<name>"}` or `{"filter":{…}}`.
    public init(json object: [String: Any]) throws {
        let keys = Set(object.keys)
        guard keys.count == 1, let key = keys.first else {
            throw CoreError(.invalid, "audience must have exactly one of \"all\", \"users\", \"tags\", \"segment\" or \"filter\"")
        }
        switch (key, object[key]) {
        case ("all", let flag as Bool) where flag:
            self = .all
        case ("users", let names as [Any]):
            guard let strings = names as? [String] else { throw CoreError(.invalid, "audience.users must be an array of user names") }
            self = try .listing(strings)
        case ("tags", let text as String):
            self = .tags(try TagExpression(text))
        case ("segment", let name as String):
            self = try .named(name)
        case ("filter", let filter?):
            self = .filter(try SegmentFilter(json: filter, path: "audience.filter"))
        default:
            throw CoreError(.invalid, "audience must be \(Self.forms)")
        }
    }

    /// A saved segment's audience, its name checked (400 naming `audience.segment`).
    public static func named(_ segment: String) throws -> Audience {
        do {
            try SegmentStore.validateName(segment)
        } catch let error as CoreError {
            throw SegmentFilter.refusal("audience.segment", error.message)
        }
        return .segment(segment)
    }

    /// The filter a segment or filter audience selects by (a segment as a reference to inline).
    var segmentFilter: SegmentFilter? {
        switch self {
        case .segment(let name): .segment(name)
        case .filter(let filter): filter
        case .all, .users, .tags: nil
        }
    }

    /// Where `segmentFilter` stands in a campaign's body, for refusals: `audience` (its
    /// `segment`) or `audience.filter`.
    var filterPath: String {
        if case .segment = self { "audience" } else { "audience.filter" }
    }

    /// A list of users, checked, sorted and without duplicates.
    public static func listing(_ names: [String]) throws -> Audience {
        guard !names.isEmpty else { throw CoreError(.invalid, "audience.users is empty") }
        guard names.count <= Campaign.maxListedUsers else {
            throw CoreError(.invalid, "audience.users lists \(names.count) users, at most \(Campaign.maxListedUsers); use a tag expression or {\"all\":true}")
        }
        for name in names { try UserStore.validateName(name) }
        return .users(Array(Set(names)).sorted())
    }

    /// The stored form.
    var stored: String {
        let object: [String: Any]
        switch self {
        case .all: object = ["all": true]
        case .users(let names): object = ["users": names]
        case .tags(let expression): object = ["tags": expression.text]
        case .segment(let name): object = ["segment": name]
        case .filter(let filter): return "{\"filter\":\(filter.text)}" // JSONValue's text: its booleans stay booleans
        }
        return String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    init(stored: String) throws {
        guard let object = try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any] else {
            throw CoreError(.invalid, "unreadable audience")
        }
        if let names = object["users"] as? [String] {
            self = .users(names) // stored lists were checked and sorted on the way in
        } else {
            try self.init(json: object)
        }
    }

    /// A short description for people (`all`, `3 users`, `tags: a && b`, `segment: vip`,
    /// `filter: {"topic":"news"}`, a long filter cut at 200 characters).
    public var summary: String {
        switch self {
        case .all: return "all"
        case .users(let names): return names.count == 1 ? "user \(names[0])" : "\(names.count) users"
        case .tags(let expression): return "tags: \(expression.text)"
        case .segment(let name): return "segment: \(name)"
        case .filter(let filter):
            let text = filter.text
            return text.count > 200 ? "filter: \(text.prefix(200))…" : "filter: \(text)"
        }
    }
}

extension CampaignStore {
    /// Up to `limit` recipient names after `cursor`, in name order; the cursor after them; and
    /// whether none are left. With `zone`, only users in that time zone (`UTC`: those with none).
    static func nextRecipients(_ db: SQLConnection, _ audience: Audience, after cursor: String, limit: Int, zone: String? = nil) throws
        -> (names: [String], cursor: String, exhausted: Bool) {
        func inZone(_ column: String) -> (String, [any SQLValueConvertible]) {
            guard let zone else { return ("", []) }
            return zone == "UTC" ? ("AND (\(column) IS NULL OR \(column) = 'UTC')", []) : ("AND \(column) = ?", [zone])
        }
        let names: [String]
        switch audience {
        case .all:
            let (condition, values) = inZone("timezone")
            names = try String.fetchAll(db, sql: "SELECT name FROM users WHERE name > ? \(condition) ORDER BY name LIMIT ?",
                                        arguments: SQLArguments([cursor] + values + [limit]))
        case .users(let listed):
            let start = listed.firstIndex { $0 > cursor } ?? listed.count
            let slice = Array(listed[start..<min(start + limit, listed.count)])
            // Accounts removed since the campaign was made are skipped.
            let (condition, values) = inZone("timezone")
            let existing = Set(try String.fetchAll(db, sql: "SELECT name FROM users WHERE name IN (\(sqlPlaceholders(slice.count))) \(condition)",
                                                   arguments: SQLArguments(slice.map { $0 as any SQLValueConvertible } + values)))
            return (slice.filter(existing.contains), slice.last ?? cursor, start + slice.count >= listed.count)
        case .tags:
            let (condition, values) = inZone("u.timezone")
            names = try String.fetchAll(db, sql: """
                SELECT DISTINCT r.username FROM registrations r JOIN users u ON u.name = r.username
                WHERE r.username > ? AND r.handle IS NOT NULL \(condition) ORDER BY r.username LIMIT ?
                """, arguments: SQLArguments([cursor] + values + [limit]))
        case .segment, .filter:
            // A campaign's is a filter with its segments inlined when it was made; resolving
            // again is a walk of the tree (a stored `.segment` would be read now).
            let selected = try SegmentStore.condition(db, audience.segmentFilter!, path: audience.filterPath, now: db.now)
            let (condition, values) = inZone("u.timezone")
            var arguments: [SQLValue] = [.text(cursor)]
            arguments += values.map { $0.sqlValue }
            arguments += selected.arguments
            arguments.append(.integer(Int64(limit)))
            names = try String.fetchAll(db, sql: "SELECT u.name FROM users u WHERE u.name > ? \(condition) AND \(selected.sql) ORDER BY u.name LIMIT ?",
                                        arguments: SQLArguments(values: arguments))
        }
        return (names, names.last ?? cursor, names.count < limit)
    }

    /// The device targets of each named user: every device, or those matching the tag expression.
    static func devices(_ db: SQLConnection, of names: [String], audience: Audience, app: String?, sparse: Bool = false) throws -> [String: [PushTarget]] {
        guard let first = names.first, let last = names.last else { return [:] }
        let wanted = Set(names)
        var devices: [String: [PushTarget]] = [:]
        // Listed users and those a filter selects are sparse (two names can span the whole
        // table): by name. The others come in name order, a contiguous range.
        let listed = switch audience {
        case .users, .segment, .filter: true
        case .all, .tags: false
        }
        let (condition, arguments): (String, [String]) = if listed || sparse {
            ("username IN (\(sqlPlaceholders(names.count)))", names)
        } else {
            ("username BETWEEN ? AND ?", [first, last])
        }
        try db.forEach(sql: """
            SELECT id, username, handle, platform, tags, app FROM registrations
            WHERE \(condition) AND handle IS NOT NULL ORDER BY username, createdAt
            """, arguments: SQLArguments(arguments)) { row in
            let name: String = row["username"]
            guard wanted.contains(name), app == nil || (row["app"] as String) == app else { return }
            if case .tags(let expression) = audience {
                let tags = RegistrationStore.decodeTags(row["tags"])
                guard expression.matches(tags) else { return }
            }
            devices[name, default: []].append(PushTarget(registration: row["id"], target: row["handle"], platform: row["platform"], app: row["app"]))
        }
        return devices
    }
}
