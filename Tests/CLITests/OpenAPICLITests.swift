import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("schemathesis against a live serve (SPEC §14)")
struct OpenAPICLITests {
    static let config = Fixtures.packageRoot.appendingPathComponent("Tests/OpenAPI/schemathesis.toml").path

    @Test("openapi-spec-validator, a validator nobody here wrote, accepts the served /openapi.json: every $ref resolves (SPEC §23)")
    func validDocument() async throws {
        guard (try? runCapturing("/usr/bin/env", ["python3", "-c", "import openapi_spec_validator"]).0) == 0 else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "openapi-spec-validator is not installed (pip install openapi-spec-validator)")
            return
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port) = try await CLI.startServe([], cwd: dir)
        defer { kill(server.processIdentifier, SIGKILL) }
        let script = """
            import json, sys, urllib.request
            from openapi_spec_validator import validate
            document = json.load(urllib.request.urlopen(sys.argv[1], timeout=20))
            validate(document)
            refs = []
            def walk(v):
                if isinstance(v, dict):
                    if "$ref" in v: refs.append(v["$ref"])
                    for x in v.values(): walk(x)
                elif isinstance(v, list):
                    for x in v: walk(x)
            walk(document)
            print("valid", document["openapi"], len(document["paths"]), "paths", len(refs), "refs")
            """
        let (status, output) = try await onOwnThread {
            try runCapturing("/usr/bin/timeout", ["120", "python3", "-c", script, "http://127.0.0.1:\(port)/openapi.json"])
        }
        #expect(status == 0, "openapi-spec-validator refused /openapi.json:\n\(output.suffix(4000))")
        #expect(output.contains("valid 3.1.0"), "\(output)")
    }

    @Test("every schemathesis check passes against /openapi.json: examples, boundaries, fuzzing and linked calls, as an admin")
    func schemathesis() async throws {
        guard let schemathesis = which("schemathesis") else {
            // .ci/run installs it (PyPI); elsewhere the test says it did not run.
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "schemathesis is not installed (pip install schemathesis)")
            return
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // The default image, so that notifications without a payload can be made.
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("media"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Fixtures.media.appendingPathComponent("logo.png"), to: dir.appendingPathComponent("media/logo.png"))
        let added = try await CLI.run(["users", "add", "root", "--admin", "--password-stdin"], cwd: dir, stdin: "schema-pw\n")
        #expect(added.status == 0, "\(added.stderr)")
        // The fuzzer sends wrong credentials on purpose (its ignored_auth check): each must be a
        // 401, not the 429 the sign-in throttle would give after ten.
        let (server, port) = try await CLI.startServe(["--failed-sign-ins", "0"], cwd: dir)
        defer { kill(server.processIdentifier, SIGKILL) }
        let seed = ProcessInfo.processInfo.environment["RICHPUSH_SCHEMATHESIS_SEED"] ?? "20261123"
        // Every check but use_after_free: a cancelled campaign stays readable (schemathesis.toml says why).
        let arguments = ["--config-file", Self.config, "run", "http://127.0.0.1:\(port)/openapi.json", "--auth", "root:schema-pw",
                         "--checks", "all", "--exclude-checks", "use_after_free", "--max-examples", "25", "--seed", seed, "--request-timeout", "20", "--no-color"]
        // Bounded: a run that hangs must fail this test, not the whole suite.
        // About 70 s alone; the whole suite on two busy cores has taken it past 600 s (86 operations since part four).
        let (status, output) = try await onOwnThread { try runCapturing("/usr/bin/timeout", ["1500", schemathesis] + arguments) }
        // A failure's report (its FAILURES or ERRORS section: the request, the answer, a curl to repeat it) and the summary.
        let report = [" FAILURES ", " ERRORS "].compactMap { output.range(of: $0)?.lowerBound }.min()
        let failures = report.map { String(output[$0...].prefix(8000)) + "\n…\n" } ?? ""
        #expect(status == 0, "schemathesis \(arguments.joined(separator: " ")):\n\(failures)\(output.suffix(4000))")
        // Every operation of the document was tested.
        func count(after label: String) -> Int? {
            output.range(of: label).flatMap { Int(output[$0.upperBound...].prefix { $0.isNumber }) }
        }
        let selected = count(after: "Selected: "), tested = count(after: "Tested: ")
        #expect(selected != nil && selected == tested && (selected ?? 0) >= 20, "\(output.suffix(2000))")
        #expect(server.isRunning)
    }
}
