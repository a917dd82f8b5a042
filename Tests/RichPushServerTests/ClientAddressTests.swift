import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
@testable import RichPushCore
@testable import HTTPEdge
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

@Suite("Client addresses behind a reverse proxy (serve --trusted-proxy) and /metrics on its own port")
struct ClientAddressTests {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!

    /// `count` failed sign-ins, each from its own account (so the per-name limit never trips), with
    /// the `X-Forwarded-For` that `forwarded` gives for each; their statuses.
    static func failedSignIns(_ s: TestServer, _ accounts: Range<Int>, forwarded: (Int) -> String) async throws -> [HTTPResponse.Status] {
        var statuses: [HTTPResponse.Status] = []
        for i in accounts {
            var headers = TestServer.basic("user\(i)", "wrong")
            headers[forwardedFor] = forwarded(i)
            statuses.append(try await s.get("/api/notifications", headers: headers).status)
        }
        return statuses
    }

    /// Accounts user0… with a cheap bcrypt, so that a wrong password costs little.
    static func addAccounts(_ s: TestServer, count: Int) async throws {
        let users = UserStore(database: s.database, cost: 4)
        for i in 0..<count { _ = try await users.add(name: "user\(i)", password: "right-\(i)") }
    }

    static func basic(_ user: String, from address: String) -> HTTPFields {
        var headers = TestServer.basic(user)
        headers[forwardedFor] = address
        return headers
    }

    @Test("behind a trusted proxy, clients that each fail a sign-in do not lock out the others; one client failing again and again is throttled alone, whatever it writes left of the proxy's entry")
    func trustedProxyThrottlesPerClient() async throws {
        // --failed-sign-ins 2: 10 failures per address in 5 minutes; 12 is past it.
        try await TestServer.run({
            $0.failedSignInLimit = 2
            $0.trustedProxies = ["127.0.0.0/8", "::1"].compactMap { CIDR($0) }
        }) { s in
            try await Self.addAccounts(s, count: 24)
            let many = try await Self.failedSignIns(s, 0..<12) { "203.0.113.\($0)" }
            #expect(many.allSatisfy { $0 == .unauthorized }, "\(many)")
            // Yet another client: its sign-ins go through, its mistakes are a 401 and not a 429.
            #expect(try await s.get("/api/notifications", headers: Self.basic("alice", from: "198.51.100.7")).status == .ok)
            var wrong = TestServer.basic("bob", "wrong")
            wrong[Self.forwardedFor] = "198.51.100.8"
            #expect(try await s.get("/api/notifications", headers: wrong).status == .unauthorized)

            // One client (the proxy appends 192.0.2.1; what it writes itself varies): 429 past 10.
            let one = try await Self.failedSignIns(s, 12..<24) { "10.9.8.\($0), 192.0.2.1" }
            #expect(one.prefix(10).allSatisfy { $0 == .unauthorized } && one.suffix(2).allSatisfy { $0 == .tooManyRequests }, "\(one)")
            let locked = try await s.get("/api/notifications", headers: Self.basic("root", from: "192.0.2.1"))
            #expect(locked.status == .tooManyRequests && locked.headers[.retryAfter] != nil)
            #expect(try await s.get("/api/notifications", headers: Self.basic("root", from: "198.51.100.9")).status == .ok)
        }
    }

    @Test("without --trusted-proxy, X-Forwarded-For is ignored: a spoofed header does not escape the per-address throttle")
    func untrustedForwardedForIgnored() async throws {
        try await TestServer.run({ $0.failedSignInLimit = 2 }) { s in
            try await Self.addAccounts(s, count: 12)
            let spoofed = try await Self.failedSignIns(s, 0..<12) { "203.0.113.\($0)" }
            #expect(spoofed.prefix(10).allSatisfy { $0 == .unauthorized } && spoofed.suffix(2).allSatisfy { $0 == .tooManyRequests }, "\(spoofed)")
            #expect(try await s.get("/api/notifications", headers: Self.basic("alice", from: "198.51.100.7")).status == .tooManyRequests)
        }
    }

    @Test("the console's cookie is Secure when a trusted proxy says the client used HTTPS, not when anyone else says so")
    func forwardedProtoFromTrustedProxiesOnly() async throws {
        for trusted in [true, false] {
            try await TestServer.run({ if trusted { $0.trustedProxies = ["127.0.0.0/8", "::1"].compactMap { CIDR($0) } } }) { s in
                let response = try await s.client.execute(
                    uri: "/console/session", method: .post,
                    headers: [.origin: "http://localhost", .contentType: "application/x-www-form-urlencoded", Self.forwardedProto: "https"],
                    body: ByteBuffer(string: "name=root&password=rootpw"))
                #expect(response.status == .seeOther)
                let cookie = response.headers[.setCookie] ?? ""
                #expect(cookie.hasPrefix("richpush_console="), "\(cookie)")
                #expect(cookie.hasSuffix("; Secure") == trusted, "trusted: \(trusted): \(cookie)")
            }
        }
    }

    @Test("with a metrics port, /metrics is answered there (Prometheus text) and is a 404 on the main port")
    func metricsPort() async throws {
        let metricsPort = freePort()
        try await TestServer.run({ $0.metricsPort = metricsPort }) { s in
            let main = try await s.request(.get, "/metrics", as: nil)
            #expect(main.status == .notFound)
            #expect(!String(decoding: main.bytes, as: UTF8.self).contains("richpush_build_info"))
            let answered = try await eventually {
                let text = try? await rawExchange(port: metricsPort, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout: 5)
                return text?.hasPrefix("HTTP/1.1 200 OK") == true && text?.contains("# HELP richpush_build_info") == true
                    && text?.lowercased().contains("content-type: text/plain; version=0.0.4") == true
            }
            #expect(answered)
            let other = try await rawExchange(port: metricsPort, "GET /api/notifications HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout: 5)
            #expect(other.hasPrefix("HTTP/1.1 404"), "\(other.prefix(200))")
        }
        // Without one, /metrics stays on the main port.
        try await TestServer.run(engine: .embedded) { s in
            let status = try await s.request(.get, "/metrics", as: nil).status
            #expect(status == .ok)
        }
    }
}
