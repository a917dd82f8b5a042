import Atomics
import CEpoll
import Glibc
import HeapModule
import Histogram

/// One load thread: its connections driven from a level-triggered `epoll` set, the way wrk
/// drives them. A connection writes its request when `epoll` reports it writable, which it asks
/// for only after the previous response ended (so the write happens on the next `epoll_wait`,
/// after every response already waiting has been read); it reads 8 KB at a time while the
/// socket has more, and a response ends, and is timed, when its last byte has been read and
/// framed. Same system calls per response as wrk, so that the two tools load a server alike.
///
/// Every method runs on the worker's own thread; `requests` and `errors` are the only state
/// another thread reads while it runs.
final class EpollWorker: @unchecked Sendable {
    let requests = ManagedAtomic<Int>(0)
    let errors = ManagedAtomic<Int>(0)
    private(set) var stats = LoadResult()

    private let address: SocketAddress
    private let request: [UInt8]
    private let deadline: UInt64
    private let interval: UInt64?
    private let timeout: UInt64
    private var connections: [Connection]
    private var timers = Heap<Timer>()
    private var statusCounts = [Int](repeating: 0, count: 1000)
    private var epollFD: Int32 = -1
    private static let readSize = 8 * 1024
    private static let retryDelay: UInt64 = 10_000_000

    init(address: SocketAddress, request: [UInt8], expectsBody: Bool, connections: Int, deadline: UInt64,
         interval: UInt64?, firstIntended: (Int) -> UInt64, timeout: Double) {
        self.address = address
        self.request = request
        self.deadline = deadline
        self.interval = interval
        self.timeout = UInt64(timeout * 1e9)
        self.connections = (0..<connections).map { Connection(nextIntended: firstIntended($0), expectsBody: expectsBody) }
    }

    /// Runs until the deadline, then closes every connection. Throws only when the thread cannot
    /// set up at all (no `epoll` instance).
    func run() throws(LoadError) {
        epollFD = cepoll_create()
        guard epollFD >= 0 else { throw LoadError("epoll_create1 failed: \(String(cString: strerror(errno)))") }
        defer {
            for index in connections.indices where connections[index].fd >= 0 { close(connections[index].fd) }
            close(epollFD)
        }
        for index in connections.indices { connect(index) }
        let capacity = connections.count + 8
        let events = UnsafeMutableBufferPointer<cepoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readSize, alignment: 4096)
        defer { buffer.deallocate() }
        var nextTimeoutCheck = MonotonicClock.now + 100_000_000
        while true {
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
                if event.events & UInt32(CEPOLL_IN | CEPOLL_ERR | CEPOLL_HUP) != 0 {
                    readAll(index, buffer: buffer)
                }
                if event.events & out != 0, connections[index].generation == generation, connections[index].wantsWrite {
                    write(index)
                }
            }
            requests.store(stats.requests, ordering: .relaxed)
            errors.store(stats.errors, ordering: .relaxed)
        }
        for (status, count) in statusCounts.enumerated() where count > 0 { stats.statuses[status] = count }
    }

    // MARK: Connections

    private func connect(_ index: Int) {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return connectFailed(index) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let result = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        if result != 0 && errno != EINPROGRESS {
            close(fd)
            return connectFailed(index)
        }
        connections[index].generation &+= 1
        connections[index].fd = fd
        connections[index].connecting = true
        connections[index].parser.reset()
        register(index, add: true, events: out)
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
        readyForNext(index, now: MonotonicClock.now)
    }

    private func connectFailed(_ index: Int) {
        stats.connectErrors += 1
        timers.insert(Timer(time: MonotonicClock.now + Self.retryDelay, index: index, generation: connections[index].generation))
        connections[index].retrying = true
    }

    private func closeConnection(_ index: Int) {
        close(connections[index].fd)
        connections[index].fd = -1
        connections[index].generation &+= 1
        connections[index].connecting = false
        connections[index].wantsWrite = false
        connections[index].inFlight = false
        connections[index].written = 0
    }

    private func reconnect(_ index: Int) {
        closeConnection(index)
        connect(index)
    }

    private let inOnly = UInt32(CEPOLL_IN), out = UInt32(CEPOLL_OUT), inOut = UInt32(CEPOLL_IN | CEPOLL_OUT)

    private func register(_ index: Int, add: Bool, events: UInt32) {
        _ = cepoll_set(epollFD, connections[index].fd, add ? 1 : 0, events, UInt64(connections[index].generation) << 32 | UInt64(index))
    }

    // MARK: Requests

    /// The connection is free: ask `epoll` to say when it can write, now (closed loop) or when
    /// the next request is due (open loop).
    private func readyForNext(_ index: Int, now: UInt64) {
        if interval != nil, connections[index].nextIntended > now {
            timers.insert(Timer(time: connections[index].nextIntended, index: index, generation: connections[index].generation))
            register(index, add: false, events: inOnly)
            return
        }
        connections[index].wantsWrite = true
        register(index, add: false, events: inOut)
    }

    private func fire(_ timer: Timer) {
        guard connections[timer.index].generation == timer.generation else { return }
        if connections[timer.index].retrying {
            connections[timer.index].retrying = false
            connect(timer.index)
        } else if connections[timer.index].fd >= 0, !connections[timer.index].inFlight {
            connections[timer.index].wantsWrite = true
            register(timer.index, add: false, events: inOut)
        }
    }

    private func write(_ index: Int) {
        if connections[index].written == 0 {
            let now = MonotonicClock.now
            var intended = now
            if let interval {
                intended = connections[index].nextIntended
                connections[index].nextIntended += interval
            }
            connections[index].intended = intended
            connections[index].sent = now
            connections[index].inFlight = true
        }
        let fd = connections[index].fd
        let offset = connections[index].written
        let sent = request.withUnsafeBytes { bytes in
            send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
        }
        if sent < 0 {
            if errno == EAGAIN || errno == EINTR { return }
            return failed(index)
        }
        connections[index].written += sent
        if connections[index].written == request.count {
            connections[index].written = 0
            connections[index].wantsWrite = false
            register(index, add: false, events: inOnly)
        }
    }

    /// Reads until the socket is empty, framing responses as they end.
    private func readAll(_ index: Int, buffer: UnsafeMutableRawBufferPointer) {
        let fd = connections[index].fd
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            let now = MonotonicClock.now
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { return }
                failed(index)
                return
            }
            if count == 0 {
                if let completion = connections[index].parser.connectionClosed() {
                    responseEnded(index, completion, at: now)
                    reconnect(index)
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
                // A server may answer before it has read the whole request (a 413, say); the
                // rest of that request cannot go on the same connection.
                if !completion.keepAlive || connections[index].written != 0 {
                    reconnect(index)
                    return
                }
                readyForNext(index, now: now)
            }
            // As wrk does: go on while a read filled the buffer and the socket has more.
            if count < buffer.count || cepoll_pending(fd) <= 0 { return }
        }
    }

    private func responseEnded(_ index: Int, _ completion: ResponseParser.Completion, at end: UInt64) {
        guard connections[index].inFlight else { return }
        connections[index].inFlight = false
        guard end <= deadline else { return }
        stats.requests += 1
        statusCounts[min(completion.status, statusCounts.count - 1)] += 1
        _ = stats.latency.record(max(1, (end - connections[index].intended) / 1000))
    }

    /// The connection broke (an error, a close, or bytes that are not a response to our request).
    private func failed(_ index: Int) {
        if connections[index].inFlight || !connections[index].parser.isIdle { stats.readErrors += 1 }
        reconnect(index)
    }

    private func checkTimeouts(_ now: UInt64) {
        for index in connections.indices where connections[index].inFlight && now - connections[index].sent > timeout {
            stats.timeouts += 1
            reconnect(index)
        }
    }
}

/// One connection's state.
private struct Connection {
    var fd: Int32 = -1
    /// Bumped at every (re)connect and close, so that stale events and timers are ignored.
    var generation: UInt32 = 0
    var connecting = false
    var retrying = false
    /// EPOLLOUT is registered: the next request (or the rest of it) goes out when writable.
    var wantsWrite = false
    var inFlight = false
    var written = 0
    var intended: UInt64 = 0
    var sent: UInt64 = 0
    var nextIntended: UInt64
    var parser = ResponseParser()

    init(nextIntended: UInt64, expectsBody: Bool) {
        self.nextIntended = nextIntended
        parser.expectsBody = expectsBody
    }
}

/// When a connection waiting for its next open-loop request or a reconnect is due.
private struct Timer: Comparable {
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

/// A resolved server address.
struct SocketAddress: Sendable {
    let family: Int32
    private let storage: sockaddr_storage
    private let length: socklen_t

    private init(_ info: addrinfo) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: info.ai_addr, count: Int(info.ai_addrlen)))
        }
        self.storage = storage
        self.length = info.ai_addrlen
        self.family = info.ai_family
    }

    /// Resolves `host` and `port` to the first of its addresses that accepts a connection within
    /// a second (`localhost` may name `::1` and `127.0.0.1`, and a server may listen on one), or
    /// to the first address when none does (the run then counts connect errors).
    static func resolve(host: String, port: Int) throws(LoadError) -> SocketAddress {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw LoadError("cannot resolve '\(host)': \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = list
        while let info = next {
            addresses.append(SocketAddress(info.pointee))
            next = info.pointee.ai_next
        }
        return addresses.first { $0.accepts() } ?? addresses[0]
    }

    /// Whether a connection to this address succeeds within a second.
    private func accepts() -> Bool {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if withSockaddr({ Glibc.connect(fd, $0, $1) }) == 0 { return true }
        guard errno == EINPROGRESS else { return false }
        var poll = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard Glibc.poll(&poll, 1, 1000) == 1 else { return false }
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0
    }

    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafeBytes(of: storage) { body($0.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) }
    }
}
