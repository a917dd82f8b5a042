import CoreMetrics
import HTTPTypes
import NIOCore
import NIOHPACK
import NIOHTTP2

/// On an HTTP/2 connection, between NIOHTTP2's connection handler and its stream multiplexer:
/// answers a stream whose whole request is one `HEADERS` frame (a plain `GET`, `END_STREAM` set)
/// from `HotPath` when it can, with a `HEADERS` and a `DATA` frame written on the connection, so
/// the stream never gets a child channel, a pipeline or a task (issue #51: NIOHTTP2's child
/// channel per stream was 40% of `serve`'s time in a fetch storm of new connections). Anything
/// else, and every frame of a stream not answered here, goes on to the multiplexer unchanged;
/// a stream's own `H2FastPathHandler` still answers a hot request whose end came in a later frame.
///
/// NIOHTTP2's connection handler keeps every stream's state, flow control included, so an answer
/// larger than the stream's window waits in its buffer for the client's window updates, as a
/// child channel's would. Frames and events for a stream answered here (window updates, a reset,
/// its opening and closing) stop here until it is closed: the multiplexer never knew the stream
/// and would report them as frames for no stream it has. `HTTP2GracefulClose`, before this
/// handler, still counts every stream.
///
/// A stream answered here has the deadline a stream channel's idle timeout gave it: one whose
/// answer is still held by a window the client never opens is reset (`CANCEL`) after
/// `patience`, so it holds neither its body nor a graceful shutdown for longer. An answer NIOHTTP2
/// refuses to write resets its stream (`INTERNAL_ERROR`) rather than leave the client waiting.
final class H2FrameFastPath<Routes: HotRoutes>: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let fastPath: HotPath<Routes>
    /// How long an answered stream may stay open (the streams' idle timeout).
    private let patience: TimeAmount
    /// Streams answered here that NIOHTTP2 has not yet closed, with when they were answered.
    private var answered: [HTTP2StreamID: NIODeadline] = [:]
    /// Answers written since the last flush: flushed once at the end of the read.
    private var unflushed = false
    /// The look for answers held past `patience`, while some answer is still open after a read.
    private var sweep: Scheduled<Void>?

    init(fastPath: HotPath<Routes>, patience: TimeAmount) {
        self.fastPath = fastPath
        self.patience = patience
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if !answered.isEmpty, answered[frame.streamID] != nil { return }
        if case .headers(let headers) = frame.payload, headers.endStream, frame.streamID != .rootStream,
           let request = HotRequest(headers.headers), var answer = fastPath.answer(request) {
            let start = NIODeadline.now().uptimeNanoseconds
            fastPath.sample(&answer, uri: request.path, peer: context.channel.remoteAddress?.ipAddress,
                            forwardedFor: headers.headers["x-forwarded-for"])
            answered[frame.streamID] = context.eventLoop.now
            write(answer, on: frame.streamID, context: context)
            fastPath.record(answer, since: start, EdgeMetric.memoryAnswersH2)
            EdgeMetric.frameAnswersH2.increment()
            return
        }
        context.fireChannelRead(data)
    }

    private func write(_ answer: HotAnswer, on stream: HTTP2StreamID, context: ChannelHandlerContext) {
        let fields = answer.body.fields(answer.style)
        var headers = HPACKHeaders()
        headers.reserveCapacity(fields.count + 3)
        headers.add(name: ":status", value: "200")
        for field in fields where field.name != .date && field.name != .server {
            let indexing: HPACKIndexing = switch field.indexingStrategy {
            case .avoid: .nonIndexable
            case .disallow: .neverIndexed
            default: .indexable
            }
            headers.add(name: field.name.canonicalName, value: field.value, indexing: indexing)
        }
        headers.add(name: "date", value: HTTPDate.value())
        headers.add(name: "server", value: "RichPush")
        context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers)))), promise: nil)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .data(.init(data: .byteBuffer(answer.body.bytes), endStream: true)))),
                      promise: nil)
        unflushed = true
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
        // NIOHTTP2 has written what the windows allow by now: an answer still open waits for the client.
        if !answered.isEmpty && sweep == nil { scheduleSweep(context) }
        context.fireChannelReadComplete()
    }

    private func scheduleSweep(_ context: ChannelHandlerContext) {
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        sweep = context.eventLoop.scheduleTask(in: patience) {
            let (handler, context) = bound.value
            handler.sweep = nil
            handler.resetOverdue(context)
        }
    }

    /// Resets every stream answered longer than `patience` ago and still open.
    private func resetOverdue(_ context: ChannelHandlerContext) {
        let due = context.eventLoop.now - patience
        let overdue = answered.filter { $0.value <= due }.map(\.key)
        for stream in overdue {
            answered[stream] = nil
            context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .rstStream(.cancel))), promise: nil)
        }
        if !overdue.isEmpty { context.flush() }
        if !answered.isEmpty { scheduleSweep(context) }
    }

    private func stopSweep() {
        sweep?.cancel()
        sweep = nil
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopSweep()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopSweep()
        answered.removeAll()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if !answered.isEmpty, let stream = StreamEvent(event) {
            switch stream {
            case .closed(let id): if answered.removeValue(forKey: id) != nil { return }
            case .created(let id), .windowUpdated(let id): if answered[id] != nil { return }
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // An answer NIOHTTP2 would not write (a field it refuses): the stream is reset, not left
        // waiting, and the error is not the multiplexer's.
        if !answered.isEmpty, let streamError = error as? NIOHTTP2Errors.StreamError, answered[streamError.streamID] != nil {
            answered[streamError.streamID] = nil
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: streamError.streamID, payload: .rstStream(.internalError))), promise: nil)
            return
        }
        context.fireErrorCaught(error)
    }
}

/// What `HotPath` reads of an HTTP/2 request, straight from its header block: the request only
/// when it is as plain as the hot routes take (one `:method` of `GET`, one `:scheme`, one `:path`,
/// no other pseudo-field; the router gets anything else, as it did through the HTTP types codec).
struct HotRequest {
    /// `:path`.
    let path: String
    /// The one `authorization` field; nil when none was sent.
    let authorization: String?

    /// The request for `path` with `authorization`.
    init(path: String, authorization: String?) {
        self.path = path
        self.authorization = authorization
    }

    /// Nil when the request is not a plain GET the hot routes may answer: conditional, ranged,
    /// with two `authorization` fields, or any pseudo-field out of the ordinary.
    init?(_ headers: HPACKHeaders) {
        var method: String?, scheme: String?, path: String?, authority = 0
        var authorization: String?
        for (name, value, _) in headers {
            if name.utf8.first == UInt8(ascii: ":") {
                switch name {
                case ":method": guard method == nil else { return nil }; method = value
                case ":scheme": guard scheme == nil else { return nil }; scheme = value
                case ":path": guard path == nil else { return nil }; path = value
                case ":authority": authority += 1; guard authority == 1 else { return nil }
                default: return nil
                }
                continue
            }
            switch name {
            case "range", "if-range", "if-none-match": return nil
            case "authorization":
                guard authorization == nil else { return nil } // two are the router's to refuse
                authorization = value
            default: continue
            }
        }
        guard method == "GET", scheme != nil, let path, path.utf8.first == UInt8(ascii: "/") else { return nil }
        self.init(path: path, authorization: authorization)
    }
}

/// NIOHTTP2's events about one stream, told apart by the event's type before any cast. NIOHTTP2
/// sends several events a stream (its opening, a window change for each `DATA` frame written, its
/// closing), and a failed `as?` from `Any` costs a walk through the runtime's casting code: in a
/// fetch storm (`perf`, BENCHMARKS.md session 34) the runtime's casts were 2.2% of `serve`'s
/// samples with every handler trying each type in turn, 1.2% with this.
enum StreamEvent {
    case created(HTTP2StreamID)
    case windowUpdated(HTTP2StreamID)
    case closed(HTTP2StreamID)

    private static let createdType = ObjectIdentifier(NIOHTTP2StreamCreatedEvent.self)
    private static let windowUpdatedType = ObjectIdentifier(NIOHTTP2WindowUpdatedEvent.self)
    private static let closedType = ObjectIdentifier(StreamClosedEvent.self)

    /// The stream event `event` is, or nil for any other event (one cast, and only on a match).
    init?(_ event: Any) {
        let type = ObjectIdentifier(Swift.type(of: event))
        if type == Self.windowUpdatedType, let event = event as? NIOHTTP2WindowUpdatedEvent {
            self = .windowUpdated(event.streamID)
        } else if type == Self.createdType, let event = event as? NIOHTTP2StreamCreatedEvent {
            self = .created(event.streamID)
        } else if type == Self.closedType, let event = event as? StreamClosedEvent {
            self = .closed(event.streamID)
        } else {
            return nil
        }
    }
}
