import Foundation

/// What to load and how (docs/operations.md#load-tool).
public struct LoadConfiguration: Sendable {
    /// `http://host[:port]/path?query` (plain HTTP/1.1 keep-alive).
    public var host: String
    public var port: Int
    public var target: String
    public var method: String = "GET"
    public var headers: [(String, String)] = []
    public var body: [UInt8]?
    public var connections = 64
    /// Event-loop threads the connections are spread over.
    public var threads = 1
    /// Seconds of load.
    public var duration: Double = 10
    /// Total requests per second for an open loop; nil for a closed loop.
    public var rate: Double?
    /// Seconds after which an unanswered request counts as a timeout.
    public var timeout: Double = 5

    /// Parses `url` (http only).
    public init(url: String) throws {
        guard let components = URLComponents(string: url), components.scheme == "http", let host = components.host, !host.isEmpty else {
            throw LoadError("'\(url)' is not an http:// URL (richpush-bench speaks plain HTTP/1.1)")
        }
        // An IPv6 literal comes back in its brackets on some platforms; the resolver wants it bare.
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = components.port ?? 80
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        self.target = target
    }

    /// The `Host` header: the port only when it is not 80, an IPv6 address in brackets.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == 80 ? name : "\(name):\(port)"
    }

    /// `--header 'Name: value'`.
    public mutating func addHeader(_ line: String) throws {
        guard !line.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) else { throw LoadError("header '\(line)' contains a line break") }
        guard let colon = line.firstIndex(of: ":") else { throw LoadError("header '\(line)' is not 'Name: value'") }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { throw LoadError("header '\(line)' has no name") }
        headers.append((name, line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
    }

    /// Parses `10s`, `500ms`, `2m`, `1h`, or plain seconds.
    public static func parseDuration(_ text: String) throws -> Double {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let value = Double(text.dropLast(suffix.count)), value > 0 { return value * scale }
        }
        if let value = Double(text), value > 0 { return value }
        throw LoadError("'\(text)' is not a duration (e.g. 10s, 500ms, 2m)")
    }
}

/// A usage or setup error with words a person can act on.
public struct LoadError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
