import Foundation

/// What devices may ask of one app of `serve --apps` (docs/api.md#apps-and-api-keys); its credentials stay with its providers.
public struct AppProfile: Sendable, Equatable {
    /// The VAPID public key its browsers subscribe with; nil when it sends no Web Push.
    public var vapidPublicKey: String?
    /// Whether it sends through Notification Hubs (APNs devices only, mirrored into the hub).
    public var hub: Bool

    /// Describes an app.
    public init(vapidPublicKey: String? = nil, hub: Bool = false) {
        self.vapidPublicKey = vapidPublicKey
        self.hub = hub
    }
}
