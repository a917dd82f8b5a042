import Crypto
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import PushDelivery
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RichPushCore
import ServiceLifecycle

/// Lets only admins through (403 for everyone else); goes below `AuthMiddleware`. API keys go
/// on: each route checks its own scope (`Endpoint.keyScope`).
struct AdminMiddleware: RouterMiddleware {
    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        guard let principal = context.principal else { throw Authenticator.unauthorized("credentials are required") }
        guard principal.admin || principal.apiKey != nil else { throw Problem(.forbidden, "\(principal.user) is not an admin; only admins may do this (richpush users add NAME --admin)") }
        return try await next(request, context)
    }
}
