import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("richpush serve as a process")
struct ServeCLITests {
    @Test("in a data directory made beforehand with mode 0755 (a Docker volume), the database serve creates is 0600")
    func privateFiles() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let previous = umask(0o022)
        defer { umask(previous) }
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("media"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Fixtures.media.appendingPathComponent("logo.png"), to: dir.appendingPathComponent("media/logo.png"))
        let (server, port) = try await CLI.startServe(["--data", data.path], cwd: dir)
        defer { server.terminate(); server.waitUntilExit() }
        // The container's readiness check, as well as its liveness check.
        for flags in [["--ready"], []] {
            let check = try await CLI.run(["healthcheck", "--url", "http://127.0.0.1:\(port)/\(flags.isEmpty ? "health" : "ready")"] + flags, cwd: dir)
            #expect(check.status == 0 && check.stdout.contains("answered 200"), "\(flags): \(check.stderr)")
        }
        let database = try FileManager.default.attributesOfItem(atPath: data.appendingPathComponent("richpush.sqlite").path)
        #expect((database[.posixPermissions] as? Int).map { $0 & 0o077 } == 0, "\(String((database[.posixPermissions] as? Int) ?? 0, radix: 8))")
    }

    @Test("on a port another process listens on (the main one, or --metrics-port's), serve says so and exits at once, non-zero",
          arguments: ["--port", "--metrics-port"])
    func portTaken(option: String) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Another process's listener on the port.
        let (holder, port) = boundLoopbackSocket(listening: true)
        defer { close(holder) }

        let server = Process()
        server.executableURL = CLI.executable
        server.arguments = ["serve", "--host", "127.0.0.1"] + (option == "--port" ? ["--port", String(port)]
            : ["--port", String(freePort()), "--metrics-port", String(port)])
        server.currentDirectoryURL = dir
        let err = Pipe()
        server.standardOutput = FileHandle.nullDevice
        server.standardError = err
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        // Before the fix, its background loops (webhooks, key use, the hub reconciler) took the
        // service group's cancellation for a failed try and spun, at full CPU, never exiting.
        let exited = try await eventually(within: 20) { !server.isRunning }
        #expect(exited, "serve still runs 20 s after its listener failed")
        guard exited else { return }
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(server.terminationStatus != 0)
        #expect(stderr.contains("cannot listen on 127.0.0.1:\(port)") && stderr.contains("in use"), "\(stderr)")
        #expect(stderr.split(separator: "\n").count < 20, "\(stderr.prefix(2000))")
    }

    @Test("starts on embedded defaults in a fresh directory, ingests media/logo.png, and finishes in-flight requests and answers on SIGTERM")
    func gracefulShutdown() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("media"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Fixtures.media.appendingPathComponent("logo.png"), to: dir.appendingPathComponent("media/logo.png"))
        let users = try await CLI.run(["users", "add", "alice", "--password-stdin"], cwd: dir, stdin: "pw\n")
        #expect(users.status == 0, "\(users.stderr)")

        let port = freePort()
        let server = Process()
        server.executableURL = CLI.executable
        server.arguments = ["serve", "--port", String(port)]
        server.currentDirectoryURL = dir
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        var up = false
        for _ in 0..<100 where !up {
            try await Task.sleep(for: .milliseconds(100))
            if let fd = try? connectTo(port: port) {
                sendAll(fd, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
                up = receiveAll(fd).contains("{\"status\":\"ok\"}")
                close(fd)
            }
        }
        #expect(up, "serve did not come up on port \(port)")
        #expect(try await CLI.run(["media", "show", "logo.png"], cwd: dir).status == 0, "the default image was not ingested")

        // Six GETs on one keep-alive connection: the router answers the first, the event-loop
        // fast path the rest; every one is whole and counted once (this process's own metrics).
        let logo = try Data(contentsOf: Fixtures.media.appendingPathComponent("logo.png"))
        let logoID = String(try await CLI.run(["media", "show", "logo.png", "--json"], cwd: dir).stdout.split(separator: "\"")
            .first { $0.count == 64 } ?? "")
        let keepAlive = try connectTo(port: port)
        let basic = Data("alice:pw".utf8).base64EncodedString()
        for _ in 0..<6 {
            let (head, body) = exchange(keepAlive, "GET /media/\(logoID) HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(basic)\r\n\r\n")
            #expect(head.hasPrefix("HTTP/1.1 200 OK"))
            #expect(body == [UInt8](logo))
        }
        let (_, metricsBody) = exchange(keepAlive, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        close(keepAlive)
        let metrics = String(decoding: metricsBody, as: UTF8.self)
        #expect(metrics.contains("http_server_requests_total{http_route=\"/media/{sha256}\",http_request_method=\"GET\",http_response_status_code=\"200\"} 6\n"))

        // A slow reader: 160 pipelined GETs (8 MB of answers from the fast path) into a 4 KB
        // receive buffer, so most of the answers still wait in the server when SIGTERM comes.
        let slowReader = try connectTo(port: port, receiveBuffer: 4096)
        defer { close(slowReader) }
        let get = "GET /media/\(logoID) HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(basic)\r\n\r\n"
        sendAll(slowReader, Array(String(repeating: get, count: 160).utf8))

        // Half an upload, then SIGTERM, then the rest: the request must still complete.
        let coupon = try Data(contentsOf: Fixtures.media.appendingPathComponent("coupon.png"))
        let fd = try connectTo(port: port)
        defer { close(fd) }
        let auth = Data("alice:pw".utf8).base64EncodedString()
        sendAll(fd, Array("POST /api/media HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(auth)\r\nContent-Length: \(coupon.count)\r\nConnection: close\r\n\r\n".utf8))
        sendAll(fd, Array(coupon.prefix(coupon.count / 2)))
        try await Task.sleep(for: .milliseconds(300))
        kill(server.processIdentifier, SIGTERM)
        try await Task.sleep(for: .milliseconds(300))
        sendAll(fd, Array(coupon.dropFirst(coupon.count / 2)))
        let answer = try await onOwnThread { receiveAll(fd) }
        #expect(answer.hasPrefix("HTTP/1.1 201 "), "\(answer.prefix(300))")
        // Every answer the server had written reaches the slow reader whole before the server closes.
        let answers = splitResponses(try await onOwnThread { receiveAllBytes(slowReader) })
        #expect(answers.count == 160)
        #expect(answers.allSatisfy { $0.head.hasPrefix("HTTP/1.1 200 OK") && $0.body == [UInt8](logo) })
        for _ in 0..<100 where server.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        #expect(!server.isRunning)
        #expect(server.terminationReason == .exit && server.terminationStatus == 0)
        #expect(try await CLI.run(["media", "verify"], cwd: dir).stdout == "2 blobs checked, 0 problems\n")
    }
}
