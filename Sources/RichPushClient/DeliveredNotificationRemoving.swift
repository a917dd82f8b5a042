/// Something that removes notifications the system already shows, by their identifiers: what
/// `RichPushClient.handleRetraction(_:remover:)` asks to take back a retracted push.
///
/// On iOS, `UserNotificationCenterRemover` (`.userNotificationCenter`) removes them from the app's
/// `UNUserNotificationCenter`; a test or another platform passes its own. The identifiers are the
/// `rp-<notification id>`s the original pushes were sent with; one that names nothing shown is no error.
public protocol DeliveredNotificationRemoving: Sendable {
    /// Removes the delivered notifications whose identifiers are in `identifiers`; others stay.
    func removeDeliveredNotifications(withIdentifiers identifiers: [String]) async
}
