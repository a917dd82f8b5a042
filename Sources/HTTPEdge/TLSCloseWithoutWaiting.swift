import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

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
