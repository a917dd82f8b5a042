import APNsSandbox
import MediaStore
import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs curl (a client nobody here wrote, with nghttp2) on a thread of its own.
func curl(_ arguments: [String]) async throws -> (status: Int32, output: String) {
    try await onOwnThread { try runCapturing("/usr/bin/env", ["curl", "-s", "--max-time", "20"] + arguments) }
}

@Suite("serve --tls-cert --tls-key: HTTPS, HTTP/2 and HTTP/1.1 by ALPN (SPEC §14)")
struct HTTPSCLITests {
    @Test("curl gets the same answers over HTTP/2 and HTTP/1.1 (the image's second GET from the fast path), payload URLs say https, plain HTTP gets nothing")
    func https() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let port = freePort()
        let server = try startProcess(["serve", "--port", String(port), "--tls-cert", "cert.pem", "--tls-key", "cert.key", "--demo-auth"],
                                      cwd: dir, log: dir.appendingPathComponent("serve.log"))
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        #expect(try await waitForPort(port))
        let base = "https://127.0.0.1:\(port)"
        let cert = dir.appendingPathComponent("cert.pem").path
        let logo = try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
        let id = MediaID(hashing: logo).hex
        for version in ["--http2", "--http1.1"] {
            let health = try await curl(["--cacert", cert, version, "-w", " %{http_version} %{http_code}", "\(base)/health"])
            #expect(health.output == "{\"status\":\"ok\"} \(version == "--http2" ? "2" : "1.1") 200", "\(health.output)")
            for attempt in 0..<2 {
                let file = dir.appendingPathComponent("logo-\(version)-\(attempt).png")
                let image = try await curl(["--cacert", cert, version, "-u", "alice:alice", "-o", file.path, "-w", "%{http_code} %{content_type}",
                                            "\(base)/media/\(id)"])
                #expect(image.output == "200 image/png", "\(image.output)")
                #expect(try Fixtures.bytes(file) == logo)
            }
        }
        let created = try await curl(["--cacert", cert, "-u", "alice:alice", "-H", "Content-Type: application/json",
                                      "-d", #"{"mode":"alert","title":"Hi"}"#, "\(base)/api/notifications"])
        #expect(created.output.contains("\"richUrl\":\"https://127.0.0.1:\(port)/p/"), "\(created.output)")
        let plain = try await curl(["-w", "%{http_code}", "http://127.0.0.1:\(port)/health"])
        #expect(plain.output.hasSuffix("000"), "\(plain.output)")
        kill(server.processIdentifier, SIGTERM)
        await waitForExit(server)
    }

    @Test("--tls-cert without --tls-key, or an unreadable file, is a usage error")
    func badFlags() async throws {
        let alone = try await CLI.run(["serve", "--tls-cert", "/etc/hostname"])
        #expect(alone.status == 2 && alone.stderr.contains("--tls-cert and --tls-key"), "\(alone.stderr)")
        let missing = try await CLI.run(["serve", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"])
        #expect(missing.status == 2 && missing.stderr.contains("--tls-cert: cannot read /nonexistent.pem"), "\(missing.stderr)")
    }
}
