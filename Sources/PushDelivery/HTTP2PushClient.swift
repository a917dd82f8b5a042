import HTTP2Client
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
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
    /// The peer reset the stream (RST_STREAM, or above a GOAWAY's last stream), with this code.
    case reset(UInt32)
    case timeout
    case bodyTooLarge
    case protocolError(String)

    var description: String {
        switch self {
        case .connect(let reason): "cannot connect: \(reason)"
        case .connection(let reason): reason
        case .closed: "the connection closed before the answer"
        case .reset(let code): "the stream was reset (\(HTTP2Wire.ErrorCode.name(code)))"
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
/// connection, every request a stream on it, framed by `HTTP2ClientSession` in one handler on the
/// event loop.
///
/// AsyncHTTPClient gives every request a child channel and several hops; a push is a few hundred
/// bytes, so that per-request cost was most of a push's CPU. NIOHTTP2's connection handler then
/// cost a third of `serve`'s CPU in a campaign (its stream state machines, header validation,
/// and an HPACK encoder that searches its table for every field). Here a request costs one
/// header block, encoded by hand (the fields every push repeats are indexed once, the rest are
/// literals), one DATA frame and one callback, and requests submitted together are written with
/// one flush. The peer's `MAX_CONCURRENT_STREAMS` is respected (requests beyond it wait their
/// turn); a connection told `GOAWAY`, closed, or out of stream ids is replaced by a new one on the
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
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(headers.count)
        for (name, value) in headers { fields.append(HTTP2HeaderField(name, value, indexed: !unindexed.contains(name))) }
        let request = PushConnection.Request(method: method, path: path, fields: fields, body: body.map { Array($0.readableBytesView) },
                                             timeout: timeout, completion: completion)
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
        let authority = self.authority
        let retired = NIOLockedValueBox(false)
        return ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = PushStreamsHandler(timeout: timeout, retired: retired, endpoint: endpoint, authority: authority)
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
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
        var method: String
        var path: String
        /// The request's own fields; the pseudo-fields and `content-length` are added by the session.
        var fields: [HTTP2HeaderField]
        var body: [UInt8]?
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
