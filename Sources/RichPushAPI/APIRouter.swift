import HTTPEdge
import HTTPTypes
import Hummingbird
import RichPushCore

/// The routes of `Endpoint.all`, each behind the middleware its access asks for.
package func buildRouter(_ rooms: Rooms, authenticator: Authenticator, clientAddresses: ClientAddressResolver, accessLog: AccessLog,
                 publicMedia: Bool) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    // First: everything below names the client as a trusted proxy forwarded it (`--trusted-proxy`).
    router.add(middleware: ClientAddressMiddleware(resolver: clientAddresses))
    // docs/operations.md#traces: a span per request, when tracing is on.
    router.add(middleware: RequestTracingMiddleware())
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: AccessLogMiddleware(log: accessLog))
    router.add(middleware: ProblemMiddleware())
    router.add(middleware: MethodNotAllowedMiddleware(endpoints: Endpoint.all))
    let auth = AuthMiddleware(authenticator: authenticator)
    let open = router.group()
    let user = router.group().add(middleware: auth)
    let admin = router.group().add(middleware: auth).add(middleware: AdminMiddleware())
    for endpoint in Endpoint.all {
        let group = switch endpoint.access {
        case .open: open
        case .media: publicMedia ? open : user
        case .user, .password, .session: user
        case .admin: admin
        }
        let route = endpoint.handler
        let (scope, described) = (endpoint.keyScope, "\(endpoint.method.rawValue) \(endpoint.path)")
        // API keys reach only the routes of their scope (docs/api.md#apps-and-api-keys); accounts are checked by the groups.
        let handler: @Sendable (Rooms, Request, AppRequestContext) async throws -> Response = { rooms, request, context in
            if let key = context.principal?.apiKey {
                guard let scope else {
                    throw Problem(.forbidden, "API keys cannot call \(described): it is an account's (a device's or a person's)")
                }
                guard key.scope.covers(scope) else {
                    throw Problem(.forbidden, "API key \(key.name) has the scope \(key.scope.rawValue); \(described) needs \(scope.rawValue)")
                }
            }
            return try await route(rooms, request, context)
        }
        if endpoint.takesJSONOnly {
            group.on(RouterPath(endpoint.path), method: endpoint.method) { request, context in
                try await handler(rooms, try await JSONBody.requireJSONType(request), context)
            }
        } else {
            group.on(RouterPath(endpoint.path), method: endpoint.method) { request, context in try await handler(rooms, request, context) }
        }
    }
    return router
}
