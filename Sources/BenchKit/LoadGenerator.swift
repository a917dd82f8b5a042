import Atomics
import Foundation
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix

/// Drives HTTP/1.1 keep-alive load: `connections` spread over `threads` event loops, each
/// connection one request at a time, for `duration`.
///
/// Closed loop: a connection sends its next request on the event loop's next turn after the
/// previous response ends (as wrk does). Open loop (`rate`): each connection has a schedule of
/// intended start times and latency is measured from the intended time, so a slow server is
/// charged for the requests it delayed (no coordinated omission). All per-request work happens
/// on the event loops; results are merged at the end.
public enum LoadGenerator {
    /// Runs the load; `onSecond(second, requests, errors)` is called once per second with that second's counts.
    public static func run(_ configuration: LoadConfiguration,
                           onSecond: (@Sendable (Int, Int, Int) -> Void)? = nil) async throws -> LoadResult {
        guard configuration.connections > 0, configuration.threads > 0 else { throw LoadError("--connections and --threads must be positive") }
        if let rate = configuration.rate, rate <= 0 { throw LoadError("--rate must be positive") }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.threads)
        let progress = Progress()
        let request = PreparedRequest(configuration)
        let start = DispatchTime.now().uptimeNanoseconds
        let end = start + UInt64(configuration.duration * 1e9)
        let interval = configuration.rate.map { UInt64(Double(configuration.connections) / $0 * 1e9) }
        var slots: [ConnectionSlot] = []
        for index in 0..<configuration.connections {
            let loop = group.next()
            // Open-loop schedules are staggered so the connections do not fire in step.
            let firstIntended = start + (interval.map { $0 * UInt64(index) / UInt64(configuration.connections) } ?? 0)
            let slot = ConnectionSlot(loop: loop, configuration: configuration, request: request, deadline: end,
                                      interval: interval, firstIntended: firstIntended, progress: progress)
            slots.append(slot)
            loop.execute { slot.start() }
        }
        var second = 1
        var last = (requests: 0, errors: 0)
        while DispatchTime.now().uptimeNanoseconds < end {
            let next = min(end, start + UInt64(second) * 1_000_000_000)
            let now = DispatchTime.now().uptimeNanoseconds
            if next > now { try await Task.sleep(nanoseconds: next - now) }
            let current = (progress.requests.load(ordering: .relaxed), progress.errors.load(ordering: .relaxed))
            if next == start + UInt64(second) * 1_000_000_000 {
                onSecond?(second, current.0 - last.requests, current.1 - last.errors)
            }
            last = (current.0, current.1)
            second += 1
        }
        var result = LoadResult()
        for slot in slots {
            result.merge(try await slot.loop.submit { slot.finish() }.get())
        }
        result.seconds = Double(min(DispatchTime.now().uptimeNanoseconds, end) - start) / 1e9
        try await group.shutdownGracefully()
        return result
    }
}

/// Counters read once a second for the live line.
final class Progress: Sendable {
    let requests = ManagedAtomic<Int>(0)
    let errors = ManagedAtomic<Int>(0)
}

/// The request, built once.
struct PreparedRequest: Sendable {
    let head: HTTPRequestHead
    let body: ByteBuffer?

    init(_ configuration: LoadConfiguration) {
        var headers = HTTPHeaders()
        let defaultPort = configuration.port == 80
        headers.add(name: "Host", value: defaultPort ? configuration.host : "\(configuration.host):\(configuration.port)")
        headers.add(name: "User-Agent", value: "richpush-bench")
        for (name, value) in configuration.headers { headers.replaceOrAdd(name: name, value: value) }
        if let body = configuration.body { headers.replaceOrAdd(name: "Content-Length", value: String(body.count)) }
        head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: configuration.method.uppercased()), uri: configuration.target, headers: headers)
        body = configuration.body.map { ByteBuffer(bytes: $0) }
    }
}

/// One connection's life, reconnecting as needed. Confined to `loop`: every method runs there.
final class ConnectionSlot: @unchecked Sendable {
    let loop: any EventLoop
    private let configuration: LoadConfiguration
    private let request: PreparedRequest
    private let deadline: UInt64
    private let interval: UInt64?
    private var nextIntended: UInt64
    private let progress: Progress
    private var stats = LoadResult()
    private var handler: ResponseHandler?
    private var finished = false
    private var waitingForSchedule = false
    private var timeoutCheck: RepeatedTask?
    /// The request on the wire: its intended start and when it was written.
    var inFlight: (intended: UInt64, sent: UInt64)?
    var status = 0

    init(loop: any EventLoop, configuration: LoadConfiguration, request: PreparedRequest, deadline: UInt64, interval: UInt64?,
         firstIntended: UInt64, progress: Progress) {
        self.loop = loop
        self.configuration = configuration
        self.request = request
        self.deadline = deadline
        self.interval = interval
        self.nextIntended = firstIntended
        self.progress = progress
    }

    private var now: UInt64 { DispatchTime.now().uptimeNanoseconds }
    private var running: Bool { !finished && now < deadline }

    func start() {
        let timeout = UInt64(configuration.timeout * 1e9)
        timeoutCheck = loop.scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { [self] _ in
            guard let inFlight, now - inFlight.sent > timeout, let handler else { return }
            stats.timeouts += 1
            progress.errors.wrappingIncrement(ordering: .relaxed)
            self.inFlight = nil
            handler.closeAfterTimeout()
        }
        connect()
    }

    private func connect() {
        guard running else { return }
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteCounter(slot: self))
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseHandler(slot: self))
                }
            }
            .connect(host: configuration.host, port: configuration.port)
            .whenFailure { [self] _ in
                guard running else { return }
                stats.connectErrors += 1
                progress.errors.wrappingIncrement(ordering: .relaxed)
                loop.scheduleTask(in: .milliseconds(10)) { self.connect() }
            }
    }

    func connected(_ handler: ResponseHandler) {
        self.handler = handler
        sendNext()
    }

    /// Sends the next request when the connection is free and, in an open loop, its time has come.
    func sendNext() {
        guard running, inFlight == nil, let handler else { return }
        let now = self.now
        var intended = now
        if let interval {
            if nextIntended > now {
                guard !waitingForSchedule else { return }
                waitingForSchedule = true
                loop.scheduleTask(deadline: .uptimeNanoseconds(nextIntended)) { [self] in
                    waitingForSchedule = false
                    sendNext()
                }
                return
            }
            intended = nextIntended
            nextIntended += interval
        }
        inFlight = (intended, now)
        status = 0
        handler.send(request)
    }

    /// When the latest bytes came off the socket: a response's end is timed from its last read,
    /// not from when the decoder and handlers were done with it.
    private var lastReadAt: UInt64 = 0

    func received(bytes: Int) {
        lastReadAt = now
        if lastReadAt < deadline { stats.bytes += bytes }
    }

    func responseEnded() {
        guard let current = inFlight else { return }
        inFlight = nil
        let end = max(lastReadAt, current.sent)
        guard end <= deadline else { return }
        stats.requests += 1
        stats.statuses[status, default: 0] += 1
        _ = stats.latency.record(max(1, (end - current.intended) / 1000))
        progress.requests.wrappingIncrement(ordering: .relaxed)
        if interval == nil {
            // Closed loop, as wrk does: the next request goes out on the loop's next turn, after
            // the rest of this batch of reads, so a connection that just finished does not delay
            // reading responses that are already waiting (that wait would count as their latency).
            loop.execute { self.sendNext() }
        } else {
            // Open loop: latency runs from the intended start, so send (or schedule) at once.
            sendNext()
        }
    }

    func disconnected(timedOut: Bool) {
        handler = nil
        if inFlight != nil && !timedOut && running {
            stats.readErrors += 1
            progress.errors.wrappingIncrement(ordering: .relaxed)
        }
        inFlight = nil
        connect()
    }

    func finish() -> LoadResult {
        finished = true
        timeoutCheck?.cancel()
        handler?.close()
        return stats
    }
}

/// Counts every byte received, ahead of the HTTP decoder.
final class ByteCounter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let slot: ConnectionSlot

    init(slot: ConnectionSlot) { self.slot = slot }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        slot.received(bytes: unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }
}

/// Writes requests and reads responses for one connection.
final class ResponseHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    private let slot: ConnectionSlot
    private var context: ChannelHandlerContext?
    private var timedOut = false

    init(slot: ConnectionSlot) { self.slot = slot }

    func channelActive(context: ChannelHandlerContext) {
        self.context = context
        slot.connected(self)
        context.fireChannelActive()
    }

    func send(_ request: PreparedRequest) {
        guard let context else { return }
        context.write(wrapOutboundOut(.head(request.head)), promise: nil)
        if let body = request.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): slot.status = Int(head.status.code)
        case .body: break
        case .end: slot.responseEnded()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.context = nil
        slot.disconnected(timedOut: timedOut)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func closeAfterTimeout() {
        timedOut = true
        context?.close(promise: nil)
    }

    func close() {
        context?.close(promise: nil)
    }
}
