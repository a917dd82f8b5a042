import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

extension RichPushClient {
    /// Downloads the payload image of `message` into a new file in `directory`.
    ///
    /// With a `payloadURL` (an alert push's `richUrl`) the URL is fetched with no credentials: it is
    /// a capability of its own. Otherwise `GET /api/notifications/{id}` is fetched with the client's
    /// credentials. Either way the server marks the notification read. The body is written to disk
    /// as it arrives and refused, with the transfer cancelled, as soon as the status is not 200, the
    /// size passes `maxBytes`, the `Content-Type` is not `image/png`, `image/jpeg` or `image/gif`, or the first
    /// bytes are not that type's signature. The file is named `<richId>-<random>.png`, `.jpg` or `.gif` by
    /// the verified type, as `UNNotificationAttachment` requires; on any failure nothing is left.
    ///
    /// `variant` asks for an image made for the purpose (docs/configuration.md#the-media-store): `.push` is a JPEG of at most
    /// 1 MB and 2048 px, what a Notification Service Extension's 24 MB can decode; `.thumb` fits
    /// 320×320.
    ///
    /// `timeout` bounds the whole exchange; a Notification Service Extension has about 30 seconds.
    /// - Throws: `RichPushClientError` (`.http(status:)`, `.tooLarge`, `.notAnImage`, `.transport`,
    ///   `.invalidResponse`, `.fileSystem`), or `CancellationError` when the task is cancelled.
    public func downloadPayload(for message: RichPushMessage, into directory: URL, maxBytes: Int = 10 * 1024 * 1024,
                                variant: PayloadVariant = .original, timeout: TimeInterval = 25) async throws -> DownloadedPayload {
        var url = message.payloadURL ?? endpoint("api/notifications/\(message.id)")
        if variant != .original, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            parts.queryItems = (parts.queryItems ?? []) + [URLQueryItem(name: "variant", value: variant.rawValue)]
            url = parts.url ?? url
        }
        let request = Self.request("GET", url, credentials: message.payloadURL == nil ? credentials : nil,
                                   accept: "image/png, image/jpeg, image/gif", timeout: timeout)
        let name = "\(message.id)-\(String(UInt64.random(in: .min ... .max), radix: 36))"
        let target = Transfer.ImageTarget(directory: directory, baseName: name, maxBytes: maxBytes)
        let reply = try await exchange(request, .image(target), timeout: timeout)
        guard let payload = reply.payload else { throw RichPushClientError.invalidResponse("the download produced no file") }
        return payload
    }
}

#if canImport(UserNotifications)
extension RichPushClient {
    /// Downloads the image a push names and attaches it to `content`: what a Notification Service
    /// Extension's `didReceive(_:withContentHandler:)` awaits before calling its content handler.
    ///
    /// It never throws: when the push is not RichPush's, or the download fails or passes `timeout`,
    /// `content` is left as it came and the alert shows without an image. A push with a `richUrl`
    /// needs no credentials; one without is fetched through the API with `credentials`.
    /// - Returns: whether an image was attached.
    @discardableResult
    public static func attachPayload(to content: UNMutableNotificationContent, baseURL: URL, credentials: Credentials? = nil,
                                     maxBytes: Int = 10 * 1024 * 1024, timeout: TimeInterval = 25) async -> Bool {
        guard let message = try? RichPushMessage(userInfo: content.userInfo) else { return false }
        let client = RichPushClient(baseURL: baseURL, credentials: credentials)
        // The push variant: a 12 MP original decoded for display takes 48 MB, twice what an extension may use.
        guard let payload = try? await client.downloadPayload(for: message, into: FileManager.default.temporaryDirectory,
                                                               maxBytes: maxBytes, variant: .push, timeout: timeout) else { return false }
        do {
            content.attachments = [try payload.notificationAttachment()]
            return true
        } catch {
            try? FileManager.default.removeItem(at: payload.fileURL)
            return false
        }
    }
}
#endif
