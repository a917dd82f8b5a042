import Foundation
import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Configuration a careful operator can trust")
struct ConfigurationCLITests {
    @Test("a malformed environment value is a usage error naming the variable, not a silent default")
    func malformedEnvironment() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let cases: [(String, String, String)] = [
            ("RICHPUSH_PORT", "80x", "is not a whole number"),
            ("RICHPUSH_DEMO_AUTH", "ture", "is not a boolean"),
            ("RICHPUSH_SESSION_TTL", "soon", "is not a duration"),
            ("RICHPUSH_MAX_BYTES", "10MB", "is not a whole number"),
        ]
        for (name, value, words) in cases {
            let result = try await CLI.run(["serve", "--data", dir.appendingPathComponent("data").path], environment: [name: value])
            #expect(result.status == 2, "\(name)=\(value): \(result.stderr)")
            #expect(result.stderr.contains("\(name)='\(value)' \(words)"), "\(result.stderr)")
        }
        // Well-formed values still work (a media command reads the limits too).
        let ok = try await CLI.run(["media", "list", "--data", dir.appendingPathComponent("data").path], environment: ["RICHPUSH_MAX_BYTES": "1000", "RICHPUSH_DEMO_AUTH": "off"])
        #expect(ok.status == 0, "\(ok.stderr)")
    }

    @Test("a secret in the environment never appears in --help")
    func secretsNotInHelp() async throws {
        let secret = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Full;SharedAccessKey=TOPSECRETVALUE="
        let help = try await CLI.run(["serve", "--help"], environment: ["RICHPUSH_ANH_CONNECTION_STRING": secret, "RICHPUSH_PAYLOAD_KEY": "ANOTHERSECRET-0123456789abcdef0123"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--anh-connection-string"))
        #expect(!help.stdout.contains("TOPSECRETVALUE") && !help.stderr.contains("TOPSECRETVALUE"))
        #expect(!help.stdout.contains("ANOTHERSECRET"))
    }

    @Test("a secret can come from a file (NAME_FILE, --…-file), as Docker secrets give it; an unreadable one is a usage error naming where it was asked for, never the value")
    func secretFiles() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let index = dir.appendingPathComponent("index.sqlite").path
        let databaseFile = dir.appendingPathComponent("database.secret")
        try "sqlite:\(index)\n".write(to: databaseFile, atomically: true, encoding: .utf8)
        let jpeg = Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg").path
        // The database URL from a file, by flag and by variable.
        #expect(try await CLI.run(["media", "add", "--data", data, "--database-file", databaseFile.path, jpeg]).status == 0)
        #expect(FileManager.default.fileExists(atPath: index))
        let listed = try await CLI.run(["media", "list", "--data", data], environment: ["RICHPUSH_DATABASE_FILE": databaseFile.path])
        #expect(listed.lines.dropFirst().count == 1, "\(listed.stderr)") // after the header row
        // The payload key from a file: the store makes no key of its own.
        let keyFile = dir.appendingPathComponent("payload.secret")
        try String(repeating: "k", count: 40).write(to: keyFile, atomically: true, encoding: .utf8)
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin", "--data", data], stdin: "pw\n").status == 0)
        let sent = try await CLI.run(["send", "--all", "--image", jpeg, "--data", data], environment: ["RICHPUSH_PAYLOAD_KEY_FILE": keyFile.path])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(data)/payload.key"))
        // Unreadable or empty files.
        let empty = dir.appendingPathComponent("empty.secret")
        #expect(FileManager.default.createFile(atPath: empty.path, contents: Data()))
        for (arguments, environment, named) in [
            (["media", "list", "--data", data, "--database-file", "/nonexistent/secret"], [String: String](), "--database-file: cannot read the file /nonexistent/secret"),
            (["media", "list", "--data", data], ["RICHPUSH_DATABASE_FILE": empty.path], "RICHPUSH_DATABASE_FILE: the file \(empty.path) is empty"),
            (["serve", "--data", data, "--anh-connection-string-file", "/nonexistent/anh"], [:], "--anh-connection-string-file: cannot read"),
            (["serve", "--data", data], ["RICHPUSH_ANH_CONNECTION_STRING_FILE": "/nonexistent/anh"], "RICHPUSH_ANH_CONNECTION_STRING_FILE: cannot read"),
            (["media", "list", "--data", data, "--blobs", "s3://bucket?endpoint=http://127.0.0.1:1"],
             ["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY_FILE": "/nonexistent/aws"], "AWS_SECRET_ACCESS_KEY_FILE: cannot read"),
        ] {
            let result = try await CLI.run(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments) \(environment): \(result.stderr)")
            #expect(result.stderr.contains(named), "\(arguments): \(result.stderr)")
        }
        // A secret read from a file is no more printed than one from the environment.
        let anhFile = dir.appendingPathComponent("anh.secret")
        try "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Full;SharedAccessKey=FILESECRETVALUE=".write(to: anhFile, atomically: true, encoding: .utf8)
        let help = try await CLI.run(["serve", "--help"], environment: ["RICHPUSH_ANH_CONNECTION_STRING_FILE": anhFile.path, "RICHPUSH_DATABASE": "postgres://u:DBPASSWORD@h/d"])
        #expect(help.status == 0 && help.stdout.contains("--anh-connection-string-file") && help.stdout.contains("--database-file"))
        #expect(!help.stdout.contains("FILESECRETVALUE") && !help.stdout.contains("DBPASSWORD"))
    }

    @Test("--config FILE (JSON, env RICHPUSH_CONFIG) carries any flag that has a variable; flags win over the environment, which wins over the file; bad files and values are usage errors")
    func configFile() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let index = dir.appendingPathComponent("elsewhere.sqlite").path
        let jpeg = Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg").path
        let config = dir.appendingPathComponent("richpush.json")
        try #"{"data": "\#(data)", "database": "sqlite:\#(index)", "max-bytes": 100000, "log-format": "json", "log-level": "info", "typo-key": 1}"#
            .write(to: config, atomically: true, encoding: .utf8)
        let added = try await CLI.run(["media", "add", "--config", config.path, jpeg])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(FileManager.default.fileExists(atPath: index) && FileManager.default.fileExists(atPath: "\(data)/blobs"))
        #expect(added.stderr.contains(#"warning: --config: no flag of this command reads "log-format", "log-level", "typo-key""#), "\(added.stderr)")
        // A key one letter off a flag of the command is named with the flag it was meant to be (issue #49).
        let typo = dir.appendingPathComponent("typo.json")
        try #"{"data": "\#(dir.appendingPathComponent("typo-data").path)", "max-byte": 100000}"#.write(to: typo, atomically: true, encoding: .utf8)
        let misspelt = try await CLI.run(["media", "add", "--config", typo.path, jpeg])
        #expect(misspelt.stderr.contains(#"no flag of this command reads "max-byte"; did you mean "max-bytes" for "max-byte"?"#), "\(misspelt.stderr)")
        let listed = try await CLI.run(["media", "list"], environment: ["RICHPUSH_CONFIG": config.path])
        #expect(listed.lines.dropFirst().count == 1, "\(listed.stderr)") // after the header row
        // A flag wins over the file, and so does the environment: the default database is empty.
        #expect(try await CLI.run(["media", "list", "--config", config.path, "--database", "sqlite:\(data)/richpush.sqlite"]).lines.isEmpty)
        #expect(try await CLI.run(["media", "list", "--config", config.path], environment: ["RICHPUSH_DATABASE": "sqlite:\(data)/other.sqlite"]).lines.isEmpty)
        // The file's limit applies: a 5,770-byte JPEG passes 100,000; a tighter file refuses it.
        let tight = dir.appendingPathComponent("tight.json")
        try #"{"data": "\#(data)", "max-bytes": 1000}"#.write(to: tight, atomically: true, encoding: .utf8)
        let refused = try await CLI.run(["media", "add", "--config=\(tight.path)", jpeg])
        #expect(refused.status == 1 && refused.stderr.contains("too_large"), "\(refused.stderr)")
        // serve takes the log format from the file.
        let served = dir.appendingPathComponent("serve.log")
        let (server, _) = try await startListening({ ["serve", "--config", config.path, "--port", String($0)] }, cwd: dir, log: served)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        kill(server.processIdentifier, SIGTERM)
        await waitForExit(server)
        let lines = ((try? String(contentsOf: served, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(!lines.isEmpty && lines.allSatisfy { $0.hasPrefix("{\"time\":") }, "\(lines.prefix(3))")
        // What is wrong is said, with exit 2.
        let bad = dir.appendingPathComponent("bad.json")
        try #"{"data": "\#(data)", "max-bytes": "ten"}"#.write(to: bad, atomically: true, encoding: .utf8)
        let notJSON = dir.appendingPathComponent("not.json")
        try "port = 8080".write(to: notJSON, atomically: true, encoding: .utf8)
        for (arguments, words) in [
            (["media", "add", "--config", bad.path, jpeg], "\"max-bytes\" in \(bad.path)='ten' is not a whole number"),
            (["media", "list", "--config", notJSON.path], "not a JSON object"),
            (["media", "list", "--config", "/nonexistent.json"], "cannot read /nonexistent.json"),
        ] {
            let result = try await CLI.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(words), "\(arguments): \(result.stderr)")
        }
    }

    @Test("--bcrypt-cost (env RICHPUSH_BCRYPT_COST) is the cost users add, passwd and import hash at, 12 unless given; a hash of any cost verifies; outside 4–31 is a usage error")
    func bcryptCost() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        #expect(try await CLI.run(["users", "add", "five", "--password-stdin", "--bcrypt-cost", "5", "--data", data], stdin: "pw5\n").status == 0)
        #expect(try await CLI.run(["users", "add", "six", "--password-stdin", "--data", data], stdin: "pw6\n",
                                  environment: ["RICHPUSH_BCRYPT_COST": "6"]).status == 0)
        #expect(try await CLI.run(["users", "passwd", "six", "--password-stdin", "--bcrypt-cost", "7", "--data", data], stdin: "pw7\n").status == 0)
        #expect(try await CLI.run(["users", "import", "-", "--bcrypt-cost", "8", "--data", data], stdin: "{\"name\": \"eight\", \"password\": \"pw8\"}\n").status == 0)
        for (words, value) in [("is not from 4 to 31", "3"), ("is not from 4 to 31", "32"), ("is not a whole number", "x")] {
            let refused = try await CLI.run(["users", "add", "no", "--password-stdin", "--data", data], stdin: "pw\n",
                                            environment: ["RICHPUSH_BCRYPT_COST": value])
            #expect(refused.status == 2 && refused.stderr.contains(words), "\(value): \(refused.stderr)")
        }
        let store = try await DataStore.open(path: data)
        defer { store.close() }
        for (name, password, cost) in [("five", "pw5", "05"), ("six", "pw7", "07"), ("eight", "pw8", "08")] {
            let hash = try #require(try await store.users.credentials(of: name)).passwordHash
            #expect(hash.dropFirst(3).hasPrefix("$\(cost)$"), "\(name): \(hash)")
            #expect(UserStore.verify(password: password, hash: hash) && !UserStore.verify(password: password + "x", hash: hash))
        }
        #expect(try await store.users.credentials(of: "no") == nil)
        // The default, as `serve` and every command take it without the flag or the variable.
        _ = try await store.users.add(name: "twelve", password: "pw12")
        #expect(try #require(try await store.users.credentials(of: "twelve")).passwordHash.dropFirst(3).hasPrefix("$12$"))
    }

    @Test("a new data directory, its database and keys are readable by their owner alone")
    func permissions() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin", "--data", data], stdin: "pw\n").status == 0)
        #expect(try await CLI.run(["keys", "rotate", "--data", data]).status == 0)
        func mode(_ path: String) throws -> Int { try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1 }
        #expect(try mode(data) == 0o700)
        #expect(try mode("\(data)/richpush.sqlite") == 0o600)
        #expect(try mode("\(data)/payload.key") == 0o600)
        if FileManager.default.fileExists(atPath: "\(data)/richpush.sqlite-wal") { #expect(try mode("\(data)/richpush.sqlite-wal") == 0o600) }
    }

    @Test("serve --max-connections: past the limit a new connection waits until one closes")
    func connectionLimit() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port) = try await CLI.startServe(["--max-connections", "2", "--data", dir.appendingPathComponent("data").path], cwd: dir)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        let result = try await onOwnThread { () throws -> (waited: String, after: String) in
            func health(timeout: Int) -> String {
                guard let fd = try? connectTo(port: port, timeout: timeout) else { return "" }
                defer { close(fd) }
                sendAll(fd, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
                return receiveAll(fd)
            }
            let held = try [connectTo(port: port), connectTo(port: port)]
            usleep(300_000)
            let waited = health(timeout: 1) // the third: not accepted while two are open
            for fd in held { close(fd) }
            var after = ""
            for _ in 0..<50 where !after.hasPrefix("HTTP/1.1 200") { after = health(timeout: 2); usleep(100_000) }
            return (waited, after)
        }
        #expect(!result.waited.hasPrefix("HTTP/1.1 200"), "\(result.waited.prefix(40))")
        #expect(result.after.hasPrefix("HTTP/1.1 200"))
    }
}

#if canImport(Glibc)
import Glibc
#endif
