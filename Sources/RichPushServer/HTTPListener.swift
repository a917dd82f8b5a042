import Foundation
import HTTPTypes
import Hummingbird
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
struct TLSSetup: Sendable {
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

    /// Nil when the configuration names no certificate.
    init?(_ configuration: ServerConfiguration) throws {
        guard let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath else { return nil }
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        tls.applicationProtocols = ["h2", "http/1.1"]
        tls.minimumTLSVersion = .tlsv12
        closeNotifyWait = .nanoseconds(Int64(configuration.tlsCloseWait * 1e9))
        tls.shutdownTimeout = closeNotifyWait
        context = try NIOSSLContext(configuration: tls)
        handshakeTimeout = .nanoseconds(Int64(configuration.tlsHandshakeTimeout * 1e9))
    }
}

/// An accepted connection ready for its task: HTTP/1.1 (with the fast path) or HTTP/2.
enum AcceptedConnection: Sendable {
    case http1(FastPathHTTP1Channel.Value)
    /// An HTTP/2 stream whose request needs the router.
    case http2Stream(FastPathHTTP1Channel.Value)
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
/// Graceful shutdown is Hummingbird's: NIO's quiescing helper closes the listening socket,
/// asks every connection to finish, and the service returns when the last one has closed.
struct HTTPListener: Service {
    let channel: FastPathHTTP1Channel
    /// HTTPS: TLS in front, then HTTP/2 or HTTP/1.1 as the client chose by ALPN.
    let tls: TLSSetup?
    let http2: FastPathHTTP2Connection
    let host: String
    let port: Int
    let backlog: Int
    let maxConnections: Int
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger
    let onServerRunning: @Sendable (any Channel) async -> Void

    func run() async throws {
        let (connections, handedOff) = AsyncStream.makeStream(of: AcceptedConnection.self)
        let tls = self.tls
        let http2 = self.http2
        let quiescing = ServerQuiescingHelper(group: eventLoopGroup)
        let childChannel = channel
        let logger = logger
        let maxConnections = maxConnections
        let readIdle = TimeAmount(childChannel.idleTimeout)
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
                    // HTTP/1.1: the front answers what it can; the full pipeline (the fast path's
                    // handler, the router behind it) is built when a request needs it.
                    @Sendable func fullPipeline(_ channel: any Channel) throws {
                        try childChannel.configure(channel, logger: logger)
                        try channel.pipeline.syncOperations.addHandler(Handoff { handedOff.yield(.http1($0)) })
                    }
                    // Over plain TCP its answers go out as files, with sendfile(2); TLS must encrypt them.
                    @Sendable func http1(_ channel: any Channel, plain: Bool) throws {
                        try channel.pipeline.syncOperations.addHandler(FastPathFront(fastPath: childChannel.fastPath, idleTimeout: readIdle,
                                                                                     wireFiles: plain, buildPipeline: fullPipeline))
                    }
                    return channel.eventLoop.makeCompletedFuture {
                        guard let tls else { return try http1(channel, plain: true) }
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
                            return channel.eventLoop.makeCompletedFuture { try http1(channel, plain: false) }
                        })
                    }
                }
                .bind(host: host, port: port).get()
        } catch let error as IOError {
            // The address is taken, or not this machine's: say which, and stop (the service
            // group then stops the others).
            throw ListenError(host: host, port: port, reason: error.description)
        }
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
                let done = server.eventLoop.makePromise(of: Void.self)
                done.futureResult.whenComplete { _ in handedOff.finish() }
                quiescing.initiateShutdown(promise: done)
            }
        } onCancel: {
            server.close(promise: nil)
            handedOff.finish()
        }
    }
}

/// The last handler of a connection's synchronous pipeline: the first time anything reaches
/// it, it wraps the channel in the async channel Hummingbird serves and passes that on (to be
/// given a task), then lets everything through. Until then the fast path has answered all.
final class Handoff: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias Wrapped = FastPathHTTP1Channel.Value

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

/// The application `serve` runs: Hummingbird's router and services behind `HTTPListener`.
///
/// It is an `ApplicationProtocol`, so Hummingbird's testing framework can still run it through
/// Hummingbird's own server (`server`); `run()` serves through `HTTPListener`.
public struct RichPushApplication: ApplicationProtocol {
    public typealias Responder = RouterResponder<AppRequestContext>

    public let responder: Responder
    /// Every route the router serves, as `METHOD /path/{capture}` (what `/openapi.json` must list).
    public let routes: [String]
    let channel: @Sendable (@escaping HTTPChannelHandler.Responder) -> FastPathHTTP1Channel
    /// What every connection answers from memory (its channels' `fastPath`).
    let fastPath: FastPath
    let tls: TLSSetup?
    public let configuration: ApplicationConfiguration
    let host: String
    let port: Int
    let maxConnections: Int
    public let services: [any Service]
    public let eventLoopGroup: any EventLoopGroup
    public let logger: Logger
    let running: @Sendable (any Channel) async -> Void

    public var server: HTTPServerBuilder {
        let channel = self.channel
        return HTTPServerBuilder { responder in channel(responder) }
    }

    public func onServerRunning(_ channel: any Channel) async {
        await running(channel)
    }

    /// The same application, also running `extra` once the listener is bound: after the
    /// application's own start-up work (the public URL bound, settings recorded), or with
    /// `first`, before it (what serve's signal watch needs: to be there as early as the listener).
    public func onRunning(first: Bool = false, _ extra: @escaping @Sendable (any Channel) async -> Void) -> RichPushApplication {
        let running = self.running
        return RichPushApplication(responder: responder, routes: routes, channel: channel, fastPath: fastPath, tls: tls, configuration: configuration, host: host, port: port, maxConnections: maxConnections,
                                   services: services, eventLoopGroup: eventLoopGroup, logger: logger) { channel in
            if first { await extra(channel) }
            await running(channel)
            if !first { await extra(channel) }
        }
    }

    /// Serves through `HTTPListener`, with the services beside it.
    public func run() async throws {
        let http1 = channel(respond)
        // Each HTTP/2 stream keeps to the same body rate and idle timeout as an HTTP/1.1
        // connection, and is answered from memory when it can be, as over HTTP/1.1 (docs/design/fast-path.md).
        let http2 = FastPathHTTP2Connection(fastPath: http1.fastPath, bodyRate: http1.bodyRate, idleTimeout: http1.idleTimeout)
        let listener = HTTPListener(channel: http1, tls: tls, http2: http2, host: host, port: port, backlog: configuration.backlog,
                                    maxConnections: maxConnections, eventLoopGroup: eventLoopGroup, logger: logger,
                                    onServerRunning: running)
        try await ServiceGroup(configuration: .init(services: services + [listener], logger: logger)).run()
    }

    /// Hummingbird's request handling (as `Application.run` does it): a context, the router,
    /// a 500 for an error no middleware turned into a response, `Date` and `Server`.
    private var respond: HTTPChannelHandler.Responder {
        let responder = self.responder
        let logger = self.logger
        let serverName = configuration.serverName
        return { request, writer, channel in
            var logger = logger
            logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
            let context = AppRequestContext(source: .init(channel: channel, logger: logger))
            var response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch let error as HTTPParserError {
                throw error
            } catch {
                logger.debug("Unrecognised Error", metadata: ["error.type": "\(error)"])
                response = Response(status: .internalServerError, body: .init())
            }
            response.headers[.date] = HTTPDate.value()
            if let serverName { response.headers[.server] = serverName }
            do {
                try await writer.write(response: response.head, body: response.body)
            } catch is HTTPParserError {
                // Not rethrown as a parser error: that would make `handleHTTP` answer a second time.
                throw ResponseWriteFailed()
            }
        }
    }
}

/// A request's body turned out malformed while its response was being written.
struct ResponseWriteFailed: Error {}

/// `serve` could not listen where it was told to.
struct ListenError: Error, CustomStringConvertible {
    let host: String
    let port: Int
    let reason: String
    var description: String { "cannot listen on \(host):\(port): \(reason)" }
}
