import HummingbirdCore
import Foundation
import Logging

/// One `info` line per request answered (`serve --access-log`), router and fast path alike:
/// method, path, status, duration. Off by default; a fraction logs that share of requests, so a
/// busy server can keep a sample. Payload URL tokens are cut to their first 8 characters: the
/// whole token would let a reader of the log fetch the image.
public final class AccessLog: Sendable {
    private let logger: Logger
    /// The share of requests logged, 0 (off) to 1 (all).
    public let fraction: Double

    /// A log of `fraction` of the requests into `logger`.
    public init(fraction: Double, logger: Logger) {
        self.fraction = fraction
        var logger = logger
        logger.logLevel = min(logger.logLevel, .info)
        self.logger = logger
    }

    /// Whether this request is one to log.
    @inline(__always) public var sampled: Bool {
        fraction >= 1 || (fraction > 0 && Double.random(in: 0..<1) < fraction)
    }

    /// Logs one answered request (a payload URL's token cut short).
    public func record(method: String, uri: String, status: Int, nanoseconds: UInt64, remote: String?) {
        var path = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri
        if path.hasPrefix("/p/") && path.count > 11 { path = String(path.prefix(11)) + "…" }
        var metadata: Logger.Metadata = [
            "method": .string(method), "path": .string(path), "status": .stringConvertible(status),
            "duration_ms": .string(String(format: "%.3f", Double(nanoseconds) / 1e6)),
        ]
        if let remote { metadata["remote"] = .string(remote) }
        logger.info("request", metadata: metadata)
    }

    /// Parses `--access-log`: `off`, `on` (every request) or a fraction in (0, 1].
    public static func fraction(_ text: String) -> Double? {
        switch text.lowercased() {
        case "off", "0": return 0
        case "on", "all", "1": return 1
        default:
            guard let value = Double(text), value > 0, value <= 1 else { return nil }
            return value
        }
    }
}

