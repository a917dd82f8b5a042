import NIOCore
import NIOHTTP1

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
