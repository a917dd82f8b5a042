import CMemoryFile
import NIOConcurrencyHelpers
import NIOCore

/// A whole HTTP/1.1 answer from memory (its head, the `Date` line of one second, the body) in a
/// sealed memory file, which the fast path writes to a plain-HTTP socket with `sendfile(2)`, as
/// nginx writes its files (issue #28).
///
/// Written from a buffer, every answer copies the body into new socket buffers, and the client
/// then copies it out of memory no cache has seen: on this machine the client spent 15% more
/// per answer that way than on nginx's. With `sendfile` every answer points at the same pages,
/// so neither copy touches new memory, and head and body leave in one call with nothing to cork.
///
/// A file is made on the first answer of a second for its blob and `Cache-Control`
/// (`ServedBlob.wireFile`) and is never written again (its seals forbid it): an answer in a
/// slow client's socket buffers keeps its own second's `Date`. It is closed when the last
/// reference goes: the blob's, until the next second's file or the cache lets the blob go, and
/// each connection's whose writes may still read it (`WireFile.Holder`). Until then NIO's
/// `NIOFileHandle` refuses to close a descriptor a write is using, so a descriptor number is
/// never read after it is closed.
final class WireFile: Sendable {
    let handle: NIOFileHandle
    /// The answer's length in bytes.
    let count: Int
    private let budget: Budget

    /// Makes the file: `count` bytes that `write` puts in a buffer. Nil when `budget` has no
    /// room for them or the system refuses the file (the answer is then written from memory).
    init?(budget: Budget, name: String, count: Int, write: (inout ByteBuffer) -> Void) {
        guard budget.reserve(count) else { return nil }
        var bytes = ByteBuffer()
        bytes.reserveCapacity(count)
        write(&bytes)
        let descriptor = bytes.withUnsafeReadableBytes { cmemoryfile_make("richpush \(name)", $0.baseAddress, $0.count) }
        guard descriptor >= 0, bytes.readableBytes == count else {
            budget.release(count)
            if descriptor >= 0 { _ = close(descriptor) }
            return nil
        }
        self.handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        self.count = count
        self.budget = budget
    }

    /// The whole file, to write.
    var region: FileRegion { FileRegion(fileHandle: handle, readerIndex: 0, endIndex: count) }

    deinit {
        try? handle.close()
        budget.release(count)
    }

    /// The bytes all files of one cache may hold at once (beside the cache's own copies), and
    /// how many files: each is a descriptor, and connections need theirs.
    final class Budget: Sendable {
        let limit: Int
        let fileLimit: Int
        private let used = NIOLockedValueBox((bytes: 0, files: 0))

        /// At most `limit` bytes in at most `files` files; by default an eighth of the process's
        /// descriptors, and no more than 512.
        init(limit: Int, files: Int = Budget.defaultFileLimit) {
            self.limit = limit
            self.fileLimit = files
        }

        static var defaultFileLimit: Int {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 64 }
            return Int(min(512, limit.rlim_cur / 8))
        }

        /// Bytes held by open files.
        var bytes: Int { used.withLockedValue { $0.bytes } }

        func reserve(_ count: Int) -> Bool {
            used.withLockedValue { used in
                guard used.bytes + count <= limit, used.files < fileLimit else { return false }
                used.bytes += count
                used.files += 1
                return true
            }
        }

        func release(_ count: Int) {
            used.withLockedValue { used in
                used.bytes -= count
                used.files -= 1
            }
        }
    }

    /// The files one connection has written and may still be writing: each is kept until a
    /// write after its last one is done (writes complete in order), or the connection closes.
    /// At most `capacity`: a client that stops reading while its answers span more seconds or
    /// blobs than that gets the rest from memory, so what it holds stays bounded.
    struct Holder {
        static let capacity = 4
        private var held: [(file: WireFile, lastWrite: UInt64)] = []
        private var writes: UInt64 = 0

        /// Whether `file` can be written now; when it can, it is held. `confirm` names the
        /// write when it needs a promise that calls `release(before:)` once it is done: the
        /// first write of a file while others are held (so at most one a second per blob on a
        /// keep-alive connection, and none on a connection that only ever writes one file).
        mutating func hold(_ file: WireFile) -> (allowed: Bool, confirm: UInt64?) {
            writes += 1
            if let index = held.firstIndex(where: { $0.file === file }) {
                held[index].lastWrite = writes
                return (true, nil)
            }
            guard held.count < Self.capacity else { return (false, nil) }
            held.append((file, writes))
            return (true, held.count > 1 ? writes : nil)
        }

        /// Lets go of the files whose writes all came before write `write`, which is done.
        mutating func release(before write: UInt64) {
            held.removeAll { $0.lastWrite < write }
        }

        /// Everything held (the connection is closed, or hands the rest to another owner).
        mutating func takeAll() -> [WireFile] {
            defer { held.removeAll() }
            return held.map(\.file)
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
