import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// Ends a connection the way nginx does after its last answer (a "lingering close"): once the
/// output is closed, whatever the client still sends is read and thrown away, until it stops
/// sending for `idle` (nginx's `lingering_timeout`), or for at most `linger` in all (nginx's
/// `lingering_time`) or `limit` bytes, then the connection closes.
///
/// Hummingbird closes its output after answering a `Connection: close` request and then waits
/// for the client to close. A client that is still sending a body nobody reads (an upload
/// refused early with 413) would block on a full window until its own timeout, and the
/// connection would stay open as long. Reading the rest lets it finish, read its answer and go;
/// closing at once instead could reset the connection before the client has read the answer.
final class LingeringCloseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let linger: TimeAmount
    private let idle: TimeAmount
    private let limit: Int
    private var lingering = false
    private var discarded = 0
    private var timer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?

    init(linger: TimeAmount = .seconds(30), idle: TimeAmount = .seconds(5), limit: Int = 32 << 20) {
        self.linger = linger
        self.idle = idle
        self.limit = limit
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .output, !lingering else {
            context.close(mode: mode, promise: promise)
            return
        }
        lingering = true
        context.close(mode: .output, promise: promise)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: linger) { bound.value.close(promise: nil) }
        armIdleTimer(context)
        context.read() // the reader above has stopped asking; keep the socket draining
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard lingering else {
            context.fireChannelRead(data)
            return
        }
        discarded += unwrapInboundIn(data).readableBytes
        if discarded > limit { context.close(promise: nil) }
    }

    private func armIdleTimer(_ context: ChannelHandlerContext) {
        idleTimer?.cancel()
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(in: idle) { bound.value.close(promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if lingering {
            armIdleTimer(context) // once per batch of reads, not per read
            context.read()
        } else {
            context.fireChannelReadComplete()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if lingering, case ChannelEvent.inputClosed = event {
            context.close(promise: nil) // the client is done sending: nothing left to wait for
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        idleTimer?.cancel()
        context.fireChannelInactive()
    }
}

/// A request head must arrive whole within a deadline from its first byte: a client that
/// trickles it a byte at a time (slowloris) is closed, however often it sends. Two handlers
/// share it: `start` sits before the HTTP decoder and sees the bytes, `end` after it and sees
/// the decoded head. A head that arrives in one read (every real client's) costs a clock read;
/// a timer is armed only while a head is incomplete, once per deadline, not once per request.
final class HeadDeadline {
    private let timeout: TimeAmount
    private var waitingForHead = true
    /// When the bytes of the head being received began to arrive.
    private var headStartedAt: NIODeadline?
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil, let start = headStartedAt else { return }
        // Both live on the channel's event loop, where the task runs.
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: start + timeout) {
            let (context, deadline) = bound.value
            deadline.timer = nil
            guard let started = deadline.headStartedAt else { return }
            if NIODeadline.now() - started >= deadline.timeout { context.close(promise: nil) } else { deadline.arm(context) }
        }
    }

    /// Sees raw bytes.
    final class Start: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        let deadline: HeadDeadline
        init(_ deadline: HeadDeadline) { self.deadline = deadline }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if deadline.waitingForHead && deadline.headStartedAt == nil { deadline.headStartedAt = .now() }
            // The decoder runs inside this call: a head that came whole has been seen by `End` by now.
            context.fireChannelRead(data)
            if deadline.headStartedAt != nil { deadline.arm(context) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            deadline.timer?.cancel()
            context.fireChannelInactive()
        }
    }

    /// Sees decoded request parts.
    final class End: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        let deadline: HeadDeadline
        init(_ deadline: HeadDeadline) { self.deadline = deadline }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head:
                deadline.headStartedAt = nil
                deadline.waitingForHead = false
            case .end:
                deadline.waitingForHead = true
            case .body:
                break
            }
            context.fireChannelRead(data)
        }
    }
}

/// How fast a request body must keep coming once its head has arrived: at least `minimum` bytes
/// in every `window` until it ends (a minimum rate judged over a period, as Apache's
/// `mod_reqtimeout` asks of a body). Without it a body could hold its connection for as long as
/// the client kept sending a byte now and then, since every byte resets the idle timer.
struct BodyRateLimit: Sendable {
    /// The period the rate is judged over; a client may pause for nearly this long.
    var window: TimeAmount
    /// Bytes of body each window must bring.
    var minimum: Int

    /// 20 KiB in every 20 s (1 KiB/s): a fraction of what a phone on a poor 2G link sends, with
    /// room for a stall of several seconds.
    static let `default` = BodyRateLimit(window: .seconds(20), minimum: 20 << 10)
}

/// A request part as `BodyRateHandler` counts it.
enum BodyRatePart {
    case head
    case body(Int)
    case end
}

/// The request and response parts of one HTTP version, as `BodyRateHandler` reads and writes them.
protocol BodyRateParts: SendableMetatype {
    associatedtype RequestPart
    associatedtype ResponsePart
    static func classify(_ part: RequestPart) -> BodyRatePart
    /// Whether `part` begins a final answer (a head other than 1xx).
    static func isFinalHead(_ part: ResponsePart) -> Bool
    /// The head of a `408 Request Timeout` with no body.
    static func requestTimeoutHead() -> ResponsePart
    /// The end of a response.
    static var end: ResponsePart { get }
}

/// HTTP/1.1, after NIO's decoder.
enum HTTP1BodyRate: BodyRateParts {
    static func classify(_ part: HTTPServerRequestPart) -> BodyRatePart {
        switch part {
        case .head: return .head
        case .body(let bytes): return .body(bytes.readableBytes)
        case .end: return .end
        }
    }

    static func isFinalHead(_ part: HTTPServerResponsePart) -> Bool {
        guard case .head(let head) = part else { return false }
        return !(100..<200).contains(head.status.code)
    }

    static func requestTimeoutHead() -> HTTPServerResponsePart {
        let headers: HTTPHeaders = ["Connection": "close", "Content-Length": "0", "Date": HTTPDate.value()]
        return .head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))
    }

    static var end: HTTPServerResponsePart { .end(nil) }
}

/// An HTTP/2 stream, after the conversion to HTTP types.
enum HTTP2BodyRate: BodyRateParts {
    static func classify(_ part: HTTPRequestPart) -> BodyRatePart {
        switch part {
        case .head: return .head
        case .body(let bytes): return .body(bytes.readableBytes)
        case .end: return .end
        }
    }

    static func isFinalHead(_ part: HTTPResponsePart) -> Bool {
        guard case .head(let head) = part else { return false }
        return head.status.kind != .informational
    }

    static func requestTimeoutHead() -> HTTPResponsePart {
        .head(HTTPResponse(status: .requestTimeout))
    }

    static var end: HTTPResponsePart { .end(nil) }
}

/// Holds a request body to `BodyRateLimit`: once a head has arrived and its body has not ended
/// within the same read, every window must bring the minimum. A body that falls short is
/// answered 408 if nothing has been answered on its connection that the 408 could be mistaken
/// for, and its channel (the connection; over HTTP/2 the stream) is closed: not half-closed into
/// a lingering close, which a trickling client would keep busy for its full 30 s.
///
/// Only the client's own slowness counts: while the server holds back reading (the router has
/// not taken the parts already read), a window that ends is not judged, and bytes that waited in
/// the socket count in the window that reads them. A window judged short gets a last second of
/// reading before the 408. A body that arrives whole with its head costs nothing: the window's
/// clock and timer start only at the end of a read that left a body unfinished.
final class BodyRateHandler<Parts: BodyRateParts>: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Parts.RequestPart
    typealias InboundOut = Parts.RequestPart
    typealias OutboundIn = Parts.ResponsePart
    typealias OutboundOut = Parts.ResponsePart

    private let limit: BodyRateLimit
    /// Whether an answer written now would be read as the answer to the request being received
    /// (HTTP/1.1, where earlier requests may still await theirs); nil: whether nothing has been answered.
    private let mayAnswer: (() -> Bool)?
    private var inBody = false
    /// When the current window began; nil until the end of the read that left a body unfinished.
    private var windowStart: NIODeadline?
    /// Body bytes read in the current window.
    private var received = 0
    /// A read is asked for and not yet satisfied: the server is waiting for the client.
    private var reading = false
    /// The current window is the last chance given to a short one.
    private var lastChance = false
    private var answered = false
    private var tooSlow = false
    private var timer: Scheduled<Void>?

    init(limit: BodyRateLimit, mayAnswer: (() -> Bool)? = nil) {
        self.limit = limit
        self.mayAnswer = mayAnswer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !tooSlow else { return } // nothing more goes up: the body is not whole, the channel is closing
        switch Parts.classify(unwrapInboundIn(data)) {
        case .head:
            inBody = true
            windowStart = nil
            received = 0
            lastChance = false
        case .body(let count):
            received += count
        case .end:
            inBody = false
            windowStart = nil
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false // until the next read passes: the server may be holding back
        if inBody, windowStart == nil {
            windowStart = .now()
            arm(context)
        }
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        reading = true
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !tooSlow else {
            promise?.fail(ChannelError.ioOnClosedChannel) // the 408 went out instead
            return
        }
        if Parts.isFinalHead(unwrapOutboundIn(data)) { answered = true }
        context.write(data, promise: promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .output {
            // Answered and closing: what the client still sends is read only to be thrown away,
            // under `LingeringCloseHandler`'s own limits.
            inBody = false
            timer?.cancel()
            timer = nil
        }
        context.close(mode: mode, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil, let start = windowStart else { return }
        // Both live on the channel's event loop, where the task runs.
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: start + limit.window) {
            let (context, handler) = bound.value
            handler.timer = nil
            handler.windowEnded(context)
        }
    }

    private func windowEnded(_ context: ChannelHandlerContext) {
        guard inBody, !tooSlow, let start = windowStart else { return }
        let now = NIODeadline.now()
        if now - start < limit.window {
            arm(context) // the window of a later body, begun while this timer was pending
        } else if !reading || received >= limit.minimum {
            // Fast enough, or the server is the one waiting: a new window.
            windowStart = now
            received = 0
            lastChance = false
            arm(context)
        } else if !lastChance {
            // Bytes may have waited in the socket for a read that resumed only just now.
            lastChance = true
            windowStart = now - limit.window + min(limit.window, .seconds(1))
            arm(context)
        } else {
            answerTooSlow(context)
        }
    }

    private func answerTooSlow(_ context: ChannelHandlerContext) {
        tooSlow = true
        inBody = false
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        guard mayAnswer?() ?? !answered else {
            context.close(promise: nil)
            return
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(Parts.requestTimeoutHead()), promise: nil)
        context.writeAndFlush(wrapOutboundOut(Parts.end), promise: written)
        written.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
        // A client that reads nothing never lets the answer out: close regardless, soon.
        context.eventLoop.scheduleTask(in: .seconds(1)) { bound.value.close(promise: nil) }
    }
}

/// A TLS connection must finish its handshake within a deadline of being accepted: one that
/// connects and sends nothing, or trickles its ClientHello, is closed (nothing else times a
/// connection before HTTP begins on it). Sits after the TLS handler, which announces the
/// finished handshake, and leaves the pipeline then.
final class TLSHandshakeDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let tls = event as? TLSUserEvent, case .handshakeCompleted = tls else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        timer?.cancel()
        timer = nil
        context.fireUserInboundEventTriggered(event)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) { bound.value.close(promise: nil) }
    }
}

/// Closes the connection when the `IdleStateHandler` before it reports that nothing has been read
/// for its read timeout. Hummingbird closes an idle HTTP/2 connection only once the client has
/// answered the PING sent with its GOAWAY: a client that has gone silent would be kept for ever.
final class CloseWhenReadIdle: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case IdleStateHandler.IdleStateEvent.read = event {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Closes an established TLS connection without NIOSSL's timer. Sits right after the TLS handler
/// and takes over every full close of an established connection: the socket is closed as soon
/// as the client has closed its side (as a client does once it has the answer it asked to close
/// after) and what was written before the close has gone out, and otherwise after `wait`, with
/// TLS's `close_notify` sent first to a client still there.
///
/// NIOSSL (2.37) sends its `close_notify` and then waits up to its shutdown timeout for the
/// client's, and when the client closes the TCP connection first (as nearly every client does
/// after a `Connection: close` answer) it leaves that timer scheduled: for the timer's whole
/// length the event loop held the connection's handler, TLS state and 64 KB ciphertext buffer.
/// At 250 ms (`ServerConfiguration.tlsCloseWait`) and 4,200 new connections a second
/// (`bench/https.sh` on a faster machine, issue #28) that was about a thousand closed
/// connections, 95 MB of `serve`'s heap by heaptrack, and a connection whose client had gone
/// stayed open for the whole wait. This handler's timer is cancelled when the connection goes. (Sending `close_notify` and the FIN at once instead, as
/// nginx does, cost a third of the new-connection rate of TLS 1.2 clients here.)
final class TLSCloseWithoutWaiting: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny

    private let wait: TimeAmount
    /// The TLS handler's context: a close from it goes to the socket, past TLS.
    private var tls: ChannelHandlerContext?
    private var established = false
    private var inputClosed = false
    /// A full close was asked for.
    private var closing = false
    /// Waiting for what is written to go out before the socket is closed.
    private var draining = false
    /// Closes the connection if it is still open by then.
    private var deadline: Scheduled<Void>?

    init(wait: TimeAmount) { self.wait = wait }

    func handlerAdded(context: ChannelHandlerContext) {
        tls = try? context.pipeline.syncOperations.context(handlerType: NIOSSLServerHandler.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        tls = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event { established = true }
        if case ChannelEvent.inputClosed = event {
            inputClosed = true
            // Closing, and the client has closed its side: once what is written has gone out.
            if closing { drain(context) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard established, mode == .all, let tls else { return context.close(mode: mode, promise: promise) }
        if let promise { context.channel.closeFuture.cascade(to: promise) }
        guard !closing else { return } // the first close's deadline bounds it
        closing = true
        let bound = NIOLoopBound((self, context, tls), eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: wait) {
            let (handler, context, tls) = bound.value
            // Still there: TLS's close_notify through TLS (a client that has closed its side gets
            // none: NIOSSL would wait for its answer), then the socket, whatever is left unsent.
            if !handler.inputClosed { context.close(mode: .output, promise: nil) }
            tls.close(promise: nil)
        }
        if inputClosed { drain(context) }
    }

    /// Closes the socket once everything written before it has gone out (what TLS still holds
    /// flushed first, then an empty write below TLS, whose promise completes after every write
    /// ahead of it); the deadline still bounds a client that does not read.
    private func drain(_ context: ChannelHandlerContext) {
        guard !draining, let tls else { return }
        draining = true
        context.flush()
        let bound = NIOLoopBound(tls, eventLoop: context.eventLoop)
        tls.writeAndFlush(NIOAny(ByteBuffer())).whenComplete { _ in bound.value.close(promise: nil) }
    }
}
