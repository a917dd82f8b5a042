import Hummingbird

/// The request context of every route: Hummingbird's core storage plus the authenticated user.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Who sent the request, on routes behind `AuthMiddleware`.
    public var principal: Principal?
    /// The user whose credentials were verified.
    public var user: String? { principal?.user }

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.principal = nil
    }
}
