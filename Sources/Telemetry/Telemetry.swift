// Spans, contexts and the instrument, for every module that makes spans through this one.
@_exported import Tracing

/// Traces (docs/operations.md#traces): whether they are on, and the few ways the server makes
/// spans, so that with tracing off (the default) each place that could make one pays a load
/// of one flag and nothing else: no context read, no span, no allocation.
///
/// `serve` turns it on once, before it serves, when `OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `--otel-endpoint` names a collector, after bootstrapping swift-otel's tracer as the process's
/// instrument (`InstrumentationSystem`); spans then go wherever that tracer sends them.
public enum Telemetry {
    /// Whether spans are made. Written once at start, before any task reads it.
    nonisolated(unsafe) public private(set) static var isTracing = false

    /// Turns spans on; call once, after `InstrumentationSystem.bootstrap`, before serving.
    public static func startTracing() { isTracing = true }

    /// Runs `operation` in a span named `name` when tracing is on, a child of `parent` (else of
    /// the task's current context: the request's, the transaction's); without tracing, runs it
    /// with no span.
    @inlinable
    public static func traced<T>(_ name: String, ofKind kind: SpanKind = .internal, parent: ServiceContext? = nil,
                                 _ operation: (_ span: (any Span)?) async throws -> T) async rethrows -> T {
        guard isTracing else { return try await operation(nil) }
        return try await withSpan(name, context: parent ?? ServiceContext.current ?? .topLevel, ofKind: kind) { span in
            try await operation(span)
        }
    }

    /// The W3C `traceparent` of the current span (or of `context`), to store with what another
    /// task or node carries on (a campaign's pushes, its webhook events); nil without tracing.
    public static func traceparent(of context: ServiceContext? = nil) -> String? {
        guard isTracing, let context = context ?? ServiceContext.current else { return nil }
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: DictionaryInjector())
        return carrier["traceparent"]
    }

    /// The context a stored `traceparent` names, for a span that continues its trace; nil
    /// without tracing or without one.
    public static func context(traceparent: String?) -> ServiceContext? {
        guard isTracing, let traceparent else { return nil }
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(["traceparent": traceparent], into: &context, using: DictionaryExtractor())
        return context
    }

    /// Headers to send with a request made on behalf of the current span (`traceparent`,
    /// `tracestate`), so the receiver continues the trace; empty without tracing.
    public static func propagationHeaders(of context: ServiceContext? = nil) -> [String: String] {
        guard isTracing, let context = context ?? ServiceContext.current else { return [:] }
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: DictionaryInjector())
        return carrier
    }
}

struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}

struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}
