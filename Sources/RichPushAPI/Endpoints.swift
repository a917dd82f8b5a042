import Foundation
import Hummingbird
import MediaStore
import RichPushCore

extension Endpoint {
    /// Every route of docs/api.md#http-api, §9–§11 and §14, in the order `/openapi.json` lists them.
    static let all: [Endpoint] = ops + media + registrations + webPush + notifications + sessions + campaigns + me + payloadLinks + insight + audiences
        + segments + liveActivities + console + conversions + audit

    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: `Idempotency-Key` on the POSTs that create.
    static let idempotencyKey = APIParameter(name: "Idempotency-Key", location: .header,
                                             schema: JSONSchema.string.with { $0.minLength = 1; $0.maxLength = 255 }, description: "Any string up to 255 bytes: a repeat with the same key and body within 24 h answers what the first did (Idempotent-Replayed: true) and creates nothing; the same key with another body is 422.")

    static let mediaID = JSONSchema.string.with { $0.pattern = "^[0-9a-fA-F]{64}$" }
    static let notificationID = JSONSchema.integer.with { $0.minimum = 1 }

    static func imageParameters(_ id: APIParameter, variants: Bool = false) -> [APIParameter] {
        [id, .header("Range", "bytes=FIRST-LAST, FIRST- or -SUFFIX: one range."),
         .header("If-None-Match", "The ETag held; 304 when it is still the image's.")]
            + (variants ? [.query("variant", JSONSchema.string.with { $0.enumeration = MediaVariant.allCases.map(\.rawValue) },
                                  "thumb (fits 320×320, or the image itself when that is smaller in bytes) or push (a JPEG of at most 1 MB and 2048 px), made on first request; its ETag is its own SHA-256.")]
                        : [])
    }

    /// docs/api.md#http-api: every image response has the same headers, and honours If-None-Match, Range and HEAD.
    static func imageResponses(notFound: String, gone: Bool = false, variants: Bool = false) -> [Int: APIResponse] {
        let headers = ["ETag": "The SHA-256, strong.", "Cache-Control": "private, or public with --public-media for /media.",
                       "Accept-Ranges": "bytes", "X-Content-Type-Options": "nosniff"]
        var responses: [Int: APIResponse] = [
            200: .image("The image, with its stored type.", headers: headers),
            206: .image("One range of it.", headers: headers.merging(["Content-Range": "The range sent."]) { a, _ in a }),
            304: APIResponse(description: "If-None-Match named this image.", headers: ["ETag": "The SHA-256, strong."]),
            404: .problem(notFound),
            416: .problem("The range is outside the image.", headers: ["Content-Range": "bytes */SIZE"]),
        ]
        if gone { responses[410] = .problem("The payload URL expired (the app fetches with its credentials instead), or its notification was withdrawn.") }
        if variants { responses[400] = .problem("variant is neither thumb nor push.") }
        return responses
    }
}
