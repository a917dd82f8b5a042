import Foundation

/// jsonschema's verdict on `format: date-time` for each of `texts`, and the instant when valid,
/// from `scripts/rfc3339-reference.py` (texts as JSON on its standard input). Blocks while
/// Python runs: call it on a thread of its own (`onOwnThread`).
public func rfc3339Reference(_ texts: [String]) throws -> [(valid: Bool, epoch: Double?)] {
    let script = Fixtures.packageRoot.appendingPathComponent("scripts/rfc3339-reference.py").path
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script]
    let input = Pipe(), output = Pipe(), errors = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: texts))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let complaint = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
          let answers = try JSONSerialization.jsonObject(with: data) as? [[String: Any]], answers.count == texts.count else {
        throw RFC3339ReferenceError(description: "scripts/rfc3339-reference.py exited \(process.terminationStatus): "
                                    + String(decoding: data + complaint, as: UTF8.self))
    }
    return answers.map { (valid: ($0["valid"] as? Bool) ?? false, epoch: ($0["epoch"] as? NSNumber)?.doubleValue) }
}

/// Whether `python3` has rfc3339-validator (what `rfc3339Reference` needs; openapi-spec-validator
/// brings it).
public func rfc3339ReferenceAvailable() -> Bool {
    (try? runCapturing("/usr/bin/env", ["python3", "-c", "import rfc3339_validator"]))?.status == 0
}

/// `scripts/rfc3339-reference.py` failed.
public struct RFC3339ReferenceError: Error, CustomStringConvertible {
    public let description: String
}
