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
    /// `serve --tls-cert --tls-key --demo-auth` in `dir` (a node directory: the logo, a new
    /// certificate), listening once this returns.
    static func startServe(in dir: URL) async throws -> (process: Process, port: Int) {
        try prepareNodeDirectory(dir)
        return try await startListening({ ["serve", "--port", String($0), "--tls-cert", "cert.pem", "--tls-key", "cert.key", "--demo-auth"] },
                                    cwd: dir, log: dir.appendingPathComponent("serve.log"))
    }

    @Test("richpush-bench over HTTPS against serve (SPEC §30): HTTP/2 by ALPN with 10 streams, HTTP/1.1, a new connection per request, --urls in turn, --requests exactly: every answer a 200, no error; a certificate it was not told to trust stops it naming --ca and --insecure")
    func loadToolOverTLS() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port) = try await Self.startServe(in: dir)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        let bench = CLI.executable.deletingLastPathComponent().appendingPathComponent("richpush-bench").path
        let id = MediaID(hashing: try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))).hex
        let urls = dir.appendingPathComponent("urls.txt")
        try "/health\n/media/\(id)\nhttps://127.0.0.1:\(port)/health\n".write(to: urls, atomically: true, encoding: .utf8)
        let common = ["--json", "--threads", "1", "--connections", "4", "--timeout", "30s",
                      "--header", "Authorization: Basic YWxpY2U6YWxpY2U=", "--urls", urls.path, "https://127.0.0.1:\(port)"]
        let cert = dir.appendingPathComponent("cert.pem").path
        // --requests ends the run at its last answer; its --duration is only a cap, which a loaded
        // machine must not reach (a request it left unanswered would be an error).
        for mode in [["--http2", "--streams", "10"], [], ["--new-connection"], ["--http2", "--new-connection"], ["--http2", "--streams", "10", "--requests", "50"]] {
            let duration = mode.contains("--requests") ? "60s" : "1s"
            let run = try await onOwnThread { try runCapturing(bench, mode + ["--ca", cert, "--duration", duration] + common) }
            #expect(run.status == 0, "\(mode): \(run.output)")
            let line = run.output.split(separator: "\n").last.map(String.init) ?? ""
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(mode): \(run.output)")
            #expect((object["requests"] as? Int ?? 0) > 0, "\(mode): \(line)")
            if mode.contains("--requests") { #expect(object["requests"] as? Int == 50, "\(mode): \(line)") }
            #expect(object["errors"] as? Int == 0, "\(mode): \(line)")
            #expect((object["status"] as? [String: Int]).map { Array($0.keys) } == ["200"], "\(mode): \(line)")
        }
        let untrusted = try await onOwnThread { try runCapturing(bench, ["--http2", "--duration", "1s"] + common) }
        #expect(untrusted.status != 0 && untrusted.output.contains("certificate verify failed")
                && untrusted.output.contains("--ca FILE") && untrusted.output.contains("--insecure"), "\(untrusted.output)")
        let insecure = try await onOwnThread { try runCapturing(bench, ["--insecure", "--duration", "0.3s", "--connections", "1", "https://127.0.0.1:\(port)/health"]) }
        #expect(insecure.status == 0 && insecure.output.contains("Requests/sec:"), "\(insecure.output)")
    }

    @Test("hyper-h2 (a peer nobody here wrote) gets a hot image whole over HTTP/2 however it asks: through a 4,096-byte stream window it grants frame by frame, twenty GETs written at once, after resetting a stream mid-answer, with its request ended by an empty DATA frame; a cold GET between them is the router's, and the connection is never sent GOAWAY")
    func hotStreamsOverHTTP2() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port) = try await Self.startServe(in: dir)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        let logo = try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
        let id = MediaID(hashing: logo).hex
        let script = Fixtures.packageRoot.appendingPathComponent("scripts/h2-hot.py").path
        let run = try await onOwnThread {
            try runCapturing("/usr/bin/env", ["python3", script, String(port), dir.appendingPathComponent("cert.pem").path,
                                              "/media/\(id)", "Basic YWxpY2U6YWxpY2U="])
        }
        #expect(run.status == 0, "\(run.output)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any], "\(run.output)")
        func whole(_ answer: Any?) -> Bool {
            guard let answer = answer as? [String: Any], let headers = answer["headers"] as? [String: String] else { return false }
            return answer["status"] as? Int == 200 && answer["sha256"] as? String == id && headers["content-type"] == "image/png"
                && headers["content-length"] == String(logo.count) && headers["server"] == "RichPush" && headers["date"] != nil
        }
        let window = result["window"] as? [String: Any]
        #expect(whole(window) && (window?["frames"] as? Int ?? 0) >= 13, "\(String(describing: window))")
        let burst = result["burst"] as? [Any] ?? []
        #expect(burst.count == 20 && burst.allSatisfy(whole), "\(burst)")
        let reset = result["reset"] as? [String: Any]
        #expect(reset?["first_frames"] as? Int == 1 && whole(reset?["after"]), "\(String(describing: reset))")
        #expect(whole(result["split"]), "\(String(describing: result["split"]))")
        #expect((result["cold"] as? [String: Any])?["status"] as? Int == 200, "\(String(describing: result["cold"]))")
        #expect(result["goaway"] as? Bool == false)
        // Some of the hot GETs were answered at the frame level (the first may be the router's, and
        // on a loaded machine a check falling due sends those until it is done to the router too).
        let metrics = try await curl(["--cacert", dir.appendingPathComponent("cert.pem").path, "https://127.0.0.1:\(port)/metrics"])
        let frame = metrics.output.split(separator: "\n").first { $0.hasPrefix("richpush_h2_frame_answers_total ") }
        #expect(frame.flatMap { Double($0.split(separator: " ").last ?? "") }.map { $0 >= 1 } == true, "\(String(describing: frame))")
    }

    @Test("curl gets the same answers over HTTP/2 and HTTP/1.1 (the image's second GET from the fast path), payload URLs say https, plain HTTP gets nothing")
    func https() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port) = try await Self.startServe(in: dir)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
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
        // Over HTTP/2 the first fetch of a payload with a session opened here is answered from
        // memory (docs/design/fast-path.md), as over HTTP/1.1: with the session's and the notification's rows
        // deleted behind the server's back, the router could only answer 401 or 404. (The image's
        // GET just before, on the same connection, keeps its cache entry within its second.)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any])
        let (notification, richUrl) = (try #require(object["id"] as? Int), try #require(object["richUrl"] as? String))
        let signedIn = try await curl(["--cacert", cert, "-u", "alice:alice", "-X", "POST", "\(base)/api/sessions"])
        let token = try #require((try JSONSerialization.jsonObject(with: Data(signedIn.output.utf8)) as? [String: Any])?["token"] as? String, "\(signedIn.output)")
        let deleted = try await onOwnThread {
            try runCapturing("/usr/bin/env", ["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('DELETE FROM sessions'); c.execute('DELETE FROM notifications'); c.commit()",
                                              dir.appendingPathComponent("data/richpush.sqlite").path])
        }
        #expect(deleted.0 == 0, "\(deleted.1)")
        let payloadFile = dir.appendingPathComponent("payload.png")
        let fetched = try await curl(["--cacert", cert, "--http2", "-H", "Authorization: Bearer \(token)", "-w", "%{http_version} %{http_code}\n",
                                      "-o", "/dev/null", "\(base)/media/\(id)", "-o", payloadFile.path, "\(base)/api/notifications/\(notification)"])
        #expect(fetched.output == "2 200\n2 200\n", "\(fetched.output)")
        #expect(try Fixtures.bytes(payloadFile) == logo)
        // The payload was answered from memory, on the stream's event loop, not by the router
        // (which could only have answered 401 or 404). The image's GET before it is too unless
        // more than a second passed since its last check (a loaded machine): then the router
        // answers it, as it must, so only the payload's answer is counted for certain.
        let metrics = try await curl(["--cacert", cert, "\(base)/metrics"])
        let h2 = metrics.output.split(separator: "\n").first { $0.hasPrefix("richpush_memory_answers_total{protocol=\"h2\"}") }
        #expect(h2.flatMap { Double($0.split(separator: " ").last ?? "") }.map { $0 >= 1 } == true, "\(String(describing: h2))")
        // Its payload URL over HTTP/2 too.
        let linked = try await curl(["--cacert", cert, "--http2", "-o", payloadFile.path, "-w", "%{http_version} %{http_code}", richUrl])
        let linkedBytes = try Fixtures.bytes(payloadFile)
        #expect(linked.output == "2 200" && linkedBytes == logo, "\(linked.output)")
        let jpeg = try Fixtures.bytes(Fixtures.media.appendingPathComponent("landscape.jpg"))
        let upload = try await curl(["--cacert", cert, "-u", "alice:alice", "--data-binary", "@" + Fixtures.media.appendingPathComponent("landscape.jpg").path,
                                     "-H", "Content-Type: application/octet-stream", "-w", "%{http_code}", "-o", "/dev/null", "\(base)/api/media"])
        #expect(upload.output == "201" || upload.output == "200", "\(upload.output)")
        var heads: [[String]] = []
        for attempt in 0..<3 {
            let file = dir.appendingPathComponent("landscape-\(attempt).jpg")
            let fetched = try await curl(["--cacert", cert, "--http2", "-u", "alice:alice", "-D", "-", "-o", file.path, "\(base)/media/\(MediaID(hashing: jpeg).hex)"])
            #expect(try Fixtures.bytes(file) == jpeg, "attempt \(attempt)")
            heads.append(fetched.output.split(separator: "\r\n").map(String.init).filter { !$0.lowercased().hasPrefix("date:") }.sorted())
        }
        // The router's answer (the first) and the fast path's: the same status and headers.
        #expect(heads[0] == heads[2] && heads[0].contains("HTTP/2 200 "), "\(heads)")
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
