import Atomics
import CEpoll
import CTLS
import Glibc
import HTTP2Client
import HeapModule
import Histogram

/// One load thread: its connections driven from a level-triggered `epoll` set, the way wrk
/// drives them. A connection writes its request when `epoll` reports it writable, which it asks
/// for only after the previous response ended (so the write happens on the next `epoll_wait`,
/// after every response already waiting has been read); it reads 8 KB at a time while the
/// socket has more, and a response ends, and is timed, when its last byte has been read and
/// framed. Same system calls per response as wrk, so that the two tools load a server alike.
///
/// Over TLS (OpenSSL, as wrk and h2load) a connection first completes its handshake, driven by
/// the same events. Over HTTP/2 (`EpollWorker+HTTP2.swift`) a connection keeps `streams`
/// requests open, as h2load's `-m`. With `newConnection`, each request has its own connection,
/// and its latency runs from the connection's start.
///
/// Every method runs on the worker's own thread; `requests` and `errors` are the only state
/// another thread reads while it runs.
final class EpollWorker: @unchecked Sendable {
    let requests = ManagedAtomic<Int>(0)
    let errors = ManagedAtomic<Int>(0)
    var stats = LoadResult()

    let plan: LoadPlan
    let deadline: UInt64
    let interval: UInt64?
    private let timeout: UInt64
    var connections: [Connection]
    var timers = Heap<Timer>()
    var statusCounts = [Int](repeating: 0, count: 1000)
    private var epollFD: Int32 = -1
    /// A setup error that every connection would meet (a certificate not trusted, no h2): the run stops with it.
    private var fatal: LoadError?
    /// HTTP/2 events of the read being handled.
    var http2Events: [HTTP2Event] = []
    /// HTTP/2 connections with requests to write once this round's events are handled.
    var flushQueue: [Int] = []
    static let readSize = 8 * 1024
    private static let retryDelay: UInt64 = 10_000_000

    init(plan: LoadPlan, connections: Int, deadline: UInt64, interval: UInt64?, firstIntended: (Int) -> UInt64, timeout: Double) {
        self.plan = plan
        self.deadline = deadline
        self.interval = interval
        self.timeout = UInt64(timeout * 1e9)
        self.connections = (0..<connections).map { Connection(nextIntended: firstIntended($0), expectsBody: plan.expectsBody) }
    }

    /// Runs until the deadline, then closes every connection. Throws when the thread cannot set
    /// up (no `epoll` instance) or meets an error no connection would get past.
    func run() throws(LoadError) {
        epollFD = cepoll_create()
        guard epollFD >= 0 else { throw LoadError("epoll_create1 failed: \(String(cString: strerror(errno)))") }
        defer {
            for index in connections.indices where connections[index].fd >= 0 { closeConnection(index) }
            close(epollFD)
        }
        let now = MonotonicClock.now
        for index in connections.indices {
            if plan.newConnection, interval != nil, connections[index].nextIntended > now {
                scheduleConnect(index)
            } else {
                connect(index)
            }
        }
        let capacity = connections.count + 8
        let events = UnsafeMutableBufferPointer<cepoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readSize, alignment: 4096)
        defer { buffer.deallocate() }
        var nextTimeoutCheck = MonotonicClock.now + 100_000_000
        var allDone = false
        while fatal == nil {
            let now = MonotonicClock.now
            if now >= deadline { break }
            while let due = timers.min, due.time <= now { fire(timers.removeMin()) }
            if now >= nextTimeoutCheck {
                checkTimeouts(now)
                nextTimeoutCheck = now + 100_000_000
            }
            var wake = min(deadline, nextTimeoutCheck)
            if let next = timers.min { wake = min(wake, next.time) }
            let count = cepoll_wait(epollFD, events.baseAddress, Int32(capacity), Int64(wake - now))
            if count < 0 {
                guard errno == EINTR else { throw LoadError("epoll_wait failed: \(String(cString: strerror(errno)))") }
                continue
            }
            for event in events.prefix(Int(count)) {
                let index = Int(truncatingIfNeeded: event.data & 0xFFFF_FFFF)
                let generation = UInt32(truncatingIfNeeded: event.data >> 32)
                guard connections[index].generation == generation else { continue }
                if connections[index].connecting {
                    connectFinished(index)
                    continue
                }
                if connections[index].handshaking {
                    handshake(index)
                    continue
                }
                if let http2 = connections[index].http2 {
                    if event.events & UInt32(CEPOLL_IN | CEPOLL_ERR | CEPOLL_HUP) != 0 { readHTTP2(index, http2, buffer: buffer) }
                    if event.events & out != 0, connections[index].generation == generation { flush(index) }
                    continue
                }
                if event.events & UInt32(CEPOLL_IN | CEPOLL_ERR | CEPOLL_HUP) != 0 {
                    readAll(index, buffer: buffer)
                }
                if event.events & out != 0, connections[index].generation == generation, connections[index].wantsWrite {
                    write(index)
                }
            }
            flushQueued()
            requests.store(stats.requests, ordering: .relaxed)
            errors.store(stats.errors, ordering: .relaxed)
            if plan.exhausted, !busy {
                allDone = true
                break
            }
        }
        if let fatal { throw fatal }
        // The --duration cap ended the run first: with --requests, what it left open went unanswered.
        if !allDone, plan.limit != nil { stats.unanswered = openRequests }
        for (status, count) in statusCounts.enumerated() where count > 0 { stats.statuses[status] = count }
    }

    /// Requests taken from the plan and neither answered nor failed: HTTP/2's open streams, and
    /// HTTP/1.1's request in flight (with `newConnection`, taken once its connection was made).
    private var openRequests: Int {
        connections.indices.reduce(0) { open, index in
            if let http2 = connections[index].http2 { return open + http2.streams.count }
            return open + (holdsRequest(index) ? 1 : 0)
        }
    }

    /// HTTP/1.1: the connection has a request taken from the plan and not yet answered (with
    /// `newConnection`, taken once the connection was made, before it is written).
    private func holdsRequest(_ index: Int) -> Bool {
        connections[index].inFlight || (plan.newConnection && connections[index].wantsWrite)
    }

    /// Whether a request of this thread is still open or waiting to be written (or, with
    /// `newConnection`, its connection being made).
    private var busy: Bool {
        connections.contains { connection in
            connection.inFlight || connection.wantsWrite || !(connection.http2?.streams.isEmpty ?? true)
                || (plan.newConnection && connection.fd >= 0 && (connection.connecting || connection.handshaking))
        }
    }

    // MARK: Connections

    func connect(_ index: Int) {
        let now = MonotonicClock.now
        // The request is this connection's: it starts now, or at its turn in an open loop.
        if plan.newConnection { stampRequest(index, now: now) }
        connections[index].since = now
        let fd = socket(plan.address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return connectFailed(index) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let result = plan.address.withSockaddr { Glibc.connect(fd, $0, $1) }
        if result != 0 && errno != EINPROGRESS {
            close(fd)
            return connectFailed(index)
        }
        connections[index].generation &+= 1
        connections[index].fd = fd
        connections[index].connecting = true
        connections[index].registered = 0
        connections[index].parser.reset()
        register(index, events: out)
    }

    private func connectFinished(_ index: Int) {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        let fd = connections[index].fd
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == 0 else {
            closeConnection(index)
            return connectFailed(index)
        }
        connections[index].connecting = false
        if let tls = plan.tls {
            guard let session = ctls_new(tls.pointer, fd, plan.serverName, nil) else {
                // Never a certificate left unchecked: a host the check cannot take stops the run.
                fatal = LoadError("cannot check a certificate against '\(plan.serverName)' (a name or an address OpenSSL does not read): use the server's name or a plain address, or --insecure")
                return
            }
            connections[index].tls = session
            connections[index].handshaking = true
            return handshake(index)
        }
        established(index)
    }

    /// The TLS handshake's next step, when the socket is ready for it.
    private func handshake(_ index: Int) {
        guard let session = connections[index].tls else { return }
        switch ctls_handshake(session) {
        case 1:
            connections[index].handshaking = false
            if plan.isHTTP2, ctls_is_h2(session) == 0 {
                fatal = LoadError("\(plan.serverName) did not agree to HTTP/2 by ALPN (it offers HTTP/1.1 only over TLS): drop --http2")
                return
            }
            established(index)
        case Int32(CTLS_WANT_READ):
            register(index, events: inOnly)
        case Int32(CTLS_WANT_WRITE):
            register(index, events: out)
        default:
            var text = [CChar](repeating: 0, count: 256)
            ctls_error(session, &text, text.count)
            let reason = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if reason.hasPrefix("certificate verify failed") {
                fatal = LoadError("TLS handshake with \(plan.serverName) failed: \(reason) (trust its certificate with --ca FILE, or skip the check with --insecure)")
                return
            }
            if reason.contains("wrong version number") || reason.contains("packet length too long") {
                fatal = LoadError("TLS handshake with \(plan.serverName) failed: \(reason) (does the server speak plain HTTP? try http://)")
                return
            }
            closeConnection(index)
            connectFailed(index)
        }
    }

    /// Connected (and through TLS): the first request goes.
    private func established(_ index: Int) {
        let now = MonotonicClock.now
        if plan.isHTTP2 {
            startHTTP2(index, now: now)
        } else if plan.newConnection {
            guard let target = plan.nextTarget() else { return closeConnection(index) }
            connections[index].inFlightTarget = target
            connections[index].wantsWrite = true
            register(index, events: inOut)
        } else {
            readyForNext(index, now: now)
        }
    }

    func connectFailed(_ index: Int) {
        stats.connectErrors += 1
        timers.insert(Timer(time: MonotonicClock.now + Self.retryDelay, index: index, generation: connections[index].generation))
        connections[index].retrying = true
    }

    func closeConnection(_ index: Int) {
        if let session = connections[index].tls {
            ctls_free(session)
            connections[index].tls = nil
        }
        if connections[index].fd >= 0 { close(connections[index].fd) }
        connections[index].fd = -1
        connections[index].generation &+= 1
        connections[index].connecting = false
        connections[index].handshaking = false
        connections[index].wantsWrite = false
        connections[index].inFlight = false
        connections[index].written = 0
        connections[index].http2 = nil
        connections[index].registered = 0
        connections[index].timerAt = 0
    }

    func reconnect(_ index: Int) {
        closeConnection(index)
        connect(index)
    }

    /// `newConnection`: this connection's request is done; the next one's connection opens now,
    /// or at its turn in an open loop.
    func nextConnection(_ index: Int) {
        closeConnection(index)
        if plan.exhausted { return }
        if interval != nil, connections[index].nextIntended > MonotonicClock.now {
            scheduleConnect(index)
        } else {
            connect(index)
        }
    }

    private func scheduleConnect(_ index: Int) {
        timers.insert(Timer(time: connections[index].nextIntended, index: index, generation: connections[index].generation))
        connections[index].retrying = true
    }

    let inOnly = UInt32(CEPOLL_IN), out = UInt32(CEPOLL_OUT), inOut = UInt32(CEPOLL_IN | CEPOLL_OUT)

    /// Asks `epoll` for `events` on the connection's socket (a system call only when they change).
    func register(_ index: Int, events: UInt32) {
        guard connections[index].registered != events else { return }
        let add = connections[index].registered == 0
        connections[index].registered = events
        _ = cepoll_set(epollFD, connections[index].fd, add ? 1 : 0, events, UInt64(connections[index].generation) << 32 | UInt64(index))
    }

    // MARK: Transport

    /// Reads into `buffer`: the bytes read (> 0), 0 at the end of the stream, `wouldBlock`, or `broken`.
    func receive(_ index: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        if let session = connections[index].tls {
            let count = Int(ctls_read(session, buffer.baseAddress, Int32(buffer.count)))
            switch count {
            case 1...: return count
            case Int(CTLS_WANT_READ), Int(CTLS_WANT_WRITE): return Self.wouldBlock
            case Int(CTLS_CLOSED): return 0
            default: return Self.broken
            }
        }
        let count = read(connections[index].fd, buffer.baseAddress, buffer.count)
        if count >= 0 { return count }
        return errno == EAGAIN || errno == EINTR ? Self.wouldBlock : Self.broken
    }

    /// Writes `count` bytes from `bytes`: how many went (over TLS, all or none), `wouldBlock`, or `broken`.
    func transmit(_ index: Int, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        if let session = connections[index].tls {
            let sent = Int(ctls_write(session, bytes, Int32(count)))
            switch sent {
            case 1...: return sent
            case Int(CTLS_WANT_READ), Int(CTLS_WANT_WRITE): return Self.wouldBlock
            default: return Self.broken
            }
        }
        let sent = send(connections[index].fd, bytes, count, Int32(MSG_NOSIGNAL))
        if sent >= 0 { return sent }
        return errno == EAGAIN || errno == EINTR ? Self.wouldBlock : Self.broken
    }

    static let wouldBlock = -1, broken = -2

    /// Whether to read again after a read of `count` bytes, as wrk: a read that filled the buffer
    /// with bytes still waiting on the socket, or over TLS, bytes of a record OpenSSL already
    /// holds (what is still on the socket, level-triggered `epoll` reports again).
    func mayHaveMore(_ index: Int, after count: Int, of size: Int) -> Bool {
        if let session = connections[index].tls { return ctls_pending(session) > 0 }
        return count == size && cepoll_pending(connections[index].fd) > 0
    }

    // MARK: HTTP/1.1 requests

    /// The connection is free: ask `epoll` to say when it can write, now (closed loop) or when
    /// the next request is due (open loop).
    private func readyForNext(_ index: Int, now: UInt64) {
        // --requests all out: the connection idles until the run ends.
        guard !plan.exhausted else { return register(index, events: inOnly) }
        if interval != nil, connections[index].nextIntended > now {
            timers.insert(Timer(time: connections[index].nextIntended, index: index, generation: connections[index].generation))
            register(index, events: inOnly)
            return
        }
        connections[index].wantsWrite = true
        register(index, events: inOut)
    }

    private func fire(_ timer: Timer) {
        guard connections[timer.index].generation == timer.generation else { return }
        if connections[timer.index].retrying {
            connections[timer.index].retrying = false
            connect(timer.index)
        } else if connections[timer.index].http2 != nil {
            openStreams(timer.index, now: MonotonicClock.now)
            flush(timer.index)
        } else if connections[timer.index].fd >= 0, !connections[timer.index].inFlight, !connections[timer.index].handshaking {
            connections[timer.index].wantsWrite = true
            register(timer.index, events: inOut)
        }
    }

    /// Stamps the connection's request: intended now (closed loop) or at its turn (open loop, the
    /// next turn then one interval later), sent now.
    private func stampRequest(_ index: Int, now: UInt64) {
        var intended = now
        if let interval {
            intended = connections[index].nextIntended
            connections[index].nextIntended += interval
        }
        connections[index].intended = intended
        connections[index].sent = now
    }

    private func write(_ index: Int) {
        if connections[index].written == 0, !connections[index].inFlight {
            if !plan.newConnection {
                // The target is taken as the request starts (a new connection's, as it was made):
                // one taken while waiting for its turn would be lost when --requests run out.
                guard let target = plan.nextTarget() else {
                    connections[index].wantsWrite = false
                    return register(index, events: inOnly)
                }
                connections[index].inFlightTarget = target
                stampRequest(index, now: MonotonicClock.now)
            }
            connections[index].inFlight = true
        }
        let offset = connections[index].written
        let sent = plan.http1[connections[index].inFlightTarget].withUnsafeBytes { bytes in
            transmit(index, bytes.baseAddress! + offset, bytes.count - offset)
        }
        if sent == Self.wouldBlock { return }
        if sent == Self.broken { return failed(index) }
        connections[index].written += sent
        if connections[index].written == plan.http1[connections[index].inFlightTarget].count {
            connections[index].written = 0
            connections[index].wantsWrite = false
            register(index, events: inOnly)
        }
    }

    /// Reads until the socket is empty, framing responses as they end.
    private func readAll(_ index: Int, buffer: UnsafeMutableRawBufferPointer) {
        while true {
            let count = receive(index, into: buffer)
            let now = MonotonicClock.now
            if count == Self.wouldBlock { return }
            if count == Self.broken {
                failed(index)
                return
            }
            if count == 0 {
                if let completion = connections[index].parser.connectionClosed() {
                    responseEnded(index, completion, at: now)
                    plan.newConnection ? nextConnection(index) : reconnect(index)
                } else {
                    failed(index)
                }
                return
            }
            if now < deadline { stats.bytes += count }
            var offset = 0
            while offset < count {
                let parsed: (consumed: Int, completion: ResponseParser.Completion?)
                do {
                    parsed = try connections[index].parser.parse(UnsafeRawBufferPointer(rebasing: buffer[offset..<count]))
                } catch {
                    failed(index)
                    return
                }
                offset += parsed.consumed
                guard let completion = parsed.completion else { continue }
                guard connections[index].inFlight, offset == count || completion.keepAlive == false else {
                    // Bytes the client did not ask for: the stream cannot be trusted.
                    failed(index)
                    return
                }
                responseEnded(index, completion, at: now)
                if plan.newConnection {
                    nextConnection(index)
                    return
                }
                // A server may answer before it has read the whole request (a 413, say); the
                // rest of that request cannot go on the same connection.
                if !completion.keepAlive || connections[index].written != 0 {
                    reconnect(index)
                    return
                }
                readyForNext(index, now: now)
            }
            // As wrk does: go on while a read filled the buffer and the socket has more.
            if !mayHaveMore(index, after: count, of: buffer.count) { return }
        }
    }

    private func responseEnded(_ index: Int, _ completion: ResponseParser.Completion, at end: UInt64) {
        guard connections[index].inFlight else { return }
        connections[index].inFlight = false
        record(status: completion.status, intended: connections[index].intended, end: end)
    }

    /// Counts a response that ended at `end` (only within the run; with `--requests`, one after
    /// the `--duration` cap is unanswered).
    func record(status: Int, intended: UInt64, end: UInt64) {
        guard end <= deadline else {
            if plan.limit != nil { stats.unanswered += 1 }
            return
        }
        stats.requests += 1
        stats.lastResponse = max(stats.lastResponse, end)
        statusCounts[min(max(status, 0), statusCounts.count - 1)] += 1
        _ = stats.latency.record(max(1, (end &- intended) / 1000))
    }

    /// The connection broke (an error, a close, or bytes that are not a response to our request).
    private func failed(_ index: Int) {
        if holdsRequest(index) || !connections[index].parser.isIdle { stats.readErrors += 1 }
        if plan.newConnection {
            nextConnection(index)
        } else {
            reconnect(index)
        }
    }

    /// Counts and drops what waited longer than the timeout. `now` is the loop's, taken before
    /// this round's timers fired: a request or connection they started is younger than zero.
    private func checkTimeouts(_ now: UInt64) {
        let timeout = self.timeout
        func late(_ since: UInt64) -> Bool { now > since && now - since > timeout }
        for index in connections.indices where connections[index].fd >= 0 {
            if let http2 = connections[index].http2 {
                let expired = http2.streams.filter { late($0.sent) }.count
                guard expired > 0 else { continue }
                stats.timeouts += expired
                // The others go down with the connection.
                stats.readErrors += http2.streams.count - expired
            } else if connections[index].inFlight || plan.newConnection || connections[index].connecting || connections[index].handshaking {
                // A request unanswered, or a connection (and its handshake) not made, in time.
                let since = connections[index].inFlight ? connections[index].sent : connections[index].since
                guard late(since) else { continue }
                stats.timeouts += 1
            } else {
                continue
            }
            plan.newConnection ? nextConnection(index) : reconnect(index)
        }
    }
}

/// One connection's state.
struct Connection {
    var fd: Int32 = -1
    /// Bumped at every (re)connect and close, so that stale events and timers are ignored.
    var generation: UInt32 = 0
    /// The events `epoll` watches for (0: not in the set).
    var registered: UInt32 = 0
    var connecting = false
    var handshaking = false
    var retrying = false
    /// When the connection started (for a connect or handshake that never ends).
    var since: UInt64 = 0
    /// The OpenSSL session over TLS.
    var tls: UnsafeMutableRawPointer?
    /// The HTTP/2 connection's state, over HTTP/2.
    var http2: HTTP2Connection?
    /// EPOLLOUT is registered: the next request (or the rest of it) goes out when writable.
    var wantsWrite = false
    var inFlight = false
    /// HTTP/1.1: the target of the request in flight (or next).
    var inFlightTarget = 0
    var written = 0
    var intended: UInt64 = 0
    var sent: UInt64 = 0
    var nextIntended: UInt64
    /// HTTP/2, open loop: the time the connection's timer is set for.
    var timerAt: UInt64 = 0
    var parser = ResponseParser()

    init(nextIntended: UInt64, expectsBody: Bool) {
        self.nextIntended = nextIntended
        parser.expectsBody = expectsBody
    }
}

/// When a connection waiting for its next open-loop request or a reconnect is due.
struct Timer: Comparable {
    var time: UInt64
    var index: Int
    var generation: UInt32

    static func < (a: Timer, b: Timer) -> Bool { a.time < b.time }
    static func == (a: Timer, b: Timer) -> Bool { a.time == b.time }
}

/// The monotonic clock in nanoseconds.
enum MonotonicClock {
    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
