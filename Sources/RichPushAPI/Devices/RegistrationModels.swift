import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// `200` of `POST /api/register`.
struct RegistrationCreated: Codable, Sendable {
    var registrationId: String
}

/// A registration's handle: a device token, or a browser's PushSubscription as an object or as
/// its JSON text (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push); kept as text, which the store checks for the platform.
struct DeviceHandle: Codable, Sendable, DeclaredSchema {
    var text: String

    init(_ text: String) { self.text = text }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            self.text = text
        } else {
            let subscription = try container.decode(PushSubscriptionBody.self)
            let data = try JSONEncoder().encode(subscription)
            text = String(decoding: data, as: UTF8.self)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }

    static var declaredSchema: JSONSchema {
        .oneOf([JSONSchema.string.with { $0.description = "An APNs device token in hex, an FCM registration token, or a PushSubscription's JSON text." },
                try! JSONSchema.of(PushSubscriptionBody.self)])
    }

    static var schemaExample: DeviceHandle { DeviceHandle("") }
}

/// A browser's `PushSubscription.toJSON()`.
struct PushSubscriptionBody: Codable, Sendable {
    struct Keys: Codable, Sendable {
        var p256dh: String
        var auth: String
    }
    var endpoint: String
    var keys: Keys
    var expirationTime: Double?
}

/// The body of `PUT /api/register/{id}`.
struct RegistrationUpdate: Codable, Sendable {
    var platform: String
    var handle: DeviceHandle
    var tags: [String]?
    /// The registration this device held before, when its token moves to this account.
    var replaces: String?
    /// The app the device runs (docs/api.md#apps-and-api-keys): `default` unless named; one of `serve --apps`.
    var app: String?
    /// docs/api.md#attributes-devices-versions-and-topics: the app's and the OS's versions; left out, the ones reported before stay.
    var appVersion: String?
    var osVersion: String?
}

extension RegistrationUpdate: SchemaRefining {
    /// One shape per platform, each with its handle: an APNs token in hex, an FCM token, a PushSubscription.
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["tags"]?.items = [ValuePattern.string(ValuePattern.tag)]
        schema.properties?["tags"]?.maxItems = 59 // 60 with the username:<user> tag the server adds
        for field in ["appVersion", "osVersion"] {
            schema.properties?[field]?.pattern = ValuePattern.version
            schema.properties?[field]?.description = "1 to 64 bytes of printable text, e.g. 2.4.1 or iOS 18.2."
        }
        // The subscription's JSON text in a string is taken too (tolerated, as the tutorial's
        // loose bodies are), but documented as the object, so generated clients send that.
        let subscription = try! JSONSchema.of(PushSubscriptionBody.self).with {
            $0.description = "The browser's PushSubscription.toJSON(). Its JSON text, as a string, is accepted too."
        }
        let handles: [(String, JSONSchema)] = [("apns", ValuePattern.string(ValuePattern.deviceToken)),
                                               ("fcm", ValuePattern.string(ValuePattern.fcmToken)), ("web", subscription)]
        let base = schema
        schema = .oneOf(handles.map { platform, handle in
            base.with {
                $0.properties?["platform"] = JSONSchema.string.with { $0.enumeration = [platform] }
                $0.properties?["handle"] = handle
            }
        })
    }
}

/// `200` of `PUT /api/register/{id}`.
struct RegistrationResponse: Codable, Sendable {
    var registrationId: String
    var platform: String
    var handle: String
    /// The caller's tags and the `username:<user>` tag the server adds.
    var tags: [String]
    /// The app it belongs to.
    var app: String
    /// The app's and the OS's versions, as the device last reported them; absent until it does.
    var appVersion: String?
    var osVersion: String?
}

/// `200` of `DELETE /api/register/{id}`.
struct RegistrationDeleted: Codable, Sendable {
    var registrationId: String
    var deleted: Bool
}

/// `200` of `GET /api/webpush/key`.
struct WebPushKeyResponse: Codable, Sendable {
    /// The VAPID public key, an uncompressed P-256 point in base64url: `applicationServerKey` for `pushManager.subscribe`.
    var publicKey: String
}
