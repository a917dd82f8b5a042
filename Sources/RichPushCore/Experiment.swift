import Crypto
import Foundation
import MediaStore

/// One variant of an A/B test as an admin asks for it (docs/api.md#ab-tests-and-conversions):
/// each field left out is the campaign's own (`content` and `options` are taken whole: a
/// variant's `options` replace the campaign's, its badge aside, which stays the campaign's).
public struct ExperimentVariantDraft: Sendable, Equatable {
    public var name: String
    public var title: String?
    public var message: String?
    /// A media id or name.
    public var payload: String?
    /// Title and message per BCP 47 locale, as a campaign's `content`.
    public var locales: [String: LocalizedContent]?
    public var options: PushOptions?

    /// Creates a variant; every field but the name is optional.
    public init(name: String, title: String? = nil, message: String? = nil, payload: String? = nil,
                locales: [String: LocalizedContent]? = nil, options: PushOptions? = nil) {
        self.name = name
        self.title = title
        self.message = message
        self.payload = payload
        self.locales = locales
        self.options = options
    }
}

/// How an A/B test's winner is picked, as asked: the metric, how long after the campaign starts
/// sending (`30m`, `2h`, `1d`), and the variant the rest gets when no variant wins.
public struct ExperimentWinnerDraft: Sendable, Equatable {
    public var metric: Experiment.Metric?
    public var after: String?
    public var fallback: String?

    /// Creates the winner's rule.
    public init(metric: Experiment.Metric?, after: String?, fallback: String? = nil) {
        self.metric = metric
        self.after = after
        self.fallback = fallback
    }
}

/// An A/B test as an admin asks for it with a campaign (docs/api.md#ab-tests-and-conversions).
public struct ExperimentDraft: Sendable, Equatable {
    /// 2 to 8, each named once.
    public var variants: [ExperimentVariantDraft]
    /// The share of the audience the variants are tested on (0 to 1); nil: everyone outside the holdout.
    public var testShare: Double?
    /// The share of the audience that gets nothing, to compare with (0 to 0.5); nil: none.
    public var holdout: Double?
    /// Required.
    public var winner: ExperimentWinnerDraft?

    /// Creates a test.
    public init(variants: [ExperimentVariantDraft], testShare: Double? = nil, holdout: Double? = nil, winner: ExperimentWinnerDraft?) {
        self.variants = variants
        self.testShare = testShare
        self.holdout = holdout
        self.winner = winner
    }
}

/// A variant as a campaign keeps it: every field resolved, the campaign's where the variant gave none
/// (the payload as its media id, the options in their stored form, badge included).
public struct ExperimentVariant: Sendable, Equatable, Codable {
    public var name: String
    public var title: String?
    public var message: String
    /// The media id (hex).
    public var payload: String
    /// `PushOptions.stored`; nil for none.
    public var options: String?
    /// Content per locale, canonical tags.
    public var locales: [String: LocalizedContent]

    /// Creates a resolved variant.
    public init(name: String, title: String?, message: String, payload: String, options: String?, locales: [String: LocalizedContent]) {
        self.name = name
        self.title = title
        self.message = message
        self.payload = payload
        self.options = options
        self.locales = locales
    }

    /// `campaign` with this variant's words, payload, options and locales: what its test group is queued with.
    func apply(to campaign: inout Campaign) {
        campaign.title = title
        campaign.message = message
        if let media = MediaID(payload) { campaign.payload = media }
        campaign.options = PushOptions(stored: options)
        campaign.locales = locales
        campaign.localeNames = locales.keys.sorted()
    }
}

/// Where a user of an A/B test is (`campaign_members.arm`): a variant's index (0 and up), the
/// holdout, or the rest (who wait for the winner).
public enum ExperimentArm {
    /// Sent nothing, counted (their conversions are the baseline).
    public static let holdout = -1
    /// Sent the winner once it is decided (nothing when there is none).
    public static let rest = -2
}

/// An A/B test, checked (docs/api.md#ab-tests-and-conversions): its variants, shares and the
/// winner's rule.
public struct Experiment: Sendable, Equatable {
    /// What a variant's rate counts: users who fetched the payload, reported it opened, or
    /// converted (`POST /api/events`).
    public enum Metric: String, Sendable, Codable, CaseIterable {
        case opened, displayed, converted
    }

    public var variants: [ExperimentVariant]
    public var testShare: Double
    public var holdout: Double
    public var metric: Metric
    /// Seconds from the campaign's start to the decision.
    public var after: Double
    /// `after` as it was asked (`2h`).
    public var afterText: String
    /// The index of the variant the rest gets when no variant wins; nil: nobody more.
    public var fallback: Int?

    /// The fewest and the most variants.
    public static let variantCount = 2...8
    /// The largest holdout.
    public static let maxHoldout = 0.5
    /// The longest `after`: a week.
    public static let maxAfter: Double = 7 * 86_400
    /// A variant's name: letters, digits, `_ . : -`, 1 to 64 of them.
    public static let maxNameLength = 64
    /// Below this p-value the best variant wins.
    public static let significance = 0.05

    /// Whether some of the audience waits for the winner (`testShare + holdout` below 1).
    public var hasRest: Bool { testShare + holdout < 1 - 1e-9 }

    /// Where `user` is in campaign `campaign`'s test: the first 8 bytes of SHA-256 of
    /// `"<campaign>/<user>"` as a number in [0, 1) put them in the holdout (below `holdout`), the
    /// test group (the next `testShare`) or the rest; the next 8 bytes, modulo the number of
    /// variants, pick a test user's variant. With `testShare + holdout` at 1, nobody is in the rest.
    public func arm(campaign: Int64, user: String) -> Int {
        let (share, pick) = Self.position(campaign: campaign, user: user)
        if share < holdout { return ExperimentArm.holdout }
        if !hasRest || share < holdout + testShare { return Int(pick % UInt64(variants.count)) }
        return ExperimentArm.rest
    }

    /// The two numbers `arm` goes by: the share (the digest's first 8 bytes, big-endian, their top
    /// 53 bits over 2^53) and the pick (the next 8 bytes, big-endian).
    public static func position(campaign: Int64, user: String) -> (share: Double, pick: UInt64) {
        let digest = Array(SHA256.hash(data: Data("\(campaign)/\(user)".utf8)))
        var first: UInt64 = 0
        var second: UInt64 = 0
        for byte in digest[0..<8] { first = first << 8 | UInt64(byte) }
        for byte in digest[8..<16] { second = second << 8 | UInt64(byte) }
        return (Double(first >> 11) / 9_007_199_254_740_992.0, second)
    }

    /// Seconds in a duration `<n>s`, `<n>m`, `<n>h` or `<n>d` (`30m`, `2h`, `1d`): more than 0,
    /// at most 7 days; 400 naming `winner.after` otherwise.
    public static func duration(_ text: String) throws -> Double {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        let digits = text.dropLast()
        guard let unit = text.last.flatMap({ units[$0] }), !digits.isEmpty, digits.count <= 7,
              digits.allSatisfy({ $0.isASCII && $0.isNumber }), let count = Int(digits), count > 0 else {
            throw CoreError(.invalid, "winner.after must be a duration such as 30m, 2h or 1d (a whole number and s, m, h or d), got '\(text.prefix(20))'")
        }
        let seconds = Double(count) * unit
        guard seconds <= maxAfter else {
            throw CoreError(.invalid, "winner.after is \(text), more than 7 days (7d), the longest a test may wait for its winner")
        }
        return seconds
    }

    /// Whether `name` is a variant's name (or an event's, `POST /api/events`): 1 to 64 letters, digits, `_ . : -`.
    public static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maxNameLength
            && name.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
            }
    }
}

/// What `ExperimentDraft.checked` found: everything of a test but its variants' content, which
/// needs the database (the payloads) and is resolved with the campaign.
struct ExperimentRules: Sendable, Equatable {
    var names: [String]
    var testShare: Double
    var holdout: Double
    var metric: Experiment.Metric
    var after: Double
    var afterText: String
    var fallback: Int?
}

extension ExperimentDraft {
    /// The test's shape, checked before anything is stored (400 naming the field): 2 to 8
    /// variants named once each, shares in range, a metric, an `after` of at most 7 days, a
    /// fallback that names a variant. A test is sent now or at `sendAt`, never at `localTime`
    /// (its test group goes out at one time, then its winner).
    func checked(schedule: CampaignSchedule?) throws -> ExperimentRules {
        guard Experiment.variantCount.contains(variants.count) else {
            throw CoreError(.invalid, "variants has \(variants.count) variant(s); an A/B test has 2 to 8")
        }
        var seen = Set<String>()
        for (index, variant) in variants.enumerated() {
            guard Experiment.isName(variant.name) else {
                throw CoreError(.invalid, "variants[\(index)].name must be 1 to 64 letters, digits, _ . : or -, got '\(variant.name.prefix(70))'")
            }
            guard seen.insert(variant.name).inserted else {
                throw CoreError(.invalid, "variants[\(index)].name \(variant.name) is used twice; each variant needs a name of its own")
            }
        }
        if case .localTime? = schedule {
            throw CoreError(.invalid, "localTime cannot be used with variants: an A/B test sends its test group at one time, then the winner; send it now or at sendAt")
        }
        let holdout = self.holdout ?? 0
        guard holdout >= 0, holdout <= Experiment.maxHoldout else {
            throw CoreError(.invalid, "holdout must be 0 to \(Experiment.maxHoldout) (got \(holdout))")
        }
        let testShare = self.testShare ?? (1 - holdout)
        guard testShare > 0, testShare <= 1 else {
            throw CoreError(.invalid, "testShare must be more than 0 and at most 1 (got \(testShare))")
        }
        guard testShare + holdout <= 1 + 1e-9 else {
            throw CoreError(.invalid, "testShare + holdout must be at most 1 (got \(testShare) + \(holdout))")
        }
        guard let winner = self.winner else {
            throw CoreError(.invalid, "winner is missing: an A/B test needs {\"metric\":\"opened|displayed|converted\",\"after\":\"2h\",\"fallback\":NAME|null}")
        }
        guard let metric = winner.metric else {
            throw CoreError(.invalid, "winner.metric is missing: opened, displayed or converted")
        }
        guard let afterText = winner.after else { throw CoreError(.invalid, "winner.after is missing: a duration such as 30m, 2h or 1d") }
        let after = try Experiment.duration(afterText)
        var fallback: Int?
        if let name = winner.fallback {
            guard let index = variants.firstIndex(where: { $0.name == name }) else {
                throw CoreError(.invalid, "winner.fallback names no variant: \(name.prefix(70)) is not one of \(variants.map(\.name).joined(separator: ", "))")
            }
            fallback = index
        }
        return ExperimentRules(names: variants.map(\.name), testShare: testShare, holdout: holdout, metric: metric, after: after,
                               afterText: afterText, fallback: fallback)
    }
}
