import Foundation
import SQLEngine
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import MediaStore
import PushDelivery
@testable import RichPushCore
import PushTestSupport
import RichPushTestSupport
@testable import RichPushAPI
@testable import RichPushServer
import Testing

@Suite("Media routes through a live server")
struct MediaRouteTests {
    let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
    var logoID: String { MediaID(hashing: logo).hex }

    @Test("health and metrics need no credentials; metrics follow Prometheus naming, each with HELP, RichPush's own included", arguments: StoreEngine.all)
    func ops(engine: StoreEngine) async throws {
        let provider = ScriptedProvider(outcomes: [tokenB: .failed(reason: "BadDeviceToken", prune: false)])
        try await TestServer.run(engine: engine, { $0.outboxGaugeInterval = .milliseconds(100) }, provider: provider) { s in
            let (health, object) = try await s.json(.get, "/health", as: nil)
            #expect(health.status == .ok)
            #expect(object as? [String: String] == ["status": "ok"])
            _ = try await s.request(.post, "/api/media", body: Array("%PDF-1.4".utf8))
            // A push sent, one failed, and a payload fetched.
            _ = try await s.registerDevice(tokenA)
            _ = try await s.registerDevice(tokenB)
            let (_, made) = try await s.json(.post, "/api/notifications")
            let id = try #require((made as? [String: Any])?["id"] as? Int)
            #expect(try await s.request(.get, "/api/notifications/\(id)").status == .ok)
            #expect(try await eventually(within: 10) {
                try await DeliveryStore(database: s.database).list(notification: Int64(id)).allSatisfy { $0.state != .pending }
            })
            let scrape = { @Sendable () async throws -> String in
                let metrics = try await s.request(.get, "/metrics", as: nil)
                #expect(metrics.status == .ok)
                return String(decoding: metrics.bytes, as: UTF8.self)
            }
            #expect(try await eventually(within: 5) {
                let text = try await scrape()
                return text.contains("richpush_outbox_pending{") && text.contains("outcome=\"failed\"")
            })
            let text = try await scrape()
            #expect(text.contains("http_server_requests_total{http_route=\"/health\",http_request_method=\"GET\",http_response_status_code=\"200\"}"))
            #expect(text.contains("richpush_media_ingest_total{result=\"unsupported\"}"))
            #expect(text.contains("http_server_request_duration_seconds_bucket"))
            #expect(text.contains("richpush_push_duration_seconds_bucket{platform=\"other\",outcome=\"sent\""))
            #expect(text.contains("richpush_push_duration_seconds_count{platform=\"other\",outcome=\"failed\"}"))
            #expect(text.contains("richpush_payload_fetches_total{route=\"/api/notifications/{id}\"}"))
            #expect(text.contains("richpush_build_info{version=\"\(RichPushBuild.version)\"} 1"))
            // Prometheus's conventions: HELP for every metric, counters end in _total, durations in _seconds, no hb_.
            let lines = text.split(separator: "\n").map(String.init)
            let types = lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ") }
            #expect(types.count >= 8)
            for type in types {
                let name = String(type[2]), kind = String(type[3])
                #expect(lines.contains { $0.hasPrefix("# HELP \(name) ") && $0.count > "# HELP \(name) ".count + 10 }, "no HELP for \(name)")
                #expect(!name.hasPrefix("hb_"), "\(name)")
                if kind == "counter" { #expect(name.hasSuffix("_total"), "\(name)") }
                if kind == "histogram" { #expect(name.hasSuffix("_seconds"), "\(name)") }
            }
        }
    }

    @Test("upload: 201 stored, then 200 exists, with the SPEC's fields and a Location", arguments: StoreEngine.all)
    func upload(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let jpeg = try Fixtures.bytes(Fixtures.media.appendingPathComponent("landscape.jpg"))
            let first = try await s.request(.post, "/api/media", body: jpeg)
            #expect(first.status == .created)
            let object = try JSONSerialization.jsonObject(with: Data(first.bytes)) as! [String: Any]
            let id = MediaID(hashing: jpeg).hex
            #expect(object["sha256"] as? String == id)
            #expect(object["contentType"] as? String == "image/jpeg")
            #expect(object["width"] as? Int == 1280 && object["height"] as? Int == 853)
            #expect(object["size"] as? Int == jpeg.count)
            #expect(object["url"] as? String == "/media/\(id)")
            #expect(first.headers[.location] == "/media/\(id)")
            #expect(object["stripped"] as? [String] == [])
            // The same photo with a comment: the comment is stripped, and what is left is the same image, the same id.
            let commented = Array(jpeg[0..<2]) + [0xFF, 0xFE, 0x00, 0x07] + Array("hello".utf8) + Array(jpeg[2...])
            let withComment = try await s.request(.post, "/api/media", body: commented)
            let strippedObject = try JSONSerialization.jsonObject(with: Data(withComment.bytes)) as! [String: Any]
            #expect(withComment.status == .ok && strippedObject["sha256"] as? String == id && strippedObject["stripped"] as? [String] == ["comment"])
            let second = try await s.request(.post, "/api/media", headers: [.contentType: "image/gif"], body: jpeg)
            #expect(second.status == .ok)
            let fetched = try await s.request(.get, "/media/\(id)")
            #expect(fetched.bytes == jpeg)
            #expect(fetched.headers[.contentType] == "image/jpeg")
            #expect(s.tmpFiles.isEmpty)
        }
    }

    @Test("?variant=thumb|push: made on first request and served like any image, with its own ETag, 304 and Range, even after the fast path cached the original", arguments: StoreEngine.all)
    func variants(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let jpeg = try Fixtures.bytes(Fixtures.media.appendingPathComponent("landscape.jpg"))
            let id = MediaID(hashing: jpeg).hex
            #expect(try await s.request(.post, "/api/media", body: jpeg).status == .created)
            for _ in 0..<2 { #expect(try await s.request(.get, "/media/\(id)").bytes == jpeg) } // cached for the fast path
            let thumb = try await s.request(.get, "/media/\(id)?variant=thumb")
            #expect(thumb.status == .ok && thumb.headers[.contentType] == "image/jpeg" && thumb.bytes != jpeg && thumb.bytes.count < jpeg.count / 4)
            let thumbID = MediaID(hashing: thumb.bytes).hex
            #expect(thumb.headers[.eTag] == "\"\(thumbID)\"")
            #expect(try await s.request(.get, "/media/\(id)?variant=thumb").bytes == thumb.bytes) // recorded, the same bytes
            let notModified = try await s.request(.get, "/media/\(id)?variant=thumb", headers: [.ifNoneMatch: "\"\(thumbID)\""])
            #expect(notModified.status == .notModified)
            let range = try await s.request(.get, "/media/\(id)?variant=thumb", headers: [.range: "bytes=0-9"])
            #expect(range.status == .partialContent && range.bytes == Array(thumb.bytes[0..<10]))
            // It is an image of its own too, under its id.
            #expect(try await s.request(.get, "/media/\(thumbID)").bytes == thumb.bytes)
            // landscape.jpg (1280×853, under 1 MB, upright) is its own push variant.
            #expect(try await s.request(.get, "/media/\(id)?variant=push").bytes == jpeg)
            let bad = try await s.request(.get, "/media/\(id)?variant=huge")
            #expect(bad.status == .badRequest && bad.detail.contains("thumb or push"))
            #expect(try await s.request(.get, "/media/\(String(repeating: "ab", count: 32))?variant=thumb").status == .notFound)
        }
    }

    @Test("upload rejections map to 413/415/422 with problem details and leave nothing behind", arguments: StoreEngine.all)
    func uploadRejections(engine: StoreEngine) async throws {
        let corrupt = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("pngsuite/xcsn0g01.png"))
        let truncatedJPEG = Array(try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg")).dropLast(300))
        try await TestServer.run(engine: engine, { $0.limits = MediaLimits(maxBytes: 100_000, maxPixels: 40_000_000, maxSide: 16_384) }) { s in
            let cases: [([UInt8], HTTPResponse.Status, String)] = [
                (corrupt, .unprocessableContent, "corrupt: PNG: IDAT: CRC error"),
                (Array("RIFF".utf8) + [26, 0, 0, 0] + Array("WEBPVP8 ".utf8) + [UInt8](repeating: 0, count: 14), .unsupportedMediaType,
                 "unsupported: image/webp is not accepted; send PNG, JPEG or GIF"),
                (Array("%PDF-1.4\n".utf8), .unsupportedMediaType, "unsupported: application/pdf is not accepted; send PNG, JPEG or GIF"),
                ([UInt8](repeating: 0, count: 150_000), .contentTooLarge, "too_large: 150000 bytes, over the limit of 100000 bytes"),
                (PNGBuilder.signature + PNGBuilder.ihdr(width: 20_000, height: 20_000) + PNGBuilder.chunk("IEND", []), .contentTooLarge,
                 "too_large: 20000x20000 pixels: a side is over the limit of 16384"),
                (truncatedJPEG, .unprocessableContent,
                 "corrupt: JPEG: Premature end of JPEG file"),
            ]
            for (body, status, detail) in cases {
                let response = try await s.request(.post, "/api/media", body: body)
                #expect(response.status == status, "\(detail)")
                #expect(response.headers[.contentType] == "application/problem+json")
                #expect(response.detail == detail)
                #expect(response.problem?["status"] as? Int == Int(status.code))
            }
            let rows = try await s.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM media") }
            #expect(rows == 1) // only the default image
            #expect(s.tmpFiles.isEmpty)
            let unauthenticated = try await s.request(.post, "/api/media", as: nil, body: Array("x".utf8))
            #expect(unauthenticated.status == .unauthorized)
        }
    }

    @Test("an upload declaring a Content-Length over the limit is refused with 413 before its body is read", arguments: StoreEngine.all)
    func declaredLengthTooLarge(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine, {
            $0.limits = MediaLimits(maxBytes: 1000, maxPixels: 40_000_000, maxSide: 16_384)
            $0.mediaDirectory = "/nonexistent" // logo.png is over this limit
        }) { s in
            // Headers only: the 5 MB body is never sent, so an answer proves it was not waited for.
            let auth = TestServer.basic("alice")[.authorization]!
            let answer = try await rawExchange(port: try #require(s.client.port),
                "POST /api/media HTTP/1.1\r\nHost: localhost\r\nAuthorization: \(auth)\r\nContent-Length: 5000000\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 413 "), "\(answer.prefix(200))")
            #expect(answer.contains("too_large: 5000000 bytes, over the limit of 1000 bytes"))
            #expect(s.tmpFiles.isEmpty)
        }
    }

    @Test("image responses: type, length, strong ETag, nosniff, private cache, 304, 206, 416, HEAD", arguments: StoreEngine.all)
    func imageHeaders(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let uri = "/media/\(logoID)"
            let full = try await s.request(.get, uri)
            #expect(full.status == .ok)
            #expect(full.bytes == logo)
            #expect(full.headers[.contentType] == "image/png")
            #expect(full.headers[.contentLength] == String(logo.count))
            #expect(full.headers[.eTag] == "\"\(logoID)\"")
            #expect(full.headers[.acceptRanges] == "bytes")
            #expect(full.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
            #expect(full.headers[.cacheControl] == "private, max-age=31536000, immutable")

            let notModified = try await s.request(.get, uri, headers: [.ifNoneMatch: "\"other\", W/\"\(logoID)\""])
            #expect(notModified.status == .notModified)
            #expect(notModified.bytes.isEmpty)
            #expect(notModified.headers[.eTag] == "\"\(logoID)\"")
            #expect(try await s.request(.get, uri, headers: [.ifNoneMatch: "\"other\""]).status == .ok)

            let partial = try await s.request(.get, uri, headers: [.range: "bytes=100-199"])
            #expect(partial.status == .partialContent)
            #expect(partial.bytes == Array(logo[100...199]))
            #expect(partial.headers[.contentRange] == "bytes 100-199/\(logo.count)")
            #expect(partial.headers[.contentLength] == "100")
            let suffix = try await s.request(.get, uri, headers: [.range: "bytes=-10"])
            #expect(suffix.bytes == Array(logo.suffix(10)))
            let open = try await s.request(.get, uri, headers: [.range: "bytes=50000-"])
            #expect(open.bytes == Array(logo[50000...]))
            let staleIfRange = try await s.request(.get, uri, headers: [.range: "bytes=0-9", .ifRange: "\"old\""])
            #expect(staleIfRange.status == .ok && staleIfRange.bytes == logo)
            let multi = try await s.request(.get, uri, headers: [.range: "bytes=0-1,5-6"])
            #expect(multi.status == .ok)

            let unsatisfiable = try await s.request(.get, uri, headers: [.range: "bytes=\(logo.count)-"])
            #expect(unsatisfiable.status == .rangeNotSatisfiable)
            #expect(unsatisfiable.headers[.contentRange] == "bytes */\(logo.count)")

            let head = try await s.request(.head, uri)
            #expect(head.status == .ok)
            #expect(head.headers[.contentLength] == String(logo.count))
            #expect(head.headers[.contentType] == "image/png")
            #expect(head.bytes.isEmpty)
        }
    }

    @Test("media ids in paths are validated; unknown ids are 404; private media need credentials", arguments: StoreEngine.all)
    func mediaPaths(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            for bad in ["zzz", "..%2F..%2Frichpush.sqlite", String(repeating: "g", count: 64), String(logoID.dropLast())] {
                let response = try await s.request(.get, "/media/\(bad)")
                #expect(response.status == .notFound, "\(bad)")
                #expect(response.headers[.contentType] == "application/problem+json")
            }
            #expect(try await s.request(.get, "/media/\(String(repeating: "0", count: 64))").status == .notFound)
            #expect(try await s.request(.get, "/media/\(logoID.uppercased())").status == .ok)
            let anonymous = try await s.request(.get, "/media/\(logoID)", as: nil)
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.headers[.wwwAuthenticate] == "Basic realm=\"RichPush\", charset=\"UTF-8\"")
        }
    }

    @Test("--public-media serves without credentials, publicly cacheable", arguments: StoreEngine.all)
    func publicMedia(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine, { $0.publicMedia = true }) { s in
            let response = try await s.request(.get, "/media/\(logoID)", as: nil)
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "public, max-age=31536000, immutable")
            #expect(try await s.request(.post, "/api/media", as: nil, body: logo).status == .unauthorized)
        }
    }

    @Test("past the upload limit, POST /api/media answers 503 with Retry-After instead of queueing work", arguments: StoreEngine.all)
    func uploadLimit(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine, { $0.maxConcurrentUploads = 0 }) { s in
            let logo = try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
            let busy = try await s.request(.post, "/api/media", body: logo)
            #expect(busy.status == .serviceUnavailable)
            #expect(busy.headers[.retryAfter] == "1")
            #expect(busy.detail.contains("uploads"))
        }
        let gate = Gate(limit: 2)
        #expect(throws: Never.self) { try gate.enter(); try gate.enter() }
        #expect(throws: Gate.Refusal.full) { try gate.enter() }
        gate.leave()
        #expect(throws: Never.self) { try gate.enter() }
        // One user holds at most a quarter of the slots; others still get theirs.
        let shared = Gate(limit: 16)
        for _ in 0..<4 { #expect(throws: Never.self) { try shared.enter(key: "mallory") } }
        #expect(throws: Gate.Refusal.keyFull) { try shared.enter(key: "mallory") }
        #expect(throws: Never.self) { try shared.enter(key: "alice") }
        shared.leave(key: "mallory")
        #expect(throws: Never.self) { try shared.enter(key: "mallory") }
    }

    @Test("a request head trickled a byte at a time (slowloris) is cut off at the head deadline, however often bytes come", arguments: StoreEngine.all)
    func slowHead(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine, { $0.headTimeout = 1 }) { s in
            let port = try #require(s.client.port)
            let sentBeforeClose = try await onOwnThread { () throws -> Int in
                let fd = try connectTo(port: port, timeout: 10)
                let head = Array("GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: \(String(repeating: "a", count: 200))\r\n\r\n".utf8)
                var sent = 0
                for byte in head {
                    if send(fd, [byte], 1, Int32(MSG_NOSIGNAL)) <= 0 { break }
                    sent += 1
                    usleep(100_000) // 10 bytes a second: never idle long, never done
                    var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    if poll(&probe, 1, 0) > 0 { var b: UInt8 = 0; if recv(fd, &b, 1, Int32(MSG_PEEK)) == 0 { break } } // closed by the server
                }
                close(fd)
                return sent
            }
            // A 1 s deadline at 10 bytes a second: closed after about 10 of the head's 240 bytes.
            #expect(sentBeforeClose < 60, "sent \(sentBeforeClose) bytes before the server closed")
            // A whole head sent at once is served as ever, and a keep-alive connection idle
            // between requests for longer than the head deadline is not cut off.
            #expect(try await s.request(.get, "/health", as: nil).status == .ok)
            let answers = try await onOwnThread { () throws -> [String] in
                let fd = try connectTo(port: port, timeout: 10)
                defer { close(fd) }
                let first = exchange(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").head
                usleep(1_800_000)
                let second = exchange(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").head
                return [first, second]
            }
            #expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 200") }, "\(answers)")
        }
    }

    @Test("a blob too large for the cache is streamed from its file with the same headers, Range, HEAD and 304", arguments: StoreEngine.all)
    func streamedBlob(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine, { $0.blobCacheBytes = 1 << 20 }) { s in // entries up to 128 KiB: this one is streamed
            let png = PNGBuilder.rgb(width: 300, height: 300, seed: 11)
            #expect(png.count > 200_000)
            let upload = try await s.request(.post, "/api/media", body: png)
            #expect(upload.status == .created)
            let id = MediaID(hashing: png).hex
            for _ in 0..<2 {
                let full = try await s.request(.get, "/media/\(id)")
                #expect(full.status == .ok)
                #expect(full.bytes == png)
                #expect(full.headers[.contentLength] == String(png.count))
                #expect(full.headers[.eTag] == "\"\(id)\"" && full.headers[.contentType] == "image/png")
            }
            let ranged = try await s.request(.get, "/media/\(id)", headers: [.range: "bytes=100000-100099"])
            #expect(ranged.status == .partialContent)
            #expect(ranged.bytes == Array(png[100_000..<100_100]))
            #expect(ranged.headers[.contentRange] == "bytes 100000-100099/\(png.count)")
            let tail = try await s.request(.get, "/media/\(id)", headers: [.range: "bytes=-300000"])
            #expect(tail.status == .partialContent && tail.bytes == png)
            let head = try await s.request(.head, "/media/\(id)")
            #expect(head.status == .ok && head.bytes.isEmpty && head.headers[.contentLength] == String(png.count))
            #expect(try await s.request(.get, "/media/\(id)", headers: [.ifNoneMatch: "\"\(id)\""]).status == .notModified)
            #expect(try await s.request(.get, "/media/\(id)", headers: [.range: "bytes=\(png.count)-"]).status == .rangeNotSatisfiable)
        }
    }

    @Test("a request head of more than 100 fields is refused (400) and the connection closed", arguments: StoreEngine.all)
    func headLimits(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let port = try #require(s.client.port)
            let fields = (0..<150).map { "X-Field-\($0): v\r\n" }.joined()
            let answer = try await rawExchange(port: port, "GET /health HTTP/1.1\r\nHost: x\r\n\(fields)\r\n", untilClose: true)
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(80))")
            let within = (0..<50).map { "X-Field-\($0): v\r\n" }.joined()
            #expect(try await rawExchange(port: port, "GET /health HTTP/1.1\r\nHost: x\r\n\(within)\r\n").hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test("a connection with nothing in flight is closed after the idle timeout", arguments: StoreEngine.all)
    func idleTimeout(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine, { $0.idleTimeout = 1 }) { s in
            let port = try #require(s.client.port)
            let closedWithin = try await onOwnThread { () throws -> Double in
                let fd = try connectTo(port: port, timeout: 10)
                defer { close(fd) }
                let start = Date()
                var byte: UInt8 = 0
                _ = recv(fd, &byte, 1, 0) // returns 0 when the server closes (or -1 after the 10 s receive timeout)
                return Date().timeIntervalSince(start)
            }
            #expect(closedWithin < 8, "closed after \(closedWithin) s")
        }
    }

    @Test("an upload refused early (413) with Connection: close: the client can send the rest and reads its answer; the server then closes", arguments: StoreEngine.all)
    func earlyRefusalDoesNotHang(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let port = try #require(s.client.port)
            let outcome = try await onOwnThread { () throws -> (sent: Int, answer: String) in
                let fd = try connectTo(port: port, timeout: 10)
                defer { close(fd) }
                var tv = timeval(tv_sec: 30, tv_usec: 0) // a send that blocks this long means nobody reads (generous: the suite loads 2 cores)
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                let size = 11 << 20
                let basic = Data("alice:wonderland".utf8).base64EncodedString()
                sendAll(fd, Array("POST /api/media HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(basic)\r\nContent-Length: \(size)\r\nConnection: close\r\n\r\n".utf8))
                let chunk = [UInt8](repeating: 0x42, count: 1 << 16)
                var sent = 0
                while sent < size {
                    let n = chunk.withUnsafeBytes { send(fd, $0.baseAddress, min($0.count, size - sent), Int32(MSG_NOSIGNAL)) }
                    if n <= 0 { break }
                    sent += n
                }
                return (sent, receiveAll(fd))
            }
            #expect(outcome.sent == 11 << 20)
            #expect(outcome.answer.hasPrefix("HTTP/1.1 413"))
            #expect(outcome.answer.contains("too_large"))
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
