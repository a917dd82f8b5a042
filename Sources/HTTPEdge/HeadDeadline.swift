import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

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
