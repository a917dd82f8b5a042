import Foundation
import HTTPEdge
import Hummingbird

/// The router's side of `AccessLog`.
struct AccessLogMiddleware: RouterMiddleware {
    let log: AccessLog

    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        guard log.sampled else { return try await next(request, context) }
        let start = DispatchTime.now().uptimeNanoseconds
        var status = 500
        defer {
            log.record(method: request.method.rawValue, uri: request.uri.description, status: status,
                       nanoseconds: DispatchTime.now().uptimeNanoseconds - start, remote: context.clientAddress)
        }
        do {
            let response = try await next(request, context)
            status = response.status.code
            return response
        } catch {
            status = (error as? any HTTPResponseError)?.status.code ?? 500
            throw error
        }
    }
}
