import Hummingbird
import RichPushCore

extension Endpoint {
    static let payloadLinks: [Endpoint] = [
        Endpoint(method: .get, path: "/p/{token}", access: .open, summary: "A payload image through a signed, expiring payload URL (no credentials).",
                 parameters: imageParameters(.path("token", .string, "The token of an alert push's richUrl."), variants: true),
                 responses: imageResponses(notFound: "The token is not valid (changed, or its key was rotated).", gone: true, variants: true)) { rooms, r, c in
            try await rooms.payloadLinks.fetchPayloadByLink(r, c)
        },
        Endpoint(method: .head, path: "/p/{token}", access: .open, summary: "A payload image's headers through a payload URL.",
                 parameters: imageParameters(.path("token", .string, "The token of an alert push's richUrl."), variants: true),
                 responses: imageResponses(notFound: "The token is not valid (changed, or its key was rotated).", gone: true, variants: true)) { rooms, r, c in
            try await rooms.payloadLinks.fetchPayloadByLink(r, c)
        },
        Endpoint(method: .post, path: "/p/{token}/opened", access: .open,
                 summary: "The device says the notification of this payload URL was opened (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks); counted once.",
                 parameters: [.path("token", .string, "The token of an alert push's richUrl.")],
                 responses: [204: APIResponse(description: "Counted (or already: then nothing is written)."),
                             404: .problem("The token is not valid (changed, or its key was rotated)."),
                             410: .problem("The payload URL expired, or its notification was withdrawn."),
                             429: .problem("Too many opens from this client address in a minute (--opens-per-minute).",
                                           headers: ["Retry-After": "Seconds until one more is taken."])]) { rooms, r, c in
            try await rooms.payloadLinks.reportOpenedByLink(r, c)
        },
    ]
}
