import NIOCore
import NIOHTTP2

/// Ends a response on its last frame that carries something, as Apple does: a 200 on its
/// HEADERS frame (END_STREAM, no DATA frame), an error on the DATA frame of its JSON. NIO's
/// HTTP/2 codec ends every response with a DATA frame of its own, empty, and clients that read
/// every DATA frame as the error's JSON (aioapns) fail on it.
///
/// It sits at the front of each stream's pipeline, where frames are written: a HEADERS or DATA
/// frame that does not end the stream is held until the next write; an empty DATA frame that
/// ends the stream then ends it on the held frame instead, and anything else is written after
/// it unchanged.
final class EndOnHeaders: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var held: (frame: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?)?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let payload = unwrapOutboundIn(data)
        let ending = Self.isEmptyEnd(payload)
        if let (frame, heldPromise) = held {
            held = nil
            if ending, let ended = Self.ending(frame) {
                let written = context.eventLoop.makePromise(of: Void.self)
                context.write(wrapOutboundOut(ended), promise: written)
                written.futureResult.cascade(to: heldPromise)
                written.futureResult.cascade(to: promise)
                return
            }
            context.write(wrapOutboundOut(frame), promise: heldPromise)
        }
        if Self.ending(payload) != nil {
            held = (payload, promise) // may be the last frame with something in it
        } else {
            context.write(data, promise: promise)
        }
    }

    func flush(context: ChannelHandlerContext) {
        // A held frame waits for the write that follows it (a response always ends).
        context.flush()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if let (frame, promise) = held {
            held = nil
            context.write(wrapOutboundOut(frame), promise: promise)
            context.flush()
        }
    }

    /// `frame` with END_STREAM set, when it is HEADERS or DATA that does not end the stream yet.
    private static func ending(_ frame: HTTP2Frame.FramePayload) -> HTTP2Frame.FramePayload? {
        switch frame {
        case .headers(var headers) where !headers.endStream:
            headers.endStream = true
            return .headers(headers)
        case .data(var data) where !data.endStream:
            data.endStream = true
            return .data(data)
        default:
            return nil
        }
    }

    /// An empty DATA frame that ends the stream: what NIO writes for a response's end.
    private static func isEmptyEnd(_ frame: HTTP2Frame.FramePayload) -> Bool {
        guard case .data(let data) = frame, data.endStream else { return false }
        switch data.data {
        case .byteBuffer(let buffer): return buffer.readableBytes == 0
        case .fileRegion(let region): return region.readableBytes == 0
        }
    }
}

/// Added after Hummingbird's HTTP codec in each stream (the only place its configuration can
/// add handlers), it puts `EndOnHeaders` at the front of the stream's pipeline; it passes
/// everything on itself.
final class InstallEndOnHeaders: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        try? context.pipeline.syncOperations.addHandler(EndOnHeaders(), position: .first)
    }
}
