import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

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
