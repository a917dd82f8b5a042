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

/// Authenticates every request below it (Basic or Bearer) and stores who sent it in the context.
struct AuthMiddleware: RouterMiddleware {
    let authenticator: Authenticator

    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        var context = context
        context.principal = try await authenticator.authenticate(request.headers[.authorization], from: context.clientAddress)
        return try await next(request, context)
    }
}
