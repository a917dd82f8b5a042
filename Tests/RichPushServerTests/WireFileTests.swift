import Foundation
import HTTPTypes
import MediaStore
import NIOCore
import RichPushCore
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

    @Test("over plain HTTP the front's answers are files, byte for byte the answers from memory; a file closes once its blob and the connections that wrote it are gone")
    func answersAsFiles() async throws {
        try await TestServer.run(engine: .embedded, { $0.publicMedia = true }) { s in
            let png = PNGBuilder.rgb(width: 40, height: 40, seed: UInt64.random(in: 1...UInt64.max))
            let id = MediaID(hashing: png).hex
            #expect(try await s.request(.post, "/api/media", body: png).status == .created)
            #expect(try await s.request(.get, "/media/\(id)").status == .ok) // cache it
            let port = try #require(s.client.port)
            let get = "GET /media/\(id) HTTP/1.1\r\nHost: x\r\n\r\n"
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
            #expect(s.fastPath.blobs.wireBudget.bytes > 0)
            // Removed: the cache lets it go at its next check, and with it the file.
            let other = try await s.openStoreAgain()
            defer { other.close() }
            _ = try await other.media.remove(id)
            try await Task.sleep(for: .milliseconds(1200))
            #expect(try await s.request(.get, "/media/\(id)").status == .notFound)
            #expect(try await eventually(within: 10) { Self.openFiles(id) == 0 })
        }
    }

    @Test("a budget refuses a file it has no room for and gets its bytes back when the file closes; a file is sealed against writes")
    func budget() throws {
        let budget = WireFile.Budget(limit: 100)
        func file(_ count: Int) -> WireFile? {
            WireFile(budget: budget, name: "test", count: count) { $0.writeRepeatingByte(7, count: count) }
        }
        var first = file(60)
        #expect(first != nil && budget.bytes == 60)
        #expect(file(50) == nil && budget.bytes == 60)
        first = nil
        #expect(budget.bytes == 0)
        // And a number of files.
        let two = WireFile.Budget(limit: 100, files: 2)
        let kept = [1, 2, 3].map { _ in WireFile(budget: two, name: "test", count: 1) { $0.writeInteger(UInt8(1)) } }
        #expect(kept.map { $0 != nil } == [true, true, false])
        let sealed = try #require(file(10))
        let (written, error, read) = try sealed.handle.withUnsafeFileDescriptor { fd -> (Int, Int32, [UInt8]) in
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
        let files = try (0..<5).map { _ in try #require(WireFile(budget: budget, name: "test", count: 1) { $0.writeInteger(UInt8(1)) }) }
        var holder = WireFile.Holder()
        func hold(_ index: Int) -> (Bool, UInt64?) { holder.hold(files[index]) }
        #expect(hold(0) == (true, nil)) // the only file: held until the connection closes
        #expect(hold(1) == (true, 2)) // a file's first write while another is held confirms
        #expect(hold(0) == (true, nil)) // write 3, on a file already held
        #expect(hold(2) == (true, 4))
        #expect(hold(3) == (true, 5))
        #expect(hold(4) == (false, nil)) // four held: the fifth is written from memory
        holder.release(before: 4) // writes 1 to 3 are done: files 0 and 1 can go
        #expect(hold(4) == (true, 7))
        let held = holder.takeAll().map(ObjectIdentifier.init)
        #expect(held == [2, 3, 4].map { ObjectIdentifier(files[$0]) })
        #expect(holder.takeAll().isEmpty)
        #expect(hold(0) == (true, nil))
    }
}
