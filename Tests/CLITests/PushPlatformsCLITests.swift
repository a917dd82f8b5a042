import Crypto
import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("serve with FCM and Web Push, against fcm-sandbox and webpush-sandbox (SPEC §12)")
struct PushPlatformsCLITests {
    func body(_ response: String) -> String {
        response.range(of: "\r\n\r\n").map { String(response[$0.upperBound...]) } ?? ""
    }

    @Test("an Android app and a browser registered through the API each get an alert, logged by their stand-ins as JSON lines")
    func endToEnd() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let (fcm, fcmPort) = try await startFCMSandbox(project: "rich-push-cli", in: dir)
        defer { kill(fcm.processIdentifier, SIGKILL) }
        let (web, webPort) = try await startListening({ ["webpush-sandbox", "--port", String($0), "--log", "web.jsonl"] },
                                                      cwd: dir, log: dir.appendingPathComponent("webpush-sandbox.log"))
        defer { kill(web.processIdentifier, SIGKILL) }
        try P256.Signing.PrivateKey().pemRepresentation.write(to: dir.appendingPathComponent("vapid.pem"), atomically: true, encoding: .utf8)
        let added = try await CLI.run(["users", "add", "alice", "--password-stdin"], cwd: dir, stdin: "pw\n")
        #expect(added.status == 0, "\(added.stderr)")
        let (server, port) = try await CLI.startServe(["--fcm-service-account", "service-account.json", "--fcm-endpoint", "http://127.0.0.1:\(fcmPort)",
                                                       "--vapid-key", "vapid.pem", "--vapid-subject", "mailto:ops@example.com",
                                                       "--allow-private-push-endpoints"], cwd: dir)
        defer { kill(server.processIdentifier, SIGKILL) }
        let auth = Data("alice:pw".utf8).base64EncodedString()

        let key = try #require(try JSONSerialization.jsonObject(with: Data(body(try await http(port, "GET", "/api/webpush/key", auth: auth)).utf8))
                                as? [String: String])["publicKey"]
        // The "browser" subscribes with the server's key; the "app" gets a registration token.
        let subscription = body(try await http(webPort, "POST", "/subscribe", auth: "", body: #"{"applicationServerKey":"\#(key ?? "")"}"#))
        #expect(subscription.contains("\"endpoint\":\"http://127.0.0.1:\(webPort)/push/"), "\(subscription)")
        let token = try #require(try JSONSerialization.jsonObject(with: Data(body(try await http(fcmPort, "POST", "/register", auth: "")).utf8))
                                  as? [String: String])["token"]
        for (platform, handle) in [("fcm", "\"\(token ?? "")\""), ("web", subscription)] {
            let created = body(try await http(port, "POST", "/api/register", auth: auth))
            let id = try #require(try JSONSerialization.jsonObject(with: Data(created.utf8)) as? [String: Any])["registrationId"] as? String
            let saved = try await http(port, "PUT", "/api/register/\(id ?? "")", auth: auth, body: #"{"platform":"\#(platform)","handle":\#(handle)}"#)
            #expect(saved.hasPrefix("HTTP/1.1 200"), "\(platform): \(saved)")
        }
        let sent = try await http(port, "POST", "/api/notifications", auth: auth, body: #"{"message":"Half price","title":"Sale","mode":"alert"}"#)
        #expect(sent.hasPrefix("HTTP/1.1 201"), "\(sent)")
        @Sendable func log(_ name: String) -> String { (try? String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)) ?? "" }
        // Each line whole: a line read while the stand-in writes it would not parse.
        @Sendable func whole(_ name: String) -> Bool { let text = log(name); return text.contains("Half price") && text.hasSuffix("\n") }
        let arrived = try await eventually(within: 20) { whole("fcm.jsonl") && whole("web.jsonl") }
        #expect(arrived, "fcm: \(log("fcm.jsonl")) web: \(log("web.jsonl")) fcm-sandbox: \(log("fcm-sandbox.log"))")
        let android = try #require(try JSONSerialization.jsonObject(with: Data(log("fcm.jsonl").split(separator: "\n")[0].utf8)) as? [String: Any])
        let shown = try #require(android["notification"] as? [String: String])
        #expect(shown["title"] == "Sale" && shown["body"] == "Half price" && shown["image"]?.contains("/p/") == true)
        let browser = try #require(try JSONSerialization.jsonObject(with: Data(log("web.jsonl").split(separator: "\n")[0].utf8)) as? [String: Any])
        let message = try #require(try JSONSerialization.jsonObject(with: Data((browser["payload"] as? String ?? "").utf8)) as? [String: String])
        #expect(message["title"] == "Sale" && message["richMessage"] == "Half price" && (message["richUrl"] ?? "") + "?variant=push" == shown["image"])
    }
}
