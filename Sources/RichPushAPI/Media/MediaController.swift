import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MediaStore
import Resilience
import RichPushCore

/// Uploads and serves images (`Endpoint.media`); the other rooms serve theirs through it.
struct MediaController: Sendable {
    /// `--public-media`: images are served without credentials, cached publicly.
    let publicMedia: Bool
    let media: MediaStore
    let blobs: BlobCache
    /// Uploads being received and decoded now.
    let uploads: Gate

    func uploadMedia(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let declared = request.headers[.contentLength].flatMap(Int.init)
        let name = request.uri.queryParameters.get("name")
        if name != nil, context.principal?.admin != true {
            throw Problem(.forbidden, "media names are shared by every user, so only admins may name media; upload without ?name= and use the sha256")
        }
        let uploader = context.principal?.user
        do {
            try uploads.enter(key: uploader)
        } catch .full {
            throw Problem(.serviceUnavailable, "\(uploads.limit) uploads are being checked already; try again in a moment",
                          headers: [.retryAfter: "1"])
        } catch .keyFull {
            throw Problem(.tooManyRequests, "\(uploader ?? "this user") has \(uploads.perKey) uploads being checked already (a quarter of the server's \(uploads.limit)); wait for their answers",
                          headers: [.retryAfter: "1"])
        }
        defer { uploads.leave(key: uploader) }
        // docs/operations.md#audit-log: an admin's or a key's upload, with the name it gives, in the transaction that records it.
        let audit = Audit.media(context.auditActor(request), "media.add", name: name.map { String($0) })
        let result: IngestResult
        do {
            result = try await media.ingest(upload: request.body, declaredLength: declared, name: name, also: audit)
        } catch let rejection as MediaRejection {
            Metric.ingest(rejection.kind.rawValue)
            throw rejection
        } catch let error as MediaStoreError where error.isNameTaken {
            throw Problem(.conflict, error.message)
        } catch let error as DependencyUnavailable {
            throw error
        } catch let error as MediaStoreError where error.isIO {
            // The message names server paths: it goes to the log, the client gets the kind of failure.
            context.logger.error("cannot store an upload", metadata: ["error": "\(error.message)"])
            if error.isOutOfSpace {
                throw Problem(HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"),
                              "the server's storage is full; nothing was stored (try again once an operator has made room)")
            }
            throw Problem(.internalServerError, "the server could not store the upload; nothing was stored; its log has details under request id \(context.id)")
        } catch let error as MediaStoreError {
            throw Problem(.badRequest, error.message) // the name given, or the like: the client's to mend
        } catch let error as S3Error {
            context.logger.error("the media bucket did not store an upload", metadata: ["error": "\(error)"])
            throw Self.bucketRefusal(error, requestID: context.id)
        } catch let error as any HTTPResponseError {
            throw error
        } catch {
            // The client went away or broke the body off: its problem, not a server error worth a log line.
            throw Problem(.badRequest, "the upload ended before its body did (\(error))")
        }
        Metric.ingest(result.status.rawValue)
        let item = result.item
        let url = "/media/\(item.id.hex)"
        var response = try JSONResponse.encode(MediaResponse(sha256: item.id.hex, contentType: item.info.contentType, width: item.info.width,
                                                             height: item.info.height, size: Int64(item.size), url: url,
                                                             stripped: result.stripped.map(\.rawValue)),
                                               status: result.status == .stored ? .created : .ok)
        response.headers[.location] = url
        return response
    }

    func serveMedia(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await serveImage(request, context, cacheControl: publicMedia ? "public, max-age=31536000, immutable"
                                                                                     : "private, max-age=31536000, immutable")
    }

    /// The image (or its `?variant=`) whose id is the `sha256` path parameter.
    func serveImage(_ request: Request, _ context: AppRequestContext, cacheControl: String) async throws -> Response {
        let raw = try context.parameters.require("sha256")
        guard let id = MediaID(raw) else {
            throw Problem(.notFound, "'\(raw.prefix(80))' is not a media id (64 hex digits)")
        }
        let served = try await variantOrSelf(request, id)
        guard let source = try await blobs.servable(served) else { throw Problem(.notFound, "no media \(id.hex)") }
        return try ImageResponse.make(request, source: source, cacheControl: cacheControl).0
    }

    /// The image `?variant=thumb|push` asks for (made on its first request), else `id` itself;
    /// 400 for another variant name, 404 when `id` is not stored.
    func variantOrSelf(_ request: Request, _ id: MediaID) async throws -> MediaID {
        guard let name = request.uri.queryParameters.get("variant") else { return id }
        guard let kind = MediaVariant(rawValue: name) else {
            throw Problem(.badRequest, "variant must be thumb or push, not '\(name.prefix(40))'")
        }
        do {
            let variant = try await media.variant(kind, of: id).id
            blobs.remember(variant: variant, of: id, kind)
            return variant
        } catch let error as MediaStoreError where error.isNotFound {
            throw Problem(.notFound, "no media \(id.hex)")
        }
    }

    /// The answer to an upload the bucket answered but did not store (docs/operations.md#when-a-dependency-fails): never the
    /// client's fault. Its own trouble (a 5xx, still there after the client's retries) is a 503
    /// naming the bucket, to be tried again; a refusal (403 for wrong credentials, a missing
    /// bucket) is a 500 whose details go to the log. Either way nothing was stored.
    static func bucketRefusal(_ error: S3Error, requestID: String) -> Problem {
        if case .service(let status, _, _) = error, status >= 500 {
            return Problem(.serviceUnavailable, "the media bucket is failing (it answered \(status) to every try); nothing was stored; try again in a few seconds",
                           headers: [.retryAfter: "5"])
        }
        return Problem(.internalServerError, "the media bucket refused to store the upload; nothing was stored; the server's log has details under request id \(requestID)")
    }
}
