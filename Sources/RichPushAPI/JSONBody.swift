import Foundation
import Hummingbird

extension Endpoint {
    /// Whether the route's body, when it has one, is JSON and nothing else.
    var takesJSONOnly: Bool {
        guard let body = requestBody, !body.content.isEmpty else { return false }
        return body.content.allSatisfy { $0.mediaType == "application/json" }
    }
}

/// The check every JSON route makes before it reads a body: a body must say it is JSON.
///
/// A browser posts `text/plain`, `application/x-www-form-urlencoded`, `multipart/form-data` or
/// a body with no type to any site without asking it first (no CORS preflight), and sends the
/// Basic credentials it holds for that site along. Refusing every other type (415) means a page
/// elsewhere cannot make a signed-in browser create notifications or campaigns: to send
/// `application/json` across sites, a browser must ask first, and RichPush answers no
/// cross-site preflight. An empty body (the tutorial's "send push") needs no type.
enum JSONBody {
    /// The longest body a JSON route takes (a campaign's); a chunked body without a JSON type is
    /// read up to this to learn whether it is empty.
    static let limit = 1 << 20

    /// Returns the request to hand on: as it was, or with a chunked body it had to read.
    static func requireJSONType(_ request: Request) async throws -> Request {
        if let type = request.headers[.contentType], isJSON(type) { return request }
        let length = request.headers[.contentLength].flatMap(Int.init)
        if let length, length == 0 { return request }
        var request = request
        if length == nil {
            // Chunked (or no framing): only the body itself says whether there is one.
            let buffer = try await request.body.collect(upTo: limit)
            if buffer.readableBytes == 0 {
                request.body = .init(buffer: buffer)
                return request
            }
        }
        throw Problem(.unsupportedMediaType, "send the JSON body with Content-Type: application/json (got \(request.headers[.contentType].map { "'\($0.prefix(80))'" } ?? "none")); "
                      + "a form's types are refused so that another site cannot post here with a browser's credentials")
    }

    /// `application/json` or any `…/…+json`, with or without parameters.
    static func isJSON(_ contentType: String) -> Bool {
        let essence = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return essence == "application/json" || (essence.hasPrefix("application/") && essence.hasSuffix("+json"))
    }
}
