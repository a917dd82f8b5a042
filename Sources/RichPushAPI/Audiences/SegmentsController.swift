import Foundation
import HTTPTypes
import Hummingbird
import RichPushCore

/// Saved segments: named filters over users' attributes, topics, locale and devices
/// (`Endpoint.segments`, docs/api.md#segments).
struct SegmentsController: Sendable {
    let segments: SegmentStore

    /// The largest segment body: 500 conditions fit.
    static let bodyLimit = 64 * 1024

    func save(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        let name = try context.parameters.require("name")
        try SegmentStore.validateName(name)
        let body = try await RequestBody.collect(request, upTo: Self.bodyLimit, what: "a segment body")
        let segment = try RequestBody.decode(SegmentBody.self, from: Data(body.readableBytesView), shape: "{\"filter\":{…}}")
        let saved = try await segments.save(name: name, filter: segment.filter, by: principal.user, audit: context.auditActor(request))
        return try JSONResponse.encode(SegmentResponse(saved))
    }

    func list(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try JSONResponse.encode(SegmentsResponse(segments: try await segments.list().map(SegmentResponse.init)))
    }

    func show(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try JSONResponse.encode(SegmentResponse(try await find(context)))
    }

    func remove(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let name = try context.parameters.require("name")
        try SegmentStore.validateName(name)
        try await segments.remove(name, audit: context.auditActor(request))
        return Response(status: .noContent)
    }

    func count(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let segment = try await find(context)
        // Counted as a campaign naming it would be: through the segment, whatever it names read now.
        let (users, devices) = try await segments.count(.segment(segment.name))
        return try JSONResponse.encode(SegmentCountResponse(users: users, devices: devices))
    }

    /// The segment the path names: 400 for a name that cannot be one, 404 for none.
    private func find(_ context: AppRequestContext) async throws -> SavedSegment {
        let name = try context.parameters.require("name")
        try SegmentStore.validateName(name)
        guard let segment = try await segments.find(name) else { throw Problem(.notFound, "no segment \(name)") }
        return segment
    }
}
