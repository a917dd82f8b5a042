@testable import HTTPEdge
import Testing

/// What the front of an HTTP/1.1 connection reads itself (`FrontRequestHead`), and what it
/// leaves, byte for byte, to the full pipeline.
@Suite("Request heads the front reads itself")
struct FrontRequestHeadTests {
    /// What the front makes of `text`'s bytes.
    func read(_ text: String) -> FrontRequestHead.Reading {
        Array(text.utf8).withUnsafeBytes { FrontRequestHead.read($0) }
    }

    @Test("a plain GET is read: its target, its Authorization, a close token, every X-Forwarded-For, its length")
    func reads() {
        let text = "GET /p/abc?variant=push HTTP/1.1\r\nHost: x\r\nAUTHORIZATION:   Bearer two  \r\n"
            + "Connection: keep-alive, CLOSE\r\nX-Forwarded-For: 1.2.3.4\r\nx-forwarded-for: 5.6.7.8\r\n\r\nGET / HTTP/1.1\r\n"
        let head = FrontRequestHead(uri: "/p/abc?variant=push", authorization: "Bearer two", close: true,
                                    forwardedFor: ["1.2.3.4", "5.6.7.8"], length: text.utf8.count - "GET / HTTP/1.1\r\n".utf8.count)
        #expect(read(text) == .head(head))
        #expect(read("GET / HTTP/1.1\r\n\r\n") == .head(FrontRequestHead(uri: "/", authorization: nil, close: false, forwardedFor: [], length: 18)))
        // Tokens are whole words: "closed" is not "close".
        guard case .head(let kept) = read("GET /x HTTP/1.1\r\nConnection: closed, keep-alive\r\n\r\n") else {
            Issue.record("a plain head was not read")
            return
        }
        #expect(!kept.close)
    }

    @Test("anything else is left, byte for byte, to the full pipeline: other methods and versions, odd targets and lines, bodies, ranges, conditions, upgrades, too many or too long")
    func handsOff() {
        let id = "/media/" + String(repeating: "a", count: 64)
        let refused = [
            "", "GET", "GET /x HTTP/1.1\r\nHost: x\r\n", "GET /x HTTP/1.1\r\nHost: x\r\n\r", // not whole yet
            "HEAD \(id) HTTP/1.1\r\n\r\n", "get \(id) HTTP/1.1\r\n\r\n", "POST \(id) HTTP/1.1\r\n\r\n",
            "GET \(id) HTTP/1.0\r\n\r\n", "GET \(id) HTTP/2.0\r\n\r\n", "GET \(id) http/1.1\r\n\r\n",
            "GET http://x\(id) HTTP/1.1\r\n\r\n", "GET * HTTP/1.1\r\n\r\n", "GET  \(id) HTTP/1.1\r\n\r\n",
            "GET \(id)  HTTP/1.1\r\n\r\n", "GET \(id)#frag HTTP/1.1\r\n\r\n", "GET \(id)\u{7F} HTTP/1.1\r\n\r\n",
            "GET \(id) HTTP/1.1\n\n", "GET \(id) HTTP/1.1\r\nHost: x\n\r\n", "GET \(id) HTTP/1.1\r\nHost: x\r\n\n",
            "GET \(id) HTTP/1.1\r\nHost : x\r\n\r\n", "GET \(id) HTTP/1.1\r\n: x\r\n\r\n", "GET \(id) HTTP/1.1\r\nHo\"st: x\r\n\r\n",
            "GET \(id) HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", "GET \(id) HTTP/1.1\r\nHost: a\rb\r\n\r\n",
            "GET \(id) HTTP/1.1\r\nHost: a\u{0}b\r\n\r\n", "GET \(id) HTTP/1.1\r\nHost: a\u{1B}b\r\n\r\n",
            "GET \(id) HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "GET \(id) HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "GET \(id) HTTP/1.1\r\nRange: bytes=0-1\r\n\r\n", "GET \(id) HTTP/1.1\r\nIf-Range: x\r\n\r\n",
            "GET \(id) HTTP/1.1\r\nIF-NONE-MATCH: x\r\n\r\n", "GET \(id) HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            "GET \(id) HTTP/1.1\r\nConnection: Upgrade\r\n\r\n",
            "GET \(id) HTTP/1.1\r\nAuthorization: Basic YTpi\r\nauthorization: Basic YzpkCg==\r\n\r\n", // the router refuses two
            "GET \(id) HTTP/1.1\r\n" + String(repeating: "A: b\r\n", count: 101) + "\r\n",
            "GET \(id) HTTP/1.1\r\nA: " + String(repeating: "b", count: 9000) + "\r\n\r\n",
        ]
        for text in refused {
            #expect(read(text) == .handOff, "read: \(text.debugDescription.prefix(120))")
        }
        // At the limits, still read.
        #expect(read("GET \(id) HTTP/1.1\r\n" + String(repeating: "A: b\r\n", count: 100) + "\r\n") != .handOff)
        #expect(read("GET \(id) HTTP/1.1\r\nA: é\tb\r\n\r\n") != .handOff)
    }

    @Test("hostile bytes: every prefix and every one-byte change of a head is read or left alone without a crash, and what is read is a prefix of the bytes")
    func hostile() {
        let text = Array("GET /media/x?variant=push HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YTpi\r\nConnection: close\r\n\r\n".utf8)
        var generator = SystemRandomNumberGenerator()
        var variants: [[UInt8]] = (0...text.count).map { Array(text[..<$0]) }
        for _ in 0..<5_000 {
            var bytes = text
            bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            variants.append(bytes)
        }
        for bytes in variants {
            guard case .head(let head) = bytes.withUnsafeBytes({ FrontRequestHead.read($0) }) else { continue }
            #expect(head.length <= bytes.count && bytes[head.length - 4..<head.length].elementsEqual("\r\n\r\n".utf8))
            #expect(Array(bytes[4..<4 + head.uri.utf8.count]) == Array(head.uri.utf8))
        }
    }
}
