import Hummingbird
import RichPushCore

extension Endpoint {
    static let ops: [Endpoint] = [
        Endpoint(method: .get, path: "/", access: .open, summary: "The server's root: a redirect to the console.",
                 responses: [302: APIResponse(description: "To /console.", headers: ["Location": "/console"])]) { _, _, _ in
            Response(status: .found, headers: [.location: "/console"])
        },
        Endpoint(method: .get, path: "/health", access: .open, summary: "Liveness: 200 while the server runs.",
                 responses: [200: .json(HealthResponse.self, "The server is up.")]) { rooms, r, c in try rooms.operations.health(r, c) },
        Endpoint(method: .get, path: "/ready", access: .open, summary: "Readiness: 200 when the database and the blobs answer and no push provider fails on the server's own settings, else 503 naming what fails.",
                 responses: [200: .json(ReadyResponse.self, "Every dependency answered."),
                             503: APIResponse.json(ReadyResponse.self, "A dependency did not answer within 2 s, or a push provider's sends fail for a cause in the server's settings (untrusted certificate, refused token, wrong topic, nothing listening): `failing` names it (`database`, `blobs`, `PLATFORM:APP` such as `apns:default`).",
                                                  headers: ["Retry-After": "Seconds to wait."])]) { rooms, r, c in
            try await rooms.operations.ready(r, c)
        },
        Endpoint(method: .get, path: "/metrics", access: .open, summary: "Metrics in Prometheus' text format.",
                 responses: [200: APIResponse(description: "Prometheus text format 0.0.4.", content: [("text/plain", .string)])]) { rooms, r, c in
            try rooms.operations.metrics(r, c)
        },
        Endpoint(method: .get, path: "/openapi.json", access: .open, summary: "This document.",
                 responses: [200: APIResponse(description: "OpenAPI 3.1.", content: [("application/json", .type("object"))])]) { rooms, _, _ in
            rooms.operations.openAPIResponse()
        },
    ]
}
