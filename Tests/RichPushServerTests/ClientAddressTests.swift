import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
@testable import RichPushCore
@testable import HTTPEdge
@testable import RichPushServer
import RichPushTestSupport
import Testing

@Suite("Client addresses behind a reverse proxy (serve --trusted-proxy) and /metrics on its own port")
struct ClientAddressTests {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!

    // MARK: parsing

    @Test("CIDR blocks: IPv4, IPv6, bare addresses, IPv4-mapped IPv6 both ways; malformed input is refused")
    func cidrParsing() throws {
        let ten = try #require(CIDR("10.0.0.0/8"))
        #expect(ten.contains("10.255.1.2") && ten.contains("10.0.0.0") && !ten.contains("11.0.0.1") && !ten.contains("9.255.255.255"))
        #expect(ten.description == "10.0.0.0/8")
        #expect(CIDR("10.1.2.3/8")?.description == "10.0.0.0/8", "bits past the prefix are ignored, as nginx does")
        let one = try #require(CIDR("172.28.0.10"))
        #expect(one.description == "172.28.0.10/32" && one.contains("172.28.0.10") && !one.contains("172.28.0.11"))
        let everyV4 = try #require(CIDR("0.0.0.0/0"))
        #expect(everyV4.contains("203.0.113.9") && !everyV4.contains("2001:db8::1"))

        let ula = try #require(CIDR("fd00::/8"))
        #expect(ula.contains("fd12:3456::1") && !ula.contains("fe80::1") && !ula.contains("10.0.0.1"))
        #expect(CIDR("2001:DB8:0:0::/32")?.description == "2001:db8::/32")
        let loopback6 = try #require(CIDR("::1"))
        #expect(loopback6.contains("0:0:0:0:0:0:0:1") && !loopback6.contains("::2") && loopback6.description == "::1/128")
        #expect(CIDR("::/0")?.contains("2001:db8::1") == true)

        // An IPv4 peer of a dual-stack socket is named ::ffff:a.b.c.d: IPv4 blocks hold it.
        let loopback = try #require(CIDR("127.0.0.0/8"))
        #expect(loopback.contains("::ffff:127.0.0.1") && loopback.contains("127.9.9.9") && !loopback.contains("::1"))
        let mapped = try #require(CIDR("::ffff:10.0.0.0/104"))
        #expect(mapped.contains("10.2.3.4") && !mapped.contains("11.2.3.4") && mapped.description == "10.0.0.0/8")

        for bad in ["", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8/8", "10.0.0.0/ 8", " 10.0.0.0/8",
                    "10.0.0/8", "10.0.0.256", "fd00::/129", "fd00:::/8", "fe80::1%eth0", "[::1]", "example.com", "10.0.0.0/1000", "any"] {
            #expect(CIDR(bad) == nil, "'\(bad)' was taken as a block")
        }
        #expect(!ten.contains("not an address") && !ten.contains(""))
    }

    @Test("addresses are written one way: dotted IPv4 (mapped ones too), IPv6 as RFC 5952 shortens it")
    func addressText() {
        let cases = ["2001:0DB8:0:0:0:0:0:1": "2001:db8::1", "::": "::", "::1": "::1", "1:0:0:2:0:0:0:3": "1:0:0:2::3",
                     "1:0:0:2:0:0:3:4": "1::2:0:0:3:4", "2001:db8:1:1:1:1:1:1": "2001:db8:1:1:1:1:1:1",
                     "::ffff:1.2.3.4": "1.2.3.4", "192.0.2.33": "192.0.2.33", "fe80::": "fe80::"]
        for (text, written) in cases {
            #expect(IPAddress(text)?.description == written, "\(text)")
        }
    }

    @Test("the client is the right-most X-Forwarded-For address that is not a trusted proxy, and only when the peer is one")
    func resolving() {
        let none = ClientAddressResolver(trustedProxies: [])
        #expect(none.client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1"]) == "127.0.0.1")
        #expect(none.forwardedProto(peer: "127.0.0.1", values: ["https"]) == nil)

        let proxies = ClientAddressResolver(trustedProxies: ["127.0.0.0/8", "10.0.0.0/8", "fd00::/8"].compactMap { CIDR($0) })
        // What the client wrote itself is left of what the proxies appended, and is never believed.
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["6.6.6.6, 198.51.100.1, 10.0.0.5"]) == "198.51.100.1")
        #expect(proxies.client(peer: "::ffff:127.0.0.1", forwardedFor: ["6.6.6.6", "198.51.100.1"]) == "198.51.100.1", "several fields are one list")
        #expect(proxies.client(peer: "fd00::9", forwardedFor: ["2001:DB8::7"]) == "2001:db8::7")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["[2001:db8::7]:443"]) == "2001:db8::7")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1:5555"]) == "198.51.100.1")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1,,  "]) == "198.51.100.1")
        // Not from a trusted peer: the header is anyone's word.
        #expect(proxies.client(peer: "192.0.2.9", forwardedFor: ["198.51.100.1"]) == "192.0.2.9")
        // A malformed entry stops the walk at the last trusted hop; only trusted hops: the left-most.
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1, garbage"]) == "127.0.0.1")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["198.51.100.1, garbage, 10.0.0.2"]) == "10.0.0.2")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: ["10.0.0.1, 10.0.0.2"]) == "10.0.0.1")
        #expect(proxies.client(peer: "127.0.0.1", forwardedFor: []) == "127.0.0.1")
        #expect(proxies.client(peer: nil, forwardedFor: ["198.51.100.1"]) == nil)

        #expect(proxies.forwardedProto(peer: "127.0.0.1", values: ["HTTPS"]) == "https")
        #expect(proxies.forwardedProto(peer: "127.0.0.1", values: ["https, http"]) == "https")
        #expect(proxies.forwardedProto(peer: "192.0.2.9", values: ["https"]) == nil)
    }

    // MARK: through a live server

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
