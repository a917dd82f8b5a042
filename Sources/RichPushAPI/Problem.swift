import Foundation
import Hummingbird
import Logging
import MediaStore
import Resilience
import RichPushCore

/// An error answered as `application/problem+json` (RFC 9457) with a `detail` a person can act on.
public struct Problem: HTTPResponseError {
    public let status: HTTPResponse.Status
    /// What was wrong and what to do about it.
    public let detail: String
    /// Extra headers (`WWW-Authenticate`, `Content-Range`).
    public var headers: HTTPFields

    /// Creates a problem.
    public init(_ status: HTTPResponse.Status, _ detail: String, headers: HTTPFields = [:]) {
        self.status = status
        self.detail = detail
        self.headers = headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(ProblemDetails(type: "about:blank", title: status.reasonPhrase, status: status.code, detail: detail))
        var headers = self.headers
        headers[.contentType] = "application/problem+json"
        headers[.contentLength] = String(data.count)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The problem for any error a route may meet; unknown errors become a 500 that names the request id only.
    static func from(_ error: any Error, requestID: String) -> (problem: Problem, unexpected: Bool) {
        switch error {
        case let problem as Problem:
            return (problem, false)
        case let rejection as MediaRejection:
            let status: HTTPResponse.Status = switch rejection.kind {
            case .tooLarge: .contentTooLarge
            case .unsupported: .unsupportedMediaType
            case .corrupt: .unprocessableContent
            }
            return (Problem(status, "\(rejection.kind.rawValue): \(rejection.reason)"), false)
        case let error as CoreError:
            let status: HTTPResponse.Status = switch error.kind {
            case .invalid: .badRequest
            case .unprocessable: .unprocessableContent
            case .notFound: .notFound
            case .forbidden: .forbidden
            case .gone: .gone
            case .conflict: .conflict
            case .tooLarge: .contentTooLarge
            }
            return (Problem(status, error.message), false)
        case let error as MediaStoreError where error.isNotFound:
            return (Problem(.notFound, error.message), false)
        case let error as DependencyUnavailable:
            // The log has the breaker's line with the cause; the client is told what is down, not where.
            return (Problem(.serviceUnavailable, error.publicMessage, headers: [.retryAfter: String(error.retryAfter)]), false)
        case let error as MediaStoreError where error.isBusy:
            return (Problem(.serviceUnavailable, error.message, headers: [.retryAfter: "1"]), false)
        case let error as HTTPError:
            let detail = error.body ?? (error.status == .notFound ? "no such route" : error.status.reasonPhrase)
            return (Problem(error.status, detail, headers: error.headers), false)
        case let error as any HTTPResponseError:
            return (Problem(error.status, error.status.reasonPhrase), false)
        default:
            return (Problem(.internalServerError, "internal error; the server log has details under request id \(requestID)"), true)
        }
    }
}

/// Turns every error below it into a problem+json response, logging the unexpected ones.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let (problem, unexpected) = Problem.from(error, requestID: context.id)
            if unexpected {
                context.logger.error("request failed", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            }
            return try problem.response(from: request, context: context)
        }
    }
}
