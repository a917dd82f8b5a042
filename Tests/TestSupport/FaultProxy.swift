import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on loopback in front of an engine (PostgreSQL, the S3 gateway), which a test turns
/// into the engine's faults without touching the engine other tests share:
///
/// - `.forward`: bytes go both ways, as if the engine were reached directly;
/// - `.down`: the engine is gone: every open connection is reset and new ones are refused
///   (the listening socket is closed), as when its process is killed;
/// - `.stall`: the engine is frozen (a stopped process, a partition that drops packets):
///   connections are accepted by the kernel and kept open, but nothing is read or forwarded in
///   either direction.
///
/// Going back to `.forward` after `.stall` lets the held bytes flow (a frozen process that
/// resumes); after `.down` the port listens again (a restarted engine). One thread does it all
/// with `poll`, so the proxy never runs on the test's cooperative pool.
public final class FaultProxy: @unchecked Sendable {
    /// What the proxy does now.
    public enum Mode: Sendable, Equatable {
        case forward, stall, down
    }

    /// The port to use instead of the engine's.
    public let port: Int
    private let targetPort: Int
    private let lock = NSLock()
    private var mode = Mode.forward
    private var stopped = false
    /// Changes asked for (`set`), and the last the proxy's thread has carried out.
    private var asked = 0
    private var carriedOut = 0

    /// A proxy on a free loopback port to `127.0.0.1:targetPort`, forwarding.
    public init(targetPort: Int) throws {
        self.targetPort = targetPort
        // Bound to port 0 and asked which it got: a port found free and then bound could be taken meanwhile.
        let listener = try Self.listen(port: 0)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in loop(listener: listener) }
        thread.start()
    }

    deinit { stop() }

    /// Changes what the proxy does, from now on: returns once the proxy's thread has carried it
    /// out (after `.down`, no connection is accepted any more), or after 5 s. Without the wait, a
    /// busy machine could leave a listener accepting, in the old mode, well after the call.
    public func set(_ mode: Mode) {
        let change = lock.withLock {
            self.mode = mode
            asked += 1
            return asked
        }
        let deadline = Date().addingTimeInterval(5)
        while lock.withLock({ carriedOut < change && !stopped }), Date() < deadline { usleep(1_000) }
    }

    /// Ends the proxy's thread and closes every socket (within 50 ms).
    public func stop() {
        lock.withLock { stopped = true }
    }

    private struct Pair {
        var client: Int32
        var upstream: Int32?
    }

    private func loop(listener initial: Int32) {
        var listener: Int32? = initial
        var pairs: [Pair] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        func closeAll(reset: Bool) {
            for pair in pairs {
                for fd in [pair.client] + (pair.upstream.map { [$0] } ?? []) {
                    if reset {
                        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                    }
                    close(fd)
                }
            }
            pairs.removeAll()
        }
        while true {
            let (mode, stopped, change) = lock.withLock { (self.mode, self.stopped, self.asked) }
            defer { lock.withLock { carriedOut = max(carriedOut, change) } }
            if stopped {
                closeAll(reset: true)
                if let listener { close(listener) }
                return
            }
            switch mode {
            case .down:
                closeAll(reset: true)
                if let open = listener { close(open); listener = nil }
                usleep(20_000)
                continue
            case .forward, .stall:
                if listener == nil { listener = try? Self.listen(port: port) }
            }
            if mode == .forward {
                // Connections accepted during a stall reach the engine now.
                for index in pairs.indices where pairs[index].upstream == nil {
                    pairs[index].upstream = try? connectTo(port: targetPort, timeout: 0)
                    if pairs[index].upstream == nil { close(pairs[index].client); pairs[index].client = -1 }
                }
                pairs.removeAll { $0.client < 0 }
            }
            var fds: [pollfd] = []
            if let listener { fds.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
            // While stalled the connections are not even polled (a hung-up one would wake poll at once).
            let reading = mode == .forward
            if reading {
                for pair in pairs {
                    fds.append(pollfd(fd: pair.client, events: Int16(POLLIN), revents: 0))
                    fds.append(pollfd(fd: pair.upstream ?? -1, events: Int16(POLLIN), revents: 0))
                }
            }
            let ready = poll(&fds, nfds_t(fds.count), 50)
            guard ready > 0 else { continue }
            var index = 0
            if listener != nil {
                if fds[0].revents & Int16(POLLIN) != 0 {
                    let client = accept(fds[0].fd, nil, nil)
                    if client >= 0 {
                        var upstream: Int32?
                        if mode == .forward {
                            upstream = try? connectTo(port: targetPort, timeout: 0)
                            if upstream == nil { close(client) }
                        }
                        if mode != .forward || upstream != nil { pairs.append(Pair(client: client, upstream: upstream)) }
                    }
                }
                index = 1
            }
            guard reading else { continue }
            var finished = Set<Int>()
            for pairIndex in 0..<(fds.count - index) / 2 where pairIndex < pairs.count {
                let pair = pairs[pairIndex]
                guard let upstream = pair.upstream else { continue }
                for (from, to, slot) in [(pair.client, upstream, index + pairIndex * 2), (upstream, pair.client, index + pairIndex * 2 + 1)]
                where fds[slot].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                    let count = recv(from, &buffer, buffer.count, 0)
                    if count <= 0 {
                        finished.insert(pairIndex)
                        continue
                    }
                    sendAll(to, Array(buffer[0..<count]))
                }
            }
            for pairIndex in finished.sorted(by: >) {
                close(pairs[pairIndex].client)
                if let upstream = pairs[pairIndex].upstream { close(upstream) }
                pairs.remove(at: pairIndex)
            }
        }
    }

    private static func listen(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, 128) == 0 else {
            close(fd)
            throw FixtureError("the fault proxy cannot listen on port \(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }
}
