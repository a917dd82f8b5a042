import APNsSandbox
import Crypto
import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One HTTP exchange on a fresh connection (Connection: close), off the cooperative pool.
func http(_ port: Int, _ method: String, _ path: String, auth: String, body: String = "") async throws -> String {
    try await http(port, method, path, authorization: "Basic \(auth)", body: body)
}

/// One HTTP exchange with this `Authorization` field; a body goes as JSON (the API's only body type).
func http(_ port: Int, _ method: String, _ path: String, authorization: String, body: String = "") async throws -> String {
    try await onOwnThread {
        let fd = try connectTo(port: port)
        defer { close(fd) }
        let type = body.isEmpty ? "" : "Content-Type: application/json\r\n"
        sendAll(fd, Array("\(method) \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: \(authorization)\r\n\(type)Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8))
        return receiveAll(fd)
    }
}

func startProcess(_ args: [String], cwd: URL, log: URL?, environment: [String: String] = [:]) throws -> Process {
    let process = Process()
    process.executableURL = CLI.executable
    process.arguments = args
    process.currentDirectoryURL = cwd
    process.environment = CLI.environment(environment)
    if let log {
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        handle.seekToEndOfFile()
        process.standardOutput = handle
        process.standardError = handle
    } else {
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
    }
    try process.run()
    return process
}

/// What `serve` and `apns-sandbox` need in their working directory `dir`: `media/logo.png`
/// (the default image), a provider key `AuthKey.p8` and a TLS certificate `cert.pem`/`cert.key`.
func prepareNodeDirectory(_ dir: URL) throws {
    try FileManager.default.createDirectory(at: dir.appendingPathComponent("media"), withIntermediateDirectories: true)
    try FileManager.default.copyItem(at: Fixtures.media.appendingPathComponent("logo.png"), to: dir.appendingPathComponent("media/logo.png"))
    try P256.Signing.PrivateKey().pemRepresentation.write(to: dir.appendingPathComponent("AuthKey.p8"), atomically: true, encoding: .utf8)
    let (certificate, tlsKey) = try APNsSandbox.selfSignedCertificate()
    try certificate.write(to: dir.appendingPathComponent("cert.pem"), atomically: true, encoding: .utf8)
    try tlsKey.write(to: dir.appendingPathComponent("cert.key"), atomically: true, encoding: .utf8)
}

/// Waits for `process` to exit on a thread of its own: a server's graceful shutdown can take
/// seconds, and the test pool has only a few threads (one per core) for the whole suite.
func waitForExit(_ process: Process) async {
    _ = try? await onOwnThread { process.waitUntilExit() }
}

func waitForPort(_ port: Int) async throws -> Bool {
    for _ in 0..<150 {
        if let fd = try? connectTo(port: port) { close(fd); return true }
        try await Task.sleep(for: .milliseconds(100))
    }
    return false
}

@Suite("Durable outbox across SIGKILL")
struct DurabilityCLITests {
    @Test("a push accepted while APNs is unreachable survives SIGKILL and is delivered after restart, once (Apple had accepted nothing before the kill)",
          arguments: StoreEngine.all)
    func killAndRestart(engine: StoreEngine) async throws {
        // The store named to every process by the environment (nothing for the embedded one).
        let environment = engine == .shared ? try await engine.locations().processEnvironment : [:]
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin"], cwd: dir, stdin: "pw\n", environment: environment).status == 0)

        let apnsPort = freePort(), port = freePort()
        let serve = ["serve", "--port", String(port)] + sandboxAPNs(apnsPort)
        var server = try startProcess(serve, cwd: dir, log: dir.appendingPathComponent("serve.log"), environment: environment)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        #expect(try await waitForPort(port))
        let auth = Data("alice:pw".utf8).base64EncodedString()
        let registered = try await http(port, "POST", "/api/register", auth: auth)
        let id = try #require(registered.split(separator: "\"").dropFirst(3).first.map(String.init))
        let token = String(repeating: "ab", count: 32)
        #expect(try await http(port, "PUT", "/api/register/\(id)", auth: auth, body: "{\"platform\":\"apns\",\"handle\":\"\(token)\",\"tags\":[]}").hasPrefix("HTTP/1.1 200"))
        #expect(try await http(port, "POST", "/api/notifications", auth: auth).hasPrefix("HTTP/1.1 201"))
        try await Task.sleep(for: .milliseconds(1500)) // a few attempts fail: nothing listens on the APNs port
        let pending = try await CLI.run(["deliveries", "--json"], cwd: dir, environment: environment).stdout
        #expect(pending.contains("\"state\":\"pending\""), "\(pending)")
        kill(server.processIdentifier, SIGKILL)
        await waitForExit(server)

        let pushes = dir.appendingPathComponent("pushes.jsonl")
        let sandbox = try startProcess(["apns-sandbox", "--port", String(apnsPort), "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                                        "--public-key", "AuthKey.p8", "--tls-cert", "cert.pem", "--tls-key", "cert.key", "--log", pushes.path],
                                       cwd: dir, log: dir.appendingPathComponent("sandbox.log"))
        defer { if sandbox.isRunning { kill(sandbox.processIdentifier, SIGKILL) } }
        #expect(try await waitForPort(apnsPort))
        server = try startProcess(serve, cwd: dir, log: dir.appendingPathComponent("serve.log"), environment: environment)
        func lines() -> [String] {
            ((try? String(contentsOf: pushes, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        for _ in 0..<600 where lines().isEmpty { try await Task.sleep(for: .milliseconds(100)) } // a restart on a loaded machine may take many seconds
        try await Task.sleep(for: .seconds(2))
        let delivered = lines()
        #expect(delivered.count == 1, "\(delivered)")
        let line = try #require(delivered.first)
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object?["token"] as? String == token)
        #expect((object?["payload"] as? [String: Any])?["richMessage"] as? String == "Check this image out!")
        #expect(((object?["headers"] as? [String: String])?["apns-push-type"]) == "background")
        let sent = try await CLI.run(["deliveries", "--json"], cwd: dir, environment: environment).stdout
        #expect(sent.contains("\"state\":\"sent\""), "\(sent)")
        kill(server.processIdentifier, SIGTERM)
        await waitForExit(server)
        kill(sandbox.processIdentifier, SIGTERM)
        await waitForExit(sandbox)
    }
}
