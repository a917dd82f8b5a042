import Foundation
import RichPushCore

/// The body of `PUT /api/admin/segments/{name}`: the filter to save under the name.
struct SegmentBody: Codable, Sendable {
    var filter: SegmentFilter
}

/// A saved segment, as `PUT`, `GET` and the list answer it.
struct SegmentResponse: Codable, Sendable {
    var name: String
    /// The filter as saved: a segment it names is still named, not inlined.
    var filter: SegmentFilter
    /// Who saved it first.
    var createdBy: String?
    /// When it was last saved, RFC 3339.
    var updatedAt: String

    init(_ segment: SavedSegment) {
        name = segment.name
        filter = segment.filter
        createdBy = segment.createdBy
        updatedAt = segment.updatedAt.formatted(.iso8601)
    }
}

/// `GET /api/admin/segments`: every segment, by name.
struct SegmentsResponse: Codable, Sendable {
    var segments: [SegmentResponse]
}

/// `GET /api/admin/segments/{name}/count`: how many users the segment selects now, and their devices.
struct SegmentCountResponse: Codable, Sendable {
    var users: Int
    /// Their devices a push can reach (registrations with a push handle), every app.
    var devices: Int
}

extension SegmentFilter: DeclaredSchema {
    /// An object: the grammar is recursive, which `/openapi.json` does not spell out (a schema
    /// that names itself is refused by the document's builder). The server checks it whole and
    /// answers 400 naming the JSON path of what is wrong.
    public static var declaredSchema: JSONSchema {
        JSONSchema.type("object").with {
            $0.description = """
                A segment filter (docs/api.md#segments), one of: {"all":[F…]}, {"any":[F…]}, {"not":F}, \
                {"attribute":K,"op":"eq|ne|lt|lte|gt|gte|in|exists|missing|contains","value":V}, {"topic":T}, \
                {"platform":"apns|fcm|web"}, {"app":A}, {"locale":L}, {"appVersion":{"op":"eq|ne|lt|lte|gt|gte","value":"2.10"}}, \
                {"lastSeen":{"withinDays":N}} or {"lastSeen":{"olderThanDays":N}}, {"segment":NAME}. At most 16 levels deep and \
                500 conditions; a filter that breaks a rule is a 400 naming its JSON path.
                """
        }
    }

    public static var schemaExample: SegmentFilter { .topic("news") }
}
