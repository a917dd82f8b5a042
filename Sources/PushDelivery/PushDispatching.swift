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
    /// Called after a batch of a campaign's deliveries was committed.
    func outboxChanged()
    /// Sets what runs on each claimed batch before any of its pushes is sent (the server puts
    /// their payloads in its memory cache, docs/design/fast-path.md).
    func beforeSending(_ prepare: @escaping @Sendable ([DeliveryJob]) async -> Void)
    /// Which providers fail for a cause a person must mend (`GET /ready` names them); nil when
    /// this process sends no pushes.
    var providerHealth: ProviderHealth? { get }
    /// Makes an APNs broadcast channel for `app`'s Live Activities (docs/api.md#live-activities).
    func createChannel(app: String) async throws -> String
    /// Deletes one (an activity that could not be started gives its channel back).
    func deleteChannel(_ id: String, app: String) async throws
}

extension PushDispatching {
    public func beforeSending(_ prepare: @escaping @Sendable ([DeliveryJob]) async -> Void) {}
    public var providerHealth: ProviderHealth? { nil }
    public func createChannel(app: String) async throws -> String {
        throw PushError.configuration("this server sends no pushes: broadcast Live Activities need APNs credentials (--apns-key…)")
    }
    public func deleteChannel(_ id: String, app: String) async throws {
        throw PushError.configuration("this server sends no pushes: it has no broadcast channels")
    }
}

/// Used when no push provider is configured: pushes stay pending, and the log says why.
public struct NoPushProvider: PushDispatching {
    public init() {}
    public var addressing: DeliveryAddressing { .perDevice }

    public func enqueued(_ created: CreatedNotification, logger: Logger) {
        guard created.deliveries > 0 else { return } // nothing waits: nothing to warn about
        logger.warning(
            "no push provider configured (--apns-key…, --fcm-service-account, --vapid-key or --anh-connection-string…): pushes stay pending",
            metadata: ["notification": "\(created.notification.id)", "pending": "\(created.deliveries)"])
    }

    public func outboxChanged() {}
}
