import Foundation

/// SciPy's `chi2_contingency(table, correction=False)` for each of `tables`, from
/// `scripts/chi2-reference.py` (tables as JSON on its standard input): the statistic and the
/// p-value, both nil where SciPy refuses the table (an expected count of zero). Blocks while
/// Python runs: call it on a thread of its own (`onOwnThread`).
public func chi2Reference(_ tables: [[[Int]]]) throws -> [(statistic: Double?, pValue: Double?)] {
    try pythonReference("chi2-reference.py", input: tables, count: tables.count)
        .map { (statistic: ($0["statistic"] as? NSNumber)?.doubleValue, pValue: ($0["pValue"] as? NSNumber)?.doubleValue) }
}

/// Whether `python3` has SciPy (what `chi2Reference` needs).
public func scipyAvailable() -> Bool { pythonHas("scipy.stats") }
