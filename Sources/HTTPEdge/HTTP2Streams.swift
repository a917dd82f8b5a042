import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP2
import NIOHTTPTypes
import NIOHTTPTypesHTTP2

/// An HTTP/2 connection as `serve` sets it up once ALPN chose `h2` (docs/design/fast-path.md, issue #28).
///
/// Hummingbird's HTTP/2 channel wraps every stream in an async channel, yields it to the
/// connection's task and gives it a task of its own before its request is read, so even a
/// request answered from memory crosses to the cooperative pool and back. Here a plain GET the
/// hot routes answer, its request one HEADERS frame, is answered at the connection's frame level
/// (`H2FrameFastPath`) and gets no channel at all. Any other stream's
/// pipeline is built synchronously (the HTTP types codec, the body rate, `H2FastPathHandler`),
/// and a stream gets its async channel and task (Hummingbird's `handleHTTP`, the router) only
/// when the fast path passes its request on (`StreamHandoff`). A stream answered from memory
/// never leaves its event loop.
///
/// The connection keeps what Hummingbird's connection manager did: a connection from which
/// nothing is read for the idle timeout is closed (`IdleStateHandler`, `CloseWhenReadIdle`,
/// added by `HTTPListener`), and a graceful shutdown sends GOAWAY and closes the connection once
/// its open streams are done (`HTTP2GracefulClose`).
public struct FastPathHTTP2Connection<Routes: HotRoutes>: Sendable {
    let fastPath: HotPath<Routes>
    let bodyRate: BodyRateLimit
    /// Each stream's idle timeout (Hummingbird's per stream, as before).
    let idleTimeout: Duration

    /// HTTP/2 answering from `fastPath` where it can, each stream held to `bodyRate` and `idleTimeout`.
    public init(fastPath: HotPath<Routes>, bodyRate: BodyRateLimit, idleTimeout: Duration) {
        self.fastPath = fastPath
        self.bodyRate = bodyRate
        self.idleTimeout = idleTimeout
    }

    /// Adds HTTP/2 to `channel`; `handOff` gets each stream that needs the router.
    func configure(_ channel: any Channel, logger: Logger,
                   handOff: @escaping @Sendable (NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) -> Void) throws {
        let fastPath = self.fastPath, bodyRate = self.bodyRate, idleTimeout = self.idleTimeout
        // NIOHTTP2's connection handler, then the multiplexer as a handler of its own, so that
        // `H2FrameFastPath` between them can answer a stream before it has a channel.
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()))
        try sync.addHandler(HTTP2GracefulClose())
        try sync.addHandler(H2FrameFastPath(fastPath: fastPath, patience: TimeAmount(idleTimeout)))
        try sync.addHandler(HTTP2StreamMultiplexer(mode: .server, channel: channel) { stream in
            stream.eventLoop.makeCompletedFuture {
                let pipeline = stream.pipeline.syncOperations
                try pipeline.addHandler(HTTP2FramePayloadToHTTPServerCodec())
                try pipeline.addHandler(BodyRateHandler<HTTP2BodyRate>(limit: bodyRate))
                try pipeline.addHandler(H2FastPathHandler(fastPath: fastPath))
                // Every stream has the idle timeout, as under Hummingbird: one whose request never ends is closed.
                try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
                try pipeline.addHandler(StreamHandoff(handOff: handOff))
            }
        })
    }
}

/// The last handler of an HTTP/2 stream's synchronous pipeline: when a request part reaches it
/// (the fast path passed the request on), it wraps the stream in the async channel the router
/// is served through and hands that over (to be given a task), then lets everything through. Until then events go no further: a stream
/// answered from memory ends by itself once both sides have ended it.
final class StreamHandoff: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias Wrapped = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    private let handOff: @Sendable (Wrapped) -> Void
    private var handedOff = false

    init(handOff: @escaping @Sendable (Wrapped) -> Void) {
        self.handOff = handOff
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !handedOff {
            handedOff = true
            do {
                handOff(try Wrapped(wrappingChannelSynchronously: context.channel))
            } catch {
                context.close(promise: nil)
                return
            }
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if handedOff { context.fireChannelReadComplete() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if handedOff { context.fireUserInboundEventTriggered(event) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard handedOff else { return context.close(promise: nil) }
        context.fireErrorCaught(error)
    }
}

/// On a graceful shutdown, tells the client no new stream will be served (GOAWAY, naming the
/// last stream it opened) and closes the connection once every open stream is done; at once if
/// none is. Sits after the HTTP/2 handler, whose events tell it of every stream opening and
/// closing, those answered at the frame level too. A stream that never ends is closed by its own idle
/// timeout (`HTTPConnectionStateHandler`, which also closes idle streams on the shutdown).
///
/// A client that closes its side of the connection (TCP FIN without TLS's close_notify, as
/// h2load and phones that drop a connection do) has the connection closed the same way: once its
/// open streams are done. The listener allows half-closed connections (`allowRemoteHalfClosure`,
/// for HTTP/1.1's lingering close), so NIO does not close it on the FIN, and TLS leaves it open
/// too: until this, each such connection stayed in CLOSE-WAIT, holding about 550 KB and a file
/// descriptor, for the whole idle timeout (60 s by default; found in issue #28's HTTPS runs, where
/// `serve` grew by 18 MB with each h2load run of 32 connections).
final class HTTP2GracefulClose: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var open = 0
    private var lastStream = HTTP2StreamID(0)
    private var quiescing = false
    /// The client will send nothing more: no request, no window update.
    private var inputClosed = false
    /// Closing once what is written has gone out (`finish`).
    private var finishing = false
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    private func created(_ id: HTTP2StreamID) {
        open += 1
        lastStream = max(lastStream, id)
    }

    private func closed() {
        open = max(0, open - 1)
        if (quiescing || inputClosed) && open == 0, let context { finish(context) }
    }

    /// GOAWAY naming the last stream the client opened: nothing after it will be served.
    private var goAway: HTTP2Frame {
        HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: lastStream, errorCode: .noError, opaqueData: nil))
    }

    /// Closes the connection once the frames written before now have gone out: a GOAWAY naming
    /// the last stream is written and flushed after them (writes complete in order), then the
    /// connection is closed. Closed straight from a stream's end, NIOHTTP2 would not yet have
    /// flushed that stream's last frames, and they would be lost.
    private func finish(_ context: ChannelHandlerContext) {
        guard !finishing else { return }
        finishing = true
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(goAway)).whenComplete { _ in bound.value.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The stream events first, by their type (`StreamEvent`): most events are these.
        switch StreamEvent(event) {
        case .created(let id)?:
            self.created(id)
            return context.fireUserInboundEventTriggered(event)
        case .closed?:
            context.fireUserInboundEventTriggered(event)
            return closed()
        case .windowUpdated?:
            return context.fireUserInboundEventTriggered(event)
        case nil:
            break
        }
        switch event {
        case ChannelEvent.inputClosed:
            inputClosed = true
            if open == 0 { finish(context) }
            return
        case is ChannelShouldQuiesceEvent:
            guard !quiescing else { return }
            quiescing = true
            if open == 0 {
                finish(context)
            } else {
                context.writeAndFlush(wrapOutboundOut(goAway), promise: nil)
            }
            // On to the multiplexer, which passes it to every stream channel: a stream between
            // requests closes at once (`HTTPConnectionStateHandler`).
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }
}
