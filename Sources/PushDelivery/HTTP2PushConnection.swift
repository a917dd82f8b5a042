import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A push service's answer to one request.
struct PushHTTPResponse: Sendable {
    /// The `:status`.
    var status: Int
    /// The response headers (pseudo-headers included).
    var headers: HPACKHeaders
    /// The body, at most `HTTP2PushClient.maximumBodySize` bytes.
    var body: ByteBuffer
}

/// Why a request got no answer. Every case means the service may not have seen it, so the push
/// is tried again.
enum PushHTTPError: Error, CustomStringConvertible {
    /// No connection could be made: why, in words (`ConnectionWords`).
    case connect(String)
    /// The connection failed under its streams (a TLS handshake refused, a reset): why, in words.
    case connection(String)
    case closed
    case reset(HTTP2ErrorCode)
    case timeout
    case bodyTooLarge
    case protocolError(String)

    var description: String {
        switch self {
        case .connect(let reason): "cannot connect: \(reason)"
        case .connection(let reason): reason
        case .closed: "the connection closed before the answer"
        case .reset(let code): "the stream was reset (\(code))"
        case .timeout: "no answer in time"
        case .bodyTooLarge: "the answer's body was too large"
        case .protocolError(let reason): reason
        }
    }

    /// A push's reason: a failed connection's words as they are (they start with what
    /// `ProviderFailure` recognises, and name the fix), anything else after `connection failed: `.
    var reason: String {
        switch self {
        case .connect(let words), .connection(let words): words
        default: "connection failed: \(description)"
        }
    }
}

/// An HTTP/2 client for push services (APNs, and any service spoken to the same way): one TLS
/// connection, every request a stream on it, written as frames by one handler on the event loop.
///
/// AsyncHTTPClient gives every request a child channel and several hops; a push is a few hundred
/// bytes, so that per-request cost was most of a push's CPU. Here a request costs one header
/// block, one data frame and one callback, and requests submitted together are written with
/// one flush. The peer's `MAX_CONCURRENT_STREAMS` is respected (NIOHTTP2 holds back streams beyond
/// it); a connection told `GOAWAY`, closed, or out of stream ids is replaced by a new one on the
/// next request, and the streams it did not answer fail with an error (so the push is retried).
final class HTTP2PushClient: Sendable {
    /// Answers larger than this are refused (APNs' error bodies are a few dozen bytes). Well
    /// below a stream's initial window, so no stream ever needs a window update.
    static let maximumBodySize = 16 * 1024

    private let host: String
    private let port: Int
    private let authority: String
    private let sslContext: NIOSSLContext
    private let group: any EventLoopGroup
    private let timeout: TimeAmount
    private let connectTimeout: TimeAmount
    private let state = NIOLockedValueBox(PoolState())

    private struct PoolState {
        var current: PushConnection?
        var connecting: EventLoopFuture<PushConnection>?
        var shutDown = false
        var all: [ObjectIdentifier: PushConnection] = [:]
    }

    /// A client for `https://host:port`.
    init(host: String, port: Int, tls: TLSConfiguration, timeout: TimeAmount = .seconds(30), connectTimeout: TimeAmount = .seconds(10),
         group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        self.sslContext = try NIOSSLContext(configuration: tls)
        self.host = host
        self.port = port
        self.authority = port == 443 ? host : "\(host):\(port)"
        self.group = group
        self.timeout = timeout
        self.connectTimeout = connectTimeout
    }

    /// Sends one request: `POST`-style with `body`, or bodiless when `body` is nil. `headers` are
    /// the request's own; the pseudo-headers are added here. `timeout` replaces the client's for
    /// this request (counted from when it is handed to the connection).
    func execute(method: String = "POST", path: String, headers: [(String, String)], body: ByteBuffer?,
                 timeout: TimeAmount? = nil) async throws -> PushHTTPResponse {
        try await withCheckedThrowingContinuation { continuation in
            execute(method: method, path: path, headers: headers, body: body, timeout: timeout) { continuation.resume(with: $0) }
        }
    }

    /// `execute` without a task: `completion` is called once, on the connection's event loop
    /// (or at once when no connection can be had), so a sender with many requests in flight
    /// needs no task or thread hop per request.
    ///
    /// `unindexed` names the headers (`:path` among them) whose values differ from one request to
    /// the next: HPACK sends them as literals without adding them to the connection's dynamic
    /// table. Indexed, each would evict older entries (a device's path and a push's `apns-id`
    /// are about 120 bytes a push against a 4,096-byte table), so the values every request shares
    /// (the provider token, the topic) kept falling out and being sent whole again, and both
    /// sides searched and rewrote the table for every push.
    func execute(method: String = "POST", path: String, headers: [(String, String)], body: ByteBuffer?, timeout: TimeAmount? = nil,
                 unindexed: Set<String> = [], completion: @escaping @Sendable (Result<PushHTTPResponse, any Error>) -> Void) {
        var block = HPACKHeaders()
        block.reserveCapacity(headers.count + 4)
        block.add(name: ":method", value: method)
        block.add(name: ":scheme", value: "https")
        block.add(name: ":path", value: path, indexing: unindexed.contains(":path") ? .nonIndexable : .indexable)
        block.add(name: ":authority", value: authority)
        for (name, value) in headers { block.add(name: name, value: value, indexing: unindexed.contains(name) ? .nonIndexable : .indexable) }
        let request = PushConnection.Request(headers: block, body: body, timeout: timeout, completion: completion)
        switch usableConnection() {
        case .success(let connection):
            connection.submit(request)
        case .failure(let error):
            completion(.failure(error))
        case .pending(let future):
            let host = self.host, port = self.port
            future.whenComplete { result in
                switch result {
                case .success(let connection): connection.submit(request)
                case .failure(let error as PushHTTPError): completion(.failure(error))
                case .failure(let error): completion(.failure(PushHTTPError.connect(ConnectionWords.describe(error, endpoint: "\(host):\(port)"))))
                }
            }
        }
    }

    /// Closes every connection; requests in flight fail.
    func shutdown() async {
        let connections = state.withLockedValue { state -> [PushConnection] in
            state.shutDown = true
            state.current = nil
            return Array(state.all.values)
        }
        for connection in connections { try? await connection.channel.close() }
    }

    private enum Acquired {
        case success(PushConnection)
        case failure(any Error)
        case pending(EventLoopFuture<PushConnection>)
    }

    /// The current connection if it takes new streams, else the one being made (one at a time).
    private func usableConnection() -> Acquired {
        let (acquired, started): (Acquired, Bool) = state.withLockedValue { state in
            guard !state.shutDown else { return (.failure(PushHTTPError.closed), false) }
            if let current = state.current, current.isUsable { return (.success(current), false) }
            state.current = nil
            if let connecting = state.connecting { return (.pending(connecting), false) }
            let connecting = connect()
            state.connecting = connecting
            return (.pending(connecting), true)
        }
        if started, case .pending(let connecting) = acquired {
            connecting.whenComplete { [self] result in
                self.state.withLockedValue { state in
                    state.connecting = nil
                    if case .success(let connection) = result {
                        if state.shutDown {
                            connection.channel.close(promise: nil)
                        } else {
                            state.current = connection
                            state.all[ObjectIdentifier(connection)] = connection
                        }
                    }
                }
                if case .success(let connection) = result {
                    connection.channel.closeFuture.whenComplete { _ in
                        self.state.withLockedValue { state in
                            state.all[ObjectIdentifier(connection)] = nil
                            if state.current === connection { state.current = nil }
                        }
                    }
                }
            }
        }
        return acquired
    }

    private func connect() -> EventLoopFuture<PushConnection> {
        let sslContext = self.sslContext
        let serverName = Self.isIPAddress(host) ? nil : host
        let timeout = self.timeout
        let endpoint = "\(host):\(port)"
        let retired = NIOLockedValueBox(false)
        return ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = PushStreamsHandler(timeout: timeout, retired: retired, endpoint: endpoint)
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client))
                    try sync.addHandler(handler)
                }
            }
            .connect(host: host, port: port)
            .flatMapThrowing { channel in
                let handler = try channel.pipeline.syncOperations.handler(type: PushStreamsHandler.self)
                return PushConnection(channel: channel, handler: handler, retired: retired)
            }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}

/// One connection: requests are queued under a lock and written on the event loop in one go.
final class PushConnection: Sendable {
    struct Request: Sendable {
        var headers: HPACKHeaders
        var body: ByteBuffer?
        var timeout: TimeAmount?
        var completion: @Sendable (Result<PushHTTPResponse, any Error>) -> Void
    }

    let channel: any Channel
    private let handler: NIOLoopBound<PushStreamsHandler>
    private let queue = NIOLockedValueBox(Queue())

    private struct Queue {
        var requests: [Request] = []
        var scheduled = false
    }

    private let retired: NIOLockedValueBox<Bool>

    /// `handler` must be in `channel`'s pipeline; `retired` is the flag it sets.
    init(channel: any Channel, handler: PushStreamsHandler, retired: NIOLockedValueBox<Bool>) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        self.retired = retired
    }

    /// Whether new requests may still go on this connection.
    var isUsable: Bool {
        retired.withLockedValue { !$0 }
    }

    func submit(_ request: Request) {
        let schedule = queue.withLockedValue { queue in
            queue.requests.append(request)
            defer { queue.scheduled = true }
            return !queue.scheduled
        }
        guard schedule else { return }
        channel.eventLoop.execute { [self] in
            let requests = queue.withLockedValue { queue in
                queue.scheduled = false
                defer { queue.requests.removeAll(keepingCapacity: true) }
                return queue.requests
            }
            handler.value.start(requests)
        }
    }
}

/// The connection's HTTP/2 streams, on the event loop: writes each request's frames, gathers
/// each response, returns the connection window's bytes, and fails what cannot be answered.
final class PushStreamsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var completion: @Sendable (Result<PushHTTPResponse, any Error>) -> Void
        var deadline: NIODeadline
        var status: Int?
        var headers = HPACKHeaders()
        var body: ByteBuffer?
    }

    /// Set once no new stream may start here (GOAWAY, closed, ids nearly used up); read from any thread.
    private let retired: NIOLockedValueBox<Bool>
    private let timeout: TimeAmount
    /// `host:port`, as errors name it.
    private let endpoint: String
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var nextStreamID: Int32 = 1
    private var context: ChannelHandlerContext?
    private var failure: PushHTTPError?
    private var unreturnedWindow = 0
    private var sweeper: RepeatedTask?

    init(timeout: TimeAmount, retired: NIOLockedValueBox<Bool>, endpoint: String) {
        self.timeout = timeout
        self.retired = retired
        self.endpoint = endpoint
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // Streams past their deadline are reset and failed; one timer per connection, not per push.
        let interval = TimeAmount.milliseconds(min(250, max(10, timeout.nanoseconds / 1_000_000 / 4)))
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        sweeper = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            bound.value.sweep()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sweeper?.cancel()
        failAll(.closed)
        self.context = nil
    }

    /// Starts the requests as new streams and flushes once.
    func start(_ requests: [PushConnection.Request]) {
        guard let context, failure == nil else {
            for request in requests { request.completion(.failure(failure ?? .closed)) }
            return
        }
        let now = NIODeadline.now()
        for request in requests {
            // Client stream ids are odd and below 2^31; retire the connection well before.
            guard nextStreamID < Int32.max - 1024 else {
                retire()
                request.completion(.failure(PushHTTPError.closed))
                continue
            }
            let id = HTTP2StreamID(nextStreamID)
            nextStreamID += 2
            streams[id] = Stream(completion: request.completion, deadline: now + (request.timeout ?? timeout))
            let promise = context.eventLoop.makePromise(of: Void.self)
            promise.futureResult.assumeIsolated().whenFailure { [self] error in
                // The connection's own failure (a refused certificate) says more than the write's.
                self.finish(id, with: .failure(self.failure ?? PushHTTPError.connection(ConnectionWords.describe(error, endpoint: self.endpoint))))
            }
            if let body = request.body {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: request.headers)))), promise: nil)
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
                              promise: promise)
            } else {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: request.headers, endStream: true)))),
                              promise: promise)
            }
        }
        context.flush()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let payload):
            guard var stream = streams[frame.streamID] else { return }
            if stream.status == nil {
                guard let text = payload.headers.first(name: ":status"), let status = Int(text) else {
                    reset(frame.streamID, with: .protocolError("a response without :status"))
                    return
                }
                if status < 200 { return } // informational: the real answer follows
                stream.status = status
                stream.headers = payload.headers
            }
            streams[frame.streamID] = stream
            if payload.endStream { complete(frame.streamID) }
        case .data(let payload):
            var length = payload.paddingBytes ?? 0
            if case .byteBuffer(let bytes) = payload.data { length += bytes.readableBytes }
            returnWindow(length, context: context)
            guard var stream = streams[frame.streamID] else { return }
            if case .byteBuffer(var bytes) = payload.data, bytes.readableBytes > 0 {
                if (stream.body?.readableBytes ?? 0) + bytes.readableBytes > HTTP2PushClient.maximumBodySize {
                    reset(frame.streamID, with: .bodyTooLarge)
                    return
                }
                if stream.body == nil { stream.body = bytes } else { stream.body!.writeBuffer(&bytes) }
            }
            streams[frame.streamID] = stream
            if payload.endStream { complete(frame.streamID) }
        case .goAway:
            // Streams above the last one the peer processed are closed by NIOHTTP2 (a StreamClosedEvent with a reason).
            retire()
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, let reason = closed.reason {
            finish(closed.streamID, with: .failure(PushHTTPError.reset(reason)))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            finish(streamError.streamID, with: .failure(PushHTTPError.protocolError("\(streamError.baseError)")))
            return
        }
        failAll(.connection(ConnectionWords.describe(error, endpoint: endpoint)))
        context.close(promise: nil)
    }

    private func complete(_ id: HTTP2StreamID) {
        guard let stream = streams[id] else { return }
        let response = PushHTTPResponse(status: stream.status ?? 0, headers: stream.headers, body: stream.body ?? ByteBuffer())
        if stream.status == nil {
            reset(id, with: .protocolError("a response without :status"))
        } else {
            finish(id, with: .success(response))
        }
    }

    private func finish(_ id: HTTP2StreamID, with result: Result<PushHTTPResponse, any Error>) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.completion(result)
    }

    private func reset(_ id: HTTP2StreamID, with error: PushHTTPError) {
        guard let context, streams[id] != nil else { return }
        finish(id, with: .failure(error))
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
    }

    /// Gives the peer back the connection window its DATA frames used (NIOHTTP2 does this for
    /// streams only when a multiplexer is in the pipeline; streams here never need it: a body is
    /// capped well below the initial stream window).
    private func returnWindow(_ length: Int, context: ChannelHandlerContext) {
        unreturnedWindow += length
        guard unreturnedWindow >= 32 * 1024 else { return }
        let increment = unreturnedWindow
        unreturnedWindow = 0
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
                              promise: nil)
    }

    private func sweep() {
        let now = NIODeadline.now()
        let late = streams.filter { $0.value.deadline < now }.map(\.key)
        for id in late { reset(id, with: .timeout) }
    }

    private func retire() {
        retired.withLockedValue { $0 = true }
    }

    private func failAll(_ error: PushHTTPError) {
        retire()
        if failure == nil { failure = error }
        let pending = streams
        streams.removeAll()
        for stream in pending.values { stream.completion(.failure(error)) }
    }
}
