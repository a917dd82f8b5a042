import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

extension RichPushClient {
    /// Reports that the user opened (tapped) `message` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks): `POST <payloadURL>/opened` with
    /// no credentials when the push carried a payload URL, else `POST /api/notifications/{id}/opened`
    /// with the client's. The server counts it once however often it is reported; call it from
    /// `userNotificationCenter(_:didReceive:withCompletionHandler:)`.
    /// - Throws: `RichPushClientError` (`.http(status: 404)` for a notification that is not this
    ///   user's or is gone), or `CancellationError`.
    public func reportOpened(_ message: RichPushMessage, timeout: TimeInterval = 25) async throws {
        let request: URLRequest
        if let link = message.payloadURL {
            var url = link
            url.appendPathComponent("opened")
            request = Self.request("POST", url, credentials: nil, accept: "application/json", timeout: timeout)
        } else {
            request = Self.request("POST", endpoint("api/notifications/\(message.id)/opened"), credentials: credentials,
                                   accept: "application/json", timeout: timeout)
        }
        var body = request
        body.httpBody = Data()
        _ = try await exchange(body, .json(accepting: 200...299), timeout: timeout)
    }
}
