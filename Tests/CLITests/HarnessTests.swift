import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The harness starts each server on a port of its own")
struct HarnessTests {
    @Test("listens(pid:port:) is true for the process holding the listening socket only, and false for a port bound but not listening")
    func listensIsTheOwner() throws {
        let (held, port) = boundLoopbackSocket(listening: true)
        defer { close(held) }
        #expect(listens(pid: getpid(), port: port))
        #expect(!listens(pid: getppid(), port: port))
        let (bound, quiet) = boundLoopbackSocket(listening: false)
        defer { close(bound) }
        #expect(!listens(pid: getpid(), port: quiet))
    }

    @Test("a port another process took between the pick and the bind: the server exits, another port is tried, and the one returned is its own")
    func takenPortIsRetried() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Between the pick and the start, this test process takes the first port offered and
        // listens on it, as another test's server would: a port that answers is not enough.
        var offered: [Int] = [], held: Int32 = -1
        defer { if held >= 0 { close(held) } }
        let (server, port) = try await startListening({ port in
            offered.append(port)
            if offered.count == 1 { held = boundLoopbackSocket(listening: true, port: port).fd }
            return ["serve", "--port", String(port)]
        }, cwd: dir, log: dir.appendingPathComponent("serve.log"))
        defer { kill(server.processIdentifier, SIGKILL) }
        let taken = try #require(offered.first)
        #expect(offered.count == 2 && port == offered.last && port != taken, "offered \(offered), got \(port)")
        #expect(listens(pid: getpid(), port: taken), "the first port was not held: the test tests nothing")
        #expect(listens(pid: server.processIdentifier, port: port) && !listens(pid: server.processIdentifier, port: taken))
        let health = try await http(port, "GET", "/health", auth: "")
        #expect(health.contains(#"{"status":"ok"}"#), "\(health)")
    }
}
