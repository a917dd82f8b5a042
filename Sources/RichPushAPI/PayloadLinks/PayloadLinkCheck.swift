import Foundation
import MediaStore
import RichPushCore

/// What a payload URL's token allows, decided the same way by the router and the fast path.
enum PayloadLinkCheck: Equatable {
    case valid(notification: Int64, payload: MediaID)
    case expired(notification: Int64)
    case invalid

    /// Checks the signature (the token names its notification and image, so no lookup is needed), then the expiry.
    /// (Concrete: inside a generic function the call below would bind to `PayloadLinks`'s
    /// generic `claims`, which copies the token into a new `String`.)
    static func check(_ token: Substring, links: PayloadLinks, now: Date = Date()) -> PayloadLinkCheck {
        guard let claims = PayloadLinks.claims(token), links.isAuthentic(claims) else { return .invalid }
        guard now.timeIntervalSince1970 < Double(claims.expires) else { return .expired(notification: claims.notification) }
        return .valid(notification: claims.notification, payload: claims.payload)
    }

    static func check(_ token: String, links: PayloadLinks, now: Date = Date()) -> PayloadLinkCheck {
        check(token[...], links: links, now: now)
    }
}
