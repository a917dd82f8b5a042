import HTTPEdge
import Hummingbird

/// Sets the context's client address (and the forwarded scheme) for requests a trusted proxy
/// sent; goes first, so the access log, the sign-in throttle and the console see it.
struct ClientAddressMiddleware: RouterMiddleware {
    let resolver: ClientAddressResolver

    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        let peer = context.remoteAddress?.ipAddress
        guard resolver.isTrusted(peer) else { return try await next(request, context) }
        var context = context
        context.forwardedClient = resolver.client(peer: peer, forwardedFor: request.headers[values: ClientAddressResolver.forwardedFor])
        context.forwardedProto = resolver.forwardedProto(peer: peer, values: request.headers[values: ClientAddressResolver.forwardedProto])
        return try await next(request, context)
    }
}
