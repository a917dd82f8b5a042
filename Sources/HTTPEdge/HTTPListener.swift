import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOHTTPTypes
import NIOPosix
import NIOSSL
import NIOTLS
import ServiceLifecycle

/// HTTPS for `serve --tls-cert --tls-key`: the TLS context, offering HTTP/2 and HTTP/1.1 by
/// ALPN, and the HTTP/2 channel that serves connections which chose HTTP/2.
public struct TLSSetup: Sendable {
    let context: NIOSSLContext
    /// How long a connection may take to finish its handshake, from its accept.
    let handshakeTimeout: TimeAmount

    /// How long a connection the server closes has to send what is left and its `close_notify`
    /// (`ServerConfiguration.tlsCloseWait`, 250 ms): for an established connection, the wait
    /// `TLSCloseWithoutWaiting` gives a client that does not read; for one closed before its
    /// handshake is done, NIOSSL's own wait for the client's `close_notify`. The fast path closes
    /// only once its writes are in the kernel, so the client has every byte by then; few clients
    /// send a `close_notify`, and nginx does not wait for one. Kept short because NIOSSL (2.37)
    /// leaves its timer scheduled when the client closes the TCP connection first, holding the
    /// connection's handler, TLS state and pipeline for its whole length: at NIOSSL's default of
    /// 5 s, new connections at 1,200 a second kept about 6,000 of them (`serve` at 605 MB), and
    /// every cancel of another timer searched that heap (5% of `serve`'s samples in a profile).
    let closeNotifyWait: TimeAmount

    /// TLS with the PEM `certificate` chain and `key`; a handshake must be done within
    /// `handshakeTimeout` seconds, and a closing connection waits `closeWait` seconds for its peer.
    /// Session tickets are encrypted with `ticketKeys` (`--tls-ticket-keys`, shared by the nodes
    /// behind one name); without them, with a key BoringSSL makes for this process alone.
    public init(certificate: String, key: String, handshakeTimeout: Double, closeWait: Double, ticketKeys: TLSTicketKeys? = nil) throws {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        tls.applicationProtocols = ["h2", "http/1.1"]
        tls.minimumTLSVersion = .tlsv12
        closeNotifyWait = .nanoseconds(Int64(closeWait * 1e9))
        tls.shutdownTimeout = closeNotifyWait
        let context = try NIOSSLContext(configuration: tls)
        try ticketKeys?.install(on: context)
        self.context = context
        self.handshakeTimeout = .nanoseconds(Int64(handshakeTimeout * 1e9))
    }
}

/// An accepted connection ready for its task: HTTP/1.1 (with the fast path) or HTTP/2.
enum AcceptedConnection: Sendable {
    case http1(HTTPConnectionChannel)
    /// An HTTP/2 stream whose request needs the router.
    case http2Stream(HTTPConnectionChannel)
}

/// The HTTP/1.1 listener `serve` runs, in place of Hummingbird's `Server`.
///
/// Hummingbird's server gives every accepted connection an async channel and a task before
/// its first byte is read (NIO registers a child channel only once its initializer's future
/// completes). A device fetching its payload once over a new connection then pays for two
/// thread hand-offs it never needed. Here a new connection starts with one handler,
/// `FastPathFront`, which reads plain GETs itself and answers them from the fast path on the
/// event loop. The full pipeline (`FastPathHTTP1Channel`: NIO's codec, the deadlines, the fast
/// path's own handler) is built behind it only when a request needs it, and the connection gets
/// its async channel and task only when something reaches the end of that pipeline: the first
/// request the fast path passes on, an error, or an event. From then on it is served by
/// Hummingbird's own `handleHTTP`, exactly as before. A connection the fast path answers and
/// closes never leaves its event loop, and never has more than the one handler.
///
/// Over plain HTTP, NIO does not accept: `RawFront`'s threads do, answer the first fetches that
/// ask to close themselves, and give every other connection to NIO with what they read
/// (`AdoptedConnections`), where it starts at `FastPathFront` as above.
///
/// Graceful shutdown closes the listening socket, asks every connection to finish, and the
/// service returns when the last one has closed (over HTTPS with NIO's quiescing helper).
public struct HTTPListener<Routes: HotRoutes>: Service {
    let channel: FastPathHTTP1Channel<Routes>
    /// HTTPS: TLS in front, then HTTP/2 or HTTP/1.1 as the client chose by ALPN.
    let tls: TLSSetup?
    let http2: FastPathHTTP2Connection<Routes>
    let host: String
    let port: Int
    let backlog: Int
    let maxConnections: Int
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger
    let onServerRunning: @Sendable (any Channel) async -> Void

    /// A listener on `host:port` serving `channel`'s connections (and, with `tls`, `http2`'s),
    /// at most `maxConnections` at once; `onServerRunning` runs once it is bound.
    public init(channel: FastPathHTTP1Channel<Routes>, tls: TLSSetup?, http2: FastPathHTTP2Connection<Routes>, host: String, port: Int, backlog: Int,
                maxConnections: Int, eventLoopGroup: any EventLoopGroup, logger: Logger, onServerRunning: @escaping @Sendable (any Channel) async -> Void) {
        self.channel = channel
        self.tls = tls
        self.http2 = http2
        self.host = host
        self.port = port
        self.backlog = backlog
        self.maxConnections = maxConnections
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.onServerRunning = onServerRunning
    }

    public func run() async throws {
        let (connections, handedOff) = AsyncStream.makeStream(of: AcceptedConnection.self)
        let childChannel = channel
        let logger = logger
        let readIdle = TimeAmount(childChannel.idleTimeout)
        // HTTP/1.1: the front answers what it can; the full pipeline (the fast path's handler,
        // the router behind it) is built when a request needs it.
        @Sendable func fullPipeline(_ channel: any Channel) throws {
            try childChannel.configure(channel, logger: logger)
            try channel.pipeline.syncOperations.addHandler(Handoff { handedOff.yield(.http1($0)) })
        }
        // Over plain TCP its answers go out as files, with sendfile(2); TLS must encrypt them.
        @Sendable func http1(_ channel: any Channel, plain: Bool) throws {
            try channel.pipeline.syncOperations.addHandler(FastPathFront(fastPath: childChannel.fastPath, idleTimeout: readIdle,
                                                                         wireFiles: plain, buildPipeline: fullPipeline))
        }
        let listening = try await tls == nil ? listenPlain(http1: http1) : listenTLS(http1: http1, handedOff: handedOff)
        let server = listening.server
        logger.info("Server started and listening on \(tls == nil ? "" : "https://")\(host):\(server.localAddress?.port ?? port)")

        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await onServerRunning(server)
                await withDiscardingTaskGroup { group in
                    for await connection in connections {
                        group.addTask {
                            switch connection {
                            case .http1(let value): await childChannel.handle(value: value, logger: logger)
                            // One request per stream: Hummingbird's loop ends when the stream's input does.
                            case .http2Stream(let value): await childChannel.handle(value: value, logger: logger)
                            }
                        }
                    }
                }
            } onGracefulShutdown: {
                listening.shutDown { handedOff.finish() }
            }
        } onCancel: {
            listening.cancel()
            handedOff.finish()
        }
        // No thread of the listener's outlives it, however it stopped.
        await listening.stopped()
    }

    /// What is listening, and how it stops.
    struct Listening: Sendable {
        /// NIO's server channel (for plain HTTP, one that holds the listening socket without accepting).
        let server: any Channel
        /// Stops accepting, asks every connection to finish, and calls its argument once all have closed.
        let shutDown: @Sendable (_ done: @escaping @Sendable () -> Void) -> Void
        /// Stops at once.
        let cancel: @Sendable () -> Void
        /// Returns once the listener's own threads have ended (after `shutDown` or `cancel`).
        let stopped: @Sendable () async -> Void
    }

    /// Plain HTTP/1.1: `RawFront` accepts every connection and answers the first fetches it
    /// can; NIO serves the rest through `http1`. NIO's server channel holds a copy of the
    /// listening socket, for its address, and never accepts from it.
    private func listenPlain(http1: @escaping @Sendable (any Channel, Bool) throws -> Void) async throws -> Listening {
        let socket = try RawListeningSocket(host: host, port: port, backlog: backlog)
        var bound: (any Channel)?
        do {
            bound = try await ServerBootstrap(group: eventLoopGroup)
                .serverChannelOption(ChannelOptions.autoRead, value: false)
                .serverChannelOption(ChannelOptions.backlog, value: numericCast(backlog))
                .withBoundSocket(try socket.copy()).get()
            try socket.listen() // again: NIO listened on its copy with its own backlog
        } catch {
            bound?.close(promise: nil)
            socket.close()
            if let error = error as? ListenError { throw error }
            throw ListenError(host: host, port: port, reason: "\(error)")
        }
        guard let server = bound else { preconditionFailure("bound without a channel") }
        let count = ConnectionCount(limit: maxConnections)
        let adopted = AdoptedConnections(count: count, group: eventLoopGroup, idleTimeout: TimeAmount(channel.idleTimeout))
        let front = RawFront(listening: socket.descriptor, fastPath: channel.fastPath, connections: count,
                             idleTimeout: TimeAmount(channel.idleTimeout)) { adoption in
            adopted.adopt(adoption) { try http1($0, true) }
        }
        do {
            try front.start(threads: Array(eventLoopGroup.makeIterator()).count)
        } catch {
            await front.stop()
            server.close(promise: nil)
            throw ListenError(host: host, port: port, reason: (error as? ListenError)?.reason ?? "\(error)")
        }
        return Listening(server: server, shutDown: { done in
            Task {
                await front.stop()
                try? await server.close()
                adopted.quiesce()
                await adopted.drained()
                done()
            }
        }, cancel: {
            Task { await front.stop() }
            server.close(promise: nil)
        }, stopped: {
            await front.stop()
        })
    }

    /// HTTPS: NIO accepts, with TLS in front, then HTTP/2 or HTTP/1.1 as the client chose by ALPN.
    private func listenTLS(http1: @escaping @Sendable (any Channel, Bool) throws -> Void,
                           handedOff: AsyncStream<AcceptedConnection>.Continuation) async throws -> Listening {
        guard let tls else { preconditionFailure("listenTLS without TLS") }
        let http2 = self.http2
        let logger = logger
        let maxConnections = maxConnections
        let readIdle = TimeAmount(channel.idleTimeout)
        let quiescing = ServerQuiescingHelper(group: eventLoopGroup)
        let server: any Channel
        do {
            server = try await ServerBootstrap(group: eventLoopGroup)
                .serverChannelOption(ChannelOptions.backlog, value: numericCast(backlog))
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            AvailableConnectionsChannelHandler(delegate: MaximumAvailableConnections(maxConnections)))
                        try channel.pipeline.syncOperations.addHandler(quiescing.makeServerChannelHandler(channel: channel))
                    }
                }
                .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.context))
                        try channel.pipeline.syncOperations.addHandler(TLSCloseWithoutWaiting(wait: tls.closeNotifyWait))
                        try channel.pipeline.syncOperations.addHandler(TLSHandshakeDeadline(timeout: tls.handshakeTimeout))
                        try channel.pipeline.syncOperations.addHandler(ApplicationProtocolNegotiationHandler { result, channel in
                            if case .negotiated("h2") = result {
                                // Hummingbird's idle close waits for the client to answer a PING: a
                                // connection from which nothing is read for the idle timeout closes here.
                                return channel.eventLoop.makeCompletedFuture {
                                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: readIdle))
                                    try channel.pipeline.syncOperations.addHandler(CloseWhenReadIdle())
                                    try http2.configure(channel, logger: logger) { handedOff.yield(.http2Stream($0)) }
                                }
                            }
                            return channel.eventLoop.makeCompletedFuture { try http1(channel, false) }
                        })
                    }
                }
                .bind(host: host, port: port).get()
        } catch let error as IOError {
            // The address is taken, or not this machine's: say which, and stop (the service
            // group then stops the others).
            throw ListenError(host: host, port: port, reason: error.description)
        }
        return Listening(server: server, shutDown: { done in
            let promise = server.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenComplete { _ in done() }
            quiescing.initiateShutdown(promise: promise)
        }, cancel: {
            server.close(promise: nil)
        }, stopped: {})
    }
}

/// The last handler of a connection's synchronous pipeline: the first time anything reaches
/// it, it wraps the channel in the async channel Hummingbird serves and passes that on (to be
/// given a task), then lets everything through. Until then the fast path has answered all.
final class Handoff: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias Wrapped = HTTPConnectionChannel

    private let handOff: @Sendable (Wrapped) -> Void
    private var handedOff = false

    init(_ handOff: @escaping @Sendable (Wrapped) -> Void) {
        self.handOff = handOff
    }

    /// Wraps the channel once; false if it cannot be (the channel is then closed).
    private func wrap(_ context: ChannelHandlerContext) -> Bool {
        if handedOff { return true }
        handedOff = true
        do {
            let wrapped = try Wrapped(wrappingChannelSynchronously: context.channel,
                                      configuration: .init(isOutboundHalfClosureEnabled: true))
            handOff(wrapped)
            return true
        } catch {
            context.close(promise: nil)
            return false
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if wrap(context) { context.fireChannelRead(data) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if wrap(context) { context.fireUserInboundEventTriggered(event) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if wrap(context) { context.fireErrorCaught(error) }
    }
}

/// `serve` could not listen where it was told to.
public struct ListenError: Error, CustomStringConvertible {
    let host: String
    let port: Int
    let reason: String
    /// `host:port` could not be listened on, for `reason`.
    public init(host: String, port: Int, reason: String) {
        self.host = host
        self.port = port
        self.reason = reason
    }

    public var description: String { "cannot listen on \(host):\(port): \(reason)" }
}
