import Crypto
import Foundation
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: A/B tests' chi-squared test, assignment and rules (SPEC §28)")
struct ChiSquaredTests {
    /// 2×2 to 2×8 tables, a row per variant ([with the metric, without]): a few by hand, and for
    /// each number of variants one of small counts and one of large, from a fixed seed.
    static var tables: [[[Int]]] {
        var seed: UInt64 = 0x5EED
        func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(bound))
        }
        var made: [[[Int]]] = [
            [[10, 90], [30, 70]],
            [[1, 2], [3, 4]],
            [[5, 5], [5, 5]],                    // no difference at all: χ² 0, p 1
            [[0, 10], [3, 7]],                   // a zero cell, no zero margin
            [[1, 0], [0, 1]],
            [[1_000, 9_000], [1_100, 8_900]],
            [[123_456, 876_544], [124_000, 876_000]],
            [[9_000, 1_000], [1_000, 9_000]],    // p underflows to 0
            [[48, 452], [61, 439], [55, 445]],
        ]
        for variants in 2...8 {
            made.append((0..<variants).map { _ in [1 + next(20), 1 + next(20)] })
            made.append((0..<variants).map { _ in [1 + next(100_000), 1 + next(100_000)] })
        }
        return made
    }

    @Test("statistic and p-value equal scipy.stats.chi2_contingency(table, correction=False)'s to 1e-9 over 2×2 to 2×8 tables, small counts and large (scripts/chi2-reference.py)")
    func matchesSciPy() async throws {
        guard scipyAvailable() else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "the chi-squared reference needs SciPy (python3 -m pip install scipy)")
            return
        }
        let tables = Self.tables
        #expect(tables.count >= 20)
        let reference = try await onOwnThread { try chi2Reference(tables) }
        for (table, expected) in zip(tables, reference) {
            let ours = ChiSquared.test(table)
            let statistic = try #require(expected.statistic, "\(table)")
            let pValue = try #require(expected.pValue, "\(table)")
            #expect(!ours.degenerate, "\(table)")
            #expect(ours.degreesOfFreedom == table.count - 1)
            #expect(abs(ours.statistic - statistic) <= 1e-9 * max(1, abs(statistic)), "\(table): \(ours.statistic) vs \(statistic)")
            #expect(abs(ours.pValue - pValue) <= 1e-9, "\(table): \(ours.pValue) vs \(pValue)")
            if pValue > 1e-280 {
                #expect(abs(ours.pValue - pValue) <= 1e-9 * pValue, "\(table): \(ours.pValue) vs \(pValue), relatively")
            }
        }
    }

    @Test("a table SciPy refuses (an expected count of zero: a column or row of zeros, nothing at all) is degenerate: statistic 0, p-value 1, no winner")
    func degenerate() async throws {
        let refused: [[[Int]]] = [[[0, 10], [0, 20]], [[0, 0], [4, 6]], [[0, 0], [0, 0]], [[0, 5], [0, 5], [0, 5]]]
        for table in refused {
            let ours = ChiSquared.test(table)
            #expect(ours.degenerate && ours.statistic == 0 && ours.pValue == 1, "\(table)")
        }
        #expect(ChiSquared.test([[3, 4]]).degenerate) // one variant: nothing to compare
        #expect(Experiments.best([[0, 0], [0, 0]]) == nil)
        #expect(Experiments.best([[1, 9], [3, 7], [3, 7]]) == 1) // the first of equals
        guard scipyAvailable() else { return }
        let reference = try await onOwnThread { try chi2Reference(refused) }
        #expect(reference.allSatisfy { $0.statistic == nil && $0.pValue == nil }, "SciPy took a table it used to refuse: \(reference)")
    }

    @Test("Q(a, x), the regularized upper incomplete gamma function, in closed forms: e^-x for a = 1, erfc(√x) for a = ½, Q(2, x) = (1 + x) e^-x")
    func incompleteGamma() {
        for x in [0.0, 1e-8, 0.3, 1, 1.5, 2.5, 7, 30, 200] {
            #expect(abs(ChiSquared.upperRegularizedGamma(1, x) - exp(-x)) <= 1e-14, "\(x)")
            #expect(abs(ChiSquared.upperRegularizedGamma(0.5, x) - erfc(x.squareRoot())) <= 1e-14, "\(x)")
            #expect(abs(ChiSquared.upperRegularizedGamma(2, x) - (1 + x) * exp(-x)) <= 1e-14, "\(x)")
        }
        #expect(ChiSquared.upperRegularizedGamma(3.5, .infinity) == 0)
    }

    @Test("assignment: SHA-256 of \"<campaign>/<user>\", the first 8 bytes the share (holdout, then test, then the rest), the next 8 the variant; the shares come out as asked")
    func assignment() {
        let experiment = Experiment(variants: ["A", "B", "C"].map { ExperimentVariant(name: $0, title: nil, message: "m", payload: "", options: nil, locales: [:]) },
                                    testShare: 0.5, holdout: 0.1, metric: .opened, after: 3600, afterText: "1h", fallback: nil)
        var counts: [Int: Int] = [:]
        for index in 0..<30_000 {
            let user = "user\(index)"
            let digest = Array(SHA256.hash(data: Data("77/\(user)".utf8)))
            let first = digest[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let second = digest[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let share = Double(first >> 11) / 9_007_199_254_740_992.0
            let expected = share < 0.1 ? ExperimentArm.holdout : share < 0.6 ? Int(second % 3) : ExperimentArm.rest
            let arm = experiment.arm(campaign: 77, user: user)
            #expect(arm == expected, "\(user)")
            counts[arm, default: 0] += 1
        }
        #expect(abs(Double(counts[ExperimentArm.holdout] ?? 0) / 30_000 - 0.1) < 0.01)
        #expect(abs(Double(counts[ExperimentArm.rest] ?? 0) / 30_000 - 0.4) < 0.015)
        for variant in 0..<3 { #expect(abs(Double(counts[variant] ?? 0) / 30_000 - 0.5 / 3) < 0.012, "\(variant)") }
        // Another campaign, another split: the same user is not always in the same arm.
        #expect((0..<200).contains { experiment.arm(campaign: 77, user: "user\($0)") != experiment.arm(campaign: 78, user: "user\($0)") })
        // testShare + holdout = 1: nobody waits for a winner.
        var everyone = experiment
        everyone.testShare = 0.9
        #expect((0..<2_000).allSatisfy { everyone.arm(campaign: 5, user: "u\($0)") != ExperimentArm.rest })
    }

    @Test("after: a whole number and s, m, h or d, more than 0 and at most 7 days; anything else is 400 naming winner.after")
    func durations() throws {
        #expect(try Experiment.duration("2s") == 2)
        #expect(try Experiment.duration("30m") == 1_800)
        #expect(try Experiment.duration("2h") == 7_200)
        #expect(try Experiment.duration("1d") == 86_400)
        #expect(try Experiment.duration("7d") == 7 * 86_400)
        #expect(try Experiment.duration("168h") == 7 * 86_400)
        for bad in ["8d", "169h", "0s", "2 hours", "h", "2", "-1h", "1.5h", "2H", "", "99999999s"] {
            let error = #expect(throws: CoreError.self, "\(bad)") { try Experiment.duration(bad) }
            #expect(error?.kind == .invalid && error?.message.contains("winner.after") == true, "\(bad): \(error?.message ?? "")")
        }
    }

    @Test("a test's shape: 2 to 8 variants named once each, shares in range, a metric, an after, a fallback that names a variant, no localTime; each refusal is 400 naming the field")
    func rules() throws {
        func draft(_ names: [String] = ["A", "B"], testShare: Double? = 0.5, holdout: Double? = 0.1, metric: Experiment.Metric? = .opened,
                   after: String? = "2h", fallback: String? = nil, winner: Bool = true) -> ExperimentDraft {
            ExperimentDraft(variants: names.map { ExperimentVariantDraft(name: $0) }, testShare: testShare, holdout: holdout,
                            winner: winner ? ExperimentWinnerDraft(metric: metric, after: after, fallback: fallback) : nil)
        }
        let rules = try draft(fallback: "B").checked(schedule: nil)
        #expect(rules.testShare == 0.5 && rules.holdout == 0.1 && rules.metric == .opened && rules.after == 7_200 && rules.fallback == 1)
        // Without testShare, everyone outside the holdout is tested.
        #expect(try draft(testShare: nil, holdout: 0.2).checked(schedule: nil).testShare == 0.8)
        #expect(try draft(testShare: nil, holdout: nil).checked(schedule: nil).testShare == 1)
        #expect(try draft().checked(schedule: .at(Date().addingTimeInterval(3600))).after == 7_200)
        let nine = try LocalTime("09:00")
        let refused: [(ExperimentDraft, CampaignSchedule?, String)] = [
            (draft(["A"]), nil, "variants"),
            (draft((1...9).map { "V\($0)" }), nil, "variants"),
            (draft(["A", "A"]), nil, "variants[1].name"),
            (draft(["A", "bad name"]), nil, "variants[1].name"),
            (draft(testShare: 1.5), nil, "testShare"),
            (draft(testShare: 0), nil, "testShare"),
            (draft(holdout: 0.6), nil, "holdout"),
            (draft(holdout: -0.1), nil, "holdout"),
            (draft(testShare: 0.7, holdout: 0.4), nil, "testShare + holdout"),
            (draft(metric: nil), nil, "winner.metric"),
            (draft(after: "8d"), nil, "winner.after"),
            (draft(after: "soon"), nil, "winner.after"),
            (draft(after: nil), nil, "winner.after"),
            (draft(fallback: "C"), nil, "winner.fallback"),
            (draft(winner: false), nil, "winner"),
            (draft(), .localTime(nine, date: nil), "localTime"),
        ]
        for (bad, schedule, field) in refused {
            let error = #expect(throws: CoreError.self, "\(field)") { try bad.checked(schedule: schedule) }
            #expect(error?.kind == .invalid && error?.message.hasPrefix(field) == true, "\(field): \(error?.message ?? "")")
        }
    }
}
