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

/// The first handler of the pipeline, next to the socket: the fast path writes its already
/// encoded answers through this handler's context, past the HTTP/1 encoder. Responses stay in
/// order because the fast path answers only when no router response is outstanding.
final class RawOutlet: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private(set) var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }
}

#if canImport(Glibc)
import Glibc
#endif
