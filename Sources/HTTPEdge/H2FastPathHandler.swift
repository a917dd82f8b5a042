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

/// Per HTTP/2 stream, after the conversion to HTTP types: answers the stream's request from
/// `FastPath` when it can (the same answers, headers and rules as over HTTP/1.1, with the
/// router's `Date` and `Server`), so a cached image or payload over h2 needs neither the router
/// nor a request object; anything else passes on to Hummingbird untouched.
///
/// A stream answered here gets no task (`FastPathHTTP2Connection`): it ends by itself once both
/// sides have ended it. An answer larger than the stream's flow-control window is still being
/// written after the request has ended, and closing the stream would cut it off (RST_STREAM), so
/// nothing that would close it passes this handler before the answer's last frame is written:
/// not the end of input, not a graceful shutdown.
final class H2FastPathHandler<Routes: HotRoutes>: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let fastPath: HotPath<Routes>
    private var answering: (answer: HotAnswer, start: UInt64)?
    private var forwarding = false
    /// The answer's last frame is not yet written.
    private var writing = false
    /// The end of input, held while `writing`.
    private var heldInputClosed = false

    init(fastPath: HotPath<Routes>) {
        self.fastPath = fastPath
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if forwarding { return context.fireChannelRead(data) }
        switch unwrapInboundIn(data) {
        case .head(let request):
            if answering == nil, !writing, var answer = fastPath.answer(request) {
                fastPath.sample(&answer, uri: request.path, peer: (context.remoteAddress ?? context.channel.parent?.remoteAddress)?.ipAddress,
                                forwardedFor: request.headerFields[values: HTTPField.Name("X-Forwarded-For")!])
                answering = (answer, NIODeadline.now().uptimeNanoseconds)
            } else {
                forwarding = true
                context.fireChannelRead(data)
            }
        case .body:
            break // an answered GET's body is dropped
        case .end:
            guard let (answer, start) = answering else { return }
            answering = nil
            write(answer, start: start, context: context)
        }
    }

    private func write(_ answer: HotAnswer, start: UInt64, context: ChannelHandlerContext) {
        var fields = answer.body.fields(answer.style)
        fields[.date] = HTTPDate.value()
        fields[.server] = "RichPush"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .ok, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(answer.body.bytes)), promise: nil)
        writing = true
        let written = context.eventLoop.makePromise(of: Void.self)
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in
            let (handler, context) = bound.value
            handler.writing = false
            if handler.heldInputClosed {
                handler.heldInputClosed = false
                context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        fastPath.record(answer, since: start, EdgeMetric.memoryAnswersH2)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, writing || answering != nil {
            heldInputClosed = true
            return
        }
        // A graceful shutdown lets an answer from here finish: the stream ends by itself after it
        // (the connection closes once its streams are done), and the handlers behind, which
        // never saw this request, would close the stream at once.
        if event is ChannelShouldQuiesceEvent, writing || answering != nil { return }
        context.fireUserInboundEventTriggered(event)
    }
}

#if canImport(Glibc)
import Glibc
#endif
