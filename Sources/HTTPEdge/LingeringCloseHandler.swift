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
