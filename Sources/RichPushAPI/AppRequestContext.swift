import HTTPEdge
import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core storage plus the authenticated user.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer: the client, or the proxy in front of it.
    public let remoteAddress: SocketAddress?
    /// The address a trusted proxy forwarded (`ClientAddressMiddleware`); nil from anyone else.
    var forwardedClient: String?
    /// `X-Forwarded-Proto` as a trusted proxy sent it (lower case); nil from anyone else.
    public internal(set) var forwardedProto: String?
    /// The client's address (`serve --trusted-proxy`): what a trusted proxy forwarded, else the
    /// TCP peer. Failed sign-ins are throttled per client address, and the access log names it.
    public var clientAddress: String? { forwardedClient ?? remoteAddress?.ipAddress }
    /// Who sent the request, on routes behind `AuthMiddleware`.
    public var principal: Principal?
    /// The user whose credentials were verified.
    public var user: String? { principal?.user }
    /// The console's admin a console route acts for (`ConsoleController`), whoever `principal`
    /// is then: the audit log names them (docs/operations.md#audit-log).
    var consoleAdmin: String?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.principal = nil
    }
}

extension AppRequestContext {
    /// Who sent the request; 401 when no one did (a route's handler behind `AuthMiddleware` always has one).
    func requirePrincipal() throws -> Principal {
        guard let principal = principal else { throw Authenticator.unauthorized("credentials are required") }
        return principal
    }

    /// The user whose credentials were verified; 401 without.
    func requireUser() throws -> String {
        guard let user = user else { throw Authenticator.unauthorized("credentials are required") }
        return user
    }
}
