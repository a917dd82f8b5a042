import Foundation
import HTTPTypes
import MediaStore
import NIOCore
import NIOEmbedded
import RichPushCore
@testable import HTTPEdge
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
            func lines(_ head: String) -> [String] {
                head.split(separator: "\r\n").map { $0.hasPrefix("Date: ") ? "Date: <now>" : String($0) }
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

    @Test("a budget refuses a file it has no room for, keeps each file for its second and the next, and makes room from earlier seconds; a file is sealed against writes, and each event loop writes it through its own descriptor")
    func budget() throws {
        let budget = WireFile.Budget(limit: 100)
        func file(_ count: Int, second: Int = 1, in budget: WireFile.Budget) -> WireFile? {
            WireFile(budget: budget, name: "test", second: second, count: count) { $0.writeRepeatingByte(7, count: count) }
        }
        #expect(file(60, in: budget) != nil && budget.bytes == 60) // kept by the budget, not by the caller
        #expect(file(50, in: budget) == nil && budget.bytes == 60)
        #expect(file(50, second: 2, in: budget) == nil) // the second before is kept too
        #expect(file(50, second: 3, in: budget) != nil && budget.bytes == 50) // second 1's file let go for it
        let two = WireFile.Budget(limit: 100, descriptors: 2)
        let kept = [1, 2, 3].map { _ in file(1, in: two) }
        #expect(kept.map { $0 != nil } == [true, true, false])

        let sealed = try #require(file(10, second: 5, in: budget))
        let (first, second) = (EmbeddedEventLoop(), EmbeddedEventLoop())
        let handle = try #require(sealed.region(on: first)?.fileHandle)
        #expect(sealed.region(on: first)?.fileHandle === handle)
        #expect(try #require(sealed.region(on: second)?.fileHandle) !== handle)
        #expect(budget.descriptors == 3) // this one and a handle per loop (making it let go of second 3's file)
        let (written, error, read) = try handle.withUnsafeFileDescriptor { fd -> (Int, Int32, [UInt8]) in
            let written = pwrite(fd, "x", 1, 0)
            let error = errno
            var back = [UInt8](repeating: 0, count: 20)
            let count = pread(fd, &back, 20, 0)
            return (written, error, Array(back.prefix(max(0, count))))
        }
        #expect(written == -1 && error == EPERM)
        #expect(read == [UInt8](repeating: 7, count: 10))
    }

    @Test("a connection holds each file until a write after its last one is done, and at most four at once")
    func holder() throws {
        let budget = WireFile.Budget(limit: 1000)
        let files = try (0..<5).map { _ in try #require(WireFile(budget: budget, name: "test", second: 1, count: 1) { $0.writeInteger(UInt8(1)) }) }
        var holder = WireFile.Holder()
        func hold(_ index: Int) -> (Bool, UInt64?) { holder.hold(files[index]) }
        #expect(hold(0) == (true, nil)) // the only file: held until the connection closes
        #expect(hold(1) == (true, 2)) // a file's first write while another is held confirms
        #expect(hold(0) == (true, nil)) // write 3, on a file already held
        #expect(hold(2) == (true, 4))
        #expect(hold(3) == (true, 5))
        #expect(hold(4) == (false, 6)) // four held: the fifth is written from memory, with a promise after it
        #expect(hold(4) == (false, nil)) // and one such promise at a time
        holder.release(before: 4) // writes 1 to 3 are done: files 0 and 1 can go
        #expect(hold(4) == (true, 8))
        let held = holder.takeAll().map(ObjectIdentifier.init)
        #expect(held == [2, 3, 4].map { ObjectIdentifier(files[$0]) })
        #expect(holder.takeAll().isEmpty)
        #expect(hold(0) == (true, nil))
    }
}
