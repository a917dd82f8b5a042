import Foundation
import HTTPTypes
import RichPushCore

// The bodies of A/B tests and conversions (docs/api.md#ab-tests-and-conversions): a campaign's
// `variants`, `testShare`, `holdout` and `winner`; what its progress and its stats say of the
// test; `POST /api/events`.

extension Experiment.Metric: SchemaEnumeration {}

/// One variant of a campaign's A/B test: each field left out is the campaign's (`content` and
/// `options` whole; the badge is always the campaign's).
struct VariantRequest: Codable, Sendable {
    /// 1 to 64 letters, digits, `_ . : -`; once per test.
    var name: String
    var title: String?
    var message: String?
    /// A media id or name.
    var payload: String?
    /// Title and message per BCP 47 locale, as the campaign's `content`.
    var content: LocaleContent?
    var options: PushOptions?
}

extension VariantRequest: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["name"]?.pattern = ExperimentFields.namePattern
        schema.properties?["name"]?.minLength = 1
        schema.properties?["name"]?.maxLength = Experiment.maxNameLength
    }
}

/// How the winner is picked: the metric whose rate decides, how long after the campaign starts
/// sending, and the variant the rest gets when none wins (null: nobody more).
struct WinnerRequest: Codable, Sendable {
    var metric: Experiment.Metric
    /// `<n>s`, `<n>m`, `<n>h` or `<n>d`, at most 7 days.
    var after: String
    var fallback: String?
}

extension WinnerRequest: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["after"]?.pattern = "^[0-9]{1,7}[smhd]$"
        schema.properties?["after"]?.description = "A duration: a whole number and s, m, h or d (30m, 2h, 1d); at most 7 days."
        schema.properties?["fallback"]?.pattern = ExperimentFields.namePattern
        schema.properties?["fallback"]?.description = "A variant's name, or null: without a significant winner, nobody more is sent anything."
    }
}

/// What the A/B test fields of a campaign's body share.
enum ExperimentFields {
    /// A variant's name, and an event's.
    static let namePattern = "^[A-Za-z0-9_.:-]{1,64}$"

    /// Narrows `CampaignRequest`'s test fields (`CampaignRequest.refine`).
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["variants"]?.minItems = Experiment.variantCount.lowerBound
        schema.properties?["variants"]?.maxItems = Experiment.variantCount.upperBound
        schema.properties?["testShare"]?.minimum = 0
        schema.properties?["testShare"]?.maximum = 1
        schema.properties?["testShare"]?.description = "The share of the audience the variants are tested on, more than 0 and at most 1 (default: everyone outside the holdout)."
        schema.properties?["holdout"]?.minimum = 0
        schema.properties?["holdout"]?.maximum = 1
        schema.properties?["holdout"]?.description = "The share of the audience sent nothing, to compare with: 0 to 0.5 (default 0); testShare + holdout is at most 1."
    }
}

extension CampaignRequest {
    /// The A/B test the body asks for; nil without `variants`. 400 for `testShare`, `holdout`
    /// or `winner` without variants.
    var experiment: ExperimentDraft? {
        get throws {
            guard let variants = self.variants else {
                let stray = [("testShare", testShare != nil), ("holdout", holdout != nil), ("winner", winner != nil)].first { $0.1 }
                if let stray { throw Problem(.badRequest, "\(stray.0) applies to an A/B test: give variants too") }
                return nil
            }
            return ExperimentDraft(
                variants: variants.map {
                    ExperimentVariantDraft(name: $0.name, title: $0.title, message: $0.message, payload: $0.payload, locales: $0.content?.locales,
                                           options: $0.options)
                },
                testShare: testShare, holdout: holdout,
                winner: winner.map { ExperimentWinnerDraft(metric: $0.metric, after: $0.after, fallback: $0.fallback) })
        }
    }
}

/// A campaign's A/B test as its progress shows it (`CampaignResponse.experiment`).
struct CampaignExperimentResponse: Codable, Sendable {
    /// The variants' names, in the order given.
    var variants: [String]
    var testShare: Double
    var holdout: Double
    var metric: Experiment.Metric
    var after: String
    var fallback: String?
    /// When its test group started going out (ISO 8601); absent until then.
    var started: String?
    var test: CampaignTestSummary

    init(_ progress: ExperimentProgress) {
        variants = progress.variants
        testShare = progress.testShare
        holdout = progress.holdout
        metric = progress.metric
        after = progress.after
        fallback = progress.fallback
        started = progress.startedAt.map { $0.formatted(.iso8601) }
        test = CampaignTestSummary(decideAt: progress.decideAt.map { $0.formatted(.iso8601) },
                                   decided: progress.decidedAt.map { $0.formatted(.iso8601) }, winner: progress.winner)
    }
}

/// When an A/B test's winner is due, when it was decided and which it is: each null until known
/// (the winner stays null when there is none).
struct CampaignTestSummary: Codable, Sendable {
    var decideAt: String?
    var decided: String?
    var winner: String?

    init(decideAt: String?, decided: String?, winner: String?) {
        self.decideAt = decideAt
        self.decided = decided
        self.winner = winner
    }

    enum CodingKeys: String, CodingKey { case decideAt, decided, winner }

    /// Every key, null where there is nothing yet.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(decideAt, forKey: .decideAt)
        try container.encode(decided, forKey: .decided)
        try container.encode(winner, forKey: .winner)
    }
}

/// One variant's test group in a campaign's stats: users assigned, and of them those sent a
/// push, who fetched it (displayed), opened it, converted.
struct VariantStatsResponse: Codable, Sendable {
    var name: String
    var users: Int
    var sent: Int
    var displayed: Int
    var opened: Int
    var converted: Int
}

/// The holdout in a campaign's stats: users sent nothing, and those of them who converted.
struct HoldoutStatsResponse: Codable, Sendable {
    var users: Int
    var converted: Int
}

/// An A/B test's decision in a campaign's stats: Pearson's χ² over the variants (users with the
/// metric, users without, among those sent a push), its p-value, the winner (the best variant
/// when p < 0.05, else the fallback), whether p < 0.05. Each null until decided; the winner null
/// when there is none.
struct TestStatsResponse: Codable, Sendable {
    var statistic: Double?
    var pValue: Double?
    var winner: String?
    var significant: Bool?

    init(statistic: Double?, pValue: Double?, winner: String?, significant: Bool?) {
        self.statistic = statistic
        self.pValue = pValue
        self.winner = winner
        self.significant = significant
    }

    enum CodingKeys: String, CodingKey { case statistic, pValue, winner, significant }

    /// Every key, null where there is nothing yet.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(statistic, forKey: .statistic)
        try container.encode(pValue, forKey: .pValue)
        try container.encode(winner, forKey: .winner)
        try container.encode(significant, forKey: .significant)
    }
}

extension CampaignStatsResponse {
    /// The A/B test's part of a campaign's stats: its variants, its holdout and its decision.
    static func experiment(_ stats: ExperimentStats) -> (variants: [VariantStatsResponse], holdout: HoldoutStatsResponse, test: TestStatsResponse) {
        (stats.variants.map {
            VariantStatsResponse(name: $0.name, users: $0.users, sent: $0.sent, displayed: $0.displayed, opened: $0.opened, converted: $0.converted)
        },
         HoldoutStatsResponse(users: stats.holdoutUsers, converted: stats.holdoutConverted),
         TestStatsResponse(statistic: stats.statistic, pValue: stats.pValue, winner: stats.winner, significant: stats.significant))
    }
}

/// The body of `POST /api/events`: an app event of the caller's (a purchase, a sign-up).
struct EventRequest: Codable, Sendable {
    /// 1 to 64 letters, digits, `_ . : -`.
    var name: String
}

extension EventRequest: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["name"]?.pattern = ExperimentFields.namePattern
        schema.properties?["name"]?.minLength = 1
        schema.properties?["name"]?.maxLength = Experiment.maxNameLength
    }
}

/// What `POST /api/events` answers: how many campaigns the event was counted a conversion for now.
struct EventResponse: Codable, Sendable {
    var campaigns: Int
}
