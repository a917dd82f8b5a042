import Hummingbird
import RichPushCore

extension Endpoint {
    /// docs/api.md#ab-tests-and-conversions: an app event after a push, counted as a conversion.
    static let conversions: [Endpoint] = [
        Endpoint(method: .post, path: "/api/events", access: .user,
                 summary: "An app event of the caller's (a purchase): counted once per campaign and user as a conversion of each campaign whose push the caller was sent within 24 h (in the variant they were in), and of each A/B test started within 24 h that held them out.",
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("EventRequest"))],
                                             description: "{\"name\"}: 1 to 64 letters, digits, _ . : or -."),
                 responses: [
                     202: .json(EventResponse.self, "Counted: the campaigns it was counted a conversion for now (0 when there is none, or each counted this user's conversion before)."),
                     400: .problem("The body is not {\"name\"}, or the name is not 1 to 64 letters, digits, _ . : or -."),
                     413: .problem("The body is over 4 KiB."),
                 ]) { rooms, r, c in try await rooms.insight.reportEvent(r, c) },
    ]
}
