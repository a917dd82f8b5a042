import Foundation
import Hummingbird
import RichPushCore

/// The body of `PATCH /api/admin/campaigns/{id}` and `PATCH /api/notifications/{id}`
/// (docs/api.md#change-or-take-back-what-was-sent): what changes; each field left out stays.
struct ContentChangeRequest: Codable, Sendable {
    /// The new title; empty removes it.
    var title: String?
    var message: String?
    /// A media id or name.
    var payload: String?
    /// A campaign's words per locale, replacing all of them.
    var content: LocaleContent?
    /// The platform options, replacing them (the badge stays unless `badge` is given).
    var options: PushOptions?
    var badge: PushOptions.Badge?
    /// Devices that already got it alert again (sound, as first sent) instead of replacing it quietly.
    var alertAgain: Bool?

    /// What it asks for, as the stores take it.
    var change: ContentChange {
        ContentChange(title: title, message: message, payload: payload, locales: content?.locales, options: options, badge: badge,
                      alertAgain: alertAgain ?? false)
    }

    /// The accepted shape, for refusals of unknown fields.
    static let shape = "{\"title\",\"message\",\"payload\",\"content\",\"options\",\"badge\",\"alertAgain\"}"
}

/// Counts per platform: `apns`, `fcm` and `web` always, `hub` (Notification Hubs' user tags) when any.
struct PlatformCounts: Codable, Sendable {
    var apns: Int
    var fcm: Int
    var web: Int
    var hub: Int?

    init(_ counts: [String: Int]) {
        apns = counts["apns"] ?? 0
        fcm = counts["fcm"] ?? 0
        web = counts["web"] ?? 0
        hub = counts["hub"]
    }
}

/// `200` of `PATCH /api/admin/campaigns/{id}`.
struct CampaignChangeResponse: Codable, Sendable {
    /// Inbox entries that now show the new content.
    var notifications: Int
    /// Pushes not yet sent, which carry it.
    var pending: Int
    /// Devices that got it and get a replacement under the same collapse id, tag or Topic.
    var replacements: PlatformCounts
    /// The campaign as it now stands.
    var campaign: CampaignResponse
}

/// `200` of `PATCH /api/notifications/{id}`.
struct NotificationChangeResponse: Codable, Sendable {
    var id: Int64
    var message: String
    var title: String?
    var payload: String
    /// The new signed payload URL (the old one serves the new image too).
    var richUrl: String?
    /// Pushes not yet sent, which carry the new content.
    var pending: Int
    /// Devices that got it and get a replacement.
    var replacements: PlatformCounts
}

/// The body of `POST /api/admin/campaigns/{id}/retract` and `DELETE /api/notifications/{id}`; may be left out.
struct RetractRequest: Codable, Sendable {
    /// What a browser shows in place of the notification (default "This message was withdrawn").
    var retractedText: String?

    /// The body of `request`: none (or white space alone) asks for the defaults.
    static func read(_ request: Request) async throws -> RetractRequest {
        let body = try await RequestBody.collect(request, upTo: 16 << 10, what: "a retraction")
        let bytes = Data(body.readableBytesView)
        guard !bytes.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) else { return RetractRequest() }
        return try RequestBody.decode(RetractRequest.self, from: bytes, shape: "{\"retractedText\"}, or no body")
    }
}

/// `200` of a retraction: what was done, per platform.
struct RetractResponse: Codable, Sendable {
    /// Notifications removed from their inboxes.
    var inboxes: Int
    /// Pushes not yet sent, dropped.
    var cancelled: Int
    /// Devices sent a retraction: a background push that makes the app remove what it showed
    /// (`apns`, `fcm`; coalesced past two an hour per device), or for `web` a notification
    /// showing the retracted text in its place.
    var retractPushes: PlatformCounts
    /// The campaign's status now (`retracted`); absent for a notification.
    var status: Campaign.Status?

    init(_ outcome: RetractOutcome, status: Campaign.Status? = nil) {
        inboxes = outcome.inboxes
        cancelled = outcome.cancelled
        retractPushes = PlatformCounts(outcome.retractPushes)
        self.status = status
    }
}
