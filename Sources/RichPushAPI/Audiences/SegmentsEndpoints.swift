import Hummingbird
import RichPushCore

extension Endpoint {
    /// docs/api.md#segments: saved filters over users' attributes, topics, locale and devices.
    static let segments: [Endpoint] = [
        Endpoint(method: .get, path: "/api/admin/segments", access: .admin, summary: "Every saved segment, by name.",
                 keys: .read,
                 responses: [200: .json(SegmentsResponse.self, "{\"segments\":[{\"name\",\"filter\",\"createdBy\",\"updatedAt\"},…]}, in byte order of name.")]) {
            rooms, r, c in try await rooms.segments.list(r, c)
        },
        Endpoint(method: .put, path: "/api/admin/segments/{name}", access: .admin,
                 summary: "Save a filter as a segment (a segment of that name is replaced; its creator is kept).",
                 parameters: [segmentName],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("SegmentBody"))],
                                             description: "{\"filter\":F}: F as docs/api.md#segments describes; a segment it names stays a reference, read each time this one is used."),
                 responses: [
                     200: .json(SegmentResponse.self, "The segment as saved."),
                     400: .problem("The name, the body or the filter is not valid: the detail starts with the filter's JSON path (filter.all[1].op: …). So are a segment it names that does not exist, segments that name each other in a circle, or more than 8 deep."),
                     413: .problem("The body is over 64 KiB."),
                 ]) { rooms, r, c in try await rooms.segments.save(r, c) },
        Endpoint(method: .get, path: "/api/admin/segments/{name}", access: .admin, summary: "A saved segment.",
                 parameters: [segmentName],
                 keys: .read,
                 responses: [
                     200: .json(SegmentResponse.self, "{\"name\",\"filter\",\"createdBy\",\"updatedAt\"}."),
                     400: .problem("The name cannot be a segment's."),
                     404: .problem("No such segment."),
                 ]) { rooms, r, c in try await rooms.segments.show(r, c) },
        Endpoint(method: .delete, path: "/api/admin/segments/{name}", access: .admin, summary: "Remove a segment. Campaigns made with it keep their audience.",
                 parameters: [segmentName],
                 responses: [
                     204: APIResponse(description: "Removed."),
                     400: .problem("The name cannot be a segment's."),
                     404: .problem("No such segment."),
                     409: .problem("Other segments name it (listed): change them first."),
                 ]) { rooms, r, c in try await rooms.segments.remove(r, c) },
        Endpoint(method: .get, path: "/api/admin/segments/{name}/count", access: .admin,
                 summary: "How many users the segment selects now, and how many devices they have (every app).",
                 parameters: [segmentName],
                 keys: .read,
                 responses: [
                     200: .json(SegmentCountResponse.self, "{\"users\":N,\"devices\":N}."),
                     400: .problem("The name cannot be a segment's, or a segment it names no longer resolves (more than 8 deep, or more than 500 conditions once inlined)."),
                     404: .problem("No such segment."),
                 ]) { rooms, r, c in try await rooms.segments.count(r, c) },
    ]

    private static let segmentName = APIParameter.path("name", ValuePattern.string(ValuePattern.segmentName),
                                                       "1 to 64 of A-Z a-z 0-9 _ . - (\".\" and \"..\" are path steps, not names).")
}
