import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Pearson's chi-squared test of independence over a contingency table, without continuity
/// correction: what `scipy.stats.chi2_contingency(table, correction=False)` answers
/// (docs/api.md#ab-tests-and-conversions; `Tests/RichPushCoreTests/ChiSquaredTests.swift`
/// compares the two to 1e-9 with `scripts/chi2-reference.py`).
public enum ChiSquared {
    /// The test's outcome.
    public struct Result: Sendable, Equatable {
        /// Σ (observed − expected)² / expected.
        public var statistic: Double
        /// The chance of a statistic at least this large if the rows did not differ: Q(dof/2, χ²/2).
        public var pValue: Double
        /// (rows − 1) × (columns − 1).
        public var degreesOfFreedom: Int
        /// Whether the table could not be tested (a row or column of zeros, nothing at all, or a
        /// single row or column): then the statistic is 0 and the p-value 1, where SciPy raises.
        public var degenerate: Bool

        /// Creates a result.
        public init(statistic: Double, pValue: Double, degreesOfFreedom: Int, degenerate: Bool) {
            self.statistic = statistic
            self.pValue = pValue
            self.degreesOfFreedom = degreesOfFreedom
            self.degenerate = degenerate
        }
    }

    /// The test over `table`, rows of equal length of counts (for an A/B test, a row per variant:
    /// users with the metric, users without). Expected counts are row sum × column sum / total,
    /// as SciPy computes them; the degrees of freedom (rows − 1) × (columns − 1).
    public static func test(_ table: [[Int]]) -> Result {
        let columns = table.first?.count ?? 0
        let dof = max(0, (table.count - 1) * (columns - 1))
        guard dof > 0, table.allSatisfy({ $0.count == columns }), table.allSatisfy({ $0.allSatisfy { $0 >= 0 } }) else {
            return Result(statistic: 0, pValue: 1, degreesOfFreedom: dof, degenerate: true)
        }
        let rowSums = table.map { Double($0.reduce(0, +)) }
        var columnSums = [Double](repeating: 0, count: columns)
        for row in table {
            for (column, count) in row.enumerated() { columnSums[column] += Double(count) }
        }
        let total = rowSums.reduce(0, +)
        guard total > 0, !rowSums.contains(0), !columnSums.contains(0) else {
            return Result(statistic: 0, pValue: 1, degreesOfFreedom: dof, degenerate: true)
        }
        var statistic = 0.0
        for (rowIndex, row) in table.enumerated() {
            for (column, count) in row.enumerated() {
                let expected = rowSums[rowIndex] * columnSums[column] / total
                let difference = Double(count) - expected
                statistic += difference * difference / expected
            }
        }
        return Result(statistic: statistic, pValue: upperRegularizedGamma(Double(dof) / 2, statistic / 2), degreesOfFreedom: dof,
                      degenerate: false)
    }

    /// Relative precision the series and the continued fraction are taken to.
    static let precision = 1e-15
    /// Stands in for 0 in Lentz's method (a denominator never becomes 0).
    static let tiny = 1e-300
    /// More terms than either ever needs for the tables a test makes (a few dozen at most).
    static let maxTerms = 100_000

    /// Q(a, x) = Γ(a, x) / Γ(a), the regularized upper incomplete gamma function (the chi-squared
    /// survival function is Q(dof/2, χ²/2)). For x < a + 1, 1 − P(a, x) from P's series; else
    /// Lentz's continued fraction for Q itself (accurate however small Q is); each to 1e-15
    /// relative (Numerical Recipes §6.2). `a` must be positive.
    public static func upperRegularizedGamma(_ a: Double, _ x: Double) -> Double {
        precondition(a > 0, "the shape must be positive")
        guard x > 0 else { return 1 }
        guard x.isFinite else { return 0 }
        // log(e^-x x^a / Γ(a))
        let front = -x + a * log(x) - lgamma(a)
        if x < a + 1 {
            var denominator = a
            var term = 1 / a
            var sum = term
            for _ in 0..<maxTerms {
                denominator += 1
                term *= x / denominator
                sum += term
                if abs(term) < abs(sum) * precision { break }
            }
            return min(1, max(0, 1 - sum * exp(front)))
        }
        var b = x + 1 - a
        var c = 1 / tiny
        var d = 1 / b
        var fraction = d
        for i in 1..<maxTerms {
            let an = -Double(i) * (Double(i) - a)
            b += 2
            d = an * d + b
            if abs(d) < tiny { d = tiny }
            c = b + an / c
            if abs(c) < tiny { c = tiny }
            d = 1 / d
            let delta = d * c
            fraction *= delta
            if abs(delta - 1) < precision { break }
        }
        return min(1, max(0, exp(front) * fraction))
    }
}
