import Foundation


/// A Live Activity's alert: what the Lock Screen shows as it starts or changes
/// (docs/api.md#live-activities).
public struct LiveActivityAlert: Sendable, Equatable, Codable {
    public var title: String
    public var body: String?

    /// An alert.
    public init(title: String, body: String? = nil) {
        self.title = title
        self.body = body
    }

    var apns: [String: Any] {
        var alert: [String: Any] = ["title": title]
        if let body { alert["body"] = body }
        return alert
    }
}

/// What `POST /api/live-activities` asks for, checked (docs/api.md#live-activities).
public struct LiveActivityDraft: Sendable {
    /// The ActivityKit attributes type (`attributes-type`), as the app's Swift type is named.
    public var type: String
    public var audience: Audience
    public var app: String
    /// The attributes, a JSON object (text).
    public var attributes: String
    /// The first content state, a JSON object (text).
    public var contentState: String
    public var alert: LiveActivityAlert
    public var staleDate: Date?
    public var relevanceScore: Double?
    /// The APNs broadcast channel its updates go to (iOS 18), made before it is stored; nil: one
    /// push per device.
    public var channelId: String?

    /// A draft; the JSON texts must hold objects (`LiveActivityStore.object` reads them).
    public init(type: String, audience: Audience, app: String, attributes: String, contentState: String, alert: LiveActivityAlert,
                staleDate: Date? = nil, relevanceScore: Double? = nil, channelId: String? = nil) {
        self.type = type
        self.audience = audience
        self.app = app
        self.attributes = attributes
        self.contentState = contentState
        self.alert = alert
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.channelId = channelId
    }
}

/// An update or the end of a Live Activity, checked.
public struct LiveActivityChange: Sendable {
    /// The new content state (JSON object text); nil keeps the last (an end may give none).
    public var contentState: String?
    public var alert: LiveActivityAlert?
    public var staleDate: Date?
    /// `apns-priority`: 10 or 5; nil is 5 for an update without an alert, else 10.
    public var priority: Int?
    /// For the end: when the Lock Screen lets it go (`dismissal-date`); nil lets iOS decide.
    public var dismissAt: Date?

    /// A change.
    public init(contentState: String? = nil, alert: LiveActivityAlert? = nil, staleDate: Date? = nil, priority: Int? = nil, dismissAt: Date? = nil) {
        self.contentState = contentState
        self.alert = alert
        self.staleDate = staleDate
        self.priority = priority
        self.dismissAt = dismissAt
    }
}

/// One device of an activity, as `GET /api/live-activities/{id}` shows it.
public struct LiveActivityDevice: Sendable, Equatable {
    public var registration: String
    public var platform: String
    /// Whether the app reported the activity's update token (iOS; Android and browsers need none).
    public var hasUpdateToken: Bool
    /// Its last push: the event (`start`, `update`, `end`), its state and why it failed.
    public var lastEvent: String?
    public var lastState: String?
    public var reason: String?
}

/// A Live Activity as stored (docs/api.md#live-activities).
public struct LiveActivity: Sendable, Equatable {
    public var id: String
    public var type: String
    public var app: String
    /// `active` or `ended`.
    public var state: String
    public var channelId: String?
    public var attributes: String
    public var contentState: String
    /// Devices it was started on or whose app reported it.
    public var devices: Int
    /// Updates sent (the start and the end not counted).
    public var updates: Int
    /// Pushes a push service refused for good.
    public var failures: Int
    public var lastUpdate: Date?
    /// The last `timestamp` given (seconds since 1970, strictly increasing).
    public var lastTimestamp: Int64
    public var createdAt: Date
    public var endedAt: Date?
    /// Who started it (an account or a key's owner).
    public var createdBy: String
    /// Each device; filled by `LiveActivityStore.activity(_:devices:)` when asked.
    public var perDevice: [LiveActivityDevice] = []

    /// Whether it updates through an APNs broadcast channel.
    public var broadcast: Bool { channelId != nil }
}

/// What a start, an update or an end queued.
public struct LiveActivityQueued: Sendable, Equatable {
    public var activity: LiveActivity
    /// Pushes queued: one per device, or one broadcast for every iOS device plus one per other device.
    public var devices: Int
    /// The event's `timestamp`.
    public var timestamp: Int64
}

/// What a Live Activity push is, beside its APNs payload (`DeliveryJob.payload`).
public struct ActivityPush: Sendable, Equatable {
    /// The activity (`la_…`): Android's `collapse_key` and Web Push's `Topic`.
    public var id: String
    /// Its attributes type.
    public var type: String
    /// `start`, `update` or `end`.
    public var event: String
    /// `apns-priority`: 10 or 5.
    public var priority: Int
    /// The broadcast channel (`apns-channel-id`) when this push is the broadcast.
    public var channelId: String?
    /// The JSON Android (as FCM data) and browsers (as the message) get.
    public var twin: Data

    /// A push of an activity.
    public init(id: String, type: String, event: String, priority: Int, channelId: String? = nil, twin: Data) {
        self.id = id
        self.type = type
        self.event = event
        self.priority = priority
        self.channelId = channelId
        self.twin = twin
    }
}
