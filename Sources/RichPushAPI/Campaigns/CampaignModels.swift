import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// `audience` of a campaign: exactly one of the five.
struct AudienceRequest: Codable, Sendable {
    var all: Bool?
    var users: [String]?
    var tags: String?
    /// docs/api.md#segments: a saved segment's name, read when the campaign is made.
    var segment: String?
    /// docs/api.md#segments: a filter; refusals name `audience.filter…`.
    var filter: SegmentFilter?

    init(all: Bool? = nil, users: [String]? = nil, tags: String? = nil, segment: String? = nil, filter: SegmentFilter? = nil) {
        self.all = all
        self.users = users
        self.tags = tags
        self.segment = segment
        self.filter = filter
    }

    /// Exactly one key, and no other: `{"all":true,"foo":1}` is refused, as the stored form's parser would.
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: RequestBody.AnyKey.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw CoreError(.invalid, "audience must have exactly one of \"all\", \"users\", \"tags\", \"segment\" or \"filter\"")
        }
        switch key.stringValue {
        case "all": all = try container.decode(Bool.self, forKey: key)
        case "users": users = try container.decode([String].self, forKey: key)
        case "tags": tags = try container.decode(String.self, forKey: key)
        case "segment": segment = try container.decode(String.self, forKey: key)
        case "filter": filter = try container.decode(SegmentFilter.self, forKey: key)
        default: throw CoreError(.invalid, "audience must be {\"all\":true}, {\"users\":[names]}, {\"tags\":\"expression\"}, {\"segment\":\"name\"} or {\"filter\":{…}}")
        }
    }

    /// Checked as the stored form is (`Audience(json:)`): one key, `all` true, names valid, the
    /// expression parsed; a segment's name checked (whether it exists is the store's to say), a
    /// filter parsed as it was decoded.
    var audience: Audience {
        get throws {
            if let segment { return try Audience.named(segment) }
            if let filter { return .filter(filter) }
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
            only("segment", ValuePattern.string(ValuePattern.segmentName)),
            only("filter", SegmentFilter.declaredSchema),
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
    /// The app whose devices it goes to (docs/api.md#apps-and-api-keys); every app the audience has devices in when left out.
    var app: String?
    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: when it goes out, RFC 3339 (`2026-12-01T09:00:00Z`); now when left out.
    var sendAt: String?
    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: `HH:MM` in each recipient's own time zone, on `localDate` (`YYYY-MM-DD`) or at the next such time.
    var localTime: String?
    var localDate: String?
    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: title and message per BCP 47 locale.
    var content: LocaleContent?
    /// The locale of recipients whose own has no content (default `en`).
    var defaultLocale: String?
    /// docs/api.md#options-badges-and-paced-sends: each platform's options, the badge, and the pace (pushes a minute, across all nodes).
    var options: PushOptions?
    var badge: PushOptions.Badge?
    var ratePerMinute: Int?
    /// docs/api.md#frequency-caps-and-quiet-hours: false sends past its apps' frequency caps and quiet hours (default true).
    var limits: Bool?
    /// docs/api.md#ab-tests-and-conversions: an A/B test's variants (2 to 8), the share tested,
    /// the holdout, and how the winner is picked (`experiment` reads them).
    var variants: [VariantRequest]?
    var testShare: Double?
    var holdout: Double?
    var winner: WinnerRequest?
    /// docs/api.md#dry-runs: true answers 200 with the reach and sample pushes, checked as a send
    /// is, and stores, queues and sends nothing (an `Idempotency-Key` is neither looked up nor kept).
    var dryRun: Bool?
}

extension CampaignRequest: SchemaRefining {
    /// The schedule's and the locale's shapes (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries); a value of the right shape that is not
    /// a time (02-30) or is past is 422.
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["sendAt"]?.format = "date-time"
        schema.properties?["sendAt"]?.maxLength = RFC3339.maxLength
        schema.properties?["localTime"]?.pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$"
        schema.properties?["localDate"]?.pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
        schema.properties?["defaultLocale"]?.pattern = LocaleContent.tag.pattern
        schema.properties?["defaultLocale"]?.maxLength = LocaleContent.tag.maxLength
        schema.properties?["ratePerMinute"]?.minimum = 1
        schema.properties?["ratePerMinute"]?.maximum = Int64(Campaign.maxRatePerMinute)
        ExperimentFields.refine(&schema)
    }
}

/// `content` of a campaign: BCP 47 locale → `{"title","message","subtitle","actions"}` (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries,
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
                                 // A subtitle and button titles follow options' rules for text (docs/api.md#options-badges-and-paced-sends).
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

/// `GET /api/admin/campaigns/{id}/stats` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks).
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
    /// docs/api.md#change-or-take-back-what-was-sent: replacements of its changed content, and
    /// retractions, sent to devices.
    var updated: Int
    var retracted: Int
    /// docs/api.md#frequency-caps-and-quiet-hours: pushes not sent for a frequency cap, and pushes
    /// held to the end of their user's quiet hours (those dropped in quiet hours count in `failed`).
    var capped: Int
    var delayed: Int
    /// Failure reasons (the push service's words up to the first colon) and how many.
    var failures: [String: Int]
    /// Per minute, oldest first.
    var timeline: [Minute]
    /// docs/api.md#ab-tests-and-conversions: recipients who converted (`POST /api/events` within
    /// 24 h of their push); and for an A/B test, its variants, its holdout and its decision.
    var converted: Int
    var variants: [VariantStatsResponse]?
    var holdout: HoldoutStatsResponse?
    var test: TestStatsResponse?

    init(_ stats: CampaignStats) {
        queued = stats.queued
        sent = stats.totals.sent
        failed = stats.totals.failed
        displayed = stats.totals.displayed
        opened = stats.totals.opened
        updated = stats.totals.updated
        retracted = stats.totals.retracted
        capped = stats.totals.capped
        delayed = stats.totals.delayed
        byPlatform = stats.byPlatform.mapValues { Counts(sent: $0.sent, failed: $0.failed) }
        failures = stats.failures
        timeline = stats.timeline.map { Minute(minute: $0.minute.formatted(.iso8601), sent: $0.sent, displayed: $0.displayed, opened: $0.opened) }
        converted = stats.converted
        if let experiment = stats.experiment {
            let parts = Self.experiment(experiment)
            variants = parts.variants
            holdout = parts.holdout
            test = parts.test
        }
    }
}

/// A campaign and its counts, as `/api/admin/campaigns…` answer (docs/api.md#campaigns).
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
    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: its schedule, as asked.
    var sendAt: String?
    var localTime: String?
    var localDate: String?
    /// The locales it has content for, and the default one.
    var locales: [String]?
    var defaultLocale: String?
    /// When it was cancelled.
    var cancelled: String?
    /// docs/api.md#change-or-take-back-what-was-sent: when its content was last changed, and when it was taken back.
    var changed: String?
    var retracted: String?
    /// docs/api.md#options-badges-and-paced-sends: its options and badge as asked, its pace, and when a paced campaign's last
    /// push queued so far goes out.
    var options: PushOptions?
    var badge: PushOptions.Badge?
    var ratePerMinute: Int?
    var expectedEnd: String?
    /// docs/api.md#frequency-caps-and-quiet-hours: false when sent past frequency caps and quiet hours.
    var limits: Bool
    /// docs/operations.md#traces: the W3C trace id of the request that made it, when tracing was on.
    var traceId: String?
    /// docs/api.md#ab-tests-and-conversions: its A/B test, its phase and winner; absent without one.
    var experiment: CampaignExperimentResponse?

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
        changed = c.changedAt.map { $0.formatted(.iso8601) }
        retracted = c.retractedAt.map { $0.formatted(.iso8601) }
        var options = c.options
        badge = options.badge
        options.badge = nil
        self.options = options.isEmpty ? nil : options
        ratePerMinute = c.ratePerMinute
        expectedEnd = progress.expectedEnd.map { $0.formatted(.iso8601) }
        limits = c.limits
        traceId = c.traceId
        experiment = progress.experiment.map(CampaignExperimentResponse.init)
    }
}
