import HTTP2Client
import HeapModule

/// One HTTP/2 connection's state in a load thread: the framing (`HTTP2ClientSession`), the
/// requests open on it, and the bytes waiting to be written.
final class HTTP2Connection {
    struct Stream {
        var id: UInt32
        var intended: UInt64
        var sent: UInt64
    }

    var session = HTTP2ClientSession()
    var streams: [Stream] = []
    var outbound: [UInt8] = []
    var outboundSent = 0
    /// Over TLS, a write that would block is retried with the same length (OpenSSL's rule).
    var retryLength = 0
    /// Requests opened on this connection.
    var opened = 0
    /// Waiting in the worker's `flushQueue`.
    var flushQueued = false

    init() {
        outbound.reserveCapacity(16 * 1024)
        streams.reserveCapacity(16)
    }
}

/// HTTP/2 (`--http2`): each connection keeps `streams` requests open, as h2load's `-m`; a
/// response ends, and is timed, with its stream's END_STREAM.
extension EpollWorker {
    /// Bytes a connection may have waiting to be written before the server is deemed hostile.
    static let maxOutbound = 4 << 20

    func startHTTP2(_ index: Int, now: UInt64) {
        let http2 = HTTP2Connection()
        connections[index].http2 = http2
        http2.session.start(into: &http2.outbound)
        openStreams(index, now: now)
        flush(index)
    }

    /// Opens streams up to `streams` (one for `newConnection`) while the server allows, and in an
    /// open loop while requests are due (else a timer for the next).
    func openStreams(_ index: Int, now: UInt64) {
        guard let http2 = connections[index].http2 else { return }
        let most = plan.newConnection ? 1 : plan.streams
        while http2.streams.count < most, http2.session.canOpen, !(plan.newConnection && http2.opened > 0) {
            var intended = now
            if plan.newConnection {
                intended = connections[index].intended
            } else if let interval {
                let due = connections[index].nextIntended
                guard due <= now else {
                    if connections[index].timerAt != due {
                        connections[index].timerAt = due
                        timers.insert(Timer(time: due, index: index, generation: connections[index].generation))
                    }
                    return
                }
                intended = due
                connections[index].nextIntended += interval
            }
            guard let target = plan.nextTarget() else { return }
            let id = http2.session.open(plan.http2[target], into: &http2.outbound)
            http2.streams.append(HTTP2Connection.Stream(id: id, intended: intended, sent: now))
            http2.opened += 1
        }
    }

    /// Writes what waits; `epoll` is asked for writability only while some remains.
    func flush(_ index: Int) {
        guard let http2 = connections[index].http2 else { return }
        while http2.outboundSent < http2.outbound.count {
            let length = http2.retryLength > 0 ? http2.retryLength : http2.outbound.count - http2.outboundSent
            let sent = http2.outbound.withUnsafeBytes { bytes in transmit(index, bytes.baseAddress! + http2.outboundSent, length) }
            if sent == Self.wouldBlock {
                if connections[index].tls != nil { http2.retryLength = length }
                register(index, events: inOut)
                return
            }
            if sent == Self.broken { return failedHTTP2(index) }
            http2.retryLength = 0
            http2.outboundSent += sent
        }
        http2.outbound.removeAll(keepingCapacity: true)
        http2.outboundSent = 0
        register(index, events: inOnly)
    }

    /// Reads until the socket is empty, ending the streams whose responses end.
    func readHTTP2(_ index: Int, _ http2: HTTP2Connection, buffer: UnsafeMutableRawBufferPointer) {
        // At most 1 MB an event: a server that sends without pause must not starve the thread's
        // other connections and timers (level-triggered epoll reports the rest again).
        for _ in 0..<(1 << 20) / Self.readSize {
            let count = receive(index, into: buffer)
            if count == Self.wouldBlock { break }
            if count <= 0 { return failedHTTP2(index) }
            let now = MonotonicClock.now
            if now < deadline { stats.bytes += count }
            http2Events.removeAll(keepingCapacity: true)
            do {
                try http2.session.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), into: &http2.outbound) { self.http2Events.append($0) }
            } catch {
                return failedHTTP2(index)
            }
            // Replies (PING and SETTINGS acknowledgements) pile up only while the server does not
            // read: a server that floods them while not reading is dropped.
            if http2.outbound.count - http2.outboundSent > Self.maxOutbound { return failedHTTP2(index) }
            for event in http2Events {
                switch event {
                case .response(let stream, let status):
                    guard let position = http2.streams.firstIndex(where: { $0.id == stream }) else { continue }
                    record(status: status, intended: http2.streams[position].intended, end: now)
                    http2.streams.remove(at: position)
                case .reset(let stream, _), .tooLarge(let stream):
                    guard let position = http2.streams.firstIndex(where: { $0.id == stream }) else { continue }
                    if now <= deadline { stats.readErrors += 1 } else if plan.limit != nil { stats.unanswered += 1 }
                    http2.streams.remove(at: position)
                case .answer(let response):
                    guard let position = http2.streams.firstIndex(where: { $0.id == response.stream }) else { continue }
                    record(status: response.status, intended: http2.streams[position].intended, end: now)
                    http2.streams.remove(at: position)
                }
            }
            // Over TLS, on until OpenSSL would block, as h2load reads: what a round reads ends
            // every response it can, and their next requests go out in one write.
            if connections[index].tls == nil, !mayHaveMore(index, after: count, of: buffer.count) { break }
        }
        if http2.session.finished || (plan.newConnection && http2.opened > 0 && http2.streams.isEmpty) {
            // GOAWAY and nothing left open, or this connection's one request is done.
            return plan.newConnection ? nextConnection(index) : reconnect(index)
        }
        openStreams(index, now: MonotonicClock.now)
        flushLater(index)
    }

    /// Writes the connection's requests once this round's events are handled: a round's requests
    /// on a connection go out in one write, as h2load's do (its write watcher runs after the
    /// loop's reads), not one write per response that ended.
    func flushLater(_ index: Int) {
        guard let http2 = connections[index].http2, !http2.flushQueued else { return }
        http2.flushQueued = true
        flushQueue.append(index)
    }

    /// Writes what `flushLater` queued.
    func flushQueued() {
        for index in flushQueue {
            guard let http2 = connections[index].http2, http2.flushQueued else { continue }
            http2.flushQueued = false
            flush(index)
        }
        flushQueue.removeAll(keepingCapacity: true)
    }

    /// The connection broke: its open requests are errors.
    func failedHTTP2(_ index: Int) {
        if let http2 = connections[index].http2 { stats.readErrors += http2.streams.count }
        plan.newConnection ? nextConnection(index) : reconnect(index)
    }
}
