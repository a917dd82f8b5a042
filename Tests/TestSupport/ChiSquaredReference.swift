import Foundation

/// SciPy's `chi2_contingency(table, correction=False)` for each of `tables`, from
/// `scripts/chi2-reference.py` (tables as JSON on its standard input): the statistic and the
/// p-value, both nil where SciPy refuses the table (an expected count of zero). Blocks while
/// Python runs: call it on a thread of its own (`onOwnThread`).
public func chi2Reference(_ tables: [[[Int]]]) throws -> [(statistic: Double?, pValue: Double?)] {
    let script = Fixtures.packageRoot.appendingPathComponent("scripts/chi2-reference.py").path
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script]
    let input = Pipe(), output = Pipe(), errors = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: tables))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let complaint = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
          let answers = try JSONSerialization.jsonObject(with: data) as? [[String: Any]], answers.count == tables.count else {
        throw ChiSquaredReferenceError(description: "scripts/chi2-reference.py exited \(process.terminationStatus): "
                                       + String(decoding: data + complaint, as: UTF8.self))
    }
    return answers.map { (statistic: ($0["statistic"] as? NSNumber)?.doubleValue, pValue: ($0["pValue"] as? NSNumber)?.doubleValue) }
}

/// Whether `python3` has SciPy (what `chi2Reference` needs).
public func scipyAvailable() -> Bool {
    (try? runCapturing("/usr/bin/env", ["python3", "-c", "import scipy.stats"]))?.status == 0
}

/// `scripts/chi2-reference.py` failed.
public struct ChiSquaredReferenceError: Error, CustomStringConvertible {
    public let description: String
}
