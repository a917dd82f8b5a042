extension RichPushClient {
    /// Takes back what a retraction push names (SPEC §26): asks `remover` to remove the delivered
    /// notifications `message.retractedIdentifiers` and returns those identifiers.
    ///
    /// For any other kind of message it does nothing and returns an empty list, so an app can pass
    /// every push that parses. Call it from `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)`:
    /// a retraction is a background push, which the system does not show. No request is made to the server.
    @discardableResult
    public func handleRetraction(_ message: RichPushMessage, remover: some DeliveredNotificationRemoving) async -> [String] {
        guard message.kind == .retraction, !message.retractedIdentifiers.isEmpty else { return [] }
        let identifiers = message.retractedIdentifiers
        await remover.removeDeliveredNotifications(withIdentifiers: identifiers)
        return identifiers
    }
}
