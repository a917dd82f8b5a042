import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

// The JSON bodies of the HTTP API (SPEC §5, §9, §10). Handlers encode and decode these types, and
// `/openapi.json` describes them by reading the same types (`JSONSchema.of`).

/// The values the stores check, as patterns (`RegistrationStore.normalizeHandle` and `update`,
/// `UserStore.validateName`, `MediaIndex.validateName`, `TagExpression`).
enum ValuePattern {
    /// An APNs device token in hex (the store also takes spaces and angle brackets, as iOS prints tokens).
    static let deviceToken = "^([0-9a-fA-F]{2}){8,200}$"
    /// An FCM registration token.
    static let fcmToken = "^[A-Za-z0-9_:.-]{20,4096}$"
    static let tag = "^[A-Za-z0-9_@#.:-]{1,120}$"
    static let userName = "^[A-Za-z0-9_@#.-]{1,64}$"
    /// No control characters; 64 hex digits would read as a media id (at most 255 UTF-8 bytes).
    static let mediaName = "^[^\\u0000-\\u001F\\u007F-\\u009F]{1,255}$"
    /// Up to six tags joined by && or ||, each maybe negated: a subset of Notification Hubs' grammar
    /// (parentheses and longer || lists are accepted too) that is always within its limits.
    static let tagExpression = "^!?[A-Za-z0-9_@#.:-]{1,120}( (&&|\\|\\|) !?[A-Za-z0-9_@#.:-]{1,120}){0,5}$"

    static func string(_ pattern: String) -> JSONSchema { JSONSchema.string.with { $0.pattern = pattern } }
}

/// `200` of `GET /health`.
struct HealthResponse: Codable, Sendable {
    var status: String
}

/// `GET /ready`: `ready`, or `unready` with what is failing (`database`, `blobs`).
struct ReadyResponse: Codable, Sendable {
    var status: String
    var failing: [String]?
}

/// `201`/`200` of `POST /api/media`.
struct MediaResponse: Codable, Sendable {
    /// The media id: the SHA-256 of the bytes stored (after stripping), in hex.
    var sha256: String
    var contentType: String
    var width: Int
    var height: Int
    var size: Int64
    /// Where the image is served.
    var url: String
    /// What was removed from the upload before it was stored (SPEC §16): `exif-gps`, `exif`,
    /// `xmp`, `iptc`, `comment`, `png-text`, `png-time`, `thumbnail`, `app-other`, `trailing-data`.
    var stripped: [String]
}

extension MediaResponse: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["stripped"]?.items = [JSONSchema.string.with { $0.enumeration = StrippedMetadata.allCases.map(\.rawValue) }]
    }
}

/// `200` of `POST /api/register`.
struct RegistrationCreated: Codable, Sendable {
    var registrationId: String
}

/// A registration's handle: a device token, or a browser's PushSubscription as an object or as
/// its JSON text (SPEC §12); kept as text, which the store checks for the platform.
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
    /// The app the device runs (SPEC §18): `default` unless named; one of `serve --apps`.
    var app: String?
}

extension RegistrationUpdate: SchemaRefining {
    /// One shape per platform, each with its handle: an APNs token in hex, an FCM token, a PushSubscription.
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["tags"]?.items = [ValuePattern.string(ValuePattern.tag)]
        schema.properties?["tags"]?.maxItems = 59 // 60 with the username:<user> tag the server adds
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
}

/// `200` of `DELETE /api/register/{id}`.
struct RegistrationDeleted: Codable, Sendable {
    var registrationId: String
    var deleted: Bool
}

/// The object form of `POST /api/notifications`' body; every field may be left out.
struct NotificationRequest: Codable, Sendable {
    var message: String?
    var richType: String?
    /// A media id or name.
    var payload: String?
    var title: String?
    var mode: PushMode?
    /// The app whose devices get it (SPEC §18); every app when left out.
    var app: String?
    /// The recipient: the caller when left out; another user only for an admin or an API key
    /// (which has no inbox of its own, so must name one).
    var to: String?
    /// SPEC §22: each platform's options, and the badge (`"unread"` or a number).
    var options: PushOptions?
    var badge: PushOptions.Badge?

    func draft(defaultMode: PushMode) -> NotificationDraft {
        NotificationDraft(message: message, richType: richType, payload: payload, title: title, mode: mode ?? defaultMode,
                          options: PushOptions.with(options, badge: badge))
    }
}

extension PushOptions {
    /// A request's `options` with its `badge` beside them (the API keeps the badge out of `options`).
    static func with(_ options: PushOptions?, badge: Badge?) -> PushOptions {
        var all = options ?? PushOptions()
        all.badge = badge
        return all
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

/// `200` of `GET /api/webpush/key`.
struct WebPushKeyResponse: Codable, Sendable {
    /// The VAPID public key, an uncompressed P-256 point in base64url: `applicationServerKey` for `pushManager.subscribe`.
    var publicKey: String
}

/// `201` of `POST /api/sessions`.
struct SessionResponse: Codable, Sendable {
    var token: String
    /// ISO 8601.
    var expires: String
}

/// `audience` of a campaign: exactly one of the three.
struct AudienceRequest: Codable, Sendable {
    var all: Bool?
    var users: [String]?
    var tags: String?

    init(all: Bool? = nil, users: [String]? = nil, tags: String? = nil) {
        self.all = all
        self.users = users
        self.tags = tags
    }

    /// Exactly one key, and no other: `{"all":true,"foo":1}` is refused, as the stored form's parser would.
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: RequestBody.AnyKey.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw CoreError(.invalid, "audience must have exactly one of \"all\", \"users\" or \"tags\"")
        }
        switch key.stringValue {
        case "all": all = try container.decode(Bool.self, forKey: key)
        case "users": users = try container.decode([String].self, forKey: key)
        case "tags": tags = try container.decode(String.self, forKey: key)
        default: throw CoreError(.invalid, "audience must be {\"all\":true}, {\"users\":[names]} or {\"tags\":\"expression\"}")
        }
    }

    /// Checked as the stored form is (`Audience(json:)`): one key, `all` true, names valid, the expression parsed.
    var audience: Audience {
        get throws {
            var object: [String: Any] = [:]
            if let all { object["all"] = all }
            if let users { object["users"] = users }
            if let tags { object["tags"] = tags }
            return try Audience(json: object)
        }
    }
}

extension AudienceRequest: DeclaredSchema {
    static var declaredSchema: JSONSchema {
        func only(_ key: String, _ schema: JSONSchema) -> JSONSchema {
            JSONSchema.type("object").with { $0.properties = [key: schema]; $0.required = [key]; $0.additionalProperties = false }
        }
        return .oneOf([
            only("all", JSONSchema.boolean.with { $0.constant = true }),
            only("users", JSONSchema.array(of: ValuePattern.string(ValuePattern.userName)).with {
                $0.minItems = 1
                $0.maxItems = Campaign.maxListedUsers
            }),
            only("tags", ValuePattern.string(ValuePattern.tagExpression)),
        ])
    }

    static var schemaExample: AudienceRequest { AudienceRequest(all: true) }
}

/// The body of `POST /api/admin/campaigns`.
struct CampaignRequest: Codable, Sendable {
    var audience: AudienceRequest
    var message: String?
    var title: String?
    var payload: String?
    var richType: String?
    var mode: PushMode?
    /// The app whose devices it goes to (SPEC §18); every app the audience has devices in when left out.
    var app: String?
    /// SPEC §19: when it goes out, RFC 3339 (`2026-12-01T09:00:00Z`); now when left out.
    var sendAt: String?
    /// SPEC §19: `HH:MM` in each recipient's own time zone, on `localDate` (`YYYY-MM-DD`) or at the next such time.
    var localTime: String?
    var localDate: String?
    /// SPEC §19: title and message per BCP 47 locale.
    var content: LocaleContent?
    /// The locale of recipients whose own has no content (default `en`).
    var defaultLocale: String?
    /// SPEC §22: each platform's options, the badge, and the pace (pushes a minute, across all nodes).
    var options: PushOptions?
    var badge: PushOptions.Badge?
    var ratePerMinute: Int?
}

/// `content` of a campaign: BCP 47 locale → `{"title","message","subtitle","actions"}` (SPEC §19,
/// §22: `actions` gives the buttons' titles by button id).
struct LocaleContent: Codable, Sendable, DeclaredSchema {
    var locales: [String: LocalizedContent]

    /// One field of a locale: a string, null, or (for `actions`) an object of strings.
    private enum Field: Decodable {
        case text(String?)
        case titles([String: String])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() { self = .text(nil) }
            else if let text = try? container.decode(String.self) { self = .text(text) }
            else if let titles = try? container.decode([String: String].self) { self = .titles(titles) }
            else { throw DecodingError.typeMismatch(Field.self, .init(codingPath: decoder.codingPath, debugDescription: "a string, or an object of strings")) }
        }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Strict inside too: each locale has a title, a message, a subtitle, button titles, and nothing else.
        guard let raw = try? container.decode([String: [String: Field]].self) else {
            throw DecodingError.typeMismatch(LocaleContent.self, .init(codingPath: decoder.codingPath,
                                                                       debugDescription: "an object of locale → {title, message, subtitle, actions}"))
        }
        var locales: [String: LocalizedContent] = [:]
        for (locale, fields) in raw {
            if let unknown = Set(fields.keys).subtracting(["title", "message", "subtitle", "actions"]).sorted().first {
                throw Problem(.badRequest, "unknown field \"content.\(locale).\(unknown)\"; each locale has \"title\", \"message\", \"subtitle\" and \"actions\"")
            }
            func text(_ name: String) throws -> String? {
                switch fields[name] {
                case .text(let value)?: return value
                case .titles?: throw Problem(.badRequest, "content.\(locale).\(name) must be a string")
                case nil: return nil
                }
            }
            var titles: [String: String]?
            switch fields["actions"] {
            case .titles(let value)?: titles = value
            case .text(nil)?, nil: titles = nil
            case .text?: throw Problem(.badRequest, "content.\(locale).actions must be an object of button id → title")
            }
            locales[locale] = LocalizedContent(title: try text("title"), message: try text("message"), subtitle: try text("subtitle"), actions: titles)
        }
        self.locales = locales
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(locales)
    }

    static var declaredSchema: JSONSchema {
        JSONSchema.type("object").with {
            $0.description = "BCP 47 locale (en, fr-CA) → {\"title\", \"message\", \"subtitle\", \"actions\"}; each recipient gets theirs, falling back from fr-CA to fr to defaultLocale. actions maps a button id of options.actions to its title in that locale."
            $0.propertyNames = [LocaleContent.tag]
            $0.valuesSchema = [JSONSchema.type("object").with {
                $0.properties = ["title": JSONSchema.string.with { $0.nullable = true }, "message": JSONSchema.string.with { $0.nullable = true },
                                 // A subtitle and button titles follow options' rules for text (SPEC §22).
                                 "subtitle": JSONSchema.string.with { $0.nullable = true; $0.refineText(minLength: 1) },
                                 "actions": JSONSchema.type("object").with {
                                     $0.nullable = true
                                     $0.valuesSchema = [JSONSchema.string.with { $0.refineText(minLength: 1) }]
                                 }]
                $0.additionalProperties = false
            }]
        }
    }

    /// A BCP 47 tag as the server takes it: a language of 2 or 3 letters, then subtags of 1 to 8 letters or digits.
    static let tag = JSONSchema.string.with { $0.pattern = "^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$"; $0.maxLength = 35 }
    static var schemaExample: LocaleContent { LocaleContent(locales: [:]) }

    init(locales: [String: LocalizedContent]) {
        self.locales = locales
    }
}

/// `GET /api/admin/campaigns/{id}/stats` (SPEC §20).
struct CampaignStatsResponse: Codable, Sendable {
    struct Counts: Codable, Sendable {
        var sent: Int
        var failed: Int
    }
    struct Minute: Codable, Sendable {
        /// The minute's start, ISO 8601.
        var minute: String
        var sent: Int
        var displayed: Int
        var opened: Int
    }
    var queued: Int
    var sent: Int
    var failed: Int
    /// Recipients whose device fetched the payload (the extension showed it).
    var displayed: Int
    /// Recipients whose device reported a tap.
    var opened: Int
    /// Sent and failed by device platform (`apns`, `fcm`, `web`, `hub`).
    var byPlatform: [String: Counts]
    /// Failure reasons (the push service's words up to the first colon) and how many.
    var failures: [String: Int]
    /// Per minute, oldest first.
    var timeline: [Minute]

    init(_ stats: CampaignStats) {
        queued = stats.queued
        sent = stats.totals.sent
        failed = stats.totals.failed
        displayed = stats.totals.displayed
        opened = stats.totals.opened
        byPlatform = stats.byPlatform.mapValues { Counts(sent: $0.sent, failed: $0.failed) }
        failures = stats.failures
        timeline = stats.timeline.map { Minute(minute: $0.minute.formatted(.iso8601), sent: $0.sent, displayed: $0.displayed, opened: $0.opened) }
    }
}

/// `PUT /api/me`: the caller's time zone and locale (SPEC §19); each optional.
struct MeUpdate: Codable, Sendable {
    /// An IANA zone, e.g. `Europe/Paris`.
    var timezone: String?
    /// A BCP 47 tag, e.g. `fr-CA`.
    var locale: String?
}

/// `GET`/`PUT /api/me`.
struct MeResponse: Codable, Sendable {
    var name: String
    var admin: Bool
    /// The IANA zone local-time campaigns reach the user in (`UTC` when unset).
    var timezone: String
    /// The BCP 47 locale campaigns' content is chosen by; absent when unset.
    var locale: String?
}

/// A campaign and its counts, as `/api/admin/campaigns…` answer (SPEC §10).
struct CampaignResponse: Codable, Sendable {
    var id: Int64
    var status: Campaign.Status
    var recipients: Int
    var devices: Int
    var pending: Int
    var sent: Int
    var failed: Int
    var fetched: Int
    var audience: String
    var message: String
    var title: String?
    var payload: String
    var mode: PushMode
    var createdBy: String
    var created: String
    /// The app it went to; absent for every app.
    var app: String?
    /// SPEC §19: its schedule, as asked.
    var sendAt: String?
    var localTime: String?
    var localDate: String?
    /// The locales it has content for, and the default one.
    var locales: [String]?
    var defaultLocale: String?
    /// When it was cancelled.
    var cancelled: String?
    /// SPEC §22: its options and badge as asked, its pace, and when a paced campaign's last
    /// push queued so far goes out.
    var options: PushOptions?
    var badge: PushOptions.Badge?
    var ratePerMinute: Int?
    var expectedEnd: String?

    init(_ progress: CampaignProgress) {
        let c = progress.campaign
        id = c.id
        status = progress.status
        recipients = c.recipients
        devices = c.devices
        pending = progress.pending
        sent = progress.sent
        failed = progress.failed
        fetched = progress.fetched
        audience = c.audience.summary
        message = c.message
        title = c.title
        payload = c.payload.hex
        mode = c.mode
        createdBy = c.createdBy
        created = c.createdAt.formatted(.iso8601)
        app = c.app
        switch c.schedule {
        case .at(let date)?: sendAt = date.formatted(.iso8601)
        case .localTime(let time, let date)?:
            localTime = time.description
            localDate = date?.description
        case nil: break
        }
        if !c.localeNames.isEmpty {
            locales = c.localeNames
            defaultLocale = c.defaultLocale
        }
        cancelled = c.cancelledAt.map { $0.formatted(.iso8601) }
        var options = c.options
        badge = options.badge
        options.badge = nil
        self.options = options.isEmpty ? nil : options
        ratePerMinute = c.ratePerMinute
        expectedEnd = progress.expectedEnd.map { $0.formatted(.iso8601) }
    }
}

/// Every error's body, `application/problem+json` (RFC 9457).
struct ProblemDetails: Codable, Sendable {
    var type: String
    var title: String
    var status: Int
    /// What was wrong and what to do about it.
    var detail: String
}

/// Decodes request bodies into the types above, as tolerantly as the tutorial's clients need:
/// keys in any case; a wrong or missing field is a 400 that names it.
enum RequestBody {
    /// Each body type's schema, read once.
    private static let schemas = NIOLockedValueBox<[ObjectIdentifier: JSONSchema]>([:])

    /// The body of `request`, at most `limit` bytes: past it, 413 naming the limit and `what` is limited.
    static func collect(_ request: Request, upTo limit: Int, what: String) async throws -> ByteBuffer {
        let tooLarge = Problem(.contentTooLarge, "\(what) is at most \(limit >> 10) KiB (\(limit) bytes)"
                                                 + (request.headers[.contentLength].map { "; this one is \($0) bytes" } ?? ""))
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit { throw tooLarge }
        do {
            return try await request.body.collect(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw tooLarge
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data, shape: String) throws -> T {
        let schema = try schemas.withLockedValue { cache in
            if let known = cache[ObjectIdentifier(type)] { return known }
            let schema = try JSONSchema.of(type)
            cache[ObjectIdentifier(type)] = schema
            return schema
        }
        let keys = (schema.properties ?? [:]).keys + (schema.oneOf ?? []).flatMap { ($0.properties ?? [:]).keys }
        let canonical = Dictionary(keys.map { ($0.lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .custom { path in
            let key = path.last!
            // Only the top level's keys are folded; nested objects (audience) have lower-case keys anyway.
            guard path.count == 1, let name = canonical[key.stringValue.lowercased()] else { return key }
            return AnyKey(name)
        }
        let value: T
        do {
            value = try decoder.decode(type, from: data)
        } catch let error as DecodingError {
            throw Problem(.badRequest, explain(error, schema: schema, shape: shape))
        }
        // Strict: a field the server does not know (a typo, or a feature this server lacks, such
        // as "sendAt" on an older one) is refused by name, never ignored.
        if let object = try? JSONSerialization.jsonObject(with: data) {
            if let unknown = unknownField(object, schema: schema, path: [], foldCase: true) {
                throw Problem(.badRequest, "unknown field \"\(unknown)\"; the body is \(shape)")
            }
        }
        return value
    }

    /// The first field of `value` (depth first, by path) that `schema` does not describe; nil
    /// when every one is known. Objects with no listed properties (maps) take any key; the top
    /// level's keys are matched in any case, as they are decoded.
    static func unknownField(_ value: Any, schema: JSONSchema, path: [String], foldCase: Bool) -> String? {
        if let array = value as? [Any] {
            guard let element = schema.items?.first else { return nil }
            for item in array { if let found = unknownField(item, schema: element, path: path, foldCase: false) { return found } }
            return nil
        }
        guard let object = value as? [String: Any] else { return nil }
        var properties = schema.properties ?? [:]
        for alternative in schema.oneOf ?? [] { properties.merge(alternative.properties ?? [:]) { a, _ in a } }
        guard !properties.isEmpty else { return nil }
        let known = foldCase ? Dictionary(properties.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a }) : properties
        for key in object.keys.sorted() {
            guard let property = known[foldCase ? key.lowercased() : key] else { return (path + [key]).joined(separator: ".") }
            if let found = unknownField(object[key]!, schema: property, path: path + [key], foldCase: false) { return found }
        }
        return nil
    }

    /// What was wrong, by the field's name.
    static func explain(_ error: DecodingError, schema: JSONSchema, shape: String) -> String {
        func name(_ path: [any CodingKey]) -> String { path.map(\.stringValue).joined(separator: ".") }
        func property(_ path: [any CodingKey]) -> JSONSchema? {
            var current: JSONSchema? = schema
            for key in path {
                let here = current
                current = here?.properties?[key.stringValue] ?? here?.oneOf?.lazy.compactMap { $0.properties?[key.stringValue] }.first
            }
            return current
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\"\(name(context.codingPath + [key]))\" is missing; the body is \(shape)"
        case .typeMismatch(_, let context) where context.codingPath.isEmpty, .dataCorrupted(let context) where context.codingPath.isEmpty,
             .valueNotFound(_, let context) where context.codingPath.isEmpty:
            return "the body must be a JSON object \(shape)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.filter { $0.intValue == nil }
            let expected = property(path).map(describe) ?? "of another type"
            return "\"\(name(path))\" must be \(expected)"
        @unknown default:
            return "the body must be a JSON object \(shape)"
        }
    }

    /// "a string", "an array of strings", "\"alert\" or \"silent\"".
    static func describe(_ schema: JSONSchema) -> String {
        if let values = schema.enumeration { return values.map { "\"\($0)\"" }.joined(separator: " or ") }
        if schema.oneOf != nil { return "an object as the body's shape says" }
        switch schema.type {
        case "string": return "a string"
        case "integer": return "an integer"
        case "number": return "a number"
        case "boolean": return "true or false"
        case "array": return schema.items?.first?.type == "string" ? "an array of strings" : "an array"
        case "object": return "an object"
        default: return "of another type"
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

extension CampaignRequest: SchemaRefining {
    /// The schedule's and the locale's shapes (SPEC §19); a value of the right shape that is not
    /// a time (02-30) or is past is 422.
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["sendAt"]?.format = "date-time"
        schema.properties?["localTime"]?.pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$"
        schema.properties?["localDate"]?.pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
        schema.properties?["defaultLocale"]?.pattern = LocaleContent.tag.pattern
        schema.properties?["defaultLocale"]?.maxLength = LocaleContent.tag.maxLength
        schema.properties?["ratePerMinute"]?.minimum = 1
        schema.properties?["ratePerMinute"]?.maximum = Int64(Campaign.maxRatePerMinute)
    }
}

extension MeUpdate: SchemaRefining {
    /// The zones Foundation knows, and BCP 47's shape.
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["timezone"]?.enumeration = TimeZone.knownTimeZoneIdentifiers.sorted()
        schema.properties?["locale"]?.pattern = LocaleContent.tag.pattern
        schema.properties?["locale"]?.maxLength = LocaleContent.tag.maxLength
    }
}

extension PushOptions.InterruptionLevel: SchemaEnumeration {}
extension PushOptions.Priority: SchemaEnumeration {}

extension PushOptions.Badge: DeclaredSchema {
    public static var declaredSchema: JSONSchema {
        JSONSchema.oneOf([JSONSchema.string.with { $0.enumeration = ["unread"] },
                          JSONSchema.integer.with { $0.minimum = 0; $0.maximum = Int64(PushOptions.maxBadge) }]).with {
            $0.description = "The app icon's badge: \"unread\" (the recipient's unread count at send time) or a number."
        }
    }
    public static var schemaExample: PushOptions.Badge { .unread }
}

extension PushOptions: SchemaRefining {
    /// The platforms' limits, as `validate` enforces them (SPEC §22).
    public static func refine(_ schema: inout JSONSchema) {
        for field in ["threadId", "category", "androidChannelId"] { schema.properties?[field]?.refineIdentifier() }
        schema.properties?["subtitle"]?.refineText(minLength: 1)
        schema.properties?["sound"]?.refineText(minLength: 0)
        schema.properties?["relevanceScore"]?.minimum = 0
        schema.properties?["relevanceScore"]?.maximum = 1
        schema.properties?["expiresIn"]?.minimum = 0
        schema.properties?["expiresIn"]?.maximum = Int64(PushOptions.maxExpiresIn)
        schema.properties?["actions"]?.maxItems = PushOptions.maxActions
    }
}

extension PushOptions.Action: SchemaRefining {
    /// An id as an identifier, a title as a text (SPEC §22).
    public static func refine(_ schema: inout JSONSchema) {
        schema.properties?["id"]?.refineIdentifier()
        schema.properties?["title"]?.refineText(minLength: 1)
    }
}

extension JSONSchema {
    /// 1 to 64 visible ASCII characters: a thread, category, channel or button id.
    mutating func refineIdentifier() {
        minLength = 1
        maxLength = PushOptions.maxIdentifier
        pattern = "^[!-~]+$"
    }

    /// Up to 256 characters with no control characters: a subtitle, a sound's name, a button's title.
    mutating func refineText(minLength: Int) {
        self.minLength = minLength
        maxLength = PushOptions.maxText
        pattern = "^[^\\u0000-\\u001F\\u007F]*$"
    }
}
