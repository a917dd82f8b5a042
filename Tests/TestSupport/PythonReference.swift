import Foundation

/// Runs `scripts/<script>` with `input` as JSON on its standard input and returns the JSON list
/// it prints, `count` entries long; throws with what it printed otherwise. Its input, output and
/// errors go through files, so neither side can block on a full pipe nor die of a closed one.
/// Blocks while Python runs: call it on a thread of its own (`onOwnThread`).
public func pythonReference(_ script: String, input: Any, count: Int) throws -> [[String: Any]] {
    let path = Fixtures.packageRoot.appendingPathComponent("scripts/\(script)").path
    let dir = try Fixtures.tempDirectory()
    defer { try? FileManager.default.removeItem(at: dir) }
    let (inURL, outURL, errURL) = (dir.appendingPathComponent("in.json"), dir.appendingPathComponent("out.json"), dir.appendingPathComponent("err.txt"))
    try JSONSerialization.data(withJSONObject: input).write(to: inURL)
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", path]
    process.standardInput = try FileHandle(forReadingFrom: inURL)
    process.standardOutput = try FileHandle(forWritingTo: outURL)
    process.standardError = try FileHandle(forWritingTo: errURL)
    try process.run()
    process.waitUntilExit()
    let data = try Data(contentsOf: outURL)
    guard process.terminationStatus == 0, let answers = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]], answers.count == count else {
        throw PythonReferenceError(description: "scripts/\(script) exited \(process.terminationStatus): "
                                   + String(decoding: data + ((try? Data(contentsOf: errURL)) ?? Data()), as: UTF8.self))
    }
    return answers
}

/// Whether `python3` can import `module` (what a reference script needs).
public func pythonHas(_ module: String) -> Bool {
    (try? runCapturing("/usr/bin/env", ["python3", "-c", "import \(module)"]))?.status == 0
}

/// A reference script failed.
public struct PythonReferenceError: Error, CustomStringConvertible {
    public let description: String
}
