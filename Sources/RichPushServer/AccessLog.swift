import Foundation
import Hummingbird
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
    @inline(__always) var sampled: Bool {
        fraction >= 1 || (fraction > 0 && Double.random(in: 0..<1) < fraction)
    }

    func record(method: String, uri: String, status: Int, nanoseconds: UInt64, remote: String?) {
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

/// The router's side of `AccessLog`.
struct AccessLogMiddleware: RouterMiddleware {
    let log: AccessLog

    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        guard log.sampled else { return try await next(request, context) }
        let start = DispatchTime.now().uptimeNanoseconds
        var status = 500
        defer {
            log.record(method: request.method.rawValue, uri: request.uri.description, status: status,
                       nanoseconds: DispatchTime.now().uptimeNanoseconds - start, remote: context.clientAddress)
        }
        do {
            let response = try await next(request, context)
            status = response.status.code
            return response
        } catch {
            status = (error as? any HTTPResponseError)?.status.code ?? 500
            throw error
        }
    }
}
