import Foundation
import RichPushCore
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("richpush --version and healthcheck (SPEC §14)")
struct OperationsCLITests {
    @Test("--version prints the version and exits 0")
    func version() async throws {
        let result = try await CLI.run(["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == RichPushBuild.version)
    }

    @Test("healthcheck: 0 against a running serve, 1 with the reason when nothing listens or /health is not 200, 2 on a bad URL")
    func healthcheck() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port) = try await CLI.startServe(cwd: dir)
        defer { kill(server.processIdentifier, SIGKILL) }

        let healthy = try await CLI.run(["healthcheck", "--url", "http://127.0.0.1:\(port)/health"])
        #expect(healthy.status == 0, "\(healthy.stderr)")
        // RICHPUSH_PORT names the port when no --url is given, as serve reads it.
        let byEnvironment = try await CLI.run(["healthcheck"], environment: ["RICHPUSH_PORT": String(port)])
        #expect(byEnvironment.status == 0, "\(byEnvironment.stderr)")

        let notFound = try await CLI.run(["healthcheck", "--url", "http://127.0.0.1:\(port)/no-such-page"])
        #expect(notFound.status == 1)
        #expect(notFound.stderr.contains("answered 404"), "\(notFound.stderr)")

        let closed = freePort()
        let refused = try await CLI.run(["healthcheck", "--url", "http://127.0.0.1:\(closed)/health", "--timeout", "2"])
        #expect(refused.status == 1)
        #expect(refused.stderr.hasPrefix("unhealthy: http://127.0.0.1:\(closed)/health"), "\(refused.stderr)")

        let bad = try await CLI.run(["healthcheck", "--url", "ftp://example"])
        #expect(bad.status == 2, "\(bad.stderr)")
    }
}

@Suite("--database (SPEC §13)")
struct DatabaseFlagTests {
    @Test("sqlite:PATH puts the index where it says, for every command; an unreachable PostgreSQL fails saying so, other schemes are usage errors; no password is echoed")
    func sqlitePath() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let index = dir.appendingPathComponent("elsewhere/index.sqlite").path
        try FileManager.default.createDirectory(atPath: dir.appendingPathComponent("elsewhere").path, withIntermediateDirectories: true)
        let jpeg = Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg").path
        let added = try await CLI.run(["media", "add", "--data", data, "--database", "sqlite:\(index)", jpeg])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(FileManager.default.fileExists(atPath: index))
        #expect(!FileManager.default.fileExists(atPath: "\(data)/richpush.sqlite"))
        // The same index through the environment; the default index knows nothing of it.
        let listed = try await CLI.run(["media", "list", "--data", data], environment: ["RICHPUSH_DATABASE": "sqlite:\(index)"])
        #expect(listed.lines.dropFirst().count == 1, "\(listed.stdout)") // after the header row
        let empty = try await CLI.run(["media", "list", "--data", data])
        #expect(empty.lines.isEmpty, "\(empty.stdout)")

        let postgres = try await CLI.run(["media", "list", "--data", data, "--database", "postgres://u:p@127.0.0.1:1/db"])
        #expect(postgres.status == 1 && postgres.stderr.contains("cannot connect to PostgreSQL at 127.0.0.1:1"), "\(postgres.stderr)")
        let hostless = try await CLI.run(["media", "list", "--data", data, "--database", "postgres:///db"])
        #expect(hostless.status == 2 && hostless.stderr.contains("postgres://USER:PASSWORD@HOST"), "\(hostless.stderr)")
        let badPool = try await CLI.run(["media", "list", "--data", data, "--database", "postgres://u:p@127.0.0.1:1/db?pool=0"])
        #expect(badPool.status == 2 && badPool.stderr.contains("pool must be 1 to 64"), "\(badPool.stderr)")
        let badMode = try await CLI.run(["media", "list", "--data", data, "--database", "postgres://u:p@127.0.0.1:1/db?sslmode=prefer"])
        #expect(badMode.status == 2 && badMode.stderr.contains("sslmode must be disable, require or verify-full"), "\(badMode.stderr)")
        let other = try await CLI.run(["media", "list", "--data", data, "--database", "mysql://admin:hunter2@db/x"])
        #expect(other.status == 2 && other.stderr.contains("sqlite:PATH or postgres://"), "\(other.stderr)")
        #expect(!other.stderr.contains("hunter2") && !postgres.stderr.contains("u:p@"), "a password was echoed")
    }
}
