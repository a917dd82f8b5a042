import Foundation
import Histogram

/// What a run measured.
public struct LoadResult: Sendable {
    /// Responses received in full during the run.
    public var requests = 0
    public var connectErrors = 0
    /// Connections closed or failing with a request in flight.
    public var readErrors = 0
    public var timeouts = 0
    /// With `--requests`: requests sent that the `--duration` cap ended the run before answering.
    public var unanswered = 0
    /// `--requests`, and how many of them were sent: fewer when the `--duration` cap came first.
    public var limit: Int?
    public var issued = 0
    /// Bytes received (headers and bodies).
    public var bytes = 0
    public var seconds: Double = 0
    /// Responses by status code.
    public var statuses: [Int: Int] = [:]
    /// Latencies in microseconds (from each request's intended start).
    public var latency = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)

    /// When the last response counted ended (monotonic nanoseconds).
    var lastResponse: UInt64 = 0

    public init() {}

    /// Every error: with `--requests`, each request sent ends counted once, answered or here.
    public var errors: Int { connectErrors + readErrors + timeouts + unanswered }

    /// With `--requests`, the `--duration` cap ended the run before each request was answered or failed.
    public var capped: Bool { limit.map { issued < $0 || unanswered > 0 } ?? false }
    public var requestsPerSecond: Double { seconds > 0 ? Double(requests) / seconds : 0 }
    public var bytesPerSecond: Double { seconds > 0 ? Double(bytes) / seconds : 0 }

    /// Latency at `percentile` in milliseconds.
    public func milliseconds(_ percentile: Double) -> Double {
        latency.totalCount == 0 ? 0 : Double(latency.valueAtPercentile(percentile)) / 1000
    }

    public var maxMilliseconds: Double { latency.totalCount == 0 ? 0 : Double(latency.max) / 1000 }

    mutating func merge(_ other: LoadResult) {
        requests += other.requests
        connectErrors += other.connectErrors
        readErrors += other.readErrors
        timeouts += other.timeouts
        unanswered += other.unanswered
        bytes += other.bytes
        lastResponse = max(lastResponse, other.lastResponse)
        statuses.merge(other.statuses, uniquingKeysWith: +)
        latency.add(other.latency)
    }

    /// docs/operations.md#load-tool's JSON object.
    public func json() -> String {
        let object: [String: Any] = [
            "requests": requests, "errors": errors, "seconds": (seconds * 1000).rounded() / 1000,
            "requestsPerSecond": (requestsPerSecond * 100).rounded() / 100, "bytesPerSecond": bytesPerSecond.rounded(),
            "latency": ["p50": milliseconds(50), "p90": milliseconds(90), "p99": milliseconds(99), "p999": milliseconds(99.9), "max": maxMilliseconds],
            "status": Dictionary(uniqueKeysWithValues: statuses.map { (String($0.key), $0.value) }),
        ]
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// Mean latency in milliseconds.
    public var meanMilliseconds: Double { latency.totalCount == 0 ? 0 : latency.mean / 1000 }

    /// The percentiles `--latency` prints.
    public static let distributionPercentiles: [Double] = [1, 10, 25, 50, 75, 90, 99, 99.9, 99.99]

    /// The human summary, with a `Requests/sec:` line as wrk prints it; with `distribution`, also
    /// the mean and a percentile table (a closed loop that saturates its client can make the
    /// distribution bimodal, and then p50 alone says little).
    public func summary(configuration: LoadConfiguration, distribution: Bool = false) -> String {
        func size(_ bytes: Double) -> String {
            let units = ["B", "KB", "MB", "GB", "TB"]
            var value = bytes, unit = 0
            while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
            return String(format: "%.2f%@", value, units[unit])
        }
        var mode = configuration.rate.map { String(format: "open loop at %.0f req/s", $0) } ?? "closed loop"
        let streams = configuration.newConnection ? 1 : configuration.streams
        mode += configuration.http2 ? ", HTTP/2 with \(streams) \(streams == 1 ? "stream" : "streams") a connection" : ", HTTP/1.1"
        if configuration.newConnection { mode += ", a new connection per request" }
        let targets = configuration.targets.count == 1 ? configuration.target : "\(configuration.target) (and \(configuration.targets.count - 1) more, in turn)"
        var lines = [
            (configuration.requests.map { "Running \($0) requests (at most \(String(format: "%.1f", configuration.duration))s)" }
                ?? "Running \(String(format: "%.1f", configuration.duration))s test") + " @ \(configuration.origin)\(targets)",
            "  \(configuration.threads) threads and \(configuration.connections) connections, \(mode)",
            String(format: "  Latency     p50 %.3fms  p90 %.3fms  p99 %.3fms  p99.9 %.3fms  max %.3fms",
                   milliseconds(50), milliseconds(90), milliseconds(99), milliseconds(99.9), maxMilliseconds),
        ]
        if distribution {
            lines.append(String(format: "  Latency distribution (mean %.3fms)", meanMilliseconds))
            for percentile in Self.distributionPercentiles {
                lines.append(String(format: "    %6g%%  %.3fms", percentile, milliseconds(percentile)))
            }
        }
        lines += [
            "  \(requests) requests in \(String(format: "%.2f", seconds))s, \(size(Double(bytes))) read",
        ]
        let nonSuccess = statuses.filter { !(200..<400).contains($0.key) }
        if !nonSuccess.isEmpty {
            lines.append("  Non-2xx or 3xx responses: \(nonSuccess.values.reduce(0, +)) (" +
                         nonSuccess.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + ")")
        }
        if errors > 0 {
            lines.append("  Socket errors: connect \(connectErrors), read \(readErrors), timeout \(timeouts)"
                         + (unanswered > 0 ? ", unanswered at the end \(unanswered)" : ""))
        }
        if let limit, capped {
            lines.append(String(format: "  --duration %.1fs ended the run first: %d of %d requests sent, %d unanswered (raise --duration: with --requests it is only a cap)",
                                configuration.duration, issued, limit, unanswered))
        }
        lines.append(String(format: "Requests/sec: %.2f", requestsPerSecond))
        lines.append("Transfer/sec: \(size(bytesPerSecond))")
        return lines.joined(separator: "\n")
    }
}
