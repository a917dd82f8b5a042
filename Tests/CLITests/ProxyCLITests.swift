import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("serve behind a reverse proxy: --trusted-proxy and --metrics-port")
struct ProxyCLITests {
    @Test("a malformed --trusted-proxy (flag, variable or a comma-separated list) or --metrics-port is a usage error naming it")
    func malformed() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let flag = try await CLI.run(["serve", "--data", data, "--trusted-proxy", "10.0.0.0/8", "--trusted-proxy", "10.0.0.0/33"])
        #expect(flag.status == 2 && flag.stderr.contains("--trusted-proxy") && flag.stderr.contains("'10.0.0.0/33'"), "\(flag.stderr)")
        let variable = try await CLI.run(["serve", "--data", data], environment: ["RICHPUSH_TRUSTED_PROXY": "172.28.0.10, nginx"])
        #expect(variable.status == 2 && variable.stderr.contains("RICHPUSH_TRUSTED_PROXY") && variable.stderr.contains("'nginx'"),
                "\(variable.stderr)")
        let port = try await CLI.run(["serve", "--data", data, "--metrics-port", "70000"])
        #expect(port.status == 2 && port.stderr.contains("--metrics-port"), "\(port.stderr)")
        let portVariable = try await CLI.run(["serve", "--data", data], environment: ["RICHPUSH_METRICS_PORT": "91x"])
        #expect(portVariable.status == 2 && portVariable.stderr.contains("RICHPUSH_METRICS_PORT='91x'"), "\(portVariable.stderr)")
        let help = try await CLI.run(["serve", "--help"])
        #expect(help.stdout.contains("--trusted-proxy") && help.stdout.contains("--metrics-port"))
    }

    @Test("serve --metrics-port N: GET /metrics is a 404 on the main port and Prometheus text on port N")
    func metricsPort() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // A free port can be taken by another test (or an outgoing connection) before serve binds
        // it: serve then says so and exits (ServeCLITests.portTaken), and another one is tried.
        var started: (server: Process, port: Int, metricsPort: Int)?
        var metrics: (head: String, body: [UInt8]) = ("", [])
        for _ in 0..<3 where started == nil {
            let metricsPort = freePort()
            // Taken before the first /health answers, serve exits at once, and startServe gives up.
            guard let (server, port) = try? await CLI.startServe(["--metrics-port", String(metricsPort), "--trusted-proxy", "127.0.0.0/8,::1"],
                                                                 cwd: dir) else { continue }
            for _ in 0..<50 where !metrics.head.hasPrefix("HTTP/1.1 200") && server.isRunning {
                metrics = (try? await onOwnThread { () -> (head: String, body: [UInt8]) in
                    let fd = try connectTo(port: metricsPort, timeout: 5)
                    defer { close(fd) }
                    return exchange(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                }) ?? ("", [])
                if !metrics.head.hasPrefix("HTTP/1.1 200") { try? await Task.sleep(for: .milliseconds(100)) }
            }
            if server.isRunning { started = (server, port, metricsPort) } else { metrics = ("", []) }
        }
        let (server, port) = try #require(started.map { ($0.server, $0.port) }, "serve exited three times: its ports were taken")
        defer { kill(server.processIdentifier, SIGKILL) }

        let main = try await onOwnThread { () -> (head: String, body: [UInt8]) in
            let fd = try connectTo(port: port)
            defer { close(fd) }
            return exchange(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        }
        #expect(main.head.hasPrefix("HTTP/1.1 404"), "\(main.head)")
        #expect(metrics.head.hasPrefix("HTTP/1.1 200"), "\(metrics.head)")
        #expect(metrics.head.lowercased().contains("content-type: text/plain; version=0.0.4"), "\(metrics.head)")
        let text = String(decoding: metrics.body, as: UTF8.self)
        #expect(text.contains("# HELP richpush_build_info") && text.contains("http_server_requests_total{"), "\(text.prefix(300))")
    }
}
