import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

/// A payload image saved to a file and verified to be the PNG, JPEG or GIF its name says.
public struct DownloadedPayload: Sendable, Equatable {
    /// The file, `<richId>-<random>.png`, `.jpg` or `.gif` in the directory given; the caller owns it
    /// (iOS moves it away when it becomes a notification attachment).
    public var fileURL: URL
    /// `image/png`, `image/jpeg` or `image/gif`: what the server declared and the first bytes confirmed.
    public var contentType: String
    /// The file's size in bytes.
    public var size: Int

    /// Creates a payload record from its parts.
    public init(fileURL: URL, contentType: String, size: Int) {
        self.fileURL = fileURL
        self.contentType = contentType
        self.size = size
    }
}

#if canImport(UserNotifications)
extension DownloadedPayload {
    /// An attachment that shows this image in the notification.
    ///
    /// iOS moves the file into its own store when the content is delivered, and reads its type from
    /// the file extension, which is why the file is named by the verified type.
    public func notificationAttachment(identifier: String = "richpush-image") throws -> UNNotificationAttachment {
        try UNNotificationAttachment(identifier: identifier, url: fileURL, options: nil)
    }
}
#endif
