import HTTPTypes
import Hummingbird
import MediaStore

/// Builds every image response (`/media/…` and notification payloads) the same way: real type,
/// `Content-Length`, strong `ETag`, `Accept-Ranges`, `nosniff`, `If-None-Match` → 304,
/// a single `Range` → 206 / 416, and `HEAD`.
enum ImageResponse {
    /// What happened, so the caller can decide about side effects (marking a payload read).
    enum Outcome { case full, partial, notModified, head }

    static let nosniff = HTTPField.Name("X-Content-Type-Options")!

    /// The headers every image response carries.
    static func baseHeaders(contentType: String, etag: String, cacheControl: String) -> HTTPFields {
        [.contentType: contentType, .eTag: etag, .acceptRanges: "bytes", .cacheControl: cacheControl, nosniff: "nosniff"]
    }

    static func make(_ request: Request, blob: ServedBlob, cacheControl: String) throws -> (Response, Outcome) {
        try make(request, source: .memory(blob), cacheControl: cacheControl)
    }

    /// The same answer for a blob in memory or one streamed from its file.
    static func make(_ request: Request, source: Servable, cacheControl: String) throws -> (Response, Outcome) {
        let (etag, size, contentType): (String, Int, String) = switch source {
        case .memory(let blob): (blob.etag, blob.bytes.readableBytes, blob.contentType)
        case .file(let file): (file.etag, file.size, file.contentType)
        }
        func body(_ range: ClosedRange<Int>) -> ResponseBody {
            switch source {
            case .memory(let blob):
                return .init(byteBuffer: blob.bytes.getSlice(at: blob.bytes.readerIndex + range.lowerBound, length: range.count)!)
            case .file(let file):
                return ResponseBody(contentLength: range.count) { writer in
                    var writer: any ResponseBodyWriter = writer
                    try await FileChunks.stream(file, range: range, to: &writer)
                }
            }
        }
        let isHead = request.method == .head
        let plain = request.headers[.ifNoneMatch] == nil && request.headers[.range] == nil
        if plain, case .memory(let blob) = source, let headers = blob.fullHeaders[cacheControl] {
            return (Response(status: .ok, headers: headers, body: isHead ? .init() : .init(byteBuffer: blob.bytes)), isHead ? .head : .full)
        }
        var headers = baseHeaders(contentType: contentType, etag: etag, cacheControl: cacheControl)
        if let inm = request.headers[values: .ifNoneMatch].first, matches(inm, etag: etag) {
            return (Response(status: .notModified, headers: headers), .notModified)
        }
        var range: ClosedRange<Int>?
        if let rangeHeader = request.headers[.range], ifRangeAllows(request, etag: etag) {
            switch parseRange(rangeHeader, size: size) {
            case .none: break
            case .some(.unsatisfiable):
                throw Problem(.rangeNotSatisfiable, "range '\(rangeHeader)' is outside the \(size)-byte image",
                              headers: [.contentRange: "bytes */\(size)"])
            case .some(.range(let r)): range = r
            }
        }
        if let range {
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
            headers[.contentLength] = String(range.count)
            return (Response(status: .partialContent, headers: headers, body: isHead ? .init() : body(range)), isHead ? .head : .partial)
        }
        headers[.contentLength] = String(size)
        return (Response(status: .ok, headers: headers, body: isHead || size == 0 ? .init() : body(0...(size - 1))), isHead ? .head : .full)
    }

    /// `If-None-Match`: `*` or any listed tag equal under weak comparison.
    static func matches(_ header: String, etag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            var tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == etag
        }
    }

    /// `If-Range` with a strong ETag: the range applies only when it still names this blob.
    static func ifRangeAllows(_ request: Request, etag: String) -> Bool {
        guard let ifRange = request.headers[.ifRange] else { return true }
        return ifRange.trimmingCharacters(in: .whitespaces) == etag
    }

    enum ParsedRange: Equatable {
        case range(ClosedRange<Int>)
        case unsatisfiable
    }

    /// One `bytes=` range; nil for anything else (several ranges, other units, bad syntax),
    /// which RFC 9110 lets a server answer with the whole representation.
    static func parseRange(_ header: String, size: Int) -> ParsedRange? {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            guard let suffix = Int(last), suffix >= 0, last.allSatisfy(\.isNumber) else { return nil }
            if suffix == 0 || size == 0 { return .unsatisfiable }
            return .range(max(0, size - suffix)...(size - 1))
        }
        guard let start = Int(first), first.allSatisfy(\.isNumber) else { return nil }
        var end = size - 1
        if !last.isEmpty {
            guard let e = Int(last), last.allSatisfy(\.isNumber), e >= start else { return nil }
            end = min(e, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .range(start...end)
    }
}

import Foundation
