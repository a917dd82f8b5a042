import APNsSandbox
import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// richpush-bench against nghttpd, nghttp2's own HTTP/2 server (Debian's `nghttp2-server`), a peer
/// nobody here wrote: h2c by prior knowledge and h2 by ALPN over TLS, many streams on a
/// connection, a new connection per request, and `--urls` taking in turn a file nghttpd has and
/// one it has not. `.ci/run` installs it; elsewhere, without it, the tests say so and return,
/// unless `RICHPUSH_REQUIRE_ENGINES=1` makes a missing nghttpd a failure.
@Suite("richpush-bench against nghttpd, an HTTP/2 server nobody here wrote (SPEC §30)")
struct LoadToolPeerTests {
    /// nghttpd's path: on `PATH`, or where Debian puts it (`/usr/sbin`, often not on a user's `PATH`).
    static var nghttpd: String? {
        which("nghttpd") ?? (FileManager.default.isExecutableFile(atPath: "/usr/sbin/nghttpd") ? "/usr/sbin/nghttpd" : nil)
    }

    /// A directory with `htdocs/logo.png` and a self-signed certificate `cert.pem`/`cert.key`
    /// (for `localhost` and 127.0.0.1), and the logo's bytes.
    static func prepare(_ dir: URL) throws -> [UInt8] {
        let htdocs = dir.appendingPathComponent("htdocs")
        try FileManager.default.createDirectory(at: htdocs, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Fixtures.media.appendingPathComponent("logo.png"), to: htdocs.appendingPathComponent("logo.png"))
        let (certificate, tlsKey) = try APNsSandbox.selfSignedCertificate()
        try certificate.write(to: dir.appendingPathComponent("cert.pem"), atomically: true, encoding: .utf8)
        try tlsKey.write(to: dir.appendingPathComponent("cert.key"), atomically: true, encoding: .utf8)
        return try Fixtures.bytes(htdocs.appendingPathComponent("logo.png"))
    }

    /// `nghttpd` serving `dir/htdocs` on a free loopback port, over TLS with `cert.key`/`cert.pem`
    /// or, with `tls` false, h2c; listening once this returns.
    static func startNghttpd(_ nghttpd: String, in dir: URL, tls: Bool) async throws -> (process: Process, port: Int) {
        let port = freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: nghttpd)
        process.arguments = ["--address", "127.0.0.1", "--htdocs", dir.appendingPathComponent("htdocs").path]
            + (tls ? [String(port), dir.appendingPathComponent("cert.key").path, dir.appendingPathComponent("cert.pem").path]
                   : ["--no-tls", String(port)])
        process.currentDirectoryURL = dir
        let log = dir.appendingPathComponent(tls ? "nghttpd-tls.log" : "nghttpd-h2c.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        #expect(try await waitForPort(port), "nghttpd did not listen on \(port)")
        return (process, port)
    }

    /// Runs `body` with nghttpd serving a prepared directory (`prepare`) over TLS or h2c: the
    /// directory, the port and the logo's bytes. Without nghttpd it returns, or fails when
    /// `RICHPUSH_REQUIRE_ENGINES=1`.
    static func withNghttpd(tls: Bool, _ body: (URL, Int, [UInt8]) async throws -> Void) async throws {
        guard let nghttpd = Self.nghttpd else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "nghttpd is not installed (apt-get install nghttp2-server)")
            return
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let logo = try Self.prepare(dir)
        let (server, port) = try await Self.startNghttpd(nghttpd, in: dir, tls: tls)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        try await body(dir, port, logo)
    }

    /// `richpush-bench --json --threads 1 --timeout 30s arguments…` to completion; its JSON object (its output's last line).
    static func bench(_ arguments: [String]) async throws -> [String: Any] {
        let bench = CLI.executable.deletingLastPathComponent().appendingPathComponent("richpush-bench").path
        let all = ["--json", "--threads", "1", "--timeout", "30s"] + arguments
        let run = try await onOwnThread { try runCapturing(bench, all) }
        #expect(run.status == 0, "\(arguments): \(run.output)")
        let line = run.output.split(separator: "\n").last.map(String.init) ?? ""
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(arguments): \(run.output)")
    }

    /// The run's answers by status, as `[status: count]`.
    static func statuses(_ object: [String: Any]) -> [String: Int] {
        object["status"] as? [String: Int] ?? [:]
    }

    /// Bytes received in the run, from what the JSON says (it has no total: bytesPerSecond ×
    /// requests ÷ requestsPerSecond, both rates counted over the same seconds); nil without a rate.
    static func bytesReceived(_ object: [String: Any]) -> Double? {
        guard let bytesPerSecond = object["bytesPerSecond"].flatMap(JSONValues.number),
              let requests = object["requests"].flatMap(JSONValues.number),
              let requestsPerSecond = object["requestsPerSecond"].flatMap(JSONValues.number), requestsPerSecond > 0 else { return nil }
        return bytesPerSecond * requests / requestsPerSecond
    }

    /// Checks a run: `requests` answered exactly, no error, the statuses `expected` says (a count
    /// of nil: any positive count), and at least the logo's bytes for every 200.
    static func check(_ object: [String: Any], _ mode: String, requests: Int, expected: [String: Int?], logo: Int) {
        #expect(object["requests"] as? Int == requests, "\(mode): \(object)")
        #expect(object["errors"] as? Int == 0, "\(mode): \(object)")
        let statuses = Self.statuses(object)
        #expect(Set(statuses.keys) == Set(expected.keys), "\(mode): \(object)")
        #expect(statuses.values.reduce(0, +) == requests, "\(mode): \(object)")
        for (status, count) in expected {
            if let count { #expect(statuses[status] == count, "\(mode): \(object)") } else { #expect((statuses[status] ?? 0) > 0, "\(mode): \(object)") }
        }
        // Headers and bodies are counted; a rate is rounded to a hundredth, hence the tolerance.
        let bodies = Double((statuses["200"] ?? 0) * logo)
        let received = Self.bytesReceived(object)
        #expect(received.map { $0 >= bodies * 0.999 } == true, "\(mode): \(String(describing: received)) bytes received, \(bodies) in the 200s' bodies: \(object)")
    }

    @Test("h2c by prior knowledge (--http2 over http://): 2 connections of 10 streams get exactly --requests 200 whole 200s; --urls alternating a file nghttpd has with one it has not gets 200s and 404s, 100 in all, no error")
    func h2c() async throws {
        try await Self.withNghttpd(tls: false) { dir, port, logo in
            let streams = ["--http2", "--connections", "2", "--streams", "10"]

            let plain = try await Self.bench(streams + ["--requests", "200", "http://127.0.0.1:\(port)/logo.png"])
            Self.check(plain, "h2c", requests: 200, expected: ["200": 200], logo: logo.count)

            let urls = dir.appendingPathComponent("urls.txt")
            try "/logo.png\n/missing.png\n".write(to: urls, atomically: true, encoding: .utf8)
            let mixed = try await Self.bench(streams + ["--requests", "100", "--urls", urls.path, "http://127.0.0.1:\(port)"])
            Self.check(mixed, "h2c --urls", requests: 100, expected: ["200": nil, "404": nil], logo: logo.count)
        }
    }

    @Test("h2 by ALPN over TLS, nghttpd's self-signed certificate trusted by --ca (for 127.0.0.1): 2 connections of 10 streams get exactly --requests 200 whole 200s, and --new-connection (a handshake a request) exactly 20, no error")
    func tls() async throws {
        try await Self.withNghttpd(tls: true) { dir, port, logo in
            let target = ["--ca", dir.appendingPathComponent("cert.pem").path, "https://127.0.0.1:\(port)/logo.png"]

            let streams = try await Self.bench(["--http2", "--connections", "2", "--streams", "10", "--requests", "200"] + target)
            Self.check(streams, "h2", requests: 200, expected: ["200": 200], logo: logo.count)

            let fresh = try await Self.bench(["--http2", "--new-connection", "--requests", "20"] + target)
            Self.check(fresh, "h2 --new-connection", requests: 20, expected: ["200": 20], logo: logo.count)
        }
    }

    @Test("--requests over HTTP/2 with a --duration cap that comes first: the streams a server never answers (hyper-h2's, a peer nobody here wrote) are errors, unanswered at the end, and the summary says how many of N were sent")
    func cappedStreams() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = freePort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", Fixtures.packageRoot.appendingPathComponent("scripts/h2-stall.py").path, String(port)]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        #expect(try await waitForPort(port), "h2-stall.py did not listen on \(port)")
        let urls = dir.appendingPathComponent("urls.txt")
        try "/ok\n/stall\n".write(to: urls, atomically: true, encoding: .utf8)
        // Two connections of four streams: the /ok half of the ten is answered and frees its
        // stream, so all ten go; the five /stall streams stay open until the cap.
        let arguments = ["--http2", "--connections", "2", "--streams", "4", "--requests", "10", "--duration", "1s",
                         "--urls", urls.path, "http://127.0.0.1:\(port)"]
        let object = try await Self.bench(arguments)
        #expect(object["requests"] as? Int == 5 && object["errors"] as? Int == 5 && Self.statuses(object) == ["200": 5], "\(object)")
        #expect((object["seconds"] as? Double).map { $0 >= 1 } == true, "\(object)")
        let bench = CLI.executable.deletingLastPathComponent().appendingPathComponent("richpush-bench").path
        let summary = try await onOwnThread { try runCapturing(bench, ["--threads", "1"] + arguments) }
        #expect(summary.status == 0 && summary.output.contains("unanswered at the end 5")
                && summary.output.contains("10 of 10 requests sent, 5 unanswered (raise --duration"), "\(summary.output)")
    }
}

