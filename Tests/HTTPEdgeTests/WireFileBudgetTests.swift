@testable import HTTPEdge
import NIOCore
import NIOEmbedded
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the answers written as files (`WireFile`) may hold at once (`WireFile.Budget`), and how
/// long a connection keeps the files its writes may still read (`WireFile.Holder`).
@Suite("Wire files: budgets and holders")
struct WireFileBudgetTests {
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
