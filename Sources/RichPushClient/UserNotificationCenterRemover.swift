#if canImport(UserNotifications)
import UserNotifications

/// Removes delivered notifications from the app's `UNUserNotificationCenter`.
///
/// It holds nothing and asks `UNUserNotificationCenter.current()` on each call: the center is not
/// `Sendable`, and a library that declared it so for every app would clash with apps that do it themselves.
public struct UserNotificationCenterRemover: DeliveredNotificationRemoving {
    /// Creates a remover for the current app's notification center.
    public init() {}

    /// Removes the delivered notifications whose request identifiers are in `identifiers`.
    ///
    /// iOS takes an APNs push's `apns-collapse-id` as its request identifier, so `rp-<id>` names
    /// the notification RichPush sent. iOS removes them asynchronously, shortly after this returns.
    public func removeDeliveredNotifications(withIdentifiers identifiers: [String]) async {
        UNUserNotificationCenter.current().removeDeliveredNotifications(withIdentifiers: identifiers)
    }
}

extension DeliveredNotificationRemoving where Self == UserNotificationCenterRemover {
    /// The app's notification center, for `client.handleRetraction(message, remover: .userNotificationCenter)`.
    public static var userNotificationCenter: UserNotificationCenterRemover { UserNotificationCenterRemover() }
}
#endif
