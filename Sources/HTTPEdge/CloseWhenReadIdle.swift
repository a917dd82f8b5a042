import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

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
