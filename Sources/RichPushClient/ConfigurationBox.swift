import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

/// The caller's session configuration, copied once and never mutated, so the client is `Sendable`
/// whether or not this platform's Foundation marks `URLSessionConfiguration` so.
final class ConfigurationBox: @unchecked Sendable {
    private let configuration: URLSessionConfiguration

    init(_ configuration: URLSessionConfiguration) {
        self.configuration = configuration.copy() as! URLSessionConfiguration
    }

    /// A fresh copy for one exchange.
    func make(timeout: TimeInterval) -> URLSessionConfiguration {
        let copy = configuration.copy() as! URLSessionConfiguration
        copy.timeoutIntervalForRequest = timeout
        copy.timeoutIntervalForResource = timeout
        copy.requestCachePolicy = .reloadIgnoringLocalCacheData
        copy.urlCache = nil
        // Credentials travel in the Authorization header we set; a stored one must not answer a 401 for us.
        copy.urlCredentialStorage = nil
        return copy
    }
}
