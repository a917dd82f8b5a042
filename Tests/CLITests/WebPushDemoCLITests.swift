import Crypto
import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("/webpush-demo in headless Chromium (SPEC §12)")
struct WebPushDemoCLITests {
    static var chromium: String? { which("chromium") ?? which("chromium-browser") }

    /// The page's DOM after its scripts ran, and a screenshot, as headless Chromium renders them.
    func render(_ url: String, screenshot: URL, profile: URL) async throws -> String {
        let chromium = try #require(Self.chromium)
        let common = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
                      "--virtual-time-budget=15000", "--window-size=412,860"]
        // Bounded: a browser that hangs must fail this test, not the whole run.
        let (_, dom) = try await onOwnThread { try runCapturing("/usr/bin/timeout", ["60", chromium] + common + ["--dump-dom", url]) }
        _ = try await onOwnThread { try runCapturing("/usr/bin/timeout", ["60", chromium] + common + ["--screenshot=\(screenshot.path)", url]) }
        return dom
    }

    @Test("the page loads with the server's VAPID key and registers its service worker; without Web Push it says which flags")
    func loads() async throws {
        guard Self.chromium != nil else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "chromium is not installed (apt-get install chromium)")
            return
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        try P256.Signing.PrivateKey().pemRepresentation.write(to: dir.appendingPathComponent("vapid.pem"), atomically: true, encoding: .utf8)
        let (server, port) = try await CLI.startServe(["--vapid-key", "vapid.pem", "--vapid-subject", "mailto:ops@example.com"], cwd: dir)
        defer { kill(server.processIdentifier, SIGKILL) }
        let keyAnswer = try await http(port, "GET", "/api/webpush/key", auth: "")
        let key = try #require(keyAnswer.range(of: "\"publicKey\":\"").map { String(keyAnswer[$0.upperBound...].prefix { $0 != "\"" }) })

        let screenshot = dir.appendingPathComponent("webpush-demo.png")
        let dom = try await render("http://127.0.0.1:\(port)/webpush-demo", screenshot: screenshot, profile: dir.appendingPathComponent("profile"))
        #expect(dom.contains("<code id=\"key\">\(key)</code>"), "\(dom.suffix(1500))")
        #expect(dom.contains("Ready: sign in and subscribe."), "the service worker did not register: \(dom.suffix(800))")
        let png = try Data(contentsOf: screenshot)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 5_000)
        // Kept for a person to look at.
        let kept = Fixtures.packageRoot.appendingPathComponent(".build/test-output/webpush-demo.png")
        try? FileManager.default.createDirectory(at: kept.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: kept)
        try? FileManager.default.copyItem(at: screenshot, to: kept)

        let plain = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: plain) }
        try prepareNodeDirectory(plain)
        let (other, otherPort) = try await CLI.startServe([], cwd: plain)
        defer { kill(other.processIdentifier, SIGKILL) }
        let without = try await render("http://127.0.0.1:\(otherPort)/webpush-demo", screenshot: plain.appendingPathComponent("s.png"),
                                       profile: plain.appendingPathComponent("profile"))
        #expect(without.contains("This server sends no Web Push: start serve with --vapid-key and --vapid-subject."), "\(without.suffix(800))")
    }
}
