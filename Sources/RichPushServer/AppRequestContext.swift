import Hummingbird

/// The request context of every route: Hummingbird's core storage plus the authenticated user.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The user whose credentials were verified, on routes behind `BasicAuthMiddleware`.
    public var user: String?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.user = nil
    }
}
