import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("--log-format and --access-log as serve and apns-sandbox run them")
struct LoggingCLITests {
    func lines(_ url: URL) -> [String] {
        ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    @Test("serve --log-format json --access-log on: every line on stderr is a JSON object; each request is logged with its status, a payload URL's token cut short")
    func jsonAccessLog() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let log = dir.appendingPathComponent("serve.log")
        let (server, port) = try await startListening({ ["serve", "--port", String($0), "--log-format", "json", "--access-log", "on"] }, cwd: dir, log: log)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        let token = String(repeating: "A", count: 86)
        _ = try await http(port, "GET", "/health", auth: "")
        _ = try await http(port, "GET", "/p/\(token)", auth: "")
        _ = try await http(port, "GET", "/api/notifications", auth: Data("nobody:x".utf8).base64EncodedString())
        kill(server.processIdentifier, SIGTERM)
        await waitForExit(server)
        let objects = try lines(log).map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
        }
        #expect(objects.contains { $0["msg"] as? String == "ingested default image" && $0["level"] as? String == "info" })
        let access = objects.filter { $0["logger"] as? String == "richpush.access" }
        #expect(access.contains { $0["path"] as? String == "/health" && $0["status"] as? String == "200" && $0["method"] as? String == "GET" })
        #expect(access.contains { $0["path"] as? String == "/api/notifications" && $0["status"] as? String == "401" })
        #expect(access.contains { $0["path"] as? String == "/p/AAAAAAAA…" && $0["status"] as? String == "404" })
        #expect(!lines(log).contains { $0.contains(token) }, "a payload URL's whole token was logged")
    }

    @Test("text lines are logfmt, and the APNs sandbox writes the same way")
    func textAndSandbox() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let log = dir.appendingPathComponent("sandbox.log")
        let (sandbox, _) = try await startListening({ ["apns-sandbox", "--port", String($0), "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                                                       "--public-key", "AuthKey.p8", "--tls-cert", "cert.pem", "--tls-key", "cert.key", "--log-format", "json"] },
                                                    cwd: dir, log: log)
        defer { if sandbox.isRunning { kill(sandbox.processIdentifier, SIGKILL) } }
        kill(sandbox.processIdentifier, SIGTERM)
        await waitForExit(sandbox)
        let written = lines(log)
        #expect(!written.isEmpty)
        for line in written {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "not JSON: \(line)")
        }
        let serveLog = dir.appendingPathComponent("serve.log")
        let (server, _) = try await startListening({ ["serve", "--port", String($0)] }, cwd: dir, log: serveLog)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        kill(server.processIdentifier, SIGTERM)
        await waitForExit(server)
        let started = try #require(lines(serveLog).first { $0.contains("msg=\"Server started") })
        #expect(started.hasPrefix("time=") && started.contains(" level=info logger=richpush msg="))
    }

    @Test("a log format, level or access-log value that is not one is a usage error naming the flag and the variable")
    func badValues() async throws {
        for (arguments, environment, named) in [
            (["serve", "--log-format", "xml"], [String: String](), "--log-format (env RICHPUSH_LOG_FORMAT)"),
            (["serve"], ["RICHPUSH_LOG_FORMAT": "yaml"], "--log-format (env RICHPUSH_LOG_FORMAT)"),
            (["serve", "--log-level", "loud"], [:], "--log-level (env RICHPUSH_LOG_LEVEL)"),
            (["serve", "--access-log", "2"], [:], "--access-log (env RICHPUSH_ACCESS_LOG)"),
            (["apns-sandbox", "--team-id", "T", "--key-id", "K", "--public-key", "p", "--log-format", "xml"], [:], "--log-format"),
        ] {
            let result = try await CLI.run(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments) \(environment): \(result.stderr)")
            #expect(result.stderr.contains(named), "\(arguments): \(result.stderr)")
        }
    }
}
