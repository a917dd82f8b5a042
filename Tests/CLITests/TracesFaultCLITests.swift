import Foundation
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// docs/operations.md#traces, a fault: the collector is down (nothing listens) or stalled (it
/// accepts connections and never answers). Tracing must cost the users nothing then: requests
/// answer, a campaign is sent whole, and `serve` stops when asked, its spans dropped.
@Suite("Traces when the collector is down or stalled (SPEC §29)")
struct TracesFaultCLITests {
    /// A loopback port that accepts connections into its backlog and never reads: a stalled
    /// collector. Closed by the caller.
    static func stalledListener() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard fd >= 0, bound == 0, listen(fd, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            if fd >= 0 { close(fd) }
            throw CLIError(message: "cannot listen: \(reason)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test("a collector nobody answers for (down) or that never answers (stalled): health and the API answer at once, a 300-device campaign is sent whole, and serve stops within 15 s of SIGTERM", arguments: ["down", "stalled"])
    func collectorFault(_ fault: String) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let data = dir.appendingPathComponent("data")
        let setup = try await DataStore.open(path: data.path)
        let names = (0..<300).map { String(format: "c%05d", $0) }
        try await seedUsersWithDevices(setup, names)
        setup.close()

        var stalled: Int32 = -1
        let collectorPort: Int
        if fault == "stalled" {
            (stalled, collectorPort) = try Self.stalledListener()
        } else {
            collectorPort = freePort()  // nothing listens: every export is refused
        }
        defer { if stalled >= 0 { close(stalled) } }
        let (sandbox, apnsPort) = try await startListening({ ["apns-sandbox", "--port", String($0), "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                                                              "--public-key", "AuthKey.p8", "--tls-cert", "cert.pem", "--tls-key", "cert.key",
                                                              "--token-update-interval", "0"] },
                                                           cwd: dir, log: dir.appendingPathComponent("sandbox.log"))
        defer { if sandbox.isRunning { kill(sandbox.processIdentifier, SIGKILL) } }
        let (server, port) = try await startListening({ ["serve", "--port", String($0), "--data", data.path,
                                                         "--otel-endpoint", "http://127.0.0.1:\(collectorPort)"] + sandboxAPNs(apnsPort) },
                                                      cwd: dir, log: dir.appendingPathComponent("serve.log"),
                                                      environment: ["OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64"])
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }

        let root = Data("root:rootpw".utf8).base64EncodedString()
        let made = try await http(port, "POST", "/api/admin/campaigns", auth: root, body: #"{"audience":{"all":true},"title":"Untraced","message":"m"}"#)
        #expect(made.hasPrefix("HTTP/1.1 202"), "\(made.prefix(300))")
        let id = try #require(made.range(of: #""id":\d+"#, options: .regularExpression).map { Int(made[$0].dropFirst(5))! })
        // While the exporter fails, every request is answered promptly (each span is a request's too).
        for _ in 0..<20 {
            let started = ContinuousClock.now
            let health = try await http(port, "GET", "/health", auth: root)
            #expect(health.contains(#"{"status":"ok"}"#))
            #expect(ContinuousClock.now - started < .seconds(5), "GET /health took \(ContinuousClock.now - started) with the collector \(fault)")
        }
        #expect(try await eventually(within: 90) {
            try await http(port, "GET", "/api/admin/campaigns/\(id)", auth: root).contains(#""status":"done""#)
        }, "the campaign did not finish with the collector \(fault)")
        let progress = try await http(port, "GET", "/api/admin/campaigns/\(id)", auth: root)
        #expect(progress.contains(#""sent":300"#) && progress.contains(#""failed":0"#), "\(progress.suffix(400))")

        // A graceful stop gives the exporter its moment, not the collector's.
        let stopping = ContinuousClock.now
        server.terminate()
        let stopped = try await eventually(within: 15) { !server.isRunning }
        #expect(stopped, "serve did not stop within 15 s of SIGTERM with the collector \(fault)")
        guard stopped else { return }  // the deferred SIGKILL ends it
        await waitForExit(server)
        #expect(server.terminationStatus == 0, "serve exited \(server.terminationStatus) after \(ContinuousClock.now - stopping)")
    }
}
