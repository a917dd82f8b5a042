import Logging
import RichPushCore

/// What the HTTP layer tells the delivery side: new deliveries are in the outbox.
///
/// The outbox rows are committed before anyone is told, so a dispatcher that is not running
/// (or a process that dies) loses nothing: pending rows are picked up on the next start.
public protocol PushDispatching: Sendable {
    /// How new notifications address their pushes.
    var addressing: DeliveryAddressing { get }
    /// Called after a notification and its deliveries were committed.
    func enqueued(_ created: CreatedNotification, logger: Logger)
}

/// Used when no push provider is configured: pushes stay pending, and the log says why.
public struct NoPushProvider: PushDispatching {
    public init() {}
    public var addressing: DeliveryAddressing { .perDevice }

    public func enqueued(_ created: CreatedNotification, logger: Logger) {
        logger.warning(
            "no push provider configured (--apns-key… or --anh-connection-string…): pushes stay pending",
            metadata: ["notification": "\(created.notification.id)", "pending": "\(created.deliveries)"])
    }
}
