import Foundation
import HTTPTypes
import MediaStore
import NIOCore
import RichPushCore
@testable import HTTPEdge
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Answers from memory written as files with sendfile(2) over plain HTTP (`WireFile`).
@Suite("Answers as files over plain HTTP")
struct WireFileTests {
    /// How many memory files for blob `hex` this process has open.
    static func openFiles(_ hex: String) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { entry in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"))?.contains("memfd:richpush \(hex)") ?? false
        }.count
    }

    /// A new image of `side` × `side` pixels, uploaded to `s` and fetched once (so it is cached,
    /// and only its own test has a file for it): its bytes, id, the server's port and a plain GET of it.
    static func cachedImage(side: Int, on s: TestServer) async throws -> (png: [UInt8], id: String, port: Int, get: String) {
        let png = PNGBuilder.rgb(width: side, height: side, seed: UInt64.random(in: 1...UInt64.max))
        let id = MediaID(hashing: png).hex
        #expect(try await s.request(.post, "/api/media", body: png).status == .created)
        #expect(try await s.request(.get, "/media/\(id)").status == .ok)
        return (png, id, try #require(s.client.port), "GET /media/\(id) HTTP/1.1\r\nHost: x\r\n\r\n")
    }

    @Test("over plain HTTP the front's answers are files, byte for byte the answers from memory; a file closes within seconds once its second is over and no connection writes it")
    func answersAsFiles() async throws {
        try await TestServer.run(engine: .embedded, { $0.publicMedia = true }) { s in
            let (png, id, port, get) = try await Self.cachedImage(side: 40, on: s)
            let outcome = try await onOwnThread { () throws -> (buffered: (head: String, body: [UInt8]), files: [(head: String, body: [UInt8])], open: Int) in
                // A header the front does not read: the full pipeline answers, from memory, with a buffer.
                let full = try connectTo(port: port)
                defer { close(full) }
                let buffered = exchange(full, get.replacingOccurrences(of: "\r\n\r\n", with: "\r\nContent-Length: 0\r\n\r\n"))
                let fd = try connectTo(port: port)
                defer { close(fd) }
                let files = (0..<3).map { _ in exchange(fd, get) }
                return (buffered, files, Self.openFiles(id))
            }
            // In field order is not asked: on a machine slow enough that the blob's once-a-second
            // check falls due between the two connections, the buffered request goes to the
            // router, whose fields are the same in another order (CI, session 27).
            func lines(_ head: String) -> [String] {
                head.split(separator: "\r\n").map { $0.hasPrefix("Date: ") ? "Date: <now>" : String($0) }.sorted()
            }
            #expect(outcome.buffered.head.hasPrefix("HTTP/1.1 200 OK") && outcome.buffered.body == png)
            for answer in outcome.files {
                #expect(lines(answer.head) == lines(outcome.buffered.head))
                #expect(answer.body == png)
                #expect(answer.head.contains("\r\nDate: ") && !answer.head.contains("Connection:"))
            }
            #expect(outcome.open >= 1, "no memory file was open for the blob while its connection was")
            #expect(s.fastPath.routes.blobs.wireBudget.bytes > 0)
            // Removed: the cache lets it go at its next check. Its file is kept for its second
            // and the next, and closes then (its connection is closed).
            let other = try await s.openStoreAgain()
            defer { other.close() }
            _ = try await other.media.remove(id)
            try await Task.sleep(for: .milliseconds(1200))
            #expect(try await s.request(.get, "/media/\(id)").status == .notFound)
            #expect(try await eventually(within: 10) { Self.openFiles(id) == 0 })
        }
    }

    @Test("many connections on both event loops fetch one blob at once: every answer is whole (each loop writes the shared file through its own handle)")
    func concurrentLoops() async throws {
        try await TestServer.run(engine: .embedded, { $0.publicMedia = true; $0.eventLoopThreads = 2 }) { s in
            let (png, _, port, get) = try await Self.cachedImage(side: 120, on: s)
            let whole = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await onOwnThread {
                            let fd = try connectTo(port: port)
                            defer { close(fd) }
                            return (0..<150).reduce(0) { count, _ in
                                let answer = exchange(fd, get)
                                return count + (answer.head.hasPrefix("HTTP/1.1 200 OK") && answer.body == png ? 1 : 0)
                            }
                        }
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(whole == 8 * 150)
        }
    }
}
