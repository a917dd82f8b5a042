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
/// slow client's socket buffers keeps its own second's `Date`. Its budget keeps it for that
/// second and the next (new answers need it no longer), and each connection whose writes may
/// still read it keeps it until they are done (`WireFile.Holder`); it is closed when the last
/// of them lets go. NIO lets one user at a time use a `NIOFileHandle`, so each event loop writes
/// through a handle of its own, a duplicate of the file's descriptor (`region(on:)`).
public final class WireFile: Sendable {
    /// The file's own descriptor; the event loops' handles are duplicates of it.
    private let descriptor: CInt
    /// The answer's length in bytes.
    let count: Int
    /// The second (Unix time) of its `Date`.
    let second: Int
    private let budget: Budget
    private let handles = NIOLockedValueBox<[(loop: ObjectIdentifier, handle: NIOFileHandle)]>([])

    /// Makes the file of `second`: `count` bytes that `write` puts in a buffer. Nil when
    /// `budget` has no room for them or the system refuses the file (the answer is then written
    /// from memory).
    public init?(budget: Budget, name: String, second: Int, count: Int, write: (inout ByteBuffer) -> Void) {
        guard budget.reserve(count, second: second) else { return nil }
        var bytes = ByteBuffer()
        bytes.reserveCapacity(count)
        write(&bytes)
        let descriptor = bytes.withUnsafeReadableBytes { cmemoryfile_make("richpush \(name)", $0.baseAddress, $0.count) }
        guard descriptor >= 0, bytes.readableBytes == count else {
            budget.release(count, descriptors: 1)
            if descriptor >= 0 { _ = close(descriptor) }
            return nil
        }
        self.descriptor = descriptor
        self.count = count
        self.second = second
        self.budget = budget
        budget.keep(self)
    }

    /// The whole file, to write on `loop`, through that loop's handle (made on its first
    /// use); nil when the budget has no descriptor for it or the system refuses one.
    func region(on loop: any EventLoop) -> FileRegion? {
        let key = ObjectIdentifier(loop)
        let handle = handles.withLockedValue { handles -> NIOFileHandle? in
            if let entry = handles.first(where: { $0.loop == key }) { return entry.handle }
            guard budget.reserveDescriptor() else { return nil }
            let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else {
                budget.release(0, descriptors: 1)
                return nil
            }
            let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: copy)
            handles.append((key, handle))
            return handle
        }
        return handle.map { FileRegion(fileHandle: $0, readerIndex: 0, endIndex: count) }
    }

    /// Sends `count` bytes of the file from `offset` to the socket `fd` with `sendfile(2)`;
    /// how much the socket took, or -1 (with `errno`).
    func send(to fd: CInt, from offset: Int, count: Int) -> Int {
        var position = off_t(offset)
        return Glibc.sendfile(fd, descriptor, &position, count)
    }

    /// The file's bytes from `offset` to its end, copied (what the socket did not take of it).
    func bytes(from offset: Int) -> ByteBuffer? {
        var buffer = ByteBuffer()
        let wanted = count - offset
        let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { target in
            max(0, pread(descriptor, target.baseAddress, wanted, off_t(offset)))
        }
        return read == wanted ? buffer : nil
    }

    deinit {
        // No write can be using a handle now: the budget and every holder have let go.
        let handles = handles.withLockedValue { $0 }
        for entry in handles {
            do { try entry.handle.close() } catch { assertionFailure("a wire file's handle is still in use: \(error)") }
        }
        _ = close(descriptor)
        budget.release(count, descriptors: 1 + handles.count)
    }

    /// What all files of one cache may hold at once, beside the cache's own copies: bytes, and
    /// descriptors (connections need theirs). It also keeps each file for its second and the
    /// next; files of earlier seconds are let go when a new file is made, when one does not
    /// fit, and by a sweep once a second while any is kept.
    public final class Budget: Sendable {
        let limit: Int
        let descriptorLimit: Int
        private struct State {
            var bytes = 0
            var descriptors = 0
            var kept: [WireFile] = []
            var sweeping = false
        }
        private let state = NIOLockedValueBox(State())

        /// At most `limit` bytes in at most `descriptors` descriptors; by default an eighth of
        /// the process's, and no more than 512.
        public init(limit: Int, descriptors: Int = Budget.defaultDescriptorLimit) {
            self.limit = limit
            self.descriptorLimit = descriptors
        }

        public static var defaultDescriptorLimit: Int {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 64 }
            return Int(min(512, limit.rlim_cur / 8))
        }

        /// Bytes held by open files.
        var bytes: Int { state.withLockedValue { $0.bytes } }
        /// Descriptors held by open files.
        var descriptors: Int { state.withLockedValue { $0.descriptors } }

        /// Room for a file of `count` bytes (one descriptor) made in `second`; when there is
        /// none, the files of seconds before the last are let go first.
        func reserve(_ count: Int, second: Int) -> Bool {
            if take(count, descriptors: 1) { return true }
            // Released after the lock: a file let go here may close now, and gives its room back.
            guard !letGo(before: second - 1).isEmpty else { return false }
            return take(count, descriptors: 1)
        }

        /// Room for one more descriptor (a loop's handle).
        func reserveDescriptor() -> Bool { take(0, descriptors: 1) }

        func release(_ count: Int, descriptors: Int) {
            state.withLockedValue { state in
                state.bytes -= count
                state.descriptors -= descriptors
            }
        }

        /// Keeps `file` for its second and the next, and lets go of files of earlier seconds.
        fileprivate func keep(_ file: WireFile) {
            let earlier = letGo(before: file.second - 1)
            let sweep = state.withLockedValue { state in
                state.kept.append(file)
                defer { state.sweeping = true }
                return !state.sweeping
            }
            _ = earlier
            if sweep { sweepSoon() }
        }

        /// In a second, lets go of the files of seconds before the last, and goes on while any is kept.
        private func sweepSoon() {
            Task {
                try? await Task.sleep(for: .seconds(1))
                let earlier = letGo(before: time(nil) - 1)
                let again = state.withLockedValue { state in
                    state.sweeping = !state.kept.isEmpty
                    return state.sweeping
                }
                _ = earlier
                if again { sweepSoon() }
            }
        }

        private func take(_ count: Int, descriptors: Int) -> Bool {
            state.withLockedValue { state in
                guard state.bytes + count <= limit, state.descriptors + descriptors <= descriptorLimit else { return false }
                state.bytes += count
                state.descriptors += descriptors
                return true
            }
        }

        /// Stops keeping the files of seconds before `second`; returns them, for the caller to
        /// release outside the lock.
        private func letGo(before second: Int) -> [WireFile] {
            state.withLockedValue { state in
                guard state.kept.contains(where: { $0.second < second }) else { return [] }
                let earlier = state.kept.filter { $0.second < second }
                state.kept.removeAll { $0.second < second }
                return earlier
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
        /// A refused write's promise is pending (one at a time: a client that does not read
        /// is not given one per request).
        private var refusalPending = false

        /// Whether `file` can be written now; when it can, it is held. `confirm` names the
        /// write when it needs a promise that calls `release(before:)` once it is done: the
        /// first write of a file while others are held (so at most one a second per blob on a
        /// keep-alive connection, and none on a connection that only ever writes one file),
        /// and a write refused because four are held (the answer then goes from memory, and
        /// the promise on an empty write after it).
        mutating func hold(_ file: WireFile) -> (allowed: Bool, confirm: UInt64?) {
            writes += 1
            if let index = held.firstIndex(where: { $0.file === file }) {
                held[index].lastWrite = writes
                return (true, nil)
            }
            guard held.count < Self.capacity else {
                guard !refusalPending else { return (false, nil) }
                refusalPending = true
                return (false, writes)
            }
            held.append((file, writes))
            return (true, held.count > 1 ? writes : nil)
        }

        /// Lets go of the files whose writes all came before write `write`, which is done.
        mutating func release(before write: UInt64) {
            refusalPending = false
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
