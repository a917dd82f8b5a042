import CryptoExtras
import Foundation
import RichPushTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `richpush` executable as a user would.
enum CLI {
    /// The `richpush` binary next to the test bundle (SwiftPM builds it: the test target depends on it).
    static let executable: URL = {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [beside, beside.deletingLastPathComponent(), Fixtures.packageRoot.appendingPathComponent(".build/debug")] {
            let url = candidate.appendingPathComponent("richpush")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return Fixtures.packageRoot.appendingPathComponent(".build/debug/richpush")
    }()

    /// The environment a `richpush` of the tests runs with: this process's, passwords hashed at
    /// bcrypt's lowest cost (`--bcrypt-cost 4`: a cost-12 hash takes 0.4 s of a debug build's CPU,
    /// and the suite hashed and checked a few hundred), then `extra`.
    static func environment(_ extra: [String: String] = [:]) -> [String: String] {
        ProcessInfo.processInfo.environment.merging(["RICHPUSH_BCRYPT_COST": "4"]) { _, new in new }.merging(extra) { _, new in new }
    }

    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    /// Runs `richpush args…` to completion, waiting on a thread of its own (not the cooperative pool).
    static func run(_ args: [String], cwd: URL? = nil, stdin: String? = nil, environment: [String: String] = [:]) async throws -> Result {
        try await onOwnThread { try runBlocking(args, cwd: cwd, stdin: stdin, environment: environment) }
    }

    /// Runs `richpush args…` to completion, blocking the calling thread.
    static func runBlocking(_ args: [String], cwd: URL? = nil, stdin: String? = nil, environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = args
        process.environment = CLI.environment(environment)
        if let cwd { process.currentDirectoryURL = cwd }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        // Read both pipes fully before waiting, so a chatty child cannot block on a full pipe.
        let group = DispatchGroup()
        nonisolated(unsafe) var errData = Data()
        group.enter()
        DispatchQueue.global().async {
            errData = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self))
    }
}

extension CLI {
    /// Starts `richpush serve --port <free port> args…` in `cwd` (its output discarded, its
    /// environment the tests' with `environment` added) and waits until /health answers; the
    /// caller kills the process (a `defer` with `SIGKILL` is fine).
    static func startServe(_ args: [String] = [], cwd: URL, environment: [String: String] = [:]) async throws -> (process: Process, port: Int) {
        let (server, port) = try await startListening({ ["serve", "--port", String($0)] + args }, cwd: cwd, log: nil,
                                                      environment: environment, within: 20)
        for _ in 0..<200 where server.isRunning {
            if let fd = try? connectTo(port: port, timeout: 2) {
                sendAll(fd, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
                let up = receiveAll(fd).contains("{\"status\":\"ok\"}")
                close(fd)
                if up { return (server, port) }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        kill(server.processIdentifier, SIGKILL)
        throw CLIError(message: "serve listened on port \(port) but /health did not answer ok in 20 seconds")
    }
}

/// Starts `richpush args(port)…` on a free port, its output appended to `log` (nil: discarded),
/// and waits until the process itself listens there. A free port can be taken by another test's
/// process before this one binds it: then this one exits at once, and another port is tried. The
/// caller kills the process.
func startListening(_ args: (Int) throws -> [String], cwd: URL, log: URL?, environment: [String: String] = [:],
                    within seconds: Int = 30) async throws -> (process: Process, port: Int) {
    var exited: [Int] = [], name = ""
    let output = log.map { "its log: \($0.path)" } ?? "its output was discarded"
    for _ in 0..<3 {
        let port = freePort()
        let arguments = try args(port)
        name = arguments.first ?? ""
        let process = try startProcess(arguments, cwd: cwd, log: log, environment: environment)
        for _ in 0..<(seconds * 10) where process.isRunning {
            if listens(pid: process.processIdentifier, port: port) { return (process, port) }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard !process.isRunning else {
            kill(process.processIdentifier, SIGKILL)
            throw CLIError(message: "\(name) did not listen on port \(port) in \(seconds) seconds (\(output))")
        }
        exited.append(port)
    }
    throw CLIError(message: "\(name) exited at once on ports \(exited) (taken?); \(output)")
}

/// `serve`'s flags for sending to an APNs sandbox on `port` that checks the key
/// `prepareNodeDirectory` made (team TEAM123456, key KEY1234567, topic com.example.richpush),
/// trusting the sandbox's certificate.
func sandboxAPNs(_ port: Int) -> [String] {
    ["--apns-key", "AuthKey.p8", "--apns-key-id", "KEY1234567", "--apns-team-id", "TEAM123456",
     "--apns-topic", "com.example.richpush", "--apns-env", "https://127.0.0.1:\(port)", "--push-ca", "cert.pem"]
}

/// Starts `fcm-sandbox` in `dir`, logging what it is sent to `fcm.jsonl`, with a new Google
/// service account for `project` in `dir/service-account.json` (for serve too) whose OAuth token
/// endpoint is the sandbox's own.
func startFCMSandbox(project: String, in dir: URL) async throws -> (process: Process, port: Int) {
    let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    return try await startListening({ port in
        let account: [String: Any] = [
            "type": "service_account", "project_id": project, "private_key_id": "k1", "private_key": key.pkcs8PEMRepresentation,
            "client_email": "sender@\(project).iam.gserviceaccount.com", "token_uri": "http://127.0.0.1:\(port)/token",
        ]
        try JSONSerialization.data(withJSONObject: account).write(to: dir.appendingPathComponent("service-account.json"))
        return ["fcm-sandbox", "--port", String(port), "--service-account", "service-account.json", "--log", "fcm.jsonl"]
    }, cwd: dir, log: dir.appendingPathComponent("fcm-sandbox.log"))
}

struct CLIError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

