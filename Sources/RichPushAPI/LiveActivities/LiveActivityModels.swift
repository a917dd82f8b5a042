import Foundation
import RichPushCore

/// A JSON object a Live Activity carries (`attributes`, `contentState`): an object, or its JSON
/// text (as a form's text area sends it), kept as text.
struct ActivityJSON: Codable, Sendable {
    /// The JSON text as received.
    var text: String

    init(text: String) {
        self.text = text
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            self.text = text
            return
        }
        let value = try container.decode(JSONValue.self)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.text = String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode((try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))) ?? .object([:]))
    }
}

extension ActivityJSON: DeclaredSchema {
    static var declaredSchema: JSONSchema { JSONSchema.type("object") }
    static var schemaExample: ActivityJSON { ActivityJSON(text: "{}") }
}

/// A moment: seconds since 1970, or an RFC 3339 time.
struct ActivityDate: Codable, Sendable {
    var date: Date

    init(date: Date) {
        self.date = date
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let seconds = try? container.decode(Double.self) {
            guard seconds >= 0, seconds < 1e11 else { throw CoreError(.invalid, "a date must be seconds since 1970 or an RFC 3339 time") }
            date = Date(timeIntervalSince1970: seconds)
            return
        }
        let text = try container.decode(String.self)
        guard let date = CampaignSchedule.rfc3339(text) else {
            throw CoreError(.invalid, "a date must be seconds since 1970 or an RFC 3339 time such as 2026-12-01T09:00:00Z, got '\(text.prefix(40))'")
        }
        self.date = date
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Int64(date.timeIntervalSince1970))
    }
}

extension ActivityDate: DeclaredSchema {
    static var declaredSchema: JSONSchema {
        .oneOf([JSONSchema.integer.with { $0.minimum = 0; $0.maximum = 99_999_999_999 }, ValuePattern.string(ValuePattern.rfc3339).with { $0.maxLength = RFC3339.maxLength }])
    }
    static var schemaExample: ActivityDate { ActivityDate(date: Date(timeIntervalSince1970: 1_800_000_000)) }
}

/// An activity's alert.
struct ActivityAlertBody: Codable, Sendable {
    var title: String?
    var body: String?

    /// Checked: a title of 1 to 256 characters (`field`.title), a body of at most 1,024.
    func checked(_ field: String) throws -> LiveActivityAlert? {
        guard let title, !title.isEmpty else { return nil }
        guard title.count <= 256 else { throw CoreError(.invalid, "\(field).title is over 256 characters") }
        if let body, body.count > 1024 { throw CoreError(.invalid, "\(field).body is over 1,024 characters") }
        return LiveActivityAlert(title: title, body: body)
    }
}

/// The body of `PUT /api/register/{id}/live-activities/{type}`.
struct PushToStartTokenBody: Codable, Sendable {
    /// The token ActivityKit's `pushToStartTokenUpdates` gave, in hex.
    var pushToStartToken: String
}

/// The body of `POST /api/live-activities`.
struct LiveActivityStartRequest: Codable, Sendable {
    /// The ActivityKit attributes type (`attributes-type`).
    var type: String
    var audience: AudienceRequest
    var attributes: ActivityJSON?
    var contentState: ActivityJSON
    /// What the Lock Screen shows as it starts: a title is required (iOS drops a start without).
    var alert: ActivityAlertBody?
    var staleDate: ActivityDate?
    var relevanceScore: Double?
    var app: String?
    /// Updates through an APNs broadcast channel (iOS 18).
    var broadcast: Bool?
    /// docs/api.md#dry-runs: true answers 200 with the devices and their start pushes, checked as
    /// a start is, and stores and sends nothing (a broadcast makes no channel).
    var dryRun: Bool?

    static let shape = "{\"type\",\"audience\":{…as campaigns},\"attributes\":{…},\"contentState\":{…},\"alert\":{\"title\",\"body\"},\"staleDate\",\"relevanceScore\",\"app\",\"broadcast\",\"dryRun\"}"
}

/// The body of `PUT /api/live-activities/{id}/tokens`.
struct ActivityTokenBody: Codable, Sendable {
    /// The device's registration id.
    var registration: String
    /// The activity's update token (ActivityKit's `pushTokenUpdates`), in hex.
    var token: String
}

/// The body of `PATCH /api/live-activities/{id}` (and, optional, of `DELETE`).
struct LiveActivityChangeRequest: Codable, Sendable {
    var contentState: ActivityJSON?
    var alert: ActivityAlertBody?
    var staleDate: ActivityDate?
    /// 5 or 10 (an update's default: 5, or 10 with an alert).
    var priority: Int?
    /// For the end: when the Lock Screen lets it go.
    var dismissAt: ActivityDate?

    static let shape = "{\"contentState\":{…},\"alert\":{\"title\",\"body\"},\"staleDate\",\"priority\":5|10}"
}

extension LiveActivityChangeRequest: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["priority"]?.minimum = 5
        schema.properties?["priority"]?.maximum = 10
    }
}

/// `202` of a start, an update or an end.
struct LiveActivityQueuedResponse: Codable, Sendable {
    var id: String
    /// Pushes queued (a broadcast counts once for every iOS device).
    var devices: Int
    /// The event's `timestamp` (seconds since 1970; strictly increasing per activity).
    var timestamp: Int64
    /// The APNs broadcast channel, for the app to subscribe with (`.channel(id)`).
    var channelId: String?
    var state: String
}

/// One device of an activity.
struct LiveActivityDeviceResponse: Codable, Sendable {
    var registration: String
    var platform: String
    var hasUpdateToken: Bool
    var lastEvent: String?
    var lastState: String?
    var reason: String?
}

/// `GET /api/live-activities/{id}`.
struct LiveActivityResponse: Codable, Sendable {
    var id: String
    var type: String
    var app: String
    /// `active` or `ended`.
    var state: String
    var broadcast: Bool
    var channelId: String?
    var attributes: ActivityJSON
    var contentState: ActivityJSON
    var devices: Int
    var updates: Int
    /// When the last update was made (RFC 3339).
    var lastUpdate: String?
    var lastTimestamp: Int64
    var failures: Int
    var createdAt: String
    var endedAt: String?
    var createdBy: String
    /// The first 1,000 devices by registration id, each with its last push (absent from lists).
    var perDevice: [LiveActivityDeviceResponse]?

    init(_ activity: LiveActivity, devices withDevices: Bool) {
        id = activity.id
        type = activity.type
        app = activity.app
        state = activity.state
        broadcast = activity.broadcast
        channelId = activity.channelId
        attributes = ActivityJSON(text: activity.attributes)
        contentState = ActivityJSON(text: activity.contentState)
        devices = activity.devices
        updates = activity.updates
        lastUpdate = activity.lastUpdate.map(Self.rfc3339)
        lastTimestamp = activity.lastTimestamp
        failures = activity.failures
        createdAt = Self.rfc3339(activity.createdAt)
        endedAt = activity.endedAt.map(Self.rfc3339)
        createdBy = activity.createdBy
        perDevice = withDevices ? activity.perDevice.map {
            LiveActivityDeviceResponse(registration: $0.registration, platform: $0.platform, hasUpdateToken: $0.hasUpdateToken,
                                       lastEvent: $0.lastEvent, lastState: $0.lastState, reason: $0.reason)
        } : nil
    }

    static func rfc3339(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}

extension PushToStartTokenBody: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["pushToStartToken"]?.pattern = ValuePattern.activityToken
    }
}

extension ActivityTokenBody: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["token"]?.pattern = ValuePattern.activityToken
    }
}

extension LiveActivityStartRequest: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["type"]?.pattern = ValuePattern.activityType
    }
}
