import CoreMetrics
import Foundation
import Metrics
import Prometheus
import Logging
import RichPushCore
import ServiceLifecycle

/// Every metric RichPush exports, named as Prometheus would have it (`_total` on counters, the
/// unit on measurements) and with its `# HELP` text. Hummingbird's own metrics are renamed to
/// fit (`hb.requests` is `http_server_requests_total`).
enum MetricCatalog {
    /// swift-metrics labels used by Hummingbird (and the fast path, which records the same), renamed.
    static let renamed: [String: String] = [
        "hb.requests": "http_server_requests_total",
        "hb.request.errors": "http_server_request_errors_total",
        "http.server.request.duration": "http_server_request_duration_seconds",
        "http.server.active_requests": "http_server_active_requests",
    ]

    static let help: [String: String] = [
        "http_server_requests_total": "HTTP requests answered, by route, method and status code.",
        "http_server_request_errors_total": "HTTP requests answered with an error, by route, method and status code (error_type).",
        "http_server_request_duration_seconds": "Time to answer an HTTP request, by route, method and status code.",
        "http_server_active_requests": "HTTP requests being answered now, by method.",
        "richpush_media_ingest_total": "Image uploads, by result: stored, exists, or the rejection's kind.",
        "richpush_pushes_total": "Pushes, by outcome (queued, sent, failed, retried, lease_lost) and app.",
        "richpush_live_activity_pushes_total": "Live Activity pushes a push service accepted, by event (start, update, end), priority (5, 10) and app; a broadcast counts once.",
        "richpush_held_back_pushes_total": "Campaign pushes held back (docs/api.md#frequency-caps-and-quiet-hours), by outcome (capped, delayed, dropped) and app.",
        "richpush_push_duration_seconds": "Time from sending a push to the push service's answer, by platform and outcome.",
        "richpush_outbox_pending": "Pushes waiting in the outbox (due or retrying), by platform; sampled from the database every few seconds.",
        "richpush_payload_fetches_total": "Payloads served to devices, by route: /api/notifications/{id} (with credentials) or /p/{token} (a payload URL).",
        "richpush_memory_answers_total": "Requests answered from memory on the event loop (a cached image or payload) instead of through the router, by protocol: http/1.1 or h2.",
        "richpush_h2_frame_answers_total": "HTTP/2 requests answered from memory at the connection's frame level, with no stream channel (also in richpush_memory_answers_total{protocol=\"h2\"}).",
        "richpush_http1_handoffs_total": "HTTP/1.1 connections that needed the full pipeline (a request other than a plain GET of a cached image or payload).",
        "richpush_build_info": "The running build; always 1, the version in the labels.",
        "richpush_dependency_up": "Whether a dependency answers (1) or its circuit breaker is refusing calls (0), by dependency: database, blobs, hub.",
        "richpush_dependency_refused_total": "Calls refused at once by a dependency's open circuit breaker (each a 503 or a push retried later), by dependency.",
        "richpush_dependency_outages_total": "Times a dependency was found unreachable and its circuit breaker opened, by dependency.",
    ]

    /// The Prometheus name of a swift-metrics label, and its dimensions with valid names.
    static func name(_ label: String, _ dimensions: [(String, String)]) -> (String, [(String, String)]) {
        let name = renamed[label] ?? label.replacingOccurrences(of: ".", with: "_")
        return (name, dimensions.map { ($0.0.replacingOccurrences(of: ".", with: "_"), $0.1) })
    }

    static func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help[name] ?? "")
    }
}

/// swift-metrics into the Prometheus registry, with `MetricCatalog`'s names and help texts.
struct RichPushMetricsFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    private let inner: PrometheusMetricsFactory

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        self.inner = PrometheusMetricsFactory(registry: registry)
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        let (name, labels) = MetricCatalog.name(label, dimensions)
        return registry.makeCounter(descriptor: MetricCatalog.descriptor(name), labels: labels)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        let (name, labels) = MetricCatalog.name(label, dimensions)
        return registry.makeCounter(descriptor: MetricCatalog.descriptor(name), labels: labels)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        let (name, labels) = MetricCatalog.name(label, dimensions)
        guard aggregate else { return registry.makeGauge(descriptor: MetricCatalog.descriptor(name), labels: labels) }
        return registry.makeValueHistogram(descriptor: MetricCatalog.descriptor(name), labels: labels, buckets: inner.defaultValueHistogramBuckets)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        let (name, labels) = MetricCatalog.name(label, dimensions)
        return registry.makeGauge(descriptor: MetricCatalog.descriptor(name), labels: labels)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let (name, labels) = MetricCatalog.name(label, dimensions)
        return registry.makeDurationHistogram(descriptor: MetricCatalog.descriptor(name), labels: labels,
                                              buckets: inner.defaultDurationHistogramBuckets)
    }

    func destroyCounter(_ handler: any CounterHandler) { inner.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { inner.destroyFloatingPointCounter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { inner.destroyRecorder(handler) }
    func destroyMeter(_ handler: any MeterHandler) { inner.destroyMeter(handler) }
    func destroyTimer(_ handler: any TimerHandler) { inner.destroyTimer(handler) }
}

/// The process's Prometheus registry, bootstrapped into swift-metrics once, with the build's
/// `richpush_build_info`.
package enum PrometheusRegistry {
    package static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(RichPushMetricsFactory(registry: registry))
        Gauge(label: "richpush_build_info", dimensions: [("version", RichPushBuild.version)]).record(1)
        return registry
    }()
}

/// Samples `richpush_outbox_pending` every `interval`, from the database (so every node shows the
/// whole outbox, whoever queued it).
///
/// Counting takes time in the number waiting (half a second at a million on SQLite), so the
/// next sample waits at least `idleShare` times as long as the last count took: the gauge
/// never takes more than 2% of the database's time from the sends it counts.
package struct OutboxGauge: Service {
    /// Made of its parts, named.
    package init(deliveries: DeliveryStore, interval: Duration, logger: Logger) {
        self.deliveries = deliveries
        self.interval = interval
        self.logger = logger
    }

    let deliveries: DeliveryStore
    let interval: Duration
    let logger: Logger
    /// How much longer than a count the wait before the next one is, at least.
    static let idleShare = 50

    package func run() async throws {
        // The device platforms from the first sample on, at 0 while nothing waits (a dashboard
        // and an alert rule need the series before the first backlog), and any other seen since.
        var seen: Set<String> = ["apns", "fcm", "web"]
        let clock = ContinuousClock()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let started = clock.now
            do {
                let pending = try await deliveries.pendingByPlatform()
                seen.formUnion(pending.keys)
                for platform in seen {
                    Gauge(label: "richpush_outbox_pending", dimensions: [("platform", platform)]).record(pending[platform] ?? 0)
                }
            } catch {
                logger.warning("cannot count the outbox", metadata: ["error": "\(error)"])
            }
            let wait = max(interval, (clock.now - started) * Self.idleShare)
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(until: started + wait, clock: clock) }
            } catch {
                return
            }
        }
    }
}

/// RichPush's own counters.
enum Metric {
    static func ingest(_ outcome: String) {
        Counter(label: "richpush_media_ingest_total", dimensions: [("result", outcome)]).increment()
    }

    /// Counts pushes of one outcome, by app (docs/api.md#apps-and-api-keys).
    static func pushes(_ outcome: String, byApp counts: [String: Int]) {
        for (app, count) in counts where count > 0 {
            Counter(label: "richpush_pushes_total", dimensions: [("outcome", outcome), ("app", app)]).increment(by: count)
        }
    }

    static let credentialFetches = Counter(label: "richpush_payload_fetches_total", dimensions: [("route", "/api/notifications/{id}")])
    static let linkFetches = Counter(label: "richpush_payload_fetches_total", dimensions: [("route", "/p/{token}")])
}
