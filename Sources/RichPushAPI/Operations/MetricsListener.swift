import HTTPEdge
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// `serve --metrics-port`: `/metrics` on a port of its own, which only Prometheus's network
/// reaches, while the main port (the one a reverse proxy publishes) answers 404 for it. Plain
/// HTTP/1.1 through Hummingbird's own server; every other path here is a 404.
package enum MetricsListener {
    /// Everything in `registry`, in Prometheus's text format.
    static func response(_ registry: PrometheusCollectorRegistry) -> Response {
        var buffer = [UInt8]()
        registry.emit(into: &buffer)
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
    }

    /// The listener on `host:port`, a service to run beside the main listener.
    package static func service(host: String, port: Int, registry: PrometheusCollectorRegistry, eventLoopGroup: any EventLoopGroup,
                        logger: Logger) -> any Service {
        let router = Router(context: BasicRequestContext.self)
        router.get("/metrics") { _, _ in MetricsListener.response(registry) }
        return Listening(host: host, port: port,
                         application: Application(router: router,
                                                  configuration: .init(address: .hostname(host, port: port), serverName: "RichPush"),
                                                  eventLoopGroupProvider: .shared(eventLoopGroup),
                                                  logger: logger))
    }

    /// The application, whose failure to bind says where, as the main listener's does
    /// (`ListenError`), instead of NIO's bare `bind(descriptor:ptr:bytes:)`.
    struct Listening: Service {
        let host: String
        let port: Int
        let application: any Service

        func run() async throws {
            do {
                try await application.run()
            } catch let error as IOError {
                throw ListenError(host: host, port: port, reason: error.description)
            }
        }
    }
}
