import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MediaStore
import NIOCore
import Prometheus
import PushDelivery

/// Liveness, readiness, metrics and `/openapi.json` (`Endpoint.ops`).
struct OperationsController: Sendable {
    /// `--metrics-port`: /metrics is answered on a listener of its own, and is a 404 here.
    let metricsOnOwnPort: Bool
    let media: MediaStore
    let dispatcher: any PushDispatching
    let prometheus: PrometheusCollectorRegistry
    /// `/openapi.json`, made once.
    let openAPI: Data

    func health(_ request: Request, _ context: AppRequestContext) throws -> Response {
        try JSONResponse.encode(HealthResponse(status: "ok"))
    }

    /// Readiness (docs/operations.md#when-a-dependency-fails): the database and the blobs each answer within 2 s, probed at once;
    /// 503 naming those that did not. Nothing is cached: a dependency that comes back is ready
    /// at the next probe.
    ///
    /// A push provider whose last sends failed for a cause a person must mend (its certificate
    /// not trusted, its key or topic refused, nothing listening: `ProviderHealth`) is named too,
    /// as `PLATFORM:APP` (`apns:default`), after the dependencies, until one of its pushes is sent.
    /// The dispatcher logged its cause and fix once; a probe does not log it again.
    func ready(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let media = self.media
        let probes: [(String, @Sendable () async throws -> Void)] = [("database", { try await media.probeDatabase() }),
                                                                     ("blobs", { try await media.probeBlobs() })]
        let failing = await withTaskGroup(of: String?.self) { group in
            for (name, probe) in probes {
                group.addTask {
                    let answered = await withTaskGroup(of: Bool.self) { race in
                        race.addTask { (try? await probe()) != nil }
                        race.addTask { try? await Task.sleep(for: .seconds(2)); return false }
                        let first = await race.next() ?? false
                        race.cancelAll()
                        return first
                    }
                    return answered ? nil : name
                }
            }
            var failing: [String] = []
            for await name in group { if let name { failing.append(name) } }
            return failing.sorted()
        }
        let providers = dispatcher.providerHealth?.failing ?? []
        guard failing.isEmpty && providers.isEmpty else {
            if !failing.isEmpty { context.logger.warning("not ready", metadata: ["failing": "\(failing)"]) }
            var response = try JSONResponse.encode(ReadyResponse(status: "unready", failing: failing + providers), status: .serviceUnavailable)
            response.headers[.retryAfter] = "5"
            return response
        }
        return try JSONResponse.encode(ReadyResponse(status: "ready"))
    }

    func metrics(_ request: Request, _ context: AppRequestContext) throws -> Response {
        // With `--metrics-port`, metrics are served there only: here they are no route at all.
        guard !metricsOnOwnPort else { throw Problem(.notFound, "no such route") }
        return MetricsListener.response(prometheus)
    }

    func openAPIResponse() -> Response {
        Response(status: .ok, headers: [.contentType: "application/json", .contentLength: String(openAPI.count)],
                 body: .init(byteBuffer: ByteBuffer(bytes: openAPI)))
    }
}
