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

/// The async channel Hummingbird serves a connection (or an HTTP/2 stream) through.
public typealias HTTPConnectionChannel = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

/// Hummingbird's HTTP/1 channel with `FastPathHandler` between NIO's HTTP/1 codec and the
/// conversion to HTTP types, and a `RawOutlet` in front of the codec for its answers.
public struct FastPathHTTP1Channel<Routes: HotRoutes>: HTTPChannelHandler {
    /// The async channel a connection is served through once the router has it.
    public typealias Value = HTTPConnectionChannel
    /// Hummingbird's request handling, for what the fast path passes on.
    public let responder: HTTPChannelHandler.Responder
    /// What the connection answers from memory.
    public let fastPath: HotPath<Routes>
    /// How long a request head may take to arrive, from its first byte.
    public let headTimeout: TimeAmount
    /// A connection with no request in flight is closed after this long (the fast path's too).
    public let idleTimeout: Duration
    /// Behind TLS (`https` requests).
    public var secure = false
    /// How fast a request body must keep coming once its head has arrived.
    public var bodyRate = BodyRateLimit.default

    /// A connection answering from `fastPath` where it can and through `responder` otherwise;
    /// a head must arrive within `headTimeout`, and an idle connection closes after `idleTimeout`.
    public init(responder: @escaping HTTPChannelHandler.Responder, fastPath: HotPath<Routes>, headTimeout: TimeAmount, idleTimeout: Duration,
                secure: Bool = false, bodyRate: BodyRateLimit = .default) {
        self.responder = responder
        self.fastPath = fastPath
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
        self.secure = secure
        self.bodyRate = bodyRate
    }

    /// The whole pipeline at once (Hummingbird's own server: the tests' `.live` runs).
    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try configure(channel, logger: logger)
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    /// Adds the connection's handlers, from the socket to the conversion to HTTP types
    /// (`HTTPListener` adds its `Handoff` after them, Hummingbird's server its async channel).
    func configure(_ channel: any Channel, logger: Logger) throws {
        let outlet = RawOutlet()
        let deadline = HeadDeadline(timeout: headTimeout)
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(LingeringCloseHandler())
        try pipeline.addHandler(HeadDeadline.Start(deadline))
        try pipeline.addHandler(outlet)
        // The HTTP/1 codec, unpaired: `configureHTTPServerPipeline` has the decoder queue each
        // request's method in the encoder, which pops one per response head to leave the bodies of
        // HEAD responses out. The fast path answers below the encoder, so that queue would fall out
        // of step, and a later GET's body would be dropped as a HEAD's. `FastPathHandler` keeps
        // the same queue for the requests it forwards instead.
        try pipeline.addHandler(HTTPResponseEncoder(configuration: .init()))
        try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: HTTP1DecoderLimits.value)))
        try pipeline.addHandler(HeadDeadline.End(deadline))
        let fastPathHandler = FastPathHandler(fastPath: fastPath, outlet: outlet)
        // Before the fast path, so that it sees every body, answered here or by the router.
        try pipeline.addHandler(BodyRateHandler<HTTP1BodyRate>(limit: bodyRate, mayAnswer: { fastPathHandler.mayAnswerNow }))
        try pipeline.addHandler(fastPathHandler)
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: secure))
        try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
    }


    /// Hummingbird's request loop, over the connection's async channel.
    public func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }

}

/// How NIO's HTTP/1 decoder is configured for every connection.
enum HTTP1DecoderLimits {
    /// Request heads of at most 100 fields and 32 KiB: what devices and browsers send fits many times over.
    static let value: NIOHTTPDecoderLimitConfiguration = {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = 16 * 1024
        limits.maxHeaderListSize = 32 * 1024
        limits.maxHeaderFieldCount = 100
        return limits
    }()
}
