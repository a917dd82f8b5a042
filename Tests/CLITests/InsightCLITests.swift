import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Delivery insight from the command line, through the APNs sandbox (SPEC §20)")
struct InsightCLITests {
    @Test("a campaign's stats match the sandbox's log and the fetches, number for number; a webhook added with richpush webhooks gets every event though its receiver was down in the middle; deliveries export as CSV",
          arguments: StoreEngine.all)
    func endToEnd(engine: StoreEngine) async throws {
        let environment = engine == .shared ? try await engine.locations().processEnvironment : [:]
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let hooks = dir.appendingPathComponent("hooks")
        try FileManager.default.createDirectory(at: hooks, withIntermediateDirectories: true)
        let secret = "whsec_cli_0123456789abcdef"
        try secret.write(to: dir.appendingPathComponent("secret.txt"), atomically: true, encoding: .utf8)
        let (receiver, hookPort) = try startWebhookReceiver(in: hooks, secret: secret)
        defer { receiver.terminate() }

        let users = (1...6).map { "user\($0)" }
        func token(_ index: Int) -> String { String(format: "%064x", index) }
        let dead = token(6)
        let (sandbox, apnsPort) = try await startListening({ ["apns-sandbox", "--port", String($0), "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                                                              "--public-key", "AuthKey.p8", "--tls-cert", "cert.pem", "--tls-key", "cert.key",
                                                              "--log", "pushes.jsonl", "--fail", "\(dead)=410:Unregistered"] },
                                                           cwd: dir, log: dir.appendingPathComponent("sandbox.log"))
        defer { if sandbox.isRunning { kill(sandbox.processIdentifier, SIGKILL) } }
        #expect(try await CLI.run(["users", "add", "root", "--admin", "--password-stdin"], cwd: dir, stdin: "rootpw\n", environment: environment).status == 0)
        for user in users {
            #expect(try await CLI.run(["users", "add", user, "--password-stdin"], cwd: dir, stdin: "pw\n", environment: environment).status == 0)
        }
        #expect(try await CLI.run(["webhooks", "add", "http://example.com/hook"], cwd: dir, environment: environment).status == 1)
        // The receiver is on loopback: allowed by the flag, here and on serve.
        let added = try await CLI.run(["webhooks", "add", "http://127.0.0.1:\(hookPort)/hook", "--secret-file", "secret.txt", "--allow-private-webhooks"],
                                      cwd: dir, environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let hookID = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let (server, port) = try await startListening({ ["serve", "--port", String($0), "--allow-private-webhooks"] + sandboxAPNs(apnsPort) },
                                                      cwd: dir, log: dir.appendingPathComponent("serve.log"), environment: environment)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        for (index, user) in users.enumerated() {
            let auth = Data("\(user):pw".utf8).base64EncodedString()
            let registered = try await http(port, "POST", "/api/register", auth: auth)
            let id = try #require(registered.split(separator: "\"").dropFirst(3).first.map(String.init))
            #expect(try await http(port, "PUT", "/api/register/\(id)", auth: auth, body: #"{"platform":"apns","handle":"\#(token(index + 1))"}"#)
                .hasPrefix("HTTP/1.1 200"))
        }
        let root = Data("root:rootpw".utf8).base64EncodedString()
        let campaign = try await http(port, "POST", "/api/admin/campaigns", auth: root, body: #"{"audience":{"all":true},"title":"Sale","message":"Half price"}"#)
        let campaignID = try #require(campaign.range(of: #""id":[0-9]+"#, options: .regularExpression).map { String(campaign[$0].dropFirst(5)) })
        #expect(try await eventually(within: 30) { try await http(port, "GET", "/api/admin/campaigns/\(campaignID)", auth: root).contains("\"status\":\"done\"") })

        // The receiver goes down; meanwhile three phones show it (their payload URL) and two open it.
        try Data().write(to: hooks.appendingPathComponent("fail"))
        @Sendable func pushes() -> [[String: Any]] {
            ((try? String(contentsOf: dir.appendingPathComponent("pushes.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
        let links = pushes().compactMap { ($0["payload"] as? [String: Any])?["richUrl"] as? String }.sorted()
        #expect(links.count == 5, "\(links)")
        for link in links.prefix(3) {
            let path = String(link.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" })
            #expect(try await http(port, "GET", path, auth: "").hasPrefix("HTTP/1.1 200"))
        }
        for link in links.prefix(2) {
            let path = String(link.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" })
            #expect(try await http(port, "POST", path + "/opened", auth: "").hasPrefix("HTTP/1.1 204"))
        }
        let stats = try await http(port, "GET", "/api/admin/campaigns/\(campaignID)/stats", auth: root)
        let body = try #require(try JSONSerialization.jsonObject(with: Data((stats.range(of: "\r\n\r\n").map { String(stats[$0.upperBound...]) } ?? "").utf8)) as? [String: Any])
        // Number for number: what the sandbox accepted and refused, and what the phones did.
        #expect(body["sent"] as? Int == pushes().count && body["sent"] as? Int == 5, "\(body)")
        #expect(body["failed"] as? Int == 1 && body["queued"] as? Int == 6, "\(body)")
        #expect(body["displayed"] as? Int == 3 && body["opened"] as? Int == 2, "\(body)")
        #expect((body["failures"] as? [String: Int])?.values.reduce(0, +) == 1 && (body["failures"] as? [String: Int])?.keys.first?.hasPrefix("410") == true, "\(body)")

        // Back up: every event arrives, signed, each once.
        try await Task.sleep(for: .seconds(3))
        try FileManager.default.removeItem(at: hooks.appendingPathComponent("fail"))
        @Sendable func received() -> [[String: Any]] {
            ((try? String(contentsOf: hooks.appendingPathComponent("events.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
        let expected = 5 + 1 + 3 + 2 + 1 // sent, failed, displayed, opened, campaign.done
        #expect(try await eventually(within: 60) { received().count >= expected }, "\(received().count) of \(expected)")
        try await Task.sleep(for: .seconds(1))
        let events = received()
        #expect(events.count == expected && Set(events.compactMap { $0["id"] as? Int }).count == expected)
        let counts = Dictionary(events.map { ($0["type"] as? String ?? "", 1) }, uniquingKeysWith: +)
        #expect(counts == ["sent": 5, "failed": 1, "displayed": 3, "opened": 2, "campaign.done": 1], "\(counts)")
        #expect(!FileManager.default.fileExists(atPath: hooks.appendingPathComponent("bad").path))
        let listed = try await CLI.run(["webhooks", "list"], cwd: dir, environment: environment)
        #expect(listed.stdout.contains("\(hookID)\thttp://127.0.0.1:\(hookPort)/hook") && listed.stdout.contains("\(expected) delivered, 0 dropped\tok"), "\(listed.stdout)")

        let csv = try await CLI.run(["deliveries", "--campaign", campaignID, "--format", "csv"], cwd: dir, environment: environment)
        #expect(csv.status == 0)
        #expect(csv.lines.first == "notification,registrationId,target,state,attempts,pushId,updated,reason" && csv.lines.count == 7, "\(csv.stdout)")
        #expect(csv.lines.filter { $0.contains(",sent,") }.count == 5 && csv.lines.filter { $0.contains(",failed,") }.count == 1)
        #expect(try await CLI.run(["webhooks", "rm", hookID], cwd: dir, environment: environment).stdout == "removed webhook \(hookID)\n")
        #expect(try await CLI.run(["webhooks", "rm", hookID], cwd: dir, environment: environment).status == 1)
    }

    @Test("webhooks add takes only https to a name whose every address is public, saying why and naming --allow-private-webhooks; with the flag (or its variable) a loopback or private receiver is taken")
    func privateReceivers() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let secret = "whsec_cli_0123456789abcdef"
        try secret.write(to: dir.appendingPathComponent("secret.txt"), atomically: true, encoding: .utf8)
        let refused: [(String, String)] = [
            ("http://127.0.0.1:8099/hook", "must be https://"),
            ("http://hooks.example.com/hook", "must be https://"),
            ("https://127.0.0.1:8099/hook", "IP address 127.0.0.1, a loopback address"),
            ("https://10.0.0.1/hook", "a private address"),
            ("https://[::ffff:169.254.169.254]/hook", "IP address"),
            ("https://localhost:8099/hook", "resolves to"),
            ("https://nosuch.invalid/hook", "resolve"),
        ]
        for (url, words) in refused {
            let added = try await CLI.run(["webhooks", "add", url, "--secret-file", "secret.txt", "--data", "data"], cwd: dir)
            #expect(added.status == 1 && added.stdout.isEmpty, "\(url): \(added.status) \(added.stdout)")
            #expect(added.stderr.contains(words), "\(url): \(added.stderr)")
            if words != "resolve" {
                #expect(added.stderr.contains("--allow-private-webhooks"), "\(url): \(added.stderr)")
            }
        }
        #expect(try await CLI.run(["webhooks", "list", "--data", "data"], cwd: dir).stdout.isEmpty)
        // Allowed: by the flag, and by its variable.
        let flagged = try await CLI.run(["webhooks", "add", "http://127.0.0.1:8099/hook", "--secret-file", "secret.txt", "--data", "data",
                                         "--allow-private-webhooks"], cwd: dir)
        #expect(flagged.status == 0, "\(flagged.stderr)")
        #expect(flagged.stderr.contains("--allow-private-webhooks"), "the note that serve needs the flag too: \(flagged.stderr)")
        let variable = try await CLI.run(["webhooks", "add", "https://localhost:8099/hook", "--secret-file", "secret.txt", "--data", "data"], cwd: dir,
                                         environment: ["RICHPUSH_ALLOW_PRIVATE_WEBHOOKS": "1"])
        #expect(variable.status == 0, "\(variable.stderr)")
        #expect(try await CLI.run(["webhooks", "list", "--data", "data"], cwd: dir).lines.dropFirst().count == 2) // after the header row
        // Still never another scheme, flag or not.
        let ftp = try await CLI.run(["webhooks", "add", "ftp://127.0.0.1/hook", "--secret-file", "secret.txt", "--data", "data",
                                     "--allow-private-webhooks"], cwd: dir)
        #expect(ftp.status == 1, "\(ftp.stderr)")
    }
}
