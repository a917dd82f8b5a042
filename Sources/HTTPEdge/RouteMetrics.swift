import CoreMetrics
import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import ServiceLifecycle

/// The same metrics Hummingbird's `MetricsMiddleware` records for a 200 on a route, and the
/// payload fetch counter where the route serves payloads.
public struct RouteMetrics: Sendable {
    let requests: Counter
    let duration: Metrics.Timer
    let fetches: Counter?

    /// The metrics of `route`, with `fetches` counted too where the route serves payloads.
    public init(route: String, fetches: Counter? = nil) {
        self.fetches = fetches
        let dimensions = [("http.route", route), ("http.request.method", "GET"), ("http.response.status_code", "200")]
        requests = Counter(label: "hb.requests", dimensions: dimensions)
        duration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions)
    }
}

#if canImport(Glibc)
import Glibc
#endif
