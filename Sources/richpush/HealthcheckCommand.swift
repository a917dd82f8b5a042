import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// `richpush healthcheck [--url URL] [--ready]` (docs/operations.md, §17): exit 0 when `/health` (or with
/// `--ready`, `/ready`: the database and the blobs answer) is 200, 1 otherwise with what went
/// wrong, so a container's health check needs no curl.
struct HealthcheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Exit 0 when the server's /health (with --ready, /ready) answers 200, else 1 saying why (for container health checks).")

    @Option(help: "The health URL (default: http://127.0.0.1:<RICHPUSH_PORT or 8080>/health, or /ready with --ready).")
    var url: String?
    @Flag(help: "Check readiness (/ready: the database and the blobs answer) instead of liveness (/health).")
    var ready = false
    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    func validate() throws {
        guard timeout > 0, timeout <= 300 else { throw ValidationError("--timeout must be between 0 and 300 seconds") }
        if let url {
            guard let parsed = URL(string: url), parsed.scheme == "http" || parsed.scheme == "https", parsed.host != nil else {
                throw ValidationError("--url must be an http(s) URL, got '\(url)'")
            }
        }
    }

    func run() async throws {
        let target = url ?? "http://127.0.0.1:\(Environment.int("RICHPUSH_PORT") ?? 8080)/\(ready ? "ready" : "health")"
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .milliseconds(Int64(timeout * 1000)), read: .milliseconds(Int64(timeout * 1000)))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            let response = try await client.execute(HTTPClientRequest(url: target), timeout: .milliseconds(Int64(timeout * 1000)))
            let body = try await response.body.collect(upTo: 64 * 1024)
            guard response.status.code == 200 else {
                Terminal.error("unhealthy: \(target) answered \(response.status.code) \(String(buffer: body).prefix(200))")
                try await client.shutdown()
                throw ExitCode(1)
            }
            try await client.shutdown()
            print("ok: \(target) answered 200")
        } catch let exit as ExitCode {
            throw exit
        } catch {
            Terminal.error("unhealthy: \(target): \(Self.words(for: error, target: target, timeout: timeout))")
            try? await client.shutdown()
            throw ExitCode(1)
        }
    }

    /// A failed request in words, with what to check (not NIO's errno dump).
    static func words(for error: any Error, target: String, timeout: Double) -> String {
        let url = URL(string: target)
        let origin = url.map { "\($0.scheme ?? "http")://\($0.host ?? "")\($0.port.map { ":\($0)" } ?? "")" } ?? target
        let seconds = timeout == timeout.rounded() ? String(Int(timeout)) : String(timeout)
        let code = (error as? IOError)?.errnoCode
        let text = String(describing: error)
        if code == ECONNREFUSED || text.contains("Connection refused") {
            return "nothing is listening at \(origin) (connection refused): is serve running?"
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout:
                return "no answer from \(origin) within \(seconds) s (the connection timed out): is the address right, and is serve running there?"
            case .readTimeout, .deadlineExceeded:
                return "\(origin) took the connection but did not answer within \(seconds) s: the server is overloaded or stuck"
            case .remoteConnectionClosed:
                return "\(origin) closed the connection without answering: "
                    + (url?.scheme == "http" ? "does serve run with --tls-cert (then the URL is https://)?" : "is it the server's address?")
            default: break
            }
        }
        if code == EHOSTUNREACH || code == ENETUNREACH { return "\(origin) cannot be reached (no route to the host): is the address right?" }
        if let code { return "\(origin): \(String(cString: strerror(code)).lowercased())" }
        if text.lowercased().contains("lookup") || text.contains("getaddrinfo") || text.contains("resolve") {
            return "the name \(url?.host ?? target) does not resolve: is the host name right?"
        }
        return text
    }
}
