import Foundation

/// Runs a console test's Selenium script in headless Chromium: `scripts/` on its path (for
/// `console_browser.py`), `sys.argv[1…]` replaced by `arguments` (quoted), bounded to 180 s so a
/// browser that hangs fails its test and not the run. Returns the JSON object the script prints
/// last, or throws with the end of what it printed when it fails.
public enum ConsoleBrowser {
    public struct Failed: Error, CustomStringConvertible {
        public let description: String
    }

    /// Whether chromium-driver (apt) and selenium (pip) are here to run a console test; where
    /// they are not, false, or an error when `RICHPUSH_REQUIRE_ENGINES=1` says they must be (`.ci/run` installs them).
    public static func isAvailable() async throws -> Bool {
        if which("chromedriver") != nil, (try? await python("import selenium"))?.status == 0 { return true }
        if ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] == "1" {
            throw Failed(description: "the console test needs chromium-driver (apt) and selenium (pip); .ci/run installs them")
        }
        return false
    }

    public static func run(_ script: String, arguments: [String]) async throws -> [String: Any] {
        let scripts = Fixtures.packageRoot.appendingPathComponent("scripts").path
        var filled = "import sys\nsys.path.insert(0, '\(scripts)')\n" + script
        for (index, value) in arguments.enumerated() {
            filled = filled.replacingOccurrences(of: "sys.argv[\(index + 1)]", with: "'\(value)'")
        }
        let program = filled
        let (status, output) = try await onOwnThread { try runCapturing("/usr/bin/timeout", ["180", "python3", "-c", program]) }
        guard status == 0 else { throw Failed(description: "the browser script exited \(status): \(output.suffix(2000))") }
        let last = output.split(separator: "\n").last.map(String.init) ?? ""
        guard let seen = try? JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any] else {
            throw Failed(description: "the browser script printed no JSON object last: \(output.suffix(2000))")
        }
        return seen
    }
}
