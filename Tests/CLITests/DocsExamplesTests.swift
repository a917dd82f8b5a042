import Foundation
import RichPushTestSupport
import Testing

/// Issue #49, "Examples that run": every shell example of README.md and docs/ runs as written
/// against the built `richpush` (servers, sandboxes and inputs made by the examples themselves),
/// and every answer a document shows with `# =>` (exactly) or `# ~>` (in part) is what the binary
/// prints. `scripts/docs-examples.py` does the running; its header describes the marks a document
/// may carry (`<!-- example: skip (why) -->` and the others). A failure prints its report: the
/// block, the command or the answer that differed, and the block's output.
@Suite("The documents' examples run as written (issue #49)")
struct DocsExamplesTests {
    @Test("every ```sh block of README.md and docs/ runs with the built richpush and prints the answers the document shows")
    func everyExampleRuns() async throws {
        let script = Fixtures.packageRoot.appendingPathComponent("scripts/docs-examples.py").path
        var arguments = ["900", "python3", script, "--bin", CLI.executable.path]
        let bench = CLI.executable.deletingLastPathComponent().appendingPathComponent("richpush-bench")
        if FileManager.default.isExecutableFile(atPath: bench.path) { arguments += ["--bench", bench.path] }
        // Under RICHPUSH_REQUIRE_ENGINES=1 (.ci/run) the runner fails a block whose tools
        // (schemathesis, richpush-bench) are missing, instead of skipping it.
        // Bounded: a hung example must fail this test, not the suite (each block has its own
        // limit inside, 60 s unless its document says otherwise).
        let command = arguments
        let (status, output) = try await onOwnThread { try runCapturing("/usr/bin/timeout", command) }
        #expect(status == 0, "scripts/docs-examples.py --bin \(CLI.executable.path):\n\(output)")
        #expect(output.contains("docs-examples: ") && output.contains(" ok"), "no block ran:\n\(output)")
        print(output.split(separator: "\n").last.map(String.init) ?? "")
    }
}
