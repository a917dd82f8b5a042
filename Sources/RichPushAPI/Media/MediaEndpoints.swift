import Hummingbird
import RichPushCore

extension Endpoint {
    static let media: [Endpoint] = [
        Endpoint(method: .get, path: "/media/{sha256}", access: .media, summary: "An image, by its media id.",
                 parameters: imageParameters(.path("sha256", mediaID, "The media id: SHA-256 of the bytes, 64 hex digits."), variants: true),
                 keys: .read,
                 responses: imageResponses(notFound: "No such media.", variants: true)) { rooms, r, c in try await rooms.media.serveMedia(r, c) },
        Endpoint(method: .head, path: "/media/{sha256}", access: .media, summary: "An image's headers, by its media id.",
                 parameters: imageParameters(.path("sha256", mediaID, "The media id: SHA-256 of the bytes, 64 hex digits."), variants: true),
                 keys: .read,
                 responses: imageResponses(notFound: "No such media.", variants: true)) { rooms, r, c in try await rooms.media.serveMedia(r, c) },
        Endpoint(method: .post, path: "/api/media", access: .user, summary: "Store an image (PNG, JPEG or GIF), checked by decoding it whole.",
                 parameters: [.query("name", ValuePattern.string(ValuePattern.mediaName), "A name for the image (admins only); a name of other bytes is 409.")],
                 requestBody: APIRequestBody(required: true, content: [("image/png", .binary), ("image/jpeg", .binary), ("image/gif", .binary), ("application/octet-stream", .binary)],
                                             description: "The image's bytes."),
                 keys: .send,
                 responses: [
                     201: .json(MediaResponse.self, "Stored.", headers: ["Location": "Where the image is served."]),
                     200: .json(MediaResponse.self, "Already stored.", headers: ["Location": "Where the image is served."]),
                     400: .problem("The upload broke off, or the name is not valid."),
                     403: .problem("Only admins may name media."),
                     409: .problem("The name already names other bytes."),
                     411: .problem("The upload has no length."),
                     413: .problem("too_large: over the size or pixel limits."),
                     415: .problem("unsupported: not a PNG, JPEG or GIF."),
                     422: .problem("corrupt: it does not decode."),
                     503: .problem("Too many uploads are being checked; try again.", headers: ["Retry-After": "Seconds to wait."]),
                 ]) { rooms, r, c in try await rooms.media.uploadMedia(r, c) },
    ]
}
