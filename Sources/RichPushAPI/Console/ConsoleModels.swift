import RichPushCore

/// What the console lists for an image.
struct ConsoleMediaItem: Codable, Sendable {
    var sha256: String
    var contentType: String
    var width: Int
    var height: Int
    var size: Int64
    var names: [String]
    /// Who references it: `notification:12`, `campaign:3`, …
    var usedBy: [String]
}

/// Who a campaign would reach.
struct ConsoleReach: Codable, Sendable {
    var users: Int
    var devices: Int
    /// The listed names that are no user of this server (a campaign naming them is refused);
    /// empty for everyone and for a tag expression.
    var unknown: [String]
}

/// An app and how many devices are registered to it.
struct ConsoleApp: Codable, Sendable {
    var name: String
    var devices: Int
}

/// A user in the console's list.
struct ConsoleUser: Codable, Sendable {
    var name: String
    var admin: Bool
    var devices: Int
    var created: String
}

/// A device in the console.
struct ConsoleDevice: Codable, Sendable {
    var registrationId: String
    var platform: String
    /// The app it belongs to.
    var app: String
    /// The token or handle, cut short.
    var handle: String
    var tags: [String]
    var updated: String
}

/// One of a user's last pushes.
struct ConsolePush: Codable, Sendable {
    var id: Int64
    var title: String?
    var message: String
    var mode: PushMode
    var read: Bool
    var created: String
}

/// A user's devices and last pushes.
struct ConsoleUserDetail: Codable, Sendable {
    var name: String
    var devices: [ConsoleDevice]
    var pushes: [ConsolePush]
}

/// A failed delivery, as the console shows it.
struct ConsoleFailure: Codable, Sendable {
    /// The device (its token or handle, cut short).
    var target: String
    var reason: String
}

/// A campaign's counts and its failures.
struct ConsoleProgress: Codable, Sendable {
    var campaign: CampaignResponse
    var failures: [ConsoleFailure]
}

/// The body of `POST /console/api/preview`: a campaign's words, and the user to render them for.
struct ConsolePreviewRequest: Codable, Sendable {
    /// The user whose name, locale, time zone and attributes the templates see.
    var user: String
    var title: String?
    var message: String?
    /// As a campaign takes them; `subtitle` is rendered, the rest is ignored.
    var options: PushOptions?
}

/// A campaign's words rendered for one user, as the campaign would render them.
struct ConsolePreview: Codable, Sendable {
    var title: String?
    var message: String?
    var subtitle: String?
}
