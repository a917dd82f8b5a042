import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

/// Which image of a payload to download (docs/configuration.md#the-media-store).
public enum PayloadVariant: String, Sendable {
    /// The image as stored.
    case original
    /// A JPEG of at most 1 MB and 2048 px on its long side, upright.
    case push
    /// An image that fits 320×320, upright, or the image itself when that is smaller in bytes.
    case thumb
}
