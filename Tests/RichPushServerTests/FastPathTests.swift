import Foundation
import GRDB
import HTTPTypes
import HummingbirdTesting
import MediaStore
import RichPushServer
import RichPushTestSupport
import Testing

/// The event-loop fast path must answer exactly as the router does, and only when it may.
@Suite("Fast path for cached images")
struct FastPathTests {
    let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
    var logoID: String { MediaID(hashing: logo).hex }

    func withoutDate(_ fields: HTTPFields) -> [String: String] {
        Dictionary(fields.filter { $0.name != .date }.map { ($0.name.canonicalName, $0.value) }, uniquingKeysWith: { a, _ in a })
    }

    @Test("a cached blob is answered with the router's exact headers and bytes")
    func sameAnswer() async throws {
        try await TestServer.run { s in
            let first = try await s.request(.get, "/media/\(logoID)") // router: loads the cache
            let second = try await s.request(.get, "/media/\(logoID)") // fast path
            #expect(second.bytes == logo)
            #expect(withoutDate(second.headers) == withoutDate(first.headers))
            #expect(second.headers[.date] != nil)
            #expect(second.headers[.server] == "RichPush")

            let (_, object) = try await s.json(.post, "/api/notifications")
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            let read = try await s.request(.get, "/api/notifications/\(id)") // router: marks read
            let again = try await s.request(.get, "/api/notifications/\(id)") // fast path
            #expect(again.bytes == logo)
            #expect(withoutDate(again.headers) == withoutDate(read.headers))
            #expect(try await s.request(.get, "/api/notifications/\(id)", as: "bob").status == .notFound)
            #expect(try await s.request(.get, "/api/notifications/\(id)", as: nil).status == .unauthorized)
            let wrong = try await s.client.execute(uri: "/api/notifications/\(id)", method: .get, headers: TestServer.basic("alice", "nope"), body: nil)
            #expect(wrong.status == .unauthorized)
        }
    }

    @Test("on the wire, a fast-path answer has the router's status line, header lines and body bytes")
    func sameBytesOnTheWire() async throws {
        try await TestServer.run({ $0.publicMedia = true }) { s in
            let port = try #require(s.client.port)
            let request = "GET /media/\(logoID) HTTP/1.1\r\nHost: x\r\n\r\n"
            // One keep-alive connection: the router's answer (which fills the cache), then two from the fast path.
            let answers = try await onOwnThread { () throws -> [(head: String, body: [UInt8])] in
                let fd = try connectTo(port: port)
                defer { close(fd) }
                return (0..<3).map { _ in exchange(fd, request) }
            }
            func lines(_ head: String) -> [String] {
                head.split(separator: "\r\n").map { $0.hasPrefix("Date: ") || $0.hasPrefix("date: ") ? "Date: <now>" : String($0) }
            }
            let router = lines(answers[0].head), fast = lines(answers[1].head)
            #expect(fast.first == "HTTP/1.1 200 OK" && router.first == fast.first)
            #expect(fast.sorted() == router.sorted(), "router: \(router)\nfast path: \(fast)")
            #expect(answers[0].body == logo && answers[1].body == logo && answers[2].body == logo)
            // (On a loaded machine a cache entry can age past its one-second check between two
            // requests, and the router answers again: compare as sets, not in order.)
            #expect(lines(answers[2].head).sorted() == fast.sorted())
        }
    }

    @Test("pipelined requests are answered in order even when a later one could be answered at once")
    func pipelining() async throws {
        try await TestServer.run { s in
            _ = try await s.request(.get, "/media/\(logoID)") // cache it
            let auth = TestServer.basic("alice")[.authorization]!
            let slow = "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\nContent-Length: 7\r\n\r\n\"first\""
            let fast = "GET /media/\(logoID) HTTP/1.1\r\nHost: x\r\nAuthorization: \(auth)\r\n\r\n"
            let end = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let answer = try await rawExchange(port: try #require(s.client.port), slow + fast + end, untilClose: true)
            let created = try #require(answer.range(of: "HTTP/1.1 201"))
            let image = try #require(answer.range(of: "HTTP/1.1 200 OK\r\nContent-Type: image/png"))
            let health = try #require(answer.range(of: "{\"status\":\"ok\"}"))
            #expect(created.lowerBound < image.lowerBound && image.lowerBound < health.lowerBound)
        }
    }

    @Test("Connection: close goes through the router, which closes the connection after the image")
    func connectionClose() async throws {
        try await TestServer.run({ $0.publicMedia = true }) { s in
            _ = try await s.request(.get, "/media/\(logoID)")
            let port = try #require(s.client.port)
            let closing = try await rawExchange(port: port, "GET /media/\(logoID) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", untilClose: true)
            #expect(closing.hasPrefix("HTTP/1.1 200 OK"))
            #expect(closing.utf8.count > logo.count) // the whole image arrived before the close
        }
    }

    @Test("a blob removed by another process stops being served within about a second")
    func removal() async throws {
        try await TestServer.run { s in
            let coupon = try Fixtures.bytes(Fixtures.media.appendingPathComponent("coupon.png"))
            let id = MediaID(hashing: coupon).hex
            #expect(try await s.request(.post, "/api/media", body: coupon).status == .created)
            #expect(try await s.request(.get, "/media/\(id)").status == .ok)
            #expect(try await s.request(.get, "/media/\(id)").status == .ok) // fast path
            let store = MediaStore(directory: DataDirectory(path: s.dir.appendingPathComponent("data").path), database: s.database)
            _ = try await store.remove(id)
            try await Task.sleep(for: .milliseconds(1200))
            #expect(try await s.request(.get, "/media/\(id)").status == .notFound)
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
