import Foundation
import SQLEngine

/// Saved segments, and the users a filter selects (docs/api.md#segments).
///
/// A segment may name others (`{"segment":NAME}`): the reference is kept as written and inlined
/// each time the segment is counted or paged, so a change to the one named shows in the other.
/// A campaign is different: its audience is resolved to a filter when it is created
/// (`CampaignStore.create`), so changing a segment does not change a campaign already made.
/// Saving refuses a name that is no segment, a circle of references and references more than
/// `maxReferenceDepth` deep (400, naming the path); a segment that others name cannot be removed
/// (409). Users are selected by SQL (`SegmentCondition`), never walked in Swift.
public struct SegmentStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// What a segment's name looks like (the same rule as `validateName`).
    public static let namePattern = "^[A-Za-z0-9_.-]{1,64}$"
    /// The most segments a chain of references goes through, the one saved or named first
    /// included: a campaign naming segment 1, which names 2, …, which names 8.
    public static let maxReferenceDepth = 8

    /// Checks a segment's name: 1 to 64 of `A-Z a-z 0-9 _ . -`.
    public static func validateName(_ name: String) throws {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), bytes.allSatisfy({ byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "_.-".utf8.contains(byte)
        }) else {
            throw CoreError(.invalid, "invalid segment name '\(name.prefix(80))': a segment name is 1 to 64 of A-Z a-z 0-9 _ . -")
        }
    }

    /// Saves `filter` as segment `name`, replacing one of that name (whose creator is kept). 400
    /// when the name is not one, or when the segments it names do not exist, name it back, or go
    /// more than `maxReferenceDepth` deep. `audit` records who did (`segment.put`, with the filter).
    @discardableResult
    public func save(name: String, filter: SegmentFilter, by creator: String?, now: Date = Date(), audit: AuditActor? = nil) async throws -> SavedSegment {
        try Self.validateName(name)
        return try await database.write { db in
            _ = try Self.resolve(db, filter, path: "filter", saving: name)
            try db.execute(sql: """
                INSERT INTO segments (name, filter, createdBy, updatedAt) VALUES (?, ?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET filter = excluded.filter, updatedAt = excluded.updatedAt
                """, arguments: [name, filter.text, creator, now.timeIntervalSince1970])
            let row = try SQLRow.fetchOne(db, sql: "SELECT createdBy FROM segments WHERE name = ?", arguments: [name])
            try Audit.record(db, audit, "segment.put", target: "segment:\(name)", detail: ["filter": .string(String(filter.text.prefix(1000)))])
            return SavedSegment(name: name, filter: filter, createdBy: row.flatMap { $0["createdBy"] as String? }, updatedAt: now)
        }
    }

    /// Segment `name`, or nil.
    public func find(_ name: String) async throws -> SavedSegment? {
        try await database.read { db in try Self.find(db, name) }
    }

    /// Every segment, by name (byte order).
    public func list() async throws -> [SavedSegment] {
        try await database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT name, filter, createdBy, updatedAt FROM segments ORDER BY name").map(Self.segment)
        }
    }

    /// Removes segment `name`: 404 when there is none, 409 (naming them) when other segments name
    /// it. `audit` records who did (`segment.delete`).
    public func remove(_ name: String, audit: AuditActor? = nil) async throws {
        try await database.write { db in
            guard try Self.find(db, name) != nil else { throw CoreError(.notFound, "no segment \(name)") }
            // Only filters that name a segment at all are read.
            let naming = try SQLRow.fetchAll(db, sql: """
                SELECT name, filter, createdBy, updatedAt FROM segments WHERE name <> ? AND filter LIKE '%"segment"%' ORDER BY name
                """, arguments: [name]).map(Self.segment).filter { $0.filter.segments.contains(name) }.map(\.name)
            guard naming.isEmpty else {
                throw CoreError(.conflict, "segment \(name) is named by \(naming.prefix(10).joined(separator: ", "))\(naming.count > 10 ? " and \(naming.count - 10) more" : ""): change those first")
            }
            try db.execute(sql: "DELETE FROM segments WHERE name = ?", arguments: [name])
            try Audit.record(db, audit, "segment.delete", target: "segment:\(name)")
        }
    }

    /// How many users `filter` selects now, and how many devices they have (registrations with a
    /// push handle, every app). 400 for a segment it names that is not one (or a circle, or too deep).
    public func count(_ filter: SegmentFilter, now: Date = Date()) async throws -> (users: Int, devices: Int) {
        try await database.read { db in
            let condition = try Self.condition(db, filter, path: "filter", now: now.timeIntervalSince1970)
            // The condition runs once, over the users; their devices are then joined to that set
            // (a hash join on PostgreSQL), not the condition run again per device, as a join of
            // registrations to users would run it (bench/segments.sh). MATERIALIZED on both
            // engines: without it either may inline the set into each use.
            let row = try SQLRow.fetchOne(db, sql: """
                WITH selected AS MATERIALIZED (SELECT u.name FROM users u WHERE \(condition.sql))
                SELECT (SELECT count(*) FROM selected) AS users,
                       (SELECT count(*) FROM registrations reg JOIN selected s ON s.name = reg.username WHERE reg.handle IS NOT NULL) AS devices
                """, arguments: SQLArguments(values: condition.arguments))
            return ((row?["users"] as Int?) ?? 0, (row?["devices"] as Int?) ?? 0)
        }
    }

    /// The names of up to `limit` users `filter` selects after `cursor`, in name order (byte
    /// order): the next page of recipients starts after the last.
    public func users(matching filter: SegmentFilter, after cursor: String = "", limit: Int = 500, now: Date = Date()) async throws -> [String] {
        try await database.read { db in
            let condition = try Self.condition(db, filter, path: "filter", now: now.timeIntervalSince1970)
            var arguments: [SQLValue] = [.text(cursor)]
            arguments += condition.arguments
            arguments.append(.integer(Int64(limit)))
            return try String.fetchAll(db, sql: "SELECT u.name FROM users u WHERE u.name > ? AND \(condition.sql) ORDER BY u.name LIMIT ?",
                                       arguments: SQLArguments(values: arguments))
        }
    }

    // MARK: in a transaction

    /// `filter` resolved (every segment it names inlined) and compiled for `db`'s engine.
    static func condition(_ db: SQLConnection, _ filter: SegmentFilter, path: String, now: Double) throws -> SegmentCondition {
        try SegmentCondition(try resolve(db, filter, path: path), dialect: db.dialect, now: now)
    }

    /// `filter` with every segment it names replaced by that segment's filter, recursively. 400
    /// naming `path` (where the reference is) for a name that is no segment, a circle, references
    /// more than `maxReferenceDepth` deep, or more than `SegmentFilter.maxConditions` conditions
    /// once inlined. With `saving`, the filter is that segment's new one: naming it is a circle.
    static func resolve(_ db: SQLConnection, _ filter: SegmentFilter, path: String, saving: String? = nil) throws -> SegmentFilter {
        var loaded: [String: SegmentFilter] = [:]
        func walk(_ filter: SegmentFilter, at here: String, chain: [String], origin: String?) throws -> SegmentFilter {
            switch filter {
            case .all(let parts):
                return .all(try parts.enumerated().map { try walk($1, at: "\(here).all[\($0)]", chain: chain, origin: origin) })
            case .any(let parts):
                return .any(try parts.enumerated().map { try walk($1, at: "\(here).any[\($0)]", chain: chain, origin: origin) })
            case .not(let inner):
                return .not(try walk(inner, at: "\(here).not", chain: chain, origin: origin))
            case .segment(let name):
                let at = origin ?? "\(here).segment"
                // The segment being saved counts as one: a campaign naming it goes through it too.
                let through = chain + [name]
                let shown = through.map { "\"\($0)\"" }.joined(separator: " → ")
                if chain.contains(name) {
                    throw SegmentFilter.refusal(at, "segments name each other in a circle: \(shown)")
                }
                guard through.count <= maxReferenceDepth else {
                    throw SegmentFilter.refusal(at, "segments name segments more than \(maxReferenceDepth) deep: \(shown)")
                }
                if loaded[name] == nil {
                    guard let stored = try find(db, name) else {
                        throw SegmentFilter.refusal(at, chain.count == (saving == nil ? 0 : 1) ? "no segment named \"\(name)\""
                                                                                               : "\(shown): no segment named \"\(name)\"")
                    }
                    loaded[name] = stored.filter
                }
                return try walk(loaded[name]!, at: "filter", chain: through, origin: at)
            default:
                return filter
            }
        }
        let resolved = try walk(filter, at: path, chain: saving.map { [$0] } ?? [], origin: nil)
        let count = resolved.conditionCount
        guard count <= SegmentFilter.maxConditions else {
            throw SegmentFilter.refusal(path, "with the segments it names, the filter has \(count) conditions, at most \(SegmentFilter.maxConditions)")
        }
        return resolved
    }

    static func find(_ db: SQLConnection, _ name: String) throws -> SavedSegment? {
        try SQLRow.fetchOne(db, sql: "SELECT name, filter, createdBy, updatedAt FROM segments WHERE name = ?", arguments: [name]).map(segment)
    }

    private static func segment(_ row: SQLRow) throws -> SavedSegment {
        SavedSegment(name: row["name"], filter: try SegmentFilter(jsonText: row["filter"]), createdBy: row["createdBy"],
                     updatedAt: Date(timeIntervalSince1970: row["updatedAt"]))
    }
}
