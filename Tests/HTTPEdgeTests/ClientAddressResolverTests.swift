@testable import HTTPEdge
import Testing

/// Who a request comes from, without a server: CIDR blocks (`--trusted-proxy`), how addresses
/// are written, and the client `ClientAddressResolver` reads from `X-Forwarded-For`.
@Suite("Client addresses: blocks, spellings and X-Forwarded-For")
struct ClientAddressResolverTests {
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
}
