import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core storage plus the authenticated user.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The client's address (failed logins are throttled per address).
    public let remoteAddress: SocketAddress?
    /// Who sent the request, on routes behind `AuthMiddleware`.
    public var principal: Principal?
    /// The user whose credentials were verified.
    public var user: String? { principal?.user }

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.principal = nil
    }
}
