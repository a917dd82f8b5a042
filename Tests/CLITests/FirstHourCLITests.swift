import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue #49's CLI parts: the data directory said out loud, keys refused for apps the server does
/// not have, failures said in words, path arguments checked as paths, empty answers said, plurals,
/// header rows and `--json` arrays, TLS files named before anything is created, and a log line on
/// shutdown.
@Suite("The first hour from the command line (issue #49)")
struct FirstHourCLITests {
    /// Waits until serve on `port` answers /health: its start-up work (recording its apps, the
    /// start-up log, the signal watch) is done before it serves a request.
    func waitForHealth(_ port: Int) async throws -> Bool {
        for _ in 0..<300 {
            if let answer = try? await http(port, "GET", "/health", auth: ""), answer.hasPrefix("HTTP/1.1 200") { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// Sends `signal` to serve and waits (at most 30 s) for it to exit.
    func stop(_ server: Process, _ signal: Int32) async throws -> Bool {
        kill(server.processIdentifier, signal)
        return try await eventually(within: 30) { !server.isRunning }
    }

    func lines(_ url: URL) -> [String] {
        ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func jsonArray(_ text: String) -> [[String: Any]]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [[String: Any]]
    }

    @Test("a CLI command that creates a data directory says so once on stderr, with its absolute path and --data; the next one says nothing")
    func dataDirectoryCreated() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // `users add zed` from a folder where no serve runs: it used to succeed silently.
        let first = try await CLI.run(["users", "add", "zed", "--password-stdin"], cwd: dir, stdin: "pw\n")
        #expect(first.status == 0 && first.stdout == "added user zed\n", "\(first.stderr)")
        #expect(first.stderr.contains("created a new data directory at /") && first.stderr.contains("\(dir.lastPathComponent)/data"), "\(first.stderr)")
        #expect(first.stderr.contains("run from the directory serve uses, or pass --data DIR"), "\(first.stderr)")
        #expect(first.stderr.split(separator: "\n").count == 1, "once: \(first.stderr)")
        let second = try await CLI.run(["users", "add", "amy", "--password-stdin"], cwd: dir, stdin: "pw\n")
        #expect(second.status == 0 && second.stderr.isEmpty, "\(second.stderr)")
        // A directory named with --data is said too, by its absolute path.
        let elsewhere = dir.appendingPathComponent("elsewhere").path
        let named = try await CLI.run(["media", "list", "--data", elsewhere])
        #expect(named.status == 0 && named.stderr.contains("created a new data directory at \(elsewhere)"), "\(named.stderr)")
    }

    @Test("serve logs the data directory it creates, and names it on a later start; SIGTERM and SIGINT are logged as stopping, then stopped, with the signal")
    func serveDataDirectoryAndShutdown() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let data = "\(dir.lastPathComponent)/data"
        for (round, signal, name) in [(1, SIGTERM, "SIGTERM"), (2, SIGINT, "SIGINT")] {
            let port = freePort()
            let log = dir.appendingPathComponent("serve\(round).log")
            let server = try startProcess(["serve", "--port", String(port)], cwd: dir, log: log)
            defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
            #expect(try await waitForHealth(port), "\(lines(log))")
            #expect(try await stop(server, signal), "serve still runs 30 s after \(name)")
            let written = lines(log)
            let created = written.filter { $0.contains("msg=\"created a new data directory\"") }
            if round == 1 {
                #expect(created.count == 1 && created[0].contains(data) && created[0].contains("data=/"), "\(written)")
            } else {
                #expect(created.isEmpty, "\(written)")
                #expect(written.contains { $0.contains("data=/") && $0.contains(data) }, "the start-up log names the data directory: \(written)")
                // …and where to go from here: the console and the operational routes, by URL.
                let serving = written.first { $0.contains("msg=serving") } ?? ""
                #expect(["console=http://", "/console", "health=http://", "ready=http://", "metrics=http://", "openapi=http://"].allSatisfy(serving.contains),
                        "\(written)")
            }
            let stopping = written.firstIndex { $0.contains("msg=stopping") && $0.contains("signal=\(name)") }
            let stopped = written.firstIndex { $0.contains("msg=stopped") && $0.contains("signal=\(name)") }
            #expect(stopping != nil && stopped != nil && stopping! < stopped!, "\(written)")
        }
    }

    @Test("api-keys add --app refuses (exit 2) an app the server does not have: default alone before any serve recorded its apps, then the apps of serve --apps, named")
    func keyForUnknownApp() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let early = try await CLI.run(["api-keys", "add", "shop-backend", "--scope", "send", "--app", "shop-ios"], cwd: dir)
        #expect(early.status == 2 && early.stdout.isEmpty, "\(early.stdout) \(early.stderr)")
        #expect(early.stderr.contains("no serve has recorded its apps in this data directory yet; the apps are those of serve --apps"), "\(early.stderr)")
        #expect(try await CLI.run(["api-keys", "add", "everywhere", "--scope", "send", "--app", "default"], cwd: dir).status == 0)
        let keys = jsonArray(try await CLI.run(["api-keys", "list", "--json"], cwd: dir).stdout)
        #expect(keys?.compactMap { $0["name"] as? String } == ["everywhere"], "the refused key was not stored: \(String(describing: keys))")

        // serve with an apps file records its apps as it starts.
        let apps: [String: Any] = ["apps": [["name": "shop-ios", "apns": ["key": "AuthKey.p8", "keyId": "KEY1234567", "teamId": "TEAM123456",
                                                                          "topic": "com.example.shop", "env": "https://127.0.0.1:\(freePort())"]]]]
        try JSONSerialization.data(withJSONObject: apps).write(to: dir.appendingPathComponent("apps.json"))
        let (server, port) = try await startListening({ ["serve", "--port", String($0), "--apps", "apps.json"] },
                                                      cwd: dir, log: dir.appendingPathComponent("serve.log"))
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        #expect(try await waitForHealth(port))
        let added = try await CLI.run(["api-keys", "add", "shop-backend", "--scope", "send", "--app", "shop-ios"], cwd: dir)
        #expect(added.status == 0 && added.stdout.hasPrefix("rpk_"), "\(added.stderr)")
        let unknown = try await CLI.run(["api-keys", "add", "news-backend", "--scope", "send", "--app", "news-ios"], cwd: dir)
        #expect(unknown.status == 2 && unknown.stdout.isEmpty, "\(unknown.stderr)")
        #expect(unknown.stderr.contains("news-ios") && unknown.stderr.contains("its apps are default, shop-ios"), "\(unknown.stderr)")
        _ = try await stop(server, SIGTERM)
    }

    @Test("healthcheck against a port nobody listens on says so in words, without errno")
    func healthcheckRefused() async throws {
        let closed = freePort()
        let refused = try await CLI.run(["healthcheck", "--url", "http://127.0.0.1:\(closed)/health", "--timeout", "2"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("nothing is listening at http://127.0.0.1:\(closed) (connection refused): is serve running?"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("errno"), "\(refused.stderr)")
    }

    @Test("path arguments are checked as paths first: a missing file is said not to exist (exit 2), not malformed, not an unknown media name, and serve creates nothing")
    func pathsCheckedAsPaths() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin"], cwd: dir, stdin: "pw\n").status == 0)
        for (arguments, said, notSaid) in [
            (["send", "--user", "alice", "--image", "nosuch.png"], "--image nosuch.png: the file does not exist in ", "POST /api/media"),
            (["notify", "--user", "alice", "--image", "./nosuch.png"], "--image ./nosuch.png: the file does not exist in ", "POST /api/media"),
            (["send", "--all", "--locale-file", "sale.json"], "--locale-file: cannot read sale.json: the file does not exist in ", "not a JSON object"),
            (["users", "import", "users.jsonl"], "cannot read users.jsonl: the file does not exist in ", "not a JSON object"),
            (["webhooks", "add", "https://hooks.example.com/in", "--secret-file", "hook.secret"], "--secret-file: cannot read hook.secret: the file does not exist in ",
             "resolve"),
        ] {
            let result = try await CLI.run(arguments, cwd: dir)
            #expect(result.status == 2 && result.stdout.isEmpty, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains(said) && !result.stderr.contains(notSaid), "\(arguments): \(result.stderr)")
        }
        let secret = try await CLI.run(["webhooks", "add", "https://hooks.example.com/in", "--secret-file", "hook.secret"], cwd: dir)
        #expect(secret.stderr.contains("a secret is generated"), "the flag is optional: \(secret.stderr)")
        // serve's files, before anything is created in a fresh folder.
        let fresh = dir.appendingPathComponent("fresh")
        try FileManager.default.createDirectory(at: fresh, withIntermediateDirectories: true)
        let serve = try await CLI.run(["serve", "--port", String(freePort()), "--apns-key", "AuthKey_NOSUCH.p8", "--apns-key-id", "KEY1234567",
                                       "--apns-team-id", "TEAM123456", "--apns-topic", "com.example.app"], cwd: fresh)
        #expect(serve.status == 2 && serve.stderr.contains("--apns-key") && serve.stderr.contains("AuthKey_NOSUCH.p8: the file does not exist"), "\(serve.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fresh.appendingPathComponent("data").path))
    }

    @Test("deliveries with nothing to show says so on stderr and exits 1: an unknown notification or campaign, and one that reached no device, with why")
    func emptyDeliveries() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let logo = Fixtures.media.appendingPathComponent("logo.png").path
        #expect(try await CLI.run(["deliveries"], cwd: dir).stderr.contains("no deliveries"))
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin"], cwd: dir, stdin: "pw\n").status == 0)
        for (arguments, said) in [(["deliveries", "--notification", "999"], "no deliveries for notification 999"),
                                  (["deliveries", "--campaign", "5", "--json"], "no deliveries for campaign 5")] {
            let result = try await CLI.run(arguments, cwd: dir)
            #expect(result.status == 1 && result.stdout.isEmpty, "\(arguments): \(result.status) \(result.stdout)")
            #expect(result.stderr.contains(said), "\(arguments): \(result.stderr)")
        }
        // alice has no device: her notification reaches none, and deliveries says whose it is.
        let notified = try await CLI.run(["notify", "--user", "alice", "--image", logo], cwd: dir)
        #expect(notified.status == 0, "\(notified.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(notified.stdout.utf8)) as? [String: Any]
        let id = try #require(object?["id"] as? Int)
        let none = try await CLI.run(["deliveries", "--notification", String(id)], cwd: dir)
        #expect(none.status == 1 && none.stderr.contains("no deliveries for notification \(id): alice had no registered device"), "\(none.stderr)")
        // A CSV keeps its header, so that a spreadsheet still opens it.
        let csv = try await CLI.run(["deliveries", "--notification", String(id), "--format", "csv"], cwd: dir)
        #expect(csv.status == 1 && csv.lines == ["notification,registrationId,target,state,attempts,pushId,updated,reason"], "\(csv.stdout)")
    }

    @Test("counts are pluralised; list commands print a header row, say an empty list on stderr, and --json prints a JSON array")
    func pluralsHeadersAndJSON() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let logo = Fixtures.media.appendingPathComponent("logo.png").path
        // Empty lists: nothing on stdout, said on stderr; --json is [].
        for command in [["users", "list"], ["api-keys", "list"], ["webhooks", "list"], ["campaigns", "list"], ["media", "list"]] {
            let empty = try await CLI.run(command, cwd: dir)
            #expect(empty.status == 0 && empty.stdout.isEmpty && empty.stderr.contains("no "), "\(command): \(empty.stdout) \(empty.stderr)")
            #expect(try await CLI.run(command + ["--json"], cwd: dir).stdout == "[]\n", "\(command)")
        }
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin"], cwd: dir, stdin: "pw\n").status == 0)
        let sent = try await CLI.run(["send", "--user", "alice", "--image", logo], cwd: dir)
        #expect(sent.status == 0 && sent.stderr.contains("1 recipient, 0 devices queued"), "\(sent.stderr)")
        #expect(try await CLI.run(["api-keys", "add", "dashboard", "--scope", "read"], cwd: dir).status == 0)
        #expect(try await CLI.run(["webhooks", "add", "http://127.0.0.1:8099/hook", "--allow-private-webhooks"], cwd: dir).status == 0)

        let expected: [([String], String, String)] = [
            (["users", "list"], "NAME\tROLE\tCREATED", "alice\tuser\t"),
            (["api-keys", "list"], "NAME\tSCOPE\tAPP\tCREATED\tLAST USED", "dashboard\tread\t*\t"),
            (["webhooks", "list"], "ID\tURL\tEVENTS\tDELIVERIES\tSTATE", "1\thttp://127.0.0.1:8099/hook\t"),
            (["campaigns", "list"], "ID\tSTATUS\tSCHEDULE\tPROGRESS\tAUDIENCE", "1\tdone\tnow\t0 sent, 0 failed, 0 pending of 1 recipient\t"),
            (["media", "list"], "SHA256\tTYPE\tSIZE\tBYTES\tNAMES", ""),
        ]
        for (command, header, row) in expected {
            let table = try await CLI.run(command, cwd: dir)
            #expect(table.lines.count == 2 && table.lines.first == header && table.lines.last?.hasPrefix(row) == true, "\(command): \(table.stdout)")
            let array = jsonArray(try await CLI.run(command + ["--json"], cwd: dir).stdout)
            #expect(array?.count == 1, "\(command) --json")
        }
        #expect(jsonArray(try await CLI.run(["users", "list", "--json"], cwd: dir).stdout)?.first?["role"] as? String == "user")
        #expect(jsonArray(try await CLI.run(["webhooks", "list", "--json"], cwd: dir).stdout)?.first?["url"] as? String == "http://127.0.0.1:8099/hook")
        // One blob, one problem: singular.
        let media = dir.appendingPathComponent("media-only").path
        #expect(try await CLI.run(["media", "add", "--data", media, logo]).status == 0)
        #expect(try await CLI.run(["media", "verify", "--data", media]).stdout == "1 blob checked, 0 problems\n")
    }

    @Test("serve --tls-cert/--tls-key swapped, or not PEM: a usage error naming the file and what is wrong, before the data directory is created")
    func tlsFilesNamed() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir) // cert.pem, cert.key
        let swapped = try await CLI.run(["serve", "--port", String(freePort()), "--tls-cert", "cert.key", "--tls-key", "cert.pem"], cwd: dir)
        #expect(swapped.status == 2, "\(swapped.stderr)")
        #expect(swapped.stderr.contains("--tls-cert cert.key holds a private key and --tls-key cert.pem a certificate: they are swapped"), "\(swapped.stderr)")
        try "not a certificate\n".write(to: dir.appendingPathComponent("notes.txt"), atomically: true, encoding: .utf8)
        let text = try await CLI.run(["serve", "--port", String(freePort()), "--tls-cert", "notes.txt", "--tls-key", "cert.key"], cwd: dir)
        #expect(text.status == 2 && text.stderr.contains("--tls-cert notes.txt is not a PEM certificate"), "\(text.stderr)")
        let keyTwice = try await CLI.run(["serve", "--port", String(freePort()), "--tls-cert", "cert.pem", "--tls-key", "cert.pem"], cwd: dir)
        #expect(keyTwice.status == 2 && keyTwice.stderr.contains("--tls-key cert.pem holds a certificate, not a private key"), "\(keyTwice.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("data").path), "serve created its data directory first")
    }
}
