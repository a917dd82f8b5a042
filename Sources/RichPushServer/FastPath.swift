import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import MediaStore
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Answers the hottest requests synchronously on the event loop, when everything the answer
/// needs is already in memory: `GET /media/{sha256}` of a cached blob, and
/// `GET /api/notifications/{id}` of an already-read payload by its recipient with cached
/// credentials. Anything else (a miss, a conditional or ranged request, HEAD, a first read,
/// an unknown credential) goes through Hummingbird unchanged, and so do the rules: the
/// answers are byte-for-byte what the router would send.
///
/// It is a cache hit path, like nginx's open-file cache: no decision is made here that the
/// router would not make the same way.
final class FastPath: Sendable {
    let blobs: BlobCache
    let authenticator: Authenticator
    let payloads: ReadPayloadCache
    let publicMedia: Bool
    private let mediaMetrics = RouteMetrics(route: "/media/{sha256}")
    private let payloadMetrics = RouteMetrics(route: "/api/notifications/{id}")

    init(blobs: BlobCache, authenticator: Authenticator, payloads: ReadPayloadCache, publicMedia: Bool) {
        self.blobs = blobs
        self.authenticator = authenticator
        self.payloads = payloads
        self.publicMedia = publicMedia
    }

    /// A complete answer, ready to write.
    struct Answer {
        var headers: HTTPHeaders
        var blob: ServedBlob
        var metrics: RouteMetrics
    }

    /// The answer to `head` if it can be given from memory now; nil sends the request to the router.
    func answer(_ head: HTTPRequestHead) -> Answer? {
        guard head.method == .GET, head.isKeepAlive else { return nil }
        // One pass over the headers: conditional and ranged requests go to the router.
        var authorization: String?
        for (name, value) in head.headers {
            switch name.utf8.count {
            case 5 where name.lowercased() == "range": return nil
            case 8 where name.lowercased() == "if-range": return nil
            case 13 where name.lowercased() == "if-none-match": return nil
            case 13 where name.lowercased() == "authorization": authorization = value
            default: continue
            }
        }
        let uri = head.uri.utf8
        let pathEnd = uri.firstIndex(of: UInt8(ascii: "?")) ?? uri.endIndex
        let length = uri.distance(from: uri.startIndex, to: pathEnd)
        if length == 7 + 64, head.uri.hasPrefix("/media/") {
            guard let id = MediaID(String(head.uri.utf8.dropFirst(7).prefix(64))!) else { return nil }
            if !publicMedia {
                guard authenticator.cachedUser(authorization) != nil else { return nil }
            }
            guard let blob = blobs.freshBlob(id) else { return nil }
            return Answer(headers: publicMedia ? blob.publicHeaders : blob.privateImmutableHeaders, blob: blob, metrics: mediaMetrics)
        }
        if length > 19, head.uri.hasPrefix("/api/notifications/") {
            guard let digits = String(head.uri.utf8.dropFirst(19).prefix(length - 19)), let id = Int64(digits), id > 0,
                  let user = authenticator.cachedUser(authorization),
                  let known = payloads.get(id), known.recipient == user,
                  let blob = blobs.freshBlob(known.payload) else { return nil }
            return Answer(headers: blob.privateHeaders, blob: blob, metrics: payloadMetrics)
        }
        return nil
    }
}

/// The same metrics Hummingbird's `MetricsMiddleware` records for a 200 on a route.
struct RouteMetrics: Sendable {
    let requests: Counter
    let duration: Metrics.Timer

    init(route: String) {
        let dimensions = [("http.route", route), ("http.request.method", "GET"), ("http.response.status_code", "200")]
        requests = Counter(label: "hb.requests", dimensions: dimensions)
        duration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions)
    }
}

/// Notifications already read, by id: their recipient and payload never change afterwards.
final class ReadPayloadCache: Sendable {
    private let entries = NIOLockedValueBox<[Int64: (recipient: String, payload: MediaID)]>([:])

    func get(_ id: Int64) -> (recipient: String, payload: MediaID)? {
        entries.withLockedValue { $0[id] }
    }

    func set(_ id: Int64, recipient: String, payload: MediaID) {
        entries.withLockedValue { entries in
            if entries.count > 100_000 { entries.removeAll() }
            entries[id] = (recipient, payload)
        }
    }
}

/// Hummingbird's HTTP/1 channel with `FastPathHandler` between NIO's HTTP/1 codec and the
/// conversion to HTTP types.
struct FastPathHTTP1Channel: HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>
    let responder: HTTPChannelHandler.Responder
    let fastPath: FastPath

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: false,
                withErrorHandling: false,
                withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: .init())
            try channel.pipeline.syncOperations.addHandler(FastPathHandler(fastPath: fastPath))
            try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try channel.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(idleTimeout: nil, logger: logger))
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }

    /// The server builder for `Application(server:)`.
    static func builder(_ fastPath: FastPath) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in FastPathHTTP1Channel(responder: responder, fastPath: fastPath) }
    }
}

/// Per connection: answers from `FastPath` when it can, keeping responses in request order.
final class FastPathHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Current {
        case idle
        case forwarding
        case answering(FastPath.Answer, version: HTTPVersion, start: UInt64)
    }

    private let fastPath: FastPath
    private var current = Current.idle
    /// Requests handed to the router whose response has not ended: while any is, nothing is
    /// answered here (a pipelined request must not overtake an earlier one).
    private var routerPending = 0
    /// Answers written here and not yet flushed to the socket.
    private var writesPending = 0
    private var quiesceDeferred = false

    init(fastPath: FastPath) {
        self.fastPath = fastPath
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if routerPending == 0, let answer = fastPath.answer(head) {
                current = .answering(answer, version: head.version, start: DispatchTime.now().uptimeNanoseconds)
            } else {
                current = .forwarding
                routerPending += 1
                context.fireChannelRead(data)
            }
        case .body:
            if case .forwarding = current { context.fireChannelRead(data) } // an answered GET's body is dropped
        case .end:
            switch current {
            case .answering(let answer, let version, let start):
                write(answer, version: version, start: start, context: context)
            case .forwarding:
                context.fireChannelRead(data)
            case .idle:
                break
            }
            current = .idle
        }
    }

    private func write(_ answer: FastPath.Answer, version: HTTPVersion, start: UInt64, context: ChannelHandlerContext) {
        var headers = answer.headers
        headers.add(name: "Date", value: HTTPDate.now())
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(answer.blob.bytes))), promise: nil)
        writesPending += 1
        let promise = context.eventLoop.makePromise(of: Void.self)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        promise.futureResult.whenComplete { _ in
            let (handler, context) = loopBound.value
            handler.writesPending -= 1
            if handler.writesPending == 0 && handler.quiesceDeferred {
                handler.quiesceDeferred = false
                context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
            }
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: promise)
        answer.metrics.requests.increment()
        answer.metrics.duration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { routerPending = max(0, routerPending - 1) }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Graceful shutdown closes idle connections: not before our own answers are out.
        if event is ChannelShouldQuiesceEvent && writesPending > 0 {
            quiesceDeferred = true
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// The `Date` header value, formatted once per second.
enum HTTPDate {
    private static let cache = NIOLockedValueBox<(second: Int, value: String)>((0, ""))
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func now() -> String {
        var seconds = time(nil)
        return cache.withLockedValue { cache in
            if cache.second == seconds { return cache.value }
            var t = tm()
            gmtime_r(&seconds, &t)
            let value = String(format: "%@, %02d %@ %04d %02d:%02d:%02d GMT", days[Int(t.tm_wday)], t.tm_mday, months[Int(t.tm_mon)],
                               Int(t.tm_year) + 1900, t.tm_hour, t.tm_min, t.tm_sec)
            cache = (seconds, value)
            return value
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
