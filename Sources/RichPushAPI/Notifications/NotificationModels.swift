import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// The object form of `POST /api/notifications`' body; every field may be left out.
struct NotificationRequest: Codable, Sendable {
    var message: String?
    var richType: String?
    /// A media id or name.
    var payload: String?
    var title: String?
    var mode: PushMode?
    /// The app whose devices get it (docs/api.md#apps-and-api-keys); every app when left out.
    var app: String?
    /// The recipient: the caller when left out; another user only for an admin or an API key
    /// (which has no inbox of its own, so must name one).
    var to: String?
    /// docs/api.md#options-badges-and-paced-sends: each platform's options, and the badge (`"unread"` or a number).
    var options: PushOptions?
    var badge: PushOptions.Badge?
    /// docs/api.md#dry-runs: true answers 200 with the recipient's devices and their pushes,
    /// checked as a send is, and stores, queues and sends nothing.
    var dryRun: Bool?

    func draft(defaultMode: PushMode) -> NotificationDraft {
        NotificationDraft(message: message, richType: richType, payload: payload, title: title, mode: mode ?? defaultMode,
                          options: PushOptions.with(options, badge: badge))
    }
}

/// `201` of `POST /api/notifications`.
struct NotificationCreated: Codable, Sendable {
    var id: Int64
    var message: String
    var richType: String
    var payload: String
    var read: Bool
    var mode: PushMode
    var title: String?
    /// The signed payload URL an alert push carries.
    var richUrl: String?
}

/// An element of `GET /api/notifications`.
struct NotificationSummary: Codable, Sendable {
    var id: Int64
    var message: String
    var richType: String
    var payload: String
    var read: Bool
    /// ISO 8601.
    var created: String
}
