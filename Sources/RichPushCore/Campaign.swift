import Foundation
import MediaStore

/// One locale's words (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries): the title and message, and the words of the options a phone
/// shows (docs/api.md#options-badges-and-paced-sends): the subtitle and the buttons' titles, by button id.
public struct LocalizedContent: Sendable, Equatable, Codable {
    public var title: String?
    public var message: String?
    public var subtitle: String?
    /// Button id (one of the campaign's `options.actions`) → its title in this locale.
    public var actions: [String: String]?

    /// Creates content.
    public init(title: String? = nil, message: String? = nil, subtitle: String? = nil, actions: [String: String]? = nil) {
        self.title = title
        self.message = message
        self.subtitle = subtitle
        self.actions = actions
    }
}

/// What an admin asks for when sending a campaign.
public struct CampaignDraft: Sendable {
    public var audience: Audience
    /// Message, title, rich type, payload and mode, as for a single notification.
    public var content: NotificationDraft
    /// The app whose devices it goes to (docs/api.md#apps-and-api-keys); nil for every app the audience has devices in.
    public var app: String?
    /// When it goes out (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries); nil for now.
    public var schedule: CampaignSchedule?
    /// Title and message per BCP 47 locale; each recipient gets theirs, falling back from
    /// `fr-CA` to `fr` to `defaultLocale`, then to `content`'s title and message.
    public var locales: [String: LocalizedContent]
    /// The locale of recipients whose own has no content.
    public var defaultLocale: String
    /// At most this many pushes a minute, across all nodes (docs/api.md#options-badges-and-paced-sends); nil: as fast as they go.
    public var ratePerMinute: Int?
    /// Whether its apps' frequency caps and quiet hours hold its pushes back (docs/api.md#frequency-caps-and-quiet-hours).
    public var limits: Bool
    /// The W3C `traceparent` of the request that sends it, while tracing is on (docs/operations.md#traces).
    public var traceparent: String? = nil
    /// An A/B test (docs/api.md#ab-tests-and-conversions): variants sent to a test group, the
    /// winner to the rest; nil for none.
    public var experiment: ExperimentDraft? = nil

    /// Creates a draft; the mode defaults to `alert` (docs/api.md#campaigns).
    public init(audience: Audience, content: NotificationDraft, app: String? = nil, schedule: CampaignSchedule? = nil,
                locales: [String: LocalizedContent] = [:], defaultLocale: String = "en", ratePerMinute: Int? = nil, limits: Bool = true) {
        self.ratePerMinute = ratePerMinute
        self.limits = limits
        self.audience = audience
        self.content = content
        self.app = app
        self.schedule = schedule
        self.locales = locales
        self.defaultLocale = defaultLocale
    }
}

/// A campaign and how far it got.
public struct Campaign: Sendable, Equatable {
    /// `scheduled` until its first push is queued, `sending` until every recipient is queued
    /// and no push is pending, then `done`; `cancelled` once cancelled (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries);
    /// `retracted` once taken back (docs/api.md#change-or-take-back-what-was-sent).
    public enum Status: String, Sendable, Codable, CaseIterable { case scheduled, sending, done, cancelled, retracted }

    public var id: Int64
    public var audience: Audience
    public var message: String
    public var title: String?
    public var richType: String
    public var payload: MediaID
    public var mode: PushMode
    public var createdBy: String
    public var createdAt: Date
    /// Recipients and devices queued so far (all of them once `queued`).
    public var recipients: Int
    public var devices: Int
    /// Whether every recipient has been queued.
    public var queued: Bool
    /// The app whose devices it goes to; nil for every app.
    public var app: String? = nil
    /// When it goes out; nil: when it was made.
    public var schedule: CampaignSchedule? = nil
    /// Per-locale content and the default locale. Read only where a push is made from it
    /// (queueing): a campaign listed or polled has its `localeNames` alone.
    public var locales: [String: LocalizedContent] = [:]
    /// The locales it has content for, sorted.
    public var localeNames: [String] = []
    public var defaultLocale: String = "en"
    /// When it was cancelled.
    public var cancelledAt: Date? = nil
    /// Platform options and the badge, as each recipient's notification gets them (docs/api.md#options-badges-and-paced-sends).
    public var options = PushOptions()
    /// The pace, pushes a minute; nil for unpaced.
    public var ratePerMinute: Int? = nil
    /// A paced campaign's next free send time: when its last push queued so far goes out, plus one step.
    public var paceNextAt: Date? = nil
    /// Pushes queued (one per device, or per user through a hub; nil for campaigns made before
    /// they were counted).
    public var pushes: Int? = nil
    /// When its content was last changed, and when it was taken back (docs/api.md#change-or-take-back-what-was-sent).
    public var changedAt: Date? = nil
    public var retractedAt: Date? = nil
    /// Whether its apps' frequency caps and quiet hours apply (docs/api.md#frequency-caps-and-quiet-hours).
    public var limits = true
    /// The W3C `traceparent` of the request that made it, while tracing was on (docs/operations.md#traces).
    public var traceparent: String? = nil

    /// The trace id of `traceparent` (`00-TRACEID-SPANID-FLAGS`): the trace that follows the campaign.
    public var traceId: String? {
        guard let parts = traceparent?.split(separator: "-"), parts.count == 4, parts[1].count == 32 else { return nil }
        return String(parts[1])
    }

    /// The most pushes a minute a pace may ask for (a million: beyond it, pacing is moot).
    public static let maxRatePerMinute = 1_000_000

    /// The most users an audience may list by name.
    public static let maxListedUsers = 10_000

    /// The most locales `content` may have (docs/security.md).
    public static let maxLocales = 50

    /// The most campaigns one creator (an admin or a key) may have scheduled and not yet sent:
    /// each is looked at by every node every second until it is due.
    public static let maxScheduledPerCreator = 1_000
}

/// Delivery and read counts of a campaign (docs/api.md#campaigns).
public struct CampaignProgress: Sendable, Equatable {
    public var campaign: Campaign
    public var pending: Int
    public var sent: Int
    public var failed: Int
    /// Recipients who fetched the payload.
    public var fetched: Int
    /// Its A/B test's settings and decision (docs/api.md#ab-tests-and-conversions); nil without one.
    public var experiment: ExperimentProgress? = nil

    /// When a paced campaign's last queued push goes out (docs/api.md#options-badges-and-paced-sends): nil when unpaced, done or cancelled.
    /// The last queued push's turn, or later when the outbox has fallen behind the pace (a
    /// service down, retries): then the pushes still pending, one step apart from now.
    public var expectedEnd: Date? {
        guard let rate = campaign.ratePerMinute, let next = campaign.paceNextAt, status == .sending else { return nil }
        let step = 60 / Double(rate)
        return max(next.addingTimeInterval(-step), Date().addingTimeInterval(Double(max(0, pending - 1)) * step))
    }

    /// `cancelled`, `scheduled` (nothing queued yet), `done` (everyone queued, nothing pending, an
    /// A/B test's winner decided) or `sending`.
    public var status: Campaign.Status {
        if campaign.retractedAt != nil { return .retracted }
        if campaign.cancelledAt != nil { return .cancelled }
        if campaign.schedule != nil && !campaign.queued && campaign.recipients == 0 { return .scheduled }
        // docs/api.md#ab-tests-and-conversions: a test is sending until its winner is decided (and its rest queued).
        if let experiment, experiment.decidedAt == nil { return .sending }
        return campaign.queued && pending == 0 ? .done : .sending
    }
}
