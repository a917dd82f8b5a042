import NIOCore

/// The first handler of an adopted connection, for one moment: once the channel is active,
/// passes on the bytes the raw front read, as NIO would have read them, and leaves.
final class ReplayFirstRead: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private var bytes: ByteBuffer?

    init(_ bytes: ByteBuffer) {
        self.bytes = bytes
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        if let bytes, bytes.readableBytes > 0 {
            self.bytes = nil
            context.fireChannelRead(wrapInboundOut(bytes))
            context.fireChannelReadComplete()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
