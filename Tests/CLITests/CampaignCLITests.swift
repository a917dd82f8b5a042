import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("richpush users, send, deliveries --campaign and keys as a user runs them")
struct CampaignCLITests {
    @Test("users add --admin, list shows roles, import keeps given hashes and lists bad lines, passwd changes the password")
    func accounts() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        #expect(try await CLI.run(["users", "add", "root", "--admin", "--password-stdin", "--data", data], stdin: "toor\n").stdout == "added admin root\n")
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin", "--data", data], stdin: "pw\n").status == 0)
        let file = dir.appendingPathComponent("users.jsonl")
        let lines = [
            #"{"name":"bob","password":"builder"}"#,
            #"{"name":"carol","password":"c","admin":true}"#,
            "",
            "not json",
            #"{"name":"alice","password":"again"}"#,
            #"{"name":"dave","bcrypt":"$2b$04$tooShort"}"#,
            #"{"name":"erin","bcrypt":"$2b$04$C6UzMDM.H6dfI/f/IKxGhu4XyY9k.tdLxGiHNyXWBMTPvW3YvGqxO"}"#,
        ]
        try lines.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let imported = try await CLI.run(["users", "import", file.path, "--data", data])
        #expect(imported.status == 1)
        #expect(imported.stdout == "imported 3, skipped 1\n")
        #expect(imported.stderr.contains("\(file.path):4: not a JSON object"))
        #expect(imported.stderr.contains("\(file.path):6: not a bcrypt hash"))
        #expect(imported.stderr.split(separator: "\n").count == 2)
        let list = try await CLI.run(["users", "list", "--data", data])
        #expect(list.lines.first == "NAME\tROLE\tCREATED")
        let roles = Dictionary(uniqueKeysWithValues: list.lines.dropFirst().map { line in
            let parts = line.split(separator: "\t")
            return (String(parts[0]), String(parts[1]))
        })
        #expect(roles == ["alice": "user", "bob": "user", "carol": "admin", "erin": "user", "root": "admin"])
        // From standard input too, all good: exit 0.
        let stdin = try await CLI.run(["users", "import", "-", "--data", data], stdin: #"{"name":"frank","password":"f"}"# + "\n")
        #expect(stdin.status == 0 && stdin.stdout == "imported 1, skipped 0\n")
        #expect(try await CLI.run(["users", "passwd", "bob", "--password-stdin", "--data", data], stdin: "new\n").status == 0)
        #expect(try await CLI.run(["users", "passwd", "nobody", "--password-stdin", "--data", data], stdin: "new\n").status == 1)
    }

    @Test("SPEC §19 from the command line: users import takes zones and locales; send --local-time with a locale file and --at schedule; campaigns list shows scheduled and cancelled; campaigns cancel")
    func schedules() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let logo = Fixtures.media.appendingPathComponent("logo.png").path
        let users = dir.appendingPathComponent("users.jsonl")
        try [#"{"name":"amelie","password":"pw","timezone":"Europe/Paris","locale":"fr-CA"}"#,
             #"{"name":"bob","password":"pw","timezone":"Mars/Olympus"}"#,
             #"{"name":"carl","password":"pw","locale":"not a tag"}"#].joined(separator: "\n").write(to: users, atomically: true, encoding: .utf8)
        let imported = try await CLI.run(["users", "import", users.path, "--data", data])
        #expect(imported.status == 1 && imported.stdout == "imported 1, skipped 0\n", "\(imported.stdout) \(imported.stderr)")
        #expect(imported.stderr.contains("unknown time zone 'Mars/Olympus'") && imported.stderr.contains("malformed locale 'not a tag'"), "\(imported.stderr)")
        let store = try await DataStore.open(path: data)
        let amelie = try await store.users.find("amelie")
        #expect(amelie?.timezone == "Europe/Paris" && amelie?.locale == "fr-CA")
        store.close()

        let locales = dir.appendingPathComponent("sale.json")
        try #"{"en":{"title":"Sale","message":"Half price"},"fr":{"title":"Soldes","message":"Moitié prix"}}"#.write(to: locales, atomically: true, encoding: .utf8)
        let local = try await CLI.run(["send", "--all", "--image", logo, "--local-time", "09:00", "--locale-file", locales.path, "--data", data])
        #expect(local.status == 0 && local.stderr.contains("scheduled for 09:00 in each recipient's time zone"), "\(local.stderr)")
        let localID = local.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let at = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
        let later = try await CLI.run(["send", "--all", "--image", logo, "--at", at, "--data", data])
        #expect(later.status == 0 && later.stderr.contains("scheduled for \(at)"), "\(later.stderr)")
        let laterID = later.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await CLI.run(["send", "--all", "--at", "2020-01-01T00:00:00Z", "--data", data]).status == 1)
        #expect(try await CLI.run(["send", "--all", "--at", "tomorrow", "--data", data]).status != 0)
        #expect(try await CLI.run(["send", "--all", "--local-time", "9am", "--data", data]).status != 0)

        let listed = try await CLI.run(["campaigns", "list", "--data", data])
        #expect(listed.lines.contains { $0.hasPrefix("\(localID)\tscheduled\t09:00 local") } && listed.lines.contains { $0.hasPrefix("\(laterID)\tscheduled\t\(at)") },
                "\(listed.stdout)")
        let cancelled = try await CLI.run(["campaigns", "cancel", laterID, "--data", data])
        #expect(cancelled.status == 0 && cancelled.stdout == "campaign \(laterID) cancelled: 0 sent, 0 failed before it was\n", "\(cancelled.stdout)")
        #expect(try await CLI.run(["campaigns", "list", "--data", data]).lines.contains { $0.hasPrefix("\(laterID)\tcancelled") })
        #expect(try await CLI.run(["campaigns", "cancel", "999", "--data", data]).status == 1)
    }

    @Test("send queues a campaign and prints its id; deliveries --campaign lists every target; --wait ends when nothing is pending; keys rotate")
    func send() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let logo = Fixtures.media.appendingPathComponent("logo.png").path
        for name in ["alice", "bob"] {
            #expect(try await CLI.run(["users", "add", name, "--password-stdin", "--data", data], stdin: "pw\n").status == 0)
        }
        // No devices yet: the campaign is done as soon as it is queued.
        let empty = try await CLI.run(["send", "--all", "--image", logo, "--message", "hello", "--wait", "--data", data])
        #expect(empty.status == 0, "\(empty.stderr)")
        #expect(Int(empty.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) != nil)
        #expect(empty.stderr.contains("done, 0 sent, 0 failed, 0 pending, 0 fetched of 2 recipients"))
        // alice has a device (registered as the API would); no serve runs, so its push stays pending.
        let database = try CoreDatabase.open(DataDirectory(path: data))
        let registrations = RegistrationStore(database: database)
        let registration = try await registrations.create(for: "alice")
        _ = try await registrations.update(id: registration.id, for: "alice",
                                           with: DeviceRegistration(platform: "apns", handle: String(repeating: "ab", count: 32), tags: []))
        let keyBefore = try String(contentsOfFile: "\(data)/payload.key", encoding: .utf8)
        let sent = try await CLI.run(["send", "--user", "alice", "--user", "bob", "--title", "T", "--image", logo, "--public-url", "https://push.example.com",
                                      "--data", data])
        #expect(sent.status == 0, "\(sent.stderr)")
        let id = try #require(Int(sent.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(sent.stderr.contains("2 recipients, 1 device queued"), "\(sent.stderr)")
        let deliveries = try await CLI.run(["deliveries", "--campaign", String(id), "--json", "--data", data])
        #expect(deliveries.status == 0)
        let rows = deliveries.lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(rows.count == 1)
        #expect(rows.first?["target"] as? String == String(repeating: "ab", count: 32))
        #expect(rows.first?["state"] as? String == "pending")
        // The push it queued is the alert shape, its URL under --public-url.
        let push = try await database.read { db in
            try Data.fetchOne(db, sql: "SELECT push FROM notifications WHERE campaignId = ? AND recipient = 'alice'", arguments: [id])
        }
        let object = try JSONSerialization.jsonObject(with: try #require(push)) as? [String: Any]
        #expect((object?["richUrl"] as? String)?.hasPrefix("https://push.example.com/p/") == true)
        #expect(((object?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String == "T")
        let empty2 = try await CLI.run(["deliveries", "--campaign", "999", "--data", data])
        #expect(empty2.status == 1 && empty2.stderr.contains("no deliveries for campaign 999: there is no campaign 999"), "\(empty2.stderr)")
        // Usage errors exit 2 and say what is wrong.
        let none = try await CLI.run(["send", "--data", data])
        #expect(none.status == 2 && none.stderr.contains("choose the audience"))
        let badTags = try await CLI.run(["send", "--tags", "a &&", "--data", data])
        #expect(badTags.status == 2 && badTags.stderr.contains("expected a tag after '&&'"))
        let ghost = try await CLI.run(["send", "--user", "ghost", "--image", logo, "--data", data])
        #expect(ghost.status == 1 && ghost.stderr.contains("unknown user(s): ghost"))
        // keys rotate replaces the key file (mode 0600).
        #expect(try await CLI.run(["keys", "rotate", "--data", data]).status == 0)
        let keyAfter = try String(contentsOfFile: "\(data)/payload.key", encoding: .utf8)
        #expect(keyAfter != keyBefore && keyAfter.count == 65)
        let mode = try FileManager.default.attributesOfItem(atPath: "\(data)/payload.key")[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }
}
