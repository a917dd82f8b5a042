import Foundation
import PushDelivery
import RichPushCore

/// `200` of a dry run (docs/api.md#dry-runs): `"dryRun":true` on `POST /api/admin/campaigns`,
/// `POST /api/notifications` or `POST /api/live-activities` answers what the send would do,
/// having stored, queued and sent nothing.
struct DryRunResponse: Codable, Sendable {
    /// Always true: nothing was stored or sent.
    var dryRun: Bool
    var reach: DryRunReachResponse
    /// Up to 3 recipients' pushes per platform, each as its push service would get it.
    var samples: DryRunSamples
    /// What the reach and the samples do not say by themselves (recipients with no device, a schedule, an A/B test's shares, a pace).
    var warnings: [String]

    init(_ run: DryRun, now: Date = Date()) {
        dryRun = true
        reach = DryRunReachResponse(users: run.users, devices: run.devices, byApp: DryRunApps(apps: run.byApp.mapValues { DryRunPlatforms($0) }))
        func shown(_ platform: String) -> [DryRunSample] {
            run.samples.filter { $0.platform == platform }.map { DryRunSample($0, now: now) }
        }
        samples = DryRunSamples(apns: shown("apns"), fcm: shown("fcm"), web: shown("web"), hub: shown("hub"))
        warnings = run.warnings
    }
}

/// Whom a send would reach.
struct DryRunReachResponse: Codable, Sendable {
    /// Recipients: users who would get it in their inbox (for a tag expression or a Live Activity, those with a device it reaches).
    var users: Int
    /// Devices its pushes go to.
    var devices: Int
    /// Pushes per app and platform.
    var byApp: DryRunApps
}

/// App name → its pushes per platform.
struct DryRunApps: Codable, Sendable, DeclaredSchema {
    var apps: [String: DryRunPlatforms]

    init(apps: [String: DryRunPlatforms]) {
        self.apps = apps
    }

    init(from decoder: any Decoder) throws {
        apps = try decoder.singleValueContainer().decode([String: DryRunPlatforms].self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(apps)
    }

    static var declaredSchema: JSONSchema {
        JSONSchema.type("object").with {
            $0.description = "App name → pushes per platform: one per device (apns, fcm, web), or one per recipient through a Notification Hubs app (hub)."
            $0.valuesSchema = [JSONSchema.type("object").with {
                $0.properties = ["apns": JSONSchema.integer, "fcm": JSONSchema.integer, "web": JSONSchema.integer, "hub": JSONSchema.integer]
                $0.required = ["apns", "fcm", "hub", "web"]
                $0.additionalProperties = false
            }]
        }
    }

    static var schemaExample: DryRunApps { DryRunApps(apps: [:]) }
}

/// One app's pushes per platform.
struct DryRunPlatforms: Codable, Sendable {
    var apns: Int
    var fcm: Int
    var web: Int
    var hub: Int

    init(_ counts: [String: Int]) {
        apns = counts["apns"] ?? 0
        fcm = counts["fcm"] ?? 0
        web = counts["web"] ?? 0
        hub = counts["hub"] ?? 0
    }
}

/// Samples per platform, each list in recipients' name order.
struct DryRunSamples: Codable, Sendable {
    var apns: [DryRunSample]
    var fcm: [DryRunSample]
    var web: [DryRunSample]
    /// Through Notification Hubs: the APNs payload the hub is handed, and its tag.
    var hub: [DryRunSample]
}

/// One recipient's push on one platform, as its push service would get it.
struct DryRunSample: Codable, Sendable {
    var user: String
    /// The app whose credentials would send it.
    var app: String
    /// The A/B test's variant whose content it carries (the variants in turn).
    var variant: String?
    /// APNs and hubs: the payload, as sent. `richUrl` is `<public url>/p/dry-run-000…`, a
    /// placeholder as long as a payload URL (nothing is signed), and `richId` the id the
    /// notification would likely be given.
    var push: DryRunJSON?
    /// FCM: the HTTP v1 message (the value of the body's `message`).
    var message: DryRunJSON?
    /// Web Push: the JSON a browser gets, before it is encrypted.
    var payload: DryRunJSON?
    /// The headers it would carry (APNs: push type, priority, expiration, collapse id; Web Push:
    /// TTL, Urgency, Topic; a hub: its tag); none for FCM, whose message holds its options.
    var headers: DryRunHeaders?
    /// Its size in bytes as sent (the APNs payload, FCM's body, Web Push's plaintext): what each platform's limit counts.
    var size: Int
    /// Why it would be failed as it is queued instead of sent (a personalized push over its platform's size).
    var failure: String?

    init(_ sample: DryRun.Sample, now: Date) {
        let preview = PushPreview(sample.job, platform: sample.platform, now: now)
        let json = try? JSONDecoder().decode(JSONValue.self, from: preview.body)
        user = sample.user
        app = sample.app
        variant = sample.variant
        size = preview.body.count
        failure = sample.failure
        switch sample.platform {
        case "fcm":
            if case .object(let body)? = json, let inner = body["message"] { message = DryRunJSON(value: inner) }
        case "web":
            payload = json.map { DryRunJSON(value: $0) }
            headers = DryRunHeaders(fields: preview.headers)
        default:
            push = json.map { DryRunJSON(value: $0) }
            headers = DryRunHeaders(fields: preview.headers)
        }
    }
}

/// A JSON object shown as it is: a push's payload or message.
struct DryRunJSON: Codable, Sendable, DeclaredSchema {
    var value: JSONValue

    init(value: JSONValue) {
        self.value = value
    }

    init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(JSONValue.self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }

    static var declaredSchema: JSONSchema { JSONSchema.type("object") }
    static var schemaExample: DryRunJSON { DryRunJSON(value: .object([:])) }
}

/// A push's headers, by name.
struct DryRunHeaders: Codable, Sendable, DeclaredSchema {
    var fields: [String: String]

    init(fields: [String: String]) {
        self.fields = fields
    }

    init(from decoder: any Decoder) throws {
        fields = try decoder.singleValueContainer().decode([String: String].self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(fields)
    }

    static var declaredSchema: JSONSchema { JSONSchema.type("object").with { $0.valuesSchema = [JSONSchema.string] } }
    static var schemaExample: DryRunHeaders { DryRunHeaders(fields: [:]) }
}
