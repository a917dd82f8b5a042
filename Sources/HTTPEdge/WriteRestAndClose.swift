import NIOCore

/// The only handler of a connection whose answer the raw front wrote in part: writes the rest,
/// then closes; a client that does not read it is closed after `timeout`. What it sends is not read.
final class WriteRestAndClose: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let rest: ByteBuffer
    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(_ rest: ByteBuffer, timeout: TimeAmount) {
        self.rest = rest
        self.timeout = timeout
    }

    func channelActive(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) { bound.value.close(promise: nil) }
        context.writeAndFlush(NIOAny(rest)).whenComplete { _ in bound.value.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
