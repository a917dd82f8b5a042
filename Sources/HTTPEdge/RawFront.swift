import CEpoll
import Foundation
import HeapModule
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The accepting side of the plain HTTP/1.1 listener: threads of its own, each with an epoll,
/// accept every connection and answer the simplest and most common requests (a plain `GET`
/// answered from memory, whole in one write, with or without `Connection: close`) without NIO.
/// Every other connection is given to NIO as it is, with the bytes already read
/// (`RawAdoption`), and meets `FastPathFront` and the full pipeline as before.
///
/// A first fetch over a new connection costs nginx about 33 µs of CPU on this machine; NIO's
/// channel for it (the accept handler, the pipeline, its futures and loop tasks) cost `serve`
/// about 40 µs more (BENCHMARKS.md, sessions 36 and 37). Here it costs one `accept4`, one
/// `recv`, one `sendmsg` (and a `sendfile` for a large body) and one `close`. A keep-alive
/// connection stays here while its requests are answered so: each costs a `recv`, the writes
/// and one `epoll_ctl` to wait for the next.
///
/// The front is strict: it answers only when a read holds exactly one complete head that
/// `FrontRequestHead` reads, the hot routes answer it now, and the whole answer fits in the
/// socket at once. Anything else (part of a head, a second request behind the first, a miss,
/// an image due for its check, a head of more than 8 KiB) goes to NIO, untouched, with what was
/// read; a write the socket took only in part goes with its unwritten rest (NIO writes it, then
/// closes, or with keep-alive serves the connection on). A connection that sends nothing, at
/// first or after an answer, is closed at the idle timeout, as `FastPathFront` closes one.
final class RawFront<Routes: HotRoutes>: Sendable {
    let listening: CInt
    let fastPath: HotPath<Routes>
    let connections: ConnectionCount
    /// A connection that has sent nothing for this long is closed (ns).
    let idleTimeout: UInt64
    let adopt: @Sendable (RawAdoption) -> Void
    private let stopping = Atomic<Bool>(false)
    private let socketClosed = Atomic<Bool>(false)
    private let running = DispatchGroup()

    /// A front accepting from `listening` (bound, listening, non-blocking), answering from
    /// `fastPath`, counting its connections in `connections`, and giving NIO what it does not
    /// answer through `adopt`.
    init(listening: CInt, fastPath: HotPath<Routes>, connections: ConnectionCount, idleTimeout: TimeAmount,
         adopt: @escaping @Sendable (RawAdoption) -> Void) {
        self.listening = listening
        self.fastPath = fastPath
        self.connections = connections
        self.idleTimeout = UInt64(max(idleTimeout.nanoseconds, 1))
        self.adopt = adopt
    }

    /// Starts `threads` accepting threads.
    func start(threads: Int) throws {
        // `sendfile` has no `MSG_NOSIGNAL`: a peer gone must not stop the process (NIO ignores
        // the signal too, from its first socket on).
        signal(SIGPIPE, SIG_IGN)
        for _ in 0..<max(threads, 1) {
            let worker = try RawFrontWorker(front: self)
            running.enter()
            let thread = Thread { [self] in
                cepoll_name_thread("richpush-front")
                worker.run()
                running.leave()
            }
            thread.start()
        }
    }

    /// Bodies smaller than this are copied with their head in one `sendmsg`; larger ones leave
    /// from their wire file with `sendfile`, as nginx sends a file. The copy costs the server
    /// about what the second call does, but the client reads the file's pages from the cache,
    /// where every copy is new memory: a 50 KB first fetch gained 4–8% in rate (BENCHMARKS.md,
    /// session 38).
    static var sendfileFloor: Int { 16 * 1024 }

    /// `stop()` has been called: the threads end at their next turn.
    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Stops accepting: every thread closes the connections that have sent nothing yet and
    /// ends (within a tenth of a second); then the listening socket is closed, once, however
    /// many callers stop the front.
    func stop() async {
        stopping.store(true, ordering: .relaxed)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            running.notify(queue: .global()) { done.resume() }
        }
        if !socketClosed.exchange(true, ordering: .acquiringAndReleasing) { close(listening) }
    }
}

/// One accepting thread of a `RawFront`: its epoll, the connections waiting for their next
/// bytes, and a buffer to read them into. Used only by its thread.
private final class RawFrontWorker<Routes: HotRoutes>: @unchecked Sendable {
    /// A connection this thread holds: its serial (the epoll data's high half, so an event for a
    /// closed connection's reused descriptor is known), and when it was accepted or last answered.
    struct Held {
        var serial: UInt32
        var active: UInt64
    }

    /// When a held connection's idle timeout may fall due: one for each connection, moved on
    /// when it falls due after an answer (`expire`).
    struct Deadline: Comparable {
        var time: UInt64
        var fd: CInt
        var serial: UInt32

        static func < (a: Deadline, b: Deadline) -> Bool { a.time < b.time }
        static func == (a: Deadline, b: Deadline) -> Bool { a.time == b.time }
    }

    let front: RawFront<Routes>
    let epoll: CInt
    /// The connections this thread holds, waiting for their first bytes or, after a keep-alive
    /// answer, their next request.
    var held: [CInt: Held] = [:]
    var deadlines = Heap<Deadline>()
    var serial: UInt32 = 0
    /// The listening socket is out of this epoll: the connection limit was reached, or the
    /// process ran out of descriptors (then until `resumeAt`, uptime ns).
    var paused = false
    var resumeAt: UInt64 = 0
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FrontRequestHead.maximumLength + 1, alignment: 16)
    static var listenData: UInt64 { UInt64.max }
    /// Level-triggered, and left as it is while the connection is held: a keep-alive request
    /// costs no `epoll_ctl` (a connection leaves the epoll before NIO may have it).
    static var events: UInt32 { UInt32(CEPOLL_IN | CEPOLL_RDHUP) }

    init(front: RawFront<Routes>) throws {
        self.front = front
        epoll = cepoll_create()
        guard epoll >= 0 else { throw ListenError.system("epoll_create1") }
        guard cepoll_set(epoll, front.listening, 1, UInt32(CEPOLL_IN | CEPOLL_EXCLUSIVE), Self.listenData) == 0 else {
            close(epoll)
            throw ListenError.system("epoll_ctl")
        }
    }

    deinit {
        buffer.deallocate()
        close(epoll)
    }

    func run() {
        let capacity = 64
        let events = UnsafeMutableBufferPointer<cepoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while !front.isStopping {
            let now = NIODeadline.now().uptimeNanoseconds
            expire(now: now)
            if paused, now >= resumeAt, front.connections.hasRoom {
                paused = cepoll_set(epoll, front.listening, 1, UInt32(CEPOLL_IN | CEPOLL_EXCLUSIVE), Self.listenData) != 0
            }
            var wait: UInt64 = paused ? 10_000_000 : 100_000_000
            if let first = deadlines.min { wait = min(wait, first.time > now ? first.time - now : 0) }
            let count = cepoll_wait(epoll, events.baseAddress, Int32(capacity), Int64(wait))
            guard count > 0 else { continue }
            for event in events.prefix(Int(count)) {
                if event.data == Self.listenData {
                    acceptAll()
                } else {
                    ready(fd: CInt(truncatingIfNeeded: event.data & 0xFFFF_FFFF), serial: UInt32(event.data >> 32))
                }
            }
        }
        // Stopping: the connections waiting for a request are closed, as NIO's quiescing closes
        // an idle one.
        for (fd, _) in held {
            close(fd)
            front.connections.release()
        }
        held = [:]
    }

    /// Accepts what is queued, up to a batch (the others wait for the next turn).
    private func acceptAll() {
        for _ in 0..<64 {
            guard front.connections.take() else {
                // At the limit: the rest wait in the backlog until a connection closes.
                paused = cepoll_remove(epoll, front.listening) == 0
                return
            }
            let fd = cepoll_accept(front.listening)
            guard fd >= 0 else {
                let error = errno
                front.connections.release()
                if error == ECONNABORTED || error == EINTR { continue }
                if error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM {
                    // Out of descriptors or memory: the connection waits in the backlog, and this
                    // thread does not spin on a socket it cannot accept from (NIO backs off a second too).
                    paused = cepoll_remove(epoll, front.listening) == 0
                    resumeAt = NIODeadline.now().uptimeNanoseconds + 1_000_000_000
                }
                return
            }
            serial &+= 1
            read(fd: fd, serial: serial, registered: false)
        }
    }

    /// A held connection's descriptor is readable (or closed).
    private func ready(fd: CInt, serial: UInt32) {
        guard held[fd]?.serial == serial else { return }
        read(fd: fd, serial: serial, registered: true)
    }

    /// Reads a connection's next bytes, and answers, adopts or closes it; with none yet, waits
    /// for them. `registered`: the descriptor is in this epoll (held since an earlier turn).
    private func read(fd: CInt, serial: UInt32, registered: Bool) {
        let count = recv(fd, buffer.baseAddress, buffer.count, 0)
        if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
            wait(fd: fd, serial: serial, registered: registered, answered: false)
            return
        }
        guard count > 0 else {
            // Closed, or reset, before a byte of a request.
            held[fd] = nil
            return drop(fd)
        }
        answer(fd: fd, serial: serial, registered: registered, bytes: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
    }

    /// Waits for the connection's next bytes: puts it in this epoll when it is not there yet,
    /// and holds it with its idle deadline (a new one for a connection not held yet; after an
    /// answer, its last activity moves on).
    private func wait(fd: CInt, serial: UInt32, registered: Bool, answered: Bool) {
        if !registered {
            let data = UInt64(serial) << 32 | UInt64(UInt32(bitPattern: fd))
            guard cepoll_set(epoll, fd, 1, Self.events, data) == 0 else {
                held[fd] = nil
                return drop(fd)
            }
        }
        let now = NIODeadline.now().uptimeNanoseconds
        if held[fd] == nil {
            held[fd] = Held(serial: serial, active: now)
            deadlines.insert(Deadline(time: now + front.idleTimeout, fd: fd, serial: serial))
        } else if answered {
            held[fd]?.active = now
        }
    }

    /// Answers the request in `bytes` when the front may, and then closes the connection or
    /// (keep-alive) waits for its next request; otherwise gives the connection to NIO.
    private func answer(fd: CInt, serial: UInt32, registered: Bool, bytes: UnsafeRawBufferPointer) {
        let start = NIODeadline.now().uptimeNanoseconds
        let fastPath = front.fastPath
        guard bytes.count <= FrontRequestHead.maximumLength, case .head(let head) = FrontRequestHead.read(bytes),
              head.length == bytes.count else { return handOver(fd, registered: registered, read: bytes) }
        var memo: Routes.Memo?
        var recheck: Routes.Recheck?
        guard var answer = fastPath.routes.answer(uri: head.uri, authorization: head.authorization, memo: &memo, recheck: &recheck) else {
            return handOver(fd, registered: registered, read: bytes)
        }
        answer.close = head.close
        fastPath.sample(&answer, uri: head.uri, peer: peerAddress(fd), forwardedFor: head.forwardedFor)
        if !head.close, let file = fastPath.wireFile(answer) {
            return keepAlive(answer, from: file, fd: fd, serial: serial, registered: registered, since: start)
        }
        let parts = [answer.head, head.close ? connectionClose : ByteBuffer(), HTTPDate.line(), answer.body.bytes]
        let total = parts.reduce(0) { $0 + $1.readableBytes }
        // A keep-alive answer here has no file (`wireFile` just said so): it is not asked again.
        let (written, error) = send(parts, of: answer, to: fd, mayUseFile: head.close)
        fastPath.record(answer, since: start, EdgeMetric.memoryAnswersHTTP1)
        if written == total, !head.close { return wait(fd: fd, serial: serial, registered: registered, answered: true) }
        held[fd] = nil
        guard written < total else { return drop(fd) }
        guard written >= 0 || error == EAGAIN || error == EWOULDBLOCK else { return drop(fd) }
        // The socket took part of it: NIO writes the rest when the client reads, then closes or,
        // with keep-alive, serves the connection on.
        var rest = ByteBuffer()
        rest.reserveCapacity(total - max(written, 0))
        var skip = max(written, 0)
        for var part in parts {
            let skipped = min(skip, part.readableBytes)
            part.moveReaderIndex(forwardBy: skipped)
            skip -= skipped
            rest.writeBuffer(&part)
        }
        fastPath.noteAdoption(rest: true)
        if registered { _ = cepoll_remove(epoll, fd) }
        front.adopt(RawAdoption(fd: fd, read: nil, rest: rest, thenServe: !head.close))
    }

    /// Sends a keep-alive answer as its wire file whole, in one `sendfile` (head, `Date` and body,
    /// as `FastPathFront` sends it), then waits for the next request; a rest the socket did not
    /// take goes to NIO, which writes it and serves the connection on.
    private func keepAlive(_ answer: HotAnswer, from file: WireFile, fd: CInt, serial: UInt32, registered: Bool, since start: UInt64) {
        let written = file.send(to: fd, from: 0, count: file.count)
        let error = errno
        front.fastPath.record(answer, since: start, EdgeMetric.memoryAnswersHTTP1)
        if written == file.count { return wait(fd: fd, serial: serial, registered: registered, answered: true) }
        held[fd] = nil
        guard written >= 0 || error == EAGAIN || error == EWOULDBLOCK, let rest = file.bytes(from: max(written, 0)) else { return drop(fd) }
        front.fastPath.noteAdoption(rest: true)
        if registered { _ = cepoll_remove(epoll, fd) }
        front.adopt(RawAdoption(fd: fd, read: nil, rest: rest, thenServe: true))
    }

    /// Gives the connection to NIO with the bytes read from it.
    private func handOver(_ fd: CInt, registered: Bool, read bytes: UnsafeRawBufferPointer) {
        held[fd] = nil
        // Out of this epoll before NIO may have it (a registration stays until removed).
        if registered { _ = cepoll_remove(epoll, fd) }
        front.fastPath.noteAdoption()
        front.adopt(RawAdoption(fd: fd, read: ByteBuffer(bytes: bytes), rest: nil))
    }

    /// Closes a connection this thread has (it leaves the epoll with its descriptor).
    private func drop(_ fd: CInt) {
        close(fd)
        front.connections.release()
    }

    /// Closes the connections that have sent nothing for the idle timeout; a deadline that
    /// falls due for a connection answered since moves to its last answer's.
    private func expire(now: UInt64) {
        while let first = deadlines.min, first.time <= now {
            deadlines.removeMin()
            guard let connection = held[first.fd], connection.serial == first.serial else { continue } // adopted, or closed, since
            let due = connection.active + front.idleTimeout
            if due > now {
                deadlines.insert(Deadline(time: due, fd: first.fd, serial: first.serial))
                continue
            }
            held[first.fd] = nil
            drop(first.fd) // closing it takes it out of the epoll
        }
    }

    /// Sends `parts` (the head's three, then the body) of `answer`: a body of `sendfileFloor`
    /// bytes or more from its wire file (the head in a `sendmsg` marked `MSG_MORE`, then the body
    /// with `sendfile`, as nginx sends a file), when the file can be had; otherwise all four in
    /// one `sendmsg` (always, without `mayUseFile`: a keep-alive answer whose file was refused). Returns how much the socket took (-1: none), and `errno` after the last call.
    private func send(_ parts: [ByteBuffer], of answer: HotAnswer, to fd: CInt, mayUseFile: Bool) -> (Int, CInt) {
        let body = parts[3].readableBytes
        guard mayUseFile, body >= RawFront<Routes>.sendfileFloor,
              let file = answer.body.wireFile(answer.style, date: HTTPDate.now(), budget: front.fastPath.routes.wireBudget),
              file.count > body else {
            let written = send(parts, to: fd, flags: 0)
            return (written, errno)
        }
        let head = parts[0].readableBytes + parts[1].readableBytes + parts[2].readableBytes
        let sent = send(parts, to: fd, flags: Int32(MSG_MORE))
        guard sent == head else { return (sent, errno) }
        // The answer's file ends with its body (the file's own head and `Date` come before it).
        let rest = file.send(to: fd, from: file.count - body, count: body)
        return (rest < 0 ? head : head + rest, errno)
    }

    /// Sends the first three of `parts` in one `sendmsg`, and the fourth too unless `flags`
    /// has `MSG_MORE` (no `SIGPIPE` for a peer gone); how much the socket took, or -1.
    private func send(_ parts: [ByteBuffer], to fd: CInt, flags: Int32) -> Int {
        parts[0].withUnsafeReadableBytes { a in
            parts[1].withUnsafeReadableBytes { b in
                parts[2].withUnsafeReadableBytes { c in
                    parts[3].withUnsafeReadableBytes { d in
                        // On the stack: an answer allocates no array for its vectors.
                        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 4) { vectors in
                            func vector(_ part: UnsafeRawBufferPointer) -> iovec {
                                iovec(iov_base: UnsafeMutableRawPointer(mutating: part.baseAddress), iov_len: part.count)
                            }
                            (vectors[0], vectors[1], vectors[2], vectors[3]) = (vector(a), vector(b), vector(c), vector(d))
                            var message = msghdr()
                            message.msg_iov = vectors.baseAddress
                            message.msg_iovlen = flags & Int32(MSG_MORE) != 0 ? 3 : 4
                            return Glibc.sendmsg(fd, &message, Int32(MSG_NOSIGNAL) | flags)
                        }
                    }
                }
            }
        }
    }

    /// The peer's address as text (for the access log's sampled answers).
    private func peerAddress(_ fd: CInt) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard got == 0 else { return nil }
        // Written as NIO writes a channel's `remoteAddress?.ipAddress`, which `FastPathFront` logs.
        let family = Int32(storage.ss_family)
        return withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: SocketAddress(raw.loadUnaligned(as: sockaddr_in.self), host: "").ipAddress
            case AF_INET6: SocketAddress(raw.loadUnaligned(as: sockaddr_in6.self), host: "").ipAddress
            default: nil
            }
        }
    }
}

extension ListenError {
    /// A system call the listener on `host:port` needed failed (with `errno`).
    static func system(_ call: String, host: String = "", port: Int = 0) -> ListenError {
        ListenError(host: host, port: port, reason: "\(call): \(String(cString: strerror(errno)))")
    }
}
