import Foundation
import RichPushTestSupport
import Testing

/// SPEC §29: `richpush audit`, and the rows the CLI's own commands write (actor kind `cli`, the OS user).
@Suite("richpush audit and the CLI's audit rows (SPEC §29)")
struct AuditCLITests {
    @Test("users add, api-keys add and webhooks add each write one row of kind cli naming the OS user; audit --json lists them newest first, filtered, never a secret")
    func threeCommands() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let environment = ["USER": "operator7"]
        let added = try await CLI.run(["users", "add", "carol", "--admin", "--password-stdin", "--data", data], stdin: "carol-Secret-pw\n", environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let key = try await CLI.run(["api-keys", "add", "ci", "--scope", "send", "--data", data], environment: environment)
        #expect(key.status == 0, "\(key.stderr)")
        let token = key.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.hasPrefix("rpk_"))
        let secretFile = dir.appendingPathComponent("hook.secret")
        try "whsec-cli-0123456789abcdef".write(to: secretFile, atomically: true, encoding: .utf8)
        let hook = try await CLI.run(["webhooks", "add", "http://127.0.0.1:8099/hook/path-secret", "--secret-file", secretFile.path,
                                      "--allow-private-webhooks", "--data", data], environment: environment)
        #expect(hook.status == 0, "\(hook.stderr)")

        let audit = try await CLI.run(["audit", "--json", "--data", data])
        #expect(audit.status == 0, "\(audit.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(audit.stdout.utf8)) as? [[String: Any]])
        #expect(rows.map { $0["action"] as? String } == ["webhook.add", "apikey.add", "user.add"])
        #expect(rows.map { $0["target"] as? String } == ["webhook:1", "apikey:ci", "user:carol"])
        #expect(rows.allSatisfy { $0["actorKind"] as? String == "cli" && $0["actor"] as? String == "operator7" }, "\(rows)")
        #expect(rows.allSatisfy { $0["requestId"] == nil && $0["client"] == nil }, "a command has no request id and no client address")
        for secret in [token, String(token.dropFirst(4)), "carol-Secret-pw", "whsec-cli", "path-secret", "$2"] {
            #expect(!audit.stdout.contains(secret), "richpush audit shows \(secret.prefix(6))…")
        }

        // Filters, as the route's: an action's kind, an actor; the table; an empty answer said on stderr.
        let keys = try await CLI.run(["audit", "--action", "apikey", "--actor", "operator7", "--json", "--data", data])
        #expect((try JSONSerialization.jsonObject(with: Data(keys.stdout.utf8)) as? [[String: Any]])?.count == 1, "\(keys.stdout)")
        let recent = try await CLI.run(["audit", "--since", "1h", "--json", "--data", data])
        #expect((try JSONSerialization.jsonObject(with: Data(recent.stdout.utf8)) as? [[String: Any]])?.count == 3, "\(recent.stdout)")
        let table = try await CLI.run(["audit", "--data", data])
        #expect(table.lines.first == "ID\tTIME\tACTOR\tKIND\tACTION\tTARGET\tCLIENT\tREQUEST" && table.lines.count == 4, "\(table.stdout)")
        let none = try await CLI.run(["audit", "--actor", "nobody", "--data", data])
        #expect(none.status == 0 && none.stdout.isEmpty && none.stderr.contains("no audit entries match"), "\(none.stderr)")
        #expect(try await CLI.run(["audit", "--since", "soon", "--data", data]).status == 2)
        // --audit-days keeps at least a day.
        let refused = try await CLI.run(["serve", "--audit-days", "0", "--data", data])
        #expect(refused.status == 2 && refused.stderr.contains("--audit-days"), "\(refused.stderr)")
    }

    @Test("every state-changing command writes exactly one row, of kind cli, in the order they ran")
    func everyCommand() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        try Data(PNGBuilder.rgb(width: 8, height: 8, seed: 7)).write(to: dir.appendingPathComponent("promo.png"))
        try Data(PNGBuilder.rgb(width: 8, height: 8, seed: 8)).write(to: dir.appendingPathComponent("spare.png"))
        try #"{"name":"bob","password":"builder"}"#.write(to: dir.appendingPathComponent("users.jsonl"), atomically: true, encoding: .utf8)
        try "whsec-cli-0123456789abcdef".write(to: dir.appendingPathComponent("hook.secret"), atomically: true, encoding: .utf8)
        let later = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
        // Each command, what it reads on stdin, and the action it records; `{campaign}` is the id `send` printed.
        let commands: [(arguments: [String], stdin: String?, action: String)] = [
            (["users", "add", "root", "--admin", "--password-stdin"], "root-pw\n", "user.add"),
            (["users", "add", "alice", "--password-stdin"], "alice-pw\n", "user.add"),
            (["users", "passwd", "alice", "--password-stdin"], "alice-pw-2\n", "user.password"),
            (["users", "import", "users.jsonl"], nil, "user.import"),
            (["users", "rm", "bob"], nil, "user.remove"),
            (["api-keys", "add", "ci", "--scope", "send"], nil, "apikey.add"),
            (["api-keys", "rm", "ci"], nil, "apikey.remove"),
            (["webhooks", "add", "http://127.0.0.1:8099/hook", "--secret-file", "hook.secret", "--allow-private-webhooks"], nil, "webhook.add"),
            (["webhooks", "rm", "1"], nil, "webhook.remove"),
            (["media", "add", "promo.png", "--name", "promo"], nil, "media.add"),
            (["notify", "--user", "alice", "--image", "promo"], nil, "notification.create"),
            (["send", "--user", "alice", "--image", "promo", "--at", later], nil, "campaign.create"),
            (["campaigns", "cancel", "{campaign}"], nil, "campaign.cancel"),
            (["media", "rm", "promo"], nil, "media.remove"),
            (["keys", "rotate"], nil, "payloadkey.rotate"),
            (["media", "add", "spare.png"], nil, "media.add"),
            (["media", "gc", "--grace", "0"], nil, "media.gc"),
        ]
        var campaign = ""
        for command in commands {
            let arguments = command.arguments.map { $0 == "{campaign}" ? campaign : $0 } + ["--data", data]
            let result = try await CLI.run(arguments, cwd: dir, stdin: command.stdin)
            #expect(result.status == 0, "\(arguments.joined(separator: " ")): \(result.stderr)")
            if command.action == "campaign.create" { campaign = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) }
        }
        let audit = try await CLI.run(["audit", "--json", "--limit", "100", "--data", data])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(audit.stdout.utf8)) as? [[String: Any]], "\(audit.stderr)")
        #expect(rows.reversed().map { $0["action"] as? String ?? "" } == commands.map { $0.action })
        #expect(rows.allSatisfy { $0["actorKind"] as? String == "cli" })
        #expect(rows.first { $0["action"] as? String == "campaign.cancel" }?["target"] as? String == "campaign:\(campaign)")
    }
}
