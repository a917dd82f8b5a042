import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// `201` of `POST /api/sessions`.
struct SessionResponse: Codable, Sendable {
    var token: String
    /// ISO 8601.
    var expires: String
}

/// `PUT /api/me`: the caller's time zone and locale (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries); each optional.
struct MeUpdate: Codable, Sendable {
    /// An IANA zone, e.g. `Europe/Paris`.
    var timezone: String?
    /// A BCP 47 tag, e.g. `fr-CA`.
    var locale: String?
    /// docs/api.md#frequency-caps-and-quiet-hours: the caller's own quiet hours; `null` clears them.
    var quietHours: QuietHoursRequest?
}

/// Quiet hours as asked: `{"from":"22:00","to":"08:00","mode":"delay"|"drop"}` (docs/api.md#frequency-caps-and-quiet-hours).
struct QuietHoursRequest: Codable, Sendable, DeclaredSchema {
    var from: String
    var to: String
    var mode: QuietHours.Mode?

    init(_ quiet: QuietHours) {
        from = quiet.from.description
        to = quiet.to.description
        mode = quiet.mode
    }

    /// Checked; 400 naming `quietHours.from`, `.to` or `.mode`.
    var quietHours: QuietHours {
        get throws {
            var object: [String: Any] = ["from": from, "to": to]
            if let mode { object["mode"] = mode.rawValue }
            return try QuietHours(json: object, field: "quietHours")
        }
    }

    static var declaredSchema: JSONSchema {
        let time = JSONSchema.string.with { $0.pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$" }
        return JSONSchema.type("object").with {
            $0.nullable = true
            $0.properties = ["from": time, "to": time, "mode": JSONSchema.string.with { $0.enumeration = QuietHours.Mode.allCases.map(\.rawValue) }]
            $0.required = ["from", "to"]
            $0.additionalProperties = false
            $0.description = "A daily window of wall-clock time in the user's zone (past midnight when to is earlier than from; from and to differ); delay (the default) holds campaign pushes to its end, drop does not send them."
        }
    }

    static var schemaExample: QuietHoursRequest { QuietHoursRequest(try! QuietHours("22:00-08:00")) }
}

extension MeUpdate: SchemaRefining {
    /// The zones Foundation knows, and BCP 47's shape.
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["timezone"]?.enumeration = TimeZone.knownTimeZoneIdentifiers.sorted()
        schema.properties?["locale"]?.pattern = LocaleContent.tag.pattern
        schema.properties?["locale"]?.maxLength = LocaleContent.tag.maxLength
    }
}

/// `GET`/`PUT /api/me`.
struct MeResponse: Codable, Sendable {
    var name: String
    var admin: Bool
    /// The IANA zone local-time campaigns reach the user in (`UTC` when unset).
    var timezone: String
    /// The BCP 47 locale campaigns' content is chosen by; absent when unset.
    var locale: String?
    /// The topics the user follows, in byte order (`[]` when none): as `GET /api/me/topics`.
    var topics: [String]
    /// Their own quiet hours; absent when they keep their apps'.
    var quietHours: QuietHoursRequest?
}
