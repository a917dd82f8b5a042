import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `scripts/tls-resume.py`: a TLS client (Python's `ssl`, so OpenSSL: nobody here wrote it) that
/// keeps its sessions from one command to the next; every command gets one line back.
struct TLSResumeClient: Sendable {
    private let process: Process
    private let input: FileHandle
    private let output: FileHandle

    /// Starts the script, trusting `ca` (the nodes' self-signed certificate, made for 127.0.0.1).
    init(ca: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Fixtures.packageRoot.appendingPathComponent("scripts/tls-resume.py").path, ca]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        // A traceback comes back as the answer.
        process.standardError = output
        try process.run()
        self.process = process
        self.input = input.fileHandleForWriting
        self.output = output.fileHandleForReading
    }

    /// `command`'s answer, e.g. `resumed TLSv1.3` for `resume NAME PORT`. Bounded: the script
    /// answers every line, and each of its connections gives up after 20 s.
    func send(_ command: String) async throws -> String {
        let (input, output) = (self.input, self.output)
        return try await onOwnThread {
            try input.write(contentsOf: Data((command + "\n").utf8))
            var answer = Data()
            while answer.last != UInt8(ascii: "\n") {
                let chunk = output.availableData
                guard !chunk.isEmpty else {
                    throw CLIError(message: "tls-resume.py ended, after: \(String(decoding: answer, as: UTF8.self))")
                }
                answer.append(chunk)
            }
            return String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Ends the script (its input closed, then a SIGTERM should it still run).
    func stop() {
        try? input.close()
        if process.isRunning { process.terminate() }
    }
}

@Suite("serve --tls-ticket-keys: a TLS session made on one node resumes on another (issue #51)")
struct TLSTicketKeysCLITests {
    /// A line of a keys file: the base64 of `bytes` random bytes (80 make a key).
    static func keyLine(bytes: Int = 80) -> String {
        Data((0..<bytes).map { _ in UInt8.random(in: .min ... .max) }).base64EncodedString()
    }

    /// Replaces `file` as an operator should: a new file written beside it, renamed over it.
    static func replace(_ file: URL, with lines: [String]) throws {
        try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
    }

    /// Waits, 15 s at most, until `log` holds `text` `count` times.
    static func waitForLog(_ log: URL, _ text: String, count: Int) async throws -> Bool {
        try await eventually(within: 15) {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").components(separatedBy: text).count - 1 >= count
        }
    }

    @Test("two nodes with the same keys file: a session made on one resumes on the other (TLS 1.3 and 1.2), not on a node without it; a rotated file opens the old key's tickets and issues new ones under the new key, and once the old key is dropped refuses its tickets; a bad file on a re-read keeps the keys in use")
    func resumesAcrossNodes() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let (old, new) = (Self.keyLine(), Self.keyLine())
        let fileA = dir.appendingPathComponent("a.keys")
        // Comments and blank lines are skipped.
        try Self.replace(fileA, with: ["# node A: the first key encrypts", "", old])
        try Self.replace(dir.appendingPathComponent("b.keys"), with: [old])
        // Every node has the same certificate (cert.pem, for 127.0.0.1); A looks at its file every second.
        let tls = ["--tls-cert", "cert.pem", "--tls-key", "cert.key", "--threads", "1"]
        let logA = dir.appendingPathComponent("a.log")
        let (a, portA) = try await startListening({ ["serve", "--port", String($0), "--data", "data-a", "--tls-ticket-keys", "a.keys",
                                                     "--tls-ticket-keys-check", "1s"] + tls }, cwd: dir, log: logA)
        defer { if a.isRunning { kill(a.processIdentifier, SIGKILL) } }
        let (b, portB) = try await startListening({ ["serve", "--port", String($0), "--data", "data-b", "--tls-ticket-keys", "b.keys"] + tls },
                                                  cwd: dir, log: dir.appendingPathComponent("b.log"))
        defer { if b.isRunning { kill(b.processIdentifier, SIGKILL) } }
        let (c, portC) = try await startListening({ ["serve", "--port", String($0), "--data", "data-c"] + tls },
                                                  cwd: dir, log: dir.appendingPathComponent("c.log"))
        defer { if c.isRunning { kill(c.processIdentifier, SIGKILL) } }
        let client = try TLSResumeClient(ca: dir.appendingPathComponent("cert.pem").path)
        defer { client.stop() }

        // Sessions made on A resume on B, which has A's key, and not on C, which has a key of its own.
        #expect(try await client.send("new t13 \(portA) 1.3") == "new TLSv1.3 ticket")
        #expect(try await client.send("new t12 \(portA) 1.2") == "new TLSv1.2 ticket")
        #expect(try await client.send("resume t13 \(portB)") == "resumed TLSv1.3")
        #expect(try await client.send("resume t12 \(portB)") == "resumed TLSv1.2")
        #expect(try await client.send("resume t13 \(portC)") == "full TLSv1.3")
        #expect(try await client.send("resume t12 \(portC)") == "full TLSv1.2")

        // Rotation on A: a new key first, the old one after it.
        try Self.replace(fileA, with: [new, old])
        #expect(try await Self.waitForLog(logA, "reloaded the TLS session ticket keys", count: 1))
        // The old key still opens the tickets it made...
        #expect(try await client.send("resume t13 \(portA)") == "resumed TLSv1.3")
        #expect(try await client.send("resume t12 \(portA)") == "resumed TLSv1.2")
        // ...and new tickets are under the new key, which B does not have.
        #expect(try await client.send("new n13 \(portA) 1.3") == "new TLSv1.3 ticket")
        #expect(try await client.send("new n12 \(portA) 1.2") == "new TLSv1.2 ticket")
        #expect(try await client.send("resume n13 \(portB)") == "full TLSv1.3")
        #expect(try await client.send("resume n12 \(portB)") == "full TLSv1.2")

        // The old key dropped: A makes a full handshake for its tickets, which B, keeping it, still resumes.
        try Self.replace(fileA, with: [new])
        #expect(try await Self.waitForLog(logA, "reloaded the TLS session ticket keys", count: 2))
        #expect(try await client.send("resume t13 \(portA)") == "full TLSv1.3")
        #expect(try await client.send("resume t12 \(portA)") == "full TLSv1.2")
        #expect(try await client.send("resume t13 \(portB)") == "resumed TLSv1.3")
        #expect(try await client.send("resume n13 \(portA)") == "resumed TLSv1.3")
        #expect(try await client.send("resume n12 \(portA)") == "resumed TLSv1.2")

        // A bad line on a re-read is logged, naming it, and the keys in use stay.
        try Self.replace(fileA, with: [new, Self.keyLine(bytes: 79)])
        #expect(try await Self.waitForLog(logA, "a.keys line 2: 79 bytes instead of 80", count: 1))
        #expect(try await client.send("resume n13 \(portA)") == "resumed TLSv1.3")
        let log = try String(contentsOf: logA, encoding: .utf8)
        #expect(log.contains("cannot reload the TLS session ticket keys: the keys in use stay"), "\(log)")
    }

    /// `richpush serve arguments…`, expected to stop at its checks: its status and its output
    /// (stdout and stderr); killed after 30 s should it start instead.
    static func refusedServe(_ arguments: [String], environment: [String] = []) async throws -> (status: Int32, output: String) {
        let command = environment + ["timeout", "30", CLI.executable.path, "serve"] + arguments
        return try await onOwnThread { try runCapturing("/usr/bin/env", command) }
    }

    @Test("a bad keys file at start is a usage error (exit 2) naming the file, the line and what is wrong; --tls-ticket-keys (or its variable) needs --tls-cert")
    func badFiles() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let bad = dir.appendingPathComponent("bad.keys")
        let tls = ["--port", String(freePort()), "--data", dir.appendingPathComponent("data").path,
                   "--tls-cert", dir.appendingPathComponent("cert.pem").path, "--tls-key", dir.appendingPathComponent("cert.key").path]
        // `openssl rand -base64 80` breaks its line at 64 characters.
        let wrapped = Self.keyLine()
        let cases: [(lines: [String], expected: String)] = [
            (["# rotated daily", Self.keyLine(), Self.keyLine(bytes: 79)], "\(bad.path) line 3: 79 bytes instead of 80"),
            ([Self.keyLine(), "", "not a key!"], "\(bad.path) line 3: not base64"),
            ([String(wrapped.prefix(64)), String(wrapped.dropFirst(64))], "\(bad.path) line 1: 48 bytes instead of 80, a key broken over two lines"),
            (["# no key yet", ""], "\(bad.path) holds no key"),
        ]
        for (lines, expected) in cases {
            try Self.replace(bad, with: lines)
            let run = try await Self.refusedServe(tls + ["--tls-ticket-keys", bad.path])
            #expect(run.status == 2 && run.output.contains("--tls-ticket-keys (env RICHPUSH_TLS_TICKET_KEYS): \(expected)")
                    && run.output.contains("openssl rand 80 | base64 -w0"), "\(run.output)")
        }
        let fromVariable = try await Self.refusedServe(tls, environment: ["RICHPUSH_TLS_TICKET_KEYS=\(bad.path)"])
        #expect(fromVariable.status == 2 && fromVariable.output.contains("\(bad.path) holds no key"), "\(fromVariable.output)")
        let missing = try await Self.refusedServe(tls + ["--tls-ticket-keys", dir.appendingPathComponent("missing.keys").path])
        #expect(missing.status == 2 && missing.output.contains("--tls-ticket-keys: cannot read \(dir.appendingPathComponent("missing.keys").path)"), "\(missing.output)")
        try Self.replace(bad, with: [Self.keyLine()])
        let alone = try await Self.refusedServe(["--port", String(freePort()), "--data", dir.appendingPathComponent("data").path, "--tls-ticket-keys", bad.path])
        #expect(alone.status == 2 && alone.output.contains("--tls-ticket-keys goes with --tls-cert and --tls-key"), "\(alone.output)")
    }
}
