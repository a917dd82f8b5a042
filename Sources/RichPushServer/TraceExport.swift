import Foundation
import OTel
import ServiceLifecycle
import Telemetry
import Tracing

/// docs/operations.md#traces: OpenTelemetry traces over OTLP/HTTP (protobuf), with swift-otel.
public enum TraceExport {
    /// How long one export may take, retries included, unless `OTEL_BSP_EXPORT_TIMEOUT` or
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` say otherwise.
    public static let exportTimeout: Duration = .seconds(5)

    /// When `endpoint` (`serve --otel-endpoint`) or `OTEL_EXPORTER_OTLP_ENDPOINT` (or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) names a collector: bootstraps swift-otel's tracer as
    /// the process's instrument, turns spans on (`Telemetry`) and returns the service that
    /// batches and exports them, to run beside the server (it flushes as it stops). Nil, and
    /// tracing stays off, when nothing names one. The other `OTEL_*` variables (`OTEL_SERVICE_NAME`,
    /// `OTEL_TRACES_SAMPLER` and its argument, `OTEL_BSP_*`) apply as OpenTelemetry defines them,
    /// and win over `--otel-endpoint` where both are set. Logs and metrics stay RichPush's own.
    /// Call at most once per process.
    public static func start(endpoint: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> (any Service)? {
        let named = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].contains { !(environment[$0] ?? "").isEmpty }
        guard endpoint != nil || named else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "richpush"
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        if let endpoint { configuration.traces.otlpExporter.endpoint = endpoint }
        // A collector that is down or stalled must not hold `serve`'s stop: the stop flushes what
        // is batched, each export bounded by these (OpenTelemetry's defaults are 30 s and 10 s,
        // with retries within them). OTEL_BSP_EXPORT_TIMEOUT and OTEL_EXPORTER_OTLP_TIMEOUT still win.
        configuration.traces.batchSpanProcessor.exportTimeout = Self.exportTimeout
        configuration.traces.otlpExporter.timeout = Self.exportTimeout
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        Telemetry.startTracing()
        return backend.service
    }
}
