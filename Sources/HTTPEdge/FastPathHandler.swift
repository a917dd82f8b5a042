import CoreMetrics
import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import ServiceLifecycle

/// Per connection: answers from `FastPath` when it can, keeping responses in request order.
final class FastPathHandler<Routes: HotRoutes>: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Current {
        case idle
        case forwarding
        case answering(HotAnswer, start: UInt64)
    }

    private let fastPath: HotPath<Routes>
    private let outlet: RawOutlet
    private var current = Current.idle
    /// Requests handed to the router whose response has not ended: while any is, nothing is
    /// answered here (a pipelined request must not overtake an earlier one).
    private var routerPending = 0
    /// Whether each request handed to the router whose response head is not written yet is a
    /// `HEAD`, in order: a HEAD's response head goes out, its body parts do not (RFC 9110 §9.3.2).
    private var forwardedHeads = CircularBuffer<Bool>()
    private var suppressingBody = false
    /// Whether this connection has had an answer from here (then a graceful close waits for
    /// the socket to take every byte written before it).
    private var answered = false
    private var quiescing = false

    /// The connection's front (`FastPathFront`) answered before handing it here: a graceful close
    /// waits for those answers too.
    func noteEarlierAnswers() {
        answered = true
    }

    /// Whether an answer written now would be read as the answer to the request being received:
    /// no earlier request still awaits its answer, and this one's has not begun.
    var mayAnswerNow: Bool {
        switch current {
        case .idle, .answering: return routerPending == 0
        case .forwarding: return routerPending == 1 && forwardedHeads.count == 1
        }
    }

    init(fastPath: HotPath<Routes>, outlet: RawOutlet) {
        self.fastPath = fastPath
        self.outlet = outlet
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if routerPending == 0, var answer = fastPath.answer(head) {
                fastPath.sample(&answer, uri: head.uri, peer: context.remoteAddress?.ipAddress, forwardedFor: head.headers["X-Forwarded-For"])
                current = .answering(answer, start: NIODeadline.now().uptimeNanoseconds)
            } else {
                current = .forwarding
                routerPending += 1
                forwardedHeads.append(head.method == .HEAD)
                context.fireChannelRead(data)
            }
        case .body:
            if case .forwarding = current { context.fireChannelRead(data) } // an answered GET's body is dropped
        case .end:
            switch current {
            case .answering(let answer, let start):
                write(answer, start: start, context: context)
            case .forwarding:
                context.fireChannelRead(data)
            case .idle:
                break
            }
            current = .idle
        }
    }

    /// Writes the encoded head, the `Date` line and the body below the HTTP encoder: three
    /// buffers built before this request, one `writev`.
    private func write(_ answer: HotAnswer, start: UInt64, context: ChannelHandlerContext) {
        guard let raw = outlet.context else { return }
        fastPath.writeHTTP1(answer, through: raw, closing: context, since: start)
        answered = true
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            // A 1xx other than 101 is followed by the final head of the same request.
            if !((100..<200).contains(head.status.code) && head.status.code != 101) {
                suppressingBody = forwardedHeads.popFirst() ?? false
            }
        case .body where suppressingBody:
            promise?.succeed()
            return
        case .body:
            break
        case .end:
            routerPending = max(0, routerPending - 1)
            if suppressingBody {
                // Nothing more of a HEAD's answer goes out: a chunked head's terminator would be read as the next answer.
                suppressingBody = false
                promise?.succeed()
                context.flush()
                return
            }
        }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Graceful shutdown closes idle connections: not before our own answers are out. Writes
        // complete in order, so an empty write's promise marks the moment all earlier ones have.
        if event is ChannelShouldQuiesceEvent, answered, let raw = outlet.context {
            guard !quiescing else { return }
            quiescing = true
            let promise = context.eventLoop.makePromise(of: Void.self)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            promise.futureResult.whenComplete { _ in bound.value.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
            raw.writeAndFlush(NIOAny(ByteBuffer()), promise: promise)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

#if canImport(Glibc)
import Glibc
#endif
