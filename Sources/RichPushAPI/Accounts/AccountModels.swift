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
}
