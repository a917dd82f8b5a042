import Hummingbird

/// A local push service: its routes, on a router of their own or beside others'.
public protocol PushStandIn: Sendable {
    /// Adds the service's routes under `prefix`.
    func addRoutes(to router: Router<BasicRequestContext>, at prefix: String)
    /// Where the service is reached, prefix included: the origin of its endpoints and audiences.
    func bound(origin: String)
}

extension PushStandIn {
    /// A router with the service's routes alone.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        addRoutes(to: router, at: "")
        return router
    }
}
