import RichPushCore
import Testing

/// The classifier behind "RichPush sends only to public addresses" (Web Push endpoints, webhooks),
/// and the strict reading of the URLs it is asked to call.
@Suite("Public addresses and outbound URLs (SSRF through Web Push subscriptions)")
struct PublicAddressTests {
    func expectRefused(_ address: String, _ words: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let bytes = PublicAddress.bytes(of: address) else {
            Issue.record("\(address) does not parse", sourceLocation: sourceLocation)
            return
        }
        let why = PublicAddress.refusal(for: bytes)
        #expect(why?.contains(words) == true, "\(address): \(why ?? "public")", sourceLocation: sourceLocation)
        #expect(!PublicAddress.isPublic(address), "\(address)", sourceLocation: sourceLocation)
    }

    func expectPublic(_ address: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let why = PublicAddress.bytes(of: address).map { PublicAddress.refusal(for: $0) ?? "public" } ?? "does not parse"
        #expect(why == "public", "\(address): \(why)", sourceLocation: sourceLocation)
        #expect(PublicAddress.isPublic(address), "\(address)", sourceLocation: sourceLocation)
    }

    @Test("every IPv4 special-purpose block is refused and named, at both of its ends")
    func ipv4Refused() {
        let refused: [(String, String)] = [
            ("0.0.0.0", "this network"), ("0.255.255.255", "this network"),
            ("10.0.0.0", "private"), ("10.0.0.5", "private"), ("10.255.255.255", "private"),
            ("100.64.0.0", "carrier-grade NAT"), ("100.127.255.255", "carrier-grade NAT"),
            ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"),
            ("169.254.0.0", "link-local"), ("169.254.169.254", "metadata"), ("169.254.255.255", "link-local"),
            ("172.16.0.0", "private"), ("172.31.255.255", "private"),
            ("192.0.0.0", "IETF"), ("192.0.0.255", "IETF"),
            ("192.0.2.0", "documentation"), ("192.0.2.255", "documentation"),
            ("192.168.0.0", "private"), ("192.168.255.255", "private"),
            ("198.18.0.0", "benchmarking"), ("198.19.255.255", "benchmarking"),
            ("198.51.100.0", "documentation"), ("198.51.100.255", "documentation"),
            ("203.0.113.0", "documentation"), ("203.0.113.255", "documentation"),
            ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"), ("255.255.255.254", "reserved"), ("255.255.255.255", "broadcast"),
        ]
        for (address, words) in refused { expectRefused(address, words) }
    }

    @Test("IPv4 addresses just outside those blocks, and ordinary ones, are public")
    func ipv4Public() {
        for address in ["1.1.1.1", "8.8.8.8", "1.0.0.0", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0",
                        "126.255.255.255", "128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0",
                        "192.0.1.255", "192.0.3.0", "192.167.255.255", "192.169.0.0", "198.17.255.255", "198.20.0.0",
                        "198.51.99.255", "198.51.101.0", "203.0.112.255", "203.0.114.0", "223.255.255.255", "142.250.74.100"] {
            expectPublic(address)
        }
    }

    @Test("IPv6: loopback, unspecified, private, link-local, multicast and the special blocks are refused")
    func ipv6Refused() {
        let refused: [(String, String)] = [
            ("::", "unspecified"), ("::1", "loopback"), ("[::1]", "loopback"), ("0:0:0:0:0:0:0:1", "loopback"),
            ("::2", "IPv4-compatible"), ("::127.0.0.1", "IPv4-compatible"), ("::8.8.8.8", "IPv4-compatible"),
            ("64:ff9b:1::1", "local-use NAT64"), ("100::1", "discard-only"), ("100::ffff:ffff:ffff:ffff", "discard-only"),
            ("2001::1", "Teredo"), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"), ("2001:2::1", "benchmarking"),
            ("2001:10::1", "ORCHID"), ("2001:1f:ffff::1", "ORCHID"), ("2001:20::1", "ORCHIDv2"), ("2001:2f::1", "ORCHIDv2"),
            ("2001:db8::1", "documentation"), ("2001:DB8:FFFF::", "documentation"), ("3fff::1", "documentation"),
            ("fc00::1", "unique local"), ("fd12:3456:789a::1", "unique local"), ("fdff:ffff::1", "unique local"),
            ("fe80::1", "link-local"), ("febf:ffff::1", "link-local"), ("fec0::1", "site-local"), ("feff::1", "site-local"),
            ("ff02::1", "multicast"), ("ff05::1:3", "multicast"), ("ffff::", "multicast"),
            ("4000::1", "global unicast"), ("e000::1", "global unicast"), ("1::1", "global unicast"),
        ]
        for (address, words) in refused { expectRefused(address, words) }
    }

    @Test("an IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4) is judged by that IPv4 address")
    func embeddedIPv4() {
        let refused: [(String, String)] = [
            ("::ffff:127.0.0.1", "loopback"), ("::FFFF:7f00:1", "loopback"), ("[::ffff:127.0.0.1]", "IPv4-mapped"),
            ("0:0:0:0:0:ffff:192.168.0.1", "private"), ("::ffff:10.1.2.3", "private"), ("::ffff:a9fe:a9fe", "link-local"),
            ("::ffff:0.0.0.0", "this network"), ("::ffff:255.255.255.255", "broadcast"), ("::ffff:100.64.0.1", "carrier-grade NAT"),
            ("64:ff9b::10.0.0.1", "NAT64"), ("64:ff9b::7f00:1", "loopback"), ("64:ff9b::169.254.169.254", "link-local"),
            ("2002:7f00:1::1", "6to4"), ("2002:c0a8:101::1", "private"), ("2002:a9fe:a9fe::", "link-local"),
        ]
        for (address, words) in refused { expectRefused(address, words) }
        for address in ["::ffff:8.8.8.8", "::ffff:808:808", "64:ff9b::8.8.8.8", "64:ff9b::101:101", "2002:808:808::1"] {
            expectPublic(address)
        }
    }

    @Test("ordinary global IPv6 addresses are public")
    func ipv6Public() {
        for address in ["2001:4860:4860::8888", "2606:4700:4700::1111", "2a00:1450:4001:82b::200a", "2400:cb00::1",
                        "2001:200::1", "2001:4860::", "[2606:4700::6810:84e5]", "3ffe:ffff::1", "2620:fe::fe"] {
            expectPublic(address)
        }
    }

    @Test("anything that is not a strict IP literal is not parsed as one")
    func malformed() {
        for text in ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.-1", "1.2.3.+4", "1.2.3.4 ", "0x7f.0.0.1",
                     "::ffff:1.2.3", "::ffff:1.2.3.4.5", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::1", "fe80::1%eth0", "g::1",
                     ":::", "1.2.3.4::", "::1.2.3.4:1", "1.2.3.4:80", "[::1", "localhost", "push.example.net", "+1::"] {
            #expect(PublicAddress.bytes(of: text) == nil, "'\(text)'")
            #expect(!PublicAddress.isPublic(text), "'\(text)'")
        }
        #expect(PublicAddress.bytes(of: "::ffff:1.2.3.4") == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 1, 2, 3, 4])
        #expect(PublicAddress.bytes(of: "1:2:3:4:5:6::8")?.count == 16)
        #expect(PublicAddress.bytes(of: "2001:db8::") == [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 12))
    }

    @Test("a host that ends in a number is an address to resolvers (2130706433 is 127.0.0.1), so it counts as an IP literal")
    func numericHosts() {
        for host in ["127.0.0.1", "::1", "2130706433", "0x7f000001", "0X7F.1", "127.1", "10.0.0.1.", "017700000001", "a.1"] {
            #expect(PublicAddress.looksLikeIPAddress(host: host), "\(host)")
        }
        for host in ["localhost", "push.example.net", "fcm.googleapis.com", "1.2.3.example", "0xfoo.example", "x0x1", "1e100.net"] {
            #expect(!PublicAddress.looksLikeIPAddress(host: host), "\(host)")
        }
    }

    @Test("outbound URLs are read strictly: scheme, host, port and target, nothing smuggled")
    func outboundURLs() throws {
        let endpoint = try OutboundURL("https://fcm.googleapis.com/fcm/send/abc?x=1#fragment")
        #expect(endpoint.scheme == "https" && endpoint.host == "fcm.googleapis.com" && endpoint.port == 443)
        #expect(endpoint.target == "/fcm/send/abc?x=1" && endpoint.authority == "fcm.googleapis.com" && !endpoint.hostIsIPAddress)
        let shouting = try OutboundURL("HTTPS://Push.Example.NET.:8443")
        #expect(shouting.host == "push.example.net" && shouting.port == 8443 && shouting.target == "/" && shouting.authority == "push.example.net:8443")
        let mapped = try OutboundURL("https://[::FFFF:127.0.0.1]/p")
        #expect(mapped.host == "::ffff:127.0.0.1" && mapped.hostIsIPAddress && mapped.authority == "[::ffff:127.0.0.1]")
        let plain = try OutboundURL("http://127.0.0.1:9000?x")
        #expect(plain.port == 9000 && plain.target == "/?x" && !plain.isHTTPS && plain.hostIsIPAddress)
        #expect(try OutboundURL("http://localhost/").port == 80)

        for text in ["ftp://push.example/", "push.example/x", "https:///x", "https://user:pw@push.example/", "https://push.example@10.0.0.1/",
                     "https://push example/", "https://push.example/a b", "https://push.example/\r\nX-Injected: 1", "https://pûsh.example/",
                     "https://%31%32%37.0.0.1/", "https://push.example:0/", "https://push.example:65536/", "https://push.example:80x/",
                     "https://[::1/", "https://[::1]x/", "https://[fe80::1%25eth0]/", "https://[127.0.0.1]/", "https://-bad.example/",
                     "https://push..example/", "https://push_example.net/", "https://push.example\u{0}.net/"] {
            #expect(throws: CoreError.self, "\(text.debugDescription)") { try OutboundURL(text) }
        }
    }
}
