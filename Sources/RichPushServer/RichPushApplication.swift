import RichPushAPI
import HTTPEdge
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// The application `serve` runs: Hummingbird's router and services behind `HTTPListener`.
///
/// It is an `ApplicationProtocol`, so Hummingbird's testing framework can still run it through
/// Hummingbird's own server (`server`); `run()` serves through `HTTPListener`.
public struct RichPushApplication: ApplicationProtocol {
    public typealias Responder = RouterResponder<AppRequestContext>

    public let responder: Responder
    /// Every route the router serves, as `METHOD /path/{capture}` (what `/openapi.json` must list).
    public let routes: [String]
    let channel: @Sendable (@escaping HTTPChannelHandler.Responder) -> FastPathHTTP1Channel<FastPath>
    /// What every connection answers from memory (its channels' `fastPath`).
    let fastPath: HotPath<FastPath>
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
