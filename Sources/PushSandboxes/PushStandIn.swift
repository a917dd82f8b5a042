import Hummingbird

/// A local push service: its routes, on a router of their own or beside others'.
public protocol PushStandIn: Sendable {
    /// Adds the service's routes under `prefix`.
    func addRoutes(to router: Router<BasicRequestContext>, at prefix: String)
}

extension PushStandIn {
    /// A router with the service's routes alone.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        addRoutes(to: router, at: "")
        return router
    }
}
