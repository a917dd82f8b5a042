import Crypto
import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Apps and API keys (SPEC §18)")
struct AppsCLITests {
    static func body(_ response: String) -> String {
        response.range(of: "\r\n\r\n").map { String(response[$0.upperBound...]) } ?? ""
    }

    static func object(_ response: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body(response).utf8)) as? [String: Any]) ?? [:]
    }

    @Test("two iOS apps (two keys, two topics) and an Android app in one serve: a send key's campaign reaches each device with its own app's credentials only; scopes, an app-bound key and a removed key are enforced over real sockets",
          arguments: StoreEngine.all)
    func twoAppsAndKeys(engine: StoreEngine) async throws {
        let environment = engine == .shared ? try await engine.locations().processEnvironment : [:]
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir) // AuthKey.p8 (the shop's key), cert.pem / cert.key for the stand-ins
        try P256.Signing.PrivateKey().pemRepresentation.write(to: dir.appendingPathComponent("AuthKey2.p8"), atomically: true, encoding: .utf8)
        // Each stand-in takes one team's key, for its app's topic alone (another is 400 TopicDisallowed),
        // and knows each phone's app, as Apple does (a token of another app is 400 DeviceTokenNotForTopic).
        let tokenShopAlice = String(repeating: "a1", count: 32), tokenNewsAlice = String(repeating: "b2", count: 32)
        let tokenShopBob = String(repeating: "c3", count: 32)
        let phones = [(tokenShopAlice, "com.example.shop"), (tokenShopBob, "com.example.shop"), (tokenNewsAlice, "com.example.news")]
            .flatMap { ["--device-topic", "\($0)=\($1)"] }
        func apnsSandbox(team: String, key: String, file: String, topic: String, log: String) async throws -> (Process, Int) {
            try await startListening({ ["apns-sandbox", "--port", String($0), "--team-id", team, "--key-id", key, "--public-key", file,
                                        "--tls-cert", "cert.pem", "--tls-key", "cert.key", "--topic", topic, "--log", log, "--token-update-interval", "0"] + phones },
                                     cwd: dir, log: dir.appendingPathComponent("\(log).out"))
        }
        let (shop, shopPort) = try await apnsSandbox(team: "TEAMSHOP01", key: "KEYSHOP001", file: "AuthKey.p8", topic: "com.example.shop", log: "shop.jsonl")
        defer { kill(shop.processIdentifier, SIGKILL) }
        let (news, newsPort) = try await apnsSandbox(team: "TEAMNEWS01", key: "KEYNEWS001", file: "AuthKey2.p8", topic: "com.example.news", log: "news.jsonl")
        defer { kill(news.processIdentifier, SIGKILL) }
        let (fcm, fcmPort) = try await startFCMSandbox(project: "shop-android", in: dir)
        defer { kill(fcm.processIdentifier, SIGKILL) }

        let apps: [String: Any] = ["apps": [
            ["name": "shop-ios", "apns": ["key": "AuthKey.p8", "keyId": "KEYSHOP001", "teamId": "TEAMSHOP01", "topic": "com.example.shop",
                                          "env": "https://127.0.0.1:\(shopPort)"]],
            ["name": "news-ios", "apns": ["key": "AuthKey2.p8", "keyId": "KEYNEWS001", "teamId": "TEAMNEWS01", "topic": "com.example.news",
                                          "env": "https://127.0.0.1:\(newsPort)"]],
            ["name": "shop-android", "fcm": ["serviceAccount": "service-account.json", "endpoint": "http://127.0.0.1:\(fcmPort)"]],
        ]]
        try JSONSerialization.data(withJSONObject: apps).write(to: dir.appendingPathComponent("apps.json"))
        for name in ["alice", "bob"] {
            #expect(try await CLI.run(["users", "add", name, "--password-stdin"], cwd: dir, stdin: "pw\n", environment: environment).status == 0)
        }
        func addKey(_ name: String, _ arguments: [String]) async throws -> String {
            let added = try await CLI.run(["api-keys", "add", name] + arguments, cwd: dir, environment: environment)
            #expect(added.status == 0, "\(added.stderr)")
            let key = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(key.hasPrefix("rpk_") && key.count == 4 + 43, "\(key)")
            return key
        }
        let sender = try await addKey("backend", ["--scope", "send"])
        let reader = try await addKey("dashboard", ["--scope", "read"])
        #expect(try await CLI.run(["api-keys", "add", "backend", "--scope", "read"], cwd: dir, environment: environment).status == 1)
        #expect(try await CLI.run(["api-keys", "add", "x", "--scope", "owner"], cwd: dir, environment: environment).status != 0)

        let (server, port) = try await startListening({ ["serve", "--port", String($0), "--apps", "apps.json", "--push-ca", "cert.pem"] },
                                                      cwd: dir, log: dir.appendingPathComponent("serve.log"), environment: environment)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        // A key bound to an app: taken once serve has recorded its apps in the store (as it starts).
        var bound: CLI.Result?
        for _ in 0..<100 where bound?.status != 0 {
            bound = try await CLI.run(["api-keys", "add", "shop-backend", "--scope", "send", "--app", "shop-ios"], cwd: dir, environment: environment)
            if bound?.status != 0 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(bound?.status == 0, "\(bound?.stderr ?? "")")
        let shopOnly = bound?.stdout.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        #expect(shopOnly.hasPrefix("rpk_") && shopOnly.count == 4 + 43, "\(shopOnly)")

        // Devices: alice has the shop and news iPhone apps and the shop's Android app; bob the shop's iPhone app.
        let fcmToken = try #require(Self.object(try await http(fcmPort, "POST", "/register", auth: ""))["token"] as? String)
        func register(_ user: String, app: String, platform: String, handle: String) async throws -> String {
            let auth = Data("\(user):pw".utf8).base64EncodedString()
            let id = try #require(Self.object(try await http(port, "POST", "/api/register", auth: auth))["registrationId"] as? String)
            return try await http(port, "PUT", "/api/register/\(id)", auth: auth,
                                  body: #"{"platform":"\#(platform)","handle":"\#(handle)","app":"\#(app)"}"#)
        }
        for (user, app, platform, handle) in [("alice", "shop-ios", "apns", tokenShopAlice), ("alice", "news-ios", "apns", tokenNewsAlice),
                                              ("alice", "shop-android", "fcm", fcmToken), ("bob", "shop-ios", "apns", tokenShopBob)] {
            let saved = try await register(user, app: app, platform: platform, handle: handle)
            #expect(saved.hasPrefix("HTTP/1.1 200") && saved.contains("\"app\":\"\(app)\""), "\(saved)")
        }
        let unknown = try await register("bob", app: "nope", platform: "apns", handle: String(repeating: "d4", count: 32))
        #expect(unknown.hasPrefix("HTTP/1.1 422") && unknown.contains("no app named"), "\(unknown)")

        // The backend's send key sends a campaign to everyone: each device gets it through its own app.
        let campaign = try await http(port, "POST", "/api/admin/campaigns", authorization: "Bearer \(sender)",
                                      body: #"{"audience":{"all":true},"message":"Big sale","title":"Sale"}"#)
        #expect(campaign.hasPrefix("HTTP/1.1 202"), "\(campaign)")
        @Sendable func lines(_ name: String) -> [[String: Any]] {
            ((try? String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
        let arrived = try await eventually(within: 30) { lines("shop.jsonl").count >= 2 && lines("news.jsonl").count >= 1 && lines("fcm.jsonl").count >= 1 }
        #expect(arrived, "shop \(lines("shop.jsonl").count), news \(lines("news.jsonl").count), fcm \(lines("fcm.jsonl").count)")
        try await Task.sleep(for: .milliseconds(500)) // nothing more arrives
        let shopTokens = lines("shop.jsonl").compactMap { $0["token"] as? String }
        let newsTokens = lines("news.jsonl").compactMap { $0["token"] as? String }
        #expect(shopTokens.sorted() == [tokenShopAlice, tokenShopBob].sorted(), "\(shopTokens)")
        #expect(newsTokens == [tokenNewsAlice], "\(newsTokens)")
        #expect(lines("fcm.jsonl").compactMap { $0["token"] as? String } == [fcmToken])
        for (file, topic) in [("shop.jsonl", "com.example.shop"), ("news.jsonl", "com.example.news")] {
            #expect(lines(file).allSatisfy { ($0["headers"] as? [String: String])?["apns-topic"] == topic }, "\(file)")
        }
        let deliveries = try await CLI.run(["deliveries", "--json"], cwd: dir, environment: environment).stdout
        #expect(!deliveries.contains("\"state\":\"failed\""), "\(deliveries)")

        // Scopes, through the socket: a send key cannot read, a read key cannot send, no key acts as a device.
        let campaignID = try #require(Self.object(campaign)["id"] as? Int)
        #expect(try await http(port, "GET", "/api/admin/campaigns/\(campaignID)", authorization: "Bearer \(sender)").hasPrefix("HTTP/1.1 403"))
        let read = try await http(port, "GET", "/api/admin/campaigns/\(campaignID)", authorization: "Bearer \(reader)")
        #expect(read.hasPrefix("HTTP/1.1 200") && read.contains("\"sent\":4"), "\(read)")
        let refusedSend = try await http(port, "POST", "/api/admin/campaigns", authorization: "Bearer \(reader)", body: #"{"audience":{"all":true}}"#)
        #expect(refusedSend.hasPrefix("HTTP/1.1 403") && refusedSend.contains("needs send"), "\(refusedSend)")
        #expect(try await http(port, "POST", "/api/register", authorization: "Bearer \(sender)").hasPrefix("HTTP/1.1 403"))
        #expect(try await http(port, "POST", "/api/notifications", authorization: "Bearer \(sender)", body: #"{"message":"to nobody"}"#)
            .hasPrefix("HTTP/1.1 422"))
        #expect(try await http(port, "GET", "/api/admin/campaigns", authorization: "Bearer rpk_\(String(repeating: "A", count: 43))")
            .hasPrefix("HTTP/1.1 401"))

        // A key bound to the shop's iPhone app: another app is 403, its own reaches the shop's devices only.
        let otherApp = try await http(port, "POST", "/api/notifications", authorization: "Bearer \(shopOnly)",
                                      body: #"{"to":"alice","app":"news-ios","message":"Not yours"}"#)
        #expect(otherApp.hasPrefix("HTTP/1.1 403"), "\(otherApp)")
        let own = try await http(port, "POST", "/api/notifications", authorization: "Bearer \(shopOnly)",
                                 body: #"{"to":"alice","message":"Shop only","mode":"alert","title":"Shop"}"#)
        #expect(own.hasPrefix("HTTP/1.1 201"), "\(own)")
        #expect(try await eventually(within: 20) { lines("shop.jsonl").count >= 3 })
        try await Task.sleep(for: .milliseconds(500))
        #expect(lines("shop.jsonl").last?["token"] as? String == tokenShopAlice)
        #expect(lines("news.jsonl").count == 1 && lines("fcm.jsonl").count == 1)
        // A bound key lists its app's campaigns only (the backend's went to every app).
        let listed = try await http(port, "GET", "/api/admin/campaigns", authorization: "Bearer \(shopOnly)")
        #expect(listed.hasPrefix("HTTP/1.1 403")) // a send key does not read

        // Last used is written in batches, within seconds; the keys never reach the log.
        #expect(try await eventually(within: 15) {
            let list = try await CLI.run(["api-keys", "list", "--json"], cwd: dir, environment: environment).stdout
            let keys = (try? JSONSerialization.jsonObject(with: Data(list.utf8))) as? [[String: Any]] ?? []
            return keys.contains { $0["name"] as? String == "backend" && $0["lastUsed"] != nil }
        })
        let metrics = try await http(port, "GET", "/metrics", auth: "")
        #expect(metrics.contains("app=\"shop-ios\"") && metrics.contains("app=\"news-ios\""), "\(metrics.suffix(2000))")

        // Removed: refused within a second (the server polls the epoch every 500 ms).
        #expect(try await http(port, "GET", "/api/admin/campaigns", authorization: "Bearer \(reader)").hasPrefix("HTTP/1.1 200"))
        #expect(try await CLI.run(["api-keys", "rm", "dashboard"], cwd: dir, environment: environment).status == 0)
        let removedAt = Date()
        #expect(try await eventually(within: 5) {
            try await http(port, "GET", "/api/admin/campaigns", authorization: "Bearer \(reader)").hasPrefix("HTTP/1.1 401")
        })
        print("apps: a removed key was refused \(Date().timeIntervalSince(removedAt)) s after api-keys rm (\(engine))")
        kill(server.processIdentifier, SIGTERM)
        await waitForExit(server)
        let log = (try? String(contentsOf: dir.appendingPathComponent("serve.log"), encoding: .utf8)) ?? ""
        for key in [sender, reader, shopOnly] { #expect(!log.contains(key) && !log.contains(String(key.dropFirst(4)))) }
    }

    @Test("a bad --apps file is exit 2 naming the app and the field")
    func badFile() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let cases: [(String, String)] = [
            (#"{"apps":[{"name":"shop-ios","apns":{"key":"AuthKey.p8","teamId":"T","topic":"t"}}]}"#, #"app "shop-ios": apns.keyId: is missing"#),
            (#"{"apps":[{"name":"shop-ios","apns":{"key":"nowhere.p8","keyId":"K","teamId":"T","topic":"t"}}]}"#, #"app "shop-ios": apns.key: cannot read nowhere.p8"#),
            (#"{"apps":[{"name":"Shop"}]}"#, #"app "Shop": name: invalid app name"#),
            (#"{"apps":[{"name":"web","webpush":{"vapidKey":"AuthKey.p8","subject":"ops"}}]}"#, #"app "web": webpush.subject: must be a mailto: or https: URI"#),
            (#"{"apps":[{"name":"a","fcm":{}},{"name":"b"}]}"#, #"app "a": fcm.serviceAccount: is missing"#),
            (#"{"apps":[{"name":"a","apns":{"key":"AuthKey.p8","keyId":"K","teamId":"T","topic":"t","colour":"red"}}]}"#, #"app "a": apns.colour: unknown field"#),
            (#"{"apps":[{"name":"default","fcm":{"serviceAccount":"AuthKey.p8"}}]}"#, #"app "default": name: the push flags"#),
            ("[1,2]", "not a JSON object"),
            // docs/api.md#frequency-caps-and-quiet-hours: limits named as any other field.
            (#"{"apps":[{"name":"a","fcm":{"serviceAccount":"AuthKey.p8"},"frequencyCap":{"max":0,"per":"24h"}}]}"#, #"app "a": frequencyCap.max must be 1 to 1000, got 0"#),
            (#"{"apps":[{"name":"a","fcm":{"serviceAccount":"AuthKey.p8"},"frequencyCap":{"max":3,"per":"a day"}}]}"#, #"app "a": frequencyCap.per must be a period such as 90s, 30m, 24h or 7d"#),
            (#"{"apps":[{"name":"a","fcm":{"serviceAccount":"AuthKey.p8"},"quietHours":{"from":"22:00","to":"22:00"}}]}"#, #"app "a": quietHours.from and quietHours.to are both 22:00"#),
            (#"{"apps":[{"name":"a","fcm":{"serviceAccount":"AuthKey.p8"},"quietHours":{"from":"22:00","to":"08:00","mode":"later"}}]}"#, #"app "a": quietHours.mode must be "delay" or "drop""#),
        ]
        for (index, (text, expected)) in cases.enumerated() {
            try text.write(to: dir.appendingPathComponent("apps\(index).json"), atomically: true, encoding: .utf8)
            let flags = index == 6 ? ["--vapid-key", "AuthKey.p8", "--vapid-subject", "mailto:ops@example.com"] : []
            let run = try await CLI.run(["serve", "--port", String(freePort()), "--apps", "apps\(index).json"] + flags, cwd: dir)
            #expect(run.status == 2, "\(text): \(run.status) \(run.stderr)")
            #expect(run.stderr.contains(expected), "\(text): \(run.stderr)")
        }
        for (flags, expected) in [(["--frequency-cap", "0/24h"], "--frequency-cap (env RICHPUSH_FREQUENCY_CAP): frequencyCap.max must be 1 to 1000"),
                                  (["--quiet-hours", "22:00"], "--quiet-hours (env RICHPUSH_QUIET_HOURS): quiet hours are FROM-TO[/delay|drop]")] {
            let run = try await CLI.run(["serve", "--port", String(freePort())] + flags, cwd: dir)
            #expect(run.status == 2 || run.status == 64, "\(flags): \(run.status) \(run.stderr)")
            #expect(run.stderr.contains(expected), "\(flags): \(run.stderr)")
        }
    }
}
