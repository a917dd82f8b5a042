import NIOCore

/// The first handler of an adopted connection, for one moment: once the channel is active,
/// writes the rest of the raw front's answer, if any (before anything the handlers behind it
/// write), passes on the bytes the raw front read, as NIO would have read them, and leaves.
final class ReplayFirstRead: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var bytes: ByteBuffer?
    private var rest: ByteBuffer?

    init(_ bytes: ByteBuffer, writingFirst rest: ByteBuffer? = nil) {
        self.bytes = bytes
        self.rest = rest
    }

    func channelActive(context: ChannelHandlerContext) {
        if let rest {
            self.rest = nil
            context.writeAndFlush(wrapOutboundOut(rest), promise: nil)
        }
        context.fireChannelActive()
        if let bytes, bytes.readableBytes > 0 {
            self.bytes = nil
            context.fireChannelRead(wrapInboundOut(bytes))
            context.fireChannelReadComplete()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
