import Foundation

/// What to load and how (docs/operations.md#load-tool).
public struct LoadConfiguration: Sendable {
    /// `http` or `https`.
    public var scheme: String
    public var host: String
    public var port: Int
    /// The request targets (path and query), each request the next one, in turn: one, or
    /// `--urls`' lines.
    public var targets: [String]
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
    /// HTTP/2: by ALPN over TLS, by prior knowledge over plain HTTP.
    public var http2 = false
    /// Concurrent HTTP/2 streams per connection (`--streams`).
    public var streams = 1
    /// A new connection (and TLS handshake, never resumed) per request, as a phone's first fetch.
    public var newConnection = false
    /// `--requests`: the run ends once this many requests are answered (or fail), as h2load's
    /// `-n`; `duration` is then a cap.
    public var requests: Int?
    /// HTTPS without checking the server's certificate.
    public var insecure = false
    /// HTTPS trusting the certificates of this PEM file (else the system's store).
    public var caFile: String?

    /// The first (or only) target.
    public var target: String { targets[0] }
    public var isTLS: Bool { scheme == "https" }

    /// Parses `url`: `http://` or `https://host[:port]/path?query`.
    public init(url: String) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = components.host, !host.isEmpty else {
            throw LoadError("'\(url)' is not an http:// or https:// URL")
        }
        self.scheme = scheme
        // An IPv6 literal comes back in its brackets on some platforms; the resolver wants it bare.
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
        self.targets = [Self.target(of: components)]
    }

    /// `--urls`: one path (`/media/x`) or URL of this origin a line, blank lines skipped, as
    /// h2load's `-i`. Without a URL argument (`base` nil) the first line must be a URL, and names
    /// the origin.
    public init(urls text: String, base: String?) throws {
        let lines = text.split(whereSeparator: \.isNewline).enumerated()
            .map { (number: $0.offset + 1, text: $0.element.trimmingCharacters(in: .whitespaces)) }
            .filter { !$0.text.isEmpty }
        guard let first = lines.first else { throw LoadError("--urls names no path or URL (one a line)") }
        guard let base = base ?? (first.text.hasPrefix("/") ? nil : first.text) else {
            throw LoadError("--urls line \(first.number): '\(first.text)' is a path, so give the server's URL as well (richpush-bench --urls FILE https://host:port)")
        }
        self = try LoadConfiguration(url: base)
        targets = try lines.map { line in
            if line.text.hasPrefix("/") {
                guard !line.text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw LoadError("--urls line \(line.number): '\(line.text)' contains a space or control character") }
                return line.text
            }
            guard let other = try? LoadConfiguration(url: line.text) else {
                throw LoadError("--urls line \(line.number): '\(line.text)' is neither a path (/…) nor an http(s):// URL")
            }
            guard other.scheme == scheme, other.host == host, other.port == port else {
                throw LoadError("--urls line \(line.number): '\(line.text)' is not on \(origin) (every request goes to one server)")
            }
            return other.target
        }
    }

    private static func target(of components: URLComponents) -> String {
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        return target
    }

    /// `scheme://host[:port]`.
    public var origin: String { "\(scheme)://\(hostHeader)" }

    /// The `Host` header (`:authority`): the port only when it is not the scheme's, an IPv6
    /// address in brackets.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isTLS ? 443 : 80) ? name : "\(name):\(port)"
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
