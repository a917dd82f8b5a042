import Foundation
import Hummingbird
import RichPushCore

extension InsightController {
    /// The longest event body taken.
    static let eventBodyLimit = 4 << 10

    /// `POST /api/events` (docs/api.md#ab-tests-and-conversions): the caller's app event, counted
    /// as a conversion of the campaigns whose push they got within 24 h, and of the A/B tests that
    /// held them out; answers how many it was counted for now.
    func reportEvent(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let body = try await RequestBody.collect(request, upTo: Self.eventBodyLimit, what: "an event")
        let event = try RequestBody.decode(EventRequest.self, from: Data(body.readableBytesView), shape: "{\"name\"}")
        let counted = try await campaigns.recordConversion(user: user, name: event.name)
        return try JSONResponse.encode(EventResponse(campaigns: counted), status: .accepted)
    }
}
