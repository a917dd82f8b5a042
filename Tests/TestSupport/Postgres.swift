import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server (Debian's `postgresql`) started by the tests, once per test process: a
/// cluster made with `initdb` in a temp directory, listening on a free loopback port, trusting
/// the `richpush` role. Each test asks for a database of its own (`database()`), so tests run
/// side by side without seeing each other's rows. It stops when the test process ends (a shell
/// watchdog, as for SeaweedFS).
///
/// For speed the cluster runs with `fsync=off`: these tests check what PostgreSQL is asked to
/// do, not that the disk keeps it (SQLite's durability tests cover RichPush's own fsyncs).
///
/// When PostgreSQL is not installed the tests that need it are skipped, visibly; `.ci/run`
/// installs it and sets `RICHPUSH_REQUIRE_ENGINES=1`, which turns a missing engine into a failure.
public struct Postgres: Sendable {
    public let port: Int
    private let bin: String

    /// Whether the engine can run here (or must: see `RICHPUSH_REQUIRE_ENGINES`).
    public static var available: Bool {
        ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] == "1" || binDirectory() != nil
    }

    private static let starter = StartedOnce { try Postgres.start() }
    private static let counter = Counter()

    /// The running server, started on first use (once per test process).
    public static func running() async throws -> Postgres {
        try await starter.value()
    }

    /// A new, empty database on the running server; its `--database` URL. New connections get
    /// 15 s, not a server's 2 s: the suite runs dozens of stores at once on two cores.
    public static func database() async throws -> String {
        let server = try await running()
        let name = "t\(getpid())_\(counter.next())"
        let made = try await onOwnThread { try server.psql("CREATE DATABASE \(name)") }
        guard made.status == 0 else { throw FixtureError("cannot create database \(name): \(made.output)") }
        return "postgres://richpush@127.0.0.1:\(server.port)/\(name)?connect_timeout=15"
    }

    /// Runs `psql` against database `name` (or `postgres`), on the calling thread.
    public func psql(_ sql: String, database name: String = "postgres") throws -> (status: Int32, output: String) {
        try run(["\(bin)/psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", "\(port)", "-U", "richpush", "-d", name, "-c", sql])
    }

    static func binDirectory() -> String? {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let bin = "/usr/lib/postgresql/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: "\(bin)/initdb") { return bin }
        }
        return nil
    }

    private static func start() throws -> Postgres {
        guard let bin = binDirectory() else {
            throw FixtureError("PostgreSQL is not installed: apt-get install postgresql")
        }
        let dir = try Fixtures.engineDirectory()
        let port = freePorts(1)[0]
        let fixture = Postgres(port: port, bin: bin)
        // initdb and postgres refuse to run as root: as root, run them as Debian's `postgres` user.
        let asServer = getuid() == 0 ? "runuser -u postgres -- " : ""
        if getuid() == 0 { _ = try fixture.run(["/bin/chown", "postgres", dir.path]) }
        let initdb = try fixture.run(["/bin/sh", "-c", "\(asServer)'\(bin)/initdb' -D '\(dir.path)/data' -U richpush --auth=trust -E UTF8 --locale=C --no-sync"])
        guard initdb.status == 0 else { throw FixtureError("initdb failed: \(initdb.output.suffix(2000))") }
        let server = [
            "'\(bin)/postgres'", "-D", "'\(dir.path)/data'", "-p", "\(port)", "-k", "'\(dir.path)'", "-c", "listen_addresses=127.0.0.1",
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=400",
            "-c", "shared_buffers=64MB", "-c", "max_wal_size=128MB", "-c", "min_wal_size=32MB",
        ].joined(separator: " ")
        try startWatched("\(asServer)\(server) > '\(dir.path)/postgres.log' 2>&1",
                         stop: Self.stopScript(dir.path))
        let deadline = Date().addingTimeInterval(60)
        var last = ""
        while Date() < deadline {
            let ready = try fixture.psql("SELECT 1")
            if ready.status == 0 { return fixture }
            last = ready.output
            Thread.sleep(forTimeInterval: 0.2)
        }
        let log = (try? String(contentsOfFile: "\(dir.path)/postgres.log", encoding: .utf8)) ?? ""
        throw FixtureError("PostgreSQL did not come up in 60 s: \(last.suffix(400))\n\(log.suffix(2000))")
    }

    /// The watchdog's stop: a fast shutdown of the postmaster (its pid from `postmaster.pid`:
    /// `$p` is `runuser`'s when the tests run as root), five seconds for it, SIGKILL, then the
    /// directory. Not `pkill -f` on the data path: that matched the watchdog's own command line
    /// and killed it before its `rm`, which left a cluster of about a gigabyte in /tmp per run.
    private static func stopScript(_ dir: String) -> String {
        """
        m=$(head -n 1 '\(dir)/data/postmaster.pid' 2>/dev/null)
        kill -INT $m $p 2>/dev/null
        i=0; while [ -n "$m" ] && kill -0 "$m" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
        if [ -n "$m" ] && kill -0 "$m" 2>/dev/null; then kill -9 "$m"; fi
        kill -9 $p 2>/dev/null
        rm -rf '\(dir)'
        """
    }

    private func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try runCapturing(arguments[0], Array(arguments.dropFirst()))
    }

    private final class Counter: @unchecked Sendable {
        private var value = 0
        private let lock = NSLock()
        func next() -> Int { lock.withLock { value += 1; return value } }
    }
}
