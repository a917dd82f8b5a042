import AsyncHTTPClient
import Crypto
import Foundation
import Telemetry
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Resilience

/// Where a bucket is: `s3://BUCKET[/PREFIX]?endpoint=http(s)://HOST:PORT[&region=REGION]
/// [&connect_timeout=S][&timeout=S]`, as `--blobs` takes it. Requests are path-style (`ENDPOINT/BUCKET/KEY`), which AWS, SeaweedFS,
/// MinIO and Garage all accept.
public struct S3Location: Sendable, Equatable {
    /// `http(s)://host[:port]`, no trailing slash.
    public var endpoint: String
    /// The bucket.
    public var bucket: String
    /// Prepended to every key (empty, or ending in `/`).
    public var prefix: String
    /// The SigV4 region (`us-east-1` unless given).
    public var region: String
    /// `connect_timeout`: seconds a new connection may take (2 unless given, 1 to 60).
    public var connectTimeout: Int
    /// `timeout`: seconds a call may take, plus one per 2 MiB it carries (4 unless given, 1 to 600).
    public var timeout: Int

    /// Parses an `s3://` URL; the error says what is wrong with it.
    public init(_ text: String) throws {
        guard let url = URLComponents(string: text), url.scheme == "s3", let bucket = url.host, !bucket.isEmpty else {
            throw S3Error.configuration("--blobs must look like s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT, got '\(text)'")
        }
        let query = Dictionary((url.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        guard let endpoint = query["endpoint"], let parsed = URLComponents(string: endpoint),
              parsed.scheme == "http" || parsed.scheme == "https", parsed.host != nil, parsed.path.isEmpty || parsed.path == "/" else {
            throw S3Error.configuration("--blobs \(text): endpoint=http(s)://HOST[:PORT] is required (the S3 service's address)")
        }
        let bucketValid = bucket.count >= 3 && bucket.count <= 63
            && bucket.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "-" || $0 == "." }
        guard bucketValid else { throw S3Error.configuration("--blobs \(text): '\(bucket)' is not a valid bucket name (3–63 of a-z 0-9 . -)") }
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.bucket = bucket
        let path = url.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.prefix = path.isEmpty ? "" : path + "/"
        self.region = query["region"].flatMap { $0.isEmpty ? nil : $0 } ?? "us-east-1"
        guard let connectTimeout = Int(query["connect_timeout"] ?? "2"), (1...60).contains(connectTimeout) else {
            throw S3Error.configuration("--blobs \(text): connect_timeout must be 1 to 60 seconds")
        }
        guard let timeout = Int(query["timeout"] ?? "4"), (1...600).contains(timeout) else {
            throw S3Error.configuration("--blobs \(text): timeout must be 1 to 600 seconds")
        }
        self.connectTimeout = connectTimeout
        self.timeout = timeout
    }

    /// `host[:port]` as the `Host` header names it.
    var hostHeader: String {
        let components = URLComponents(string: endpoint)!
        let host = components.host!
        guard let port = components.port else { return host }
        let standard = (components.scheme == "https" && port == 443) || (components.scheme == "http" && port == 80)
        return standard ? host : "\(host):\(port)"
    }
}

/// The keys a request is signed with (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, and
/// `AWS_SESSION_TOKEN` for temporary credentials).
public struct S3Credentials: Sendable {
    public var accessKey: String
    public var secretKey: String
    public var sessionToken: String?

    public init(accessKey: String, secretKey: String, sessionToken: String? = nil) {
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.sessionToken = sessionToken
    }

    /// From the environment, as every S3 tool reads them (each also as `NAME_FILE`, a file
    /// holding it, for Docker secrets); the error names what is missing.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> S3Credentials {
        let values: [String?]
        do {
            values = try ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"].map { try SecretEnvironment.value($0, in: environment) }
        } catch let error as SecretFileError {
            throw S3Error.configuration(error.description)
        }
        guard let access = values[0], let secret = values[1] else {
            throw S3Error.configuration("an s3:// blob store needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_…_FILE) in the environment")
        }
        return S3Credentials(accessKey: access, secretKey: secret, sessionToken: values[2])
    }
}

/// What went wrong talking to S3.
public enum S3Error: Error, CustomStringConvertible, Equatable {
    /// The flags or environment are wrong.
    case configuration(String)
    /// The service answered with an error (`code` from its XML body, such as `SignatureDoesNotMatch`).
    case service(status: Int, code: String, message: String)
    /// The answer could not be read.
    case malformed(String)

    public var description: String {
        switch self {
        case .configuration(let message): message
        case .service(let status, let code, let message): "S3 answered \(status) \(code)\(message.isEmpty ? "" : ": \(message)")"
        case .malformed(let message): "unreadable S3 answer: \(message)"
        }
    }
}

/// One object of a listing.
public struct S3Object: Sendable, Equatable {
    /// The key, without the location's prefix.
    public var key: String
    public var size: Int
    public var lastModified: Date?
}

/// The five S3 calls the blob store needs (PutObject, GetObject with Range, HeadObject,
/// DeleteObject, ListObjectsV2), signed with AWS Signature Version 4 on swift-crypto, over
/// AsyncHTTPClient. Nothing else: buckets are the operator's to create.
///
/// A bucket that is down is answered fast (docs/operations.md#when-a-dependency-fails): a connection gets `connect_timeout` (2 s),
/// a call `timeout` (4 s, plus a second per 2 MiB it carries), a refused connection fails the
/// call at once instead of being retried until the deadline, and after one such failure the
/// client's `breaker` refuses calls without trying (`DependencyUnavailable`) until a probe finds
/// the bucket back.
public final class S3Client: Sendable {
    /// The bucket and prefix.
    public let location: S3Location
    private let credentials: S3Credentials
    private let http: HTTPClient
    /// Refuses calls at once while the bucket is unreachable.
    public let breaker: CircuitBreaker
    /// A listing page or an error body larger than this is refused (a page of 1,000 keys is ~350 KB).
    static let maximumResponse = 8 * 1024 * 1024
    /// What a call may carry per second of its deadline beyond `timeout`.
    static let bytesPerSecond = 2 * 1024 * 1024

    /// The process's clients for buckets, one per connect timeout: a connection that cannot be
    /// made fails the calls waiting for it at once (AsyncHTTPClient would otherwise try again
    /// until each call's deadline), and 64 connections per host, as a server's blob reads need.
    /// Never shut down: they live as long as the process.
    private static let clients = NIOLockedValueBox([Int: HTTPClient]())

    static func bucketHTTP(connectTimeout: Int) -> HTTPClient {
        clients.withLockedValue { clients in
            if let client = clients[connectTimeout] { return client }
            var configuration = HTTPClient.Configuration()
            configuration.timeout = .init(connect: .seconds(Int64(connectTimeout)))
            configuration.connectionPool.retryConnectionEstablishment = false
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
            let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
            clients[connectTimeout] = client
            return client
        }
    }

    /// A client for `location` signing with `credentials`, over `http` (the process's client for
    /// buckets unless given; the caller shuts down a client it gives).
    public init(location: S3Location, credentials: S3Credentials, http: HTTPClient? = nil) {
        self.location = location
        self.credentials = credentials
        self.http = http ?? Self.bucketHTTP(connectTimeout: location.connectTimeout)
        self.breaker = CircuitBreaker(.blobs)
    }

    /// PutObject: stores `body` under `key`. `sha256Hex` is the body's SHA-256 (the blob's own
    /// id), sent as `x-amz-content-sha256`, so the service refuses bytes that changed on the way.
    public func put(key: String, body: ByteBuffer, sha256Hex: String, contentType: String = "application/octet-stream") async throws {
        let response = try await send("PUT", key: key, headers: [("content-type", contentType)], body: body, payloadHash: sha256Hex)
        try expect(response, [200])
    }

    /// GetObject: the object's bytes, or those of `range` (inclusive); nil when there is no such
    /// object. `limit` bounds what is read into memory.
    public func get(key: String, range: ClosedRange<Int>? = nil, limit: Int) async throws -> ByteBuffer? {
        var headers: [(String, String)] = []
        if let range { headers.append(("range", "bytes=\(range.lowerBound)-\(range.upperBound)")) }
        let response = try await send("GET", key: key, headers: headers, bodyLimit: limit)
        if response.status == 404 { return nil }
        try expect(response, range == nil ? [200] : [206, 200])
        if let range, response.status == 200 {
            // A service that ignores Range sends the whole object: cut the range out of it.
            guard range.upperBound < response.body.readableBytes,
                  let slice = response.body.getSlice(at: response.body.readerIndex + range.lowerBound, length: range.count) else {
                throw S3Error.malformed("the object is shorter than the range asked for")
            }
            return slice
        }
        return response.body
    }

    /// HeadObject: the object's size, or nil when there is none.
    public func head(key: String) async throws -> Int? {
        let response = try await send("HEAD", key: key)
        if response.status == 404 { return nil }
        try expect(response, [200])
        guard let length = response.headers.first(name: "content-length").flatMap(Int.init) else {
            throw S3Error.malformed("HEAD \(key) without a Content-Length")
        }
        return length
    }

    /// DeleteObject: removes `key` (deleting what is not there is not an error, as in S3).
    public func delete(key: String) async throws {
        let response = try await send("DELETE", key: key)
        try expect(response, [204, 200, 404])
    }

    /// ListObjectsV2: one page of the objects whose keys start with `prefix`, and the token of
    /// the next page when there is one.
    public func list(prefix: String, continuation: String? = nil, maxKeys: Int = 1000) async throws -> (objects: [S3Object], next: String?) {
        var query = [("list-type", "2"), ("prefix", location.prefix + prefix), ("max-keys", String(maxKeys))]
        if let continuation { query.append(("continuation-token", continuation)) }
        let response = try await send("GET", key: nil, query: query, bodyLimit: Self.maximumResponse)
        try expect(response, [200])
        return try ListingParser.parse(String(buffer: response.body), stripping: location.prefix)
    }

    /// Every object under `prefix`, page by page.
    public func listAll(prefix: String) async throws -> [S3Object] {
        var all: [S3Object] = []
        var token: String?
        repeat {
            let page = try await list(prefix: prefix, continuation: token)
            all += page.objects
            token = page.next
        } while token != nil
        return all
    }

    // MARK: Requests

    struct Response {
        var status: Int
        var headers: HTTPHeaders
        var body: ByteBuffer
    }

    /// Tries per call: S3 asks clients to retry its 500/503 answers ("InternalError … please try
    /// again", "SlowDown"), and every call here is idempotent (a PUT writes content-addressed bytes).
    static let attempts = 3
    /// Answers that are the service's momentary trouble, not the request's fault.
    static let retriedStatuses: Set<Int> = [500, 502, 503, 504]

    /// Sends one call, retrying a 5xx answer with jittered exponential backoff (at most
    /// `attempts` tries, as AWS's SDKs do); anything else is answered at once. A bucket that
    /// cannot be reached opens the breaker (see the type's documentation).
    ///
    /// Inside a trace it is a span of it (docs/operations.md#traces): the method and the status,
    /// not the key (a blob's name says nothing an operator needs, and the call names its kind).
    private func send(_ method: String, key: String?, query: [(String, String)] = [], headers extra: [(String, String)] = [],
                      body: ByteBuffer? = nil, payloadHash: String? = nil, bodyLimit: Int = 64 * 1024) async throws -> Response {
        guard Telemetry.isTracing, ServiceContext.current != nil else {
            return try await sendRetrying(method, key: key, query: query, headers: extra, body: body, payloadHash: payloadHash, bodyLimit: bodyLimit)
        }
        return try await Telemetry.traced("s3 \(method)", ofKind: .client) { span in
            span?.attributes["http.request.method"] = method
            span?.attributes["aws.s3.bucket"] = location.bucket
            let response = try await sendRetrying(method, key: key, query: query, headers: extra, body: body, payloadHash: payloadHash,
                                                  bodyLimit: bodyLimit)
            span?.attributes["http.response.status_code"] = response.status
            return response
        }
    }

    private func sendRetrying(_ method: String, key: String?, query: [(String, String)], headers extra: [(String, String)],
                              body: ByteBuffer?, payloadHash: String?, bodyLimit: Int) async throws -> Response {
        try await breaker.call(classify: Self.unreachability) {
            var attempt = 1
            while true {
                let response = try await sendOnce(method, key: key, query: query, headers: extra, body: body, payloadHash: payloadHash,
                                                  bodyLimit: bodyLimit)
                guard attempt < Self.attempts, Self.retriedStatuses.contains(response.status) else { return response }
                try await Self.backOff(attempt)
                attempt += 1
            }
        }
    }

    /// Why an error means the bucket could not be reached (nil: it answered, or the error is
    /// this side's): a connection refused, reset or timed out, or no answer by the deadline.
    static func unreachability(_ error: any Error) -> String? {
        switch error {
        case is S3Error, is NIOTooManyBytesError, is CancellationError: return nil
        case let error as HTTPClientError where error == .deadlineExceeded: return "no answer within the call's deadline"
        case let error as HTTPClientError where error == .connectTimeout: return "no connection within the connect timeout"
        default: return "\(error)"
        }
    }

    /// Sleeps a random part of 100 ms × 2^(attempt-1) ("full jitter", from a quarter of it up),
    /// so that many clients turned away at once do not come back at once.
    private static func backOff(_ attempt: Int) async throws {
        let ceiling = 100_000_000 << (attempt - 1)
        try await Task.sleep(nanoseconds: UInt64.random(in: UInt64(ceiling / 4)...UInt64(ceiling)))
    }

    private func sendOnce(_ method: String, key: String?, query: [(String, String)], headers extra: [(String, String)],
                          body: ByteBuffer?, payloadHash: String?, bodyLimit: Int) async throws -> Response {
        let path = "/" + location.bucket + (key.map { "/" + location.prefix + $0 } ?? "")
        let signed = SigV4.sign(method: method, path: path, query: query, headers: extra,
                                payloadHash: payloadHash ?? SigV4.emptyPayloadHash, host: location.hostHeader,
                                region: location.region, credentials: credentials, date: Date())
        var request = HTTPClientRequest(url: location.endpoint + signed.encodedPath + (signed.encodedQuery.isEmpty ? "" : "?" + signed.encodedQuery))
        request.method = HTTPMethod(rawValue: method)
        for (name, value) in signed.headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(body) }
        let carried = max(body?.readableBytes ?? 0, method == "GET" && key != nil ? bodyLimit : 0)
        let deadline = NIODeadline.now() + .seconds(Int64(location.timeout + carried / Self.bytesPerSecond))
        let response = try await http.execute(request, deadline: deadline)
        let status = Int(response.status.code)
        let collected: ByteBuffer
        if method == "HEAD" {
            collected = ByteBuffer()
        } else {
            // Error bodies are small; a listing or an object is bounded by the caller's limit.
            collected = try await response.body.collect(upTo: (200..<300).contains(status) ? bodyLimit : 64 * 1024)
        }
        return Response(status: status, headers: response.headers, body: collected)
    }

    private func expect(_ response: Response, _ statuses: Set<Int>) throws {
        guard !statuses.contains(response.status) else { return }
        let text = String(buffer: response.body)
        throw S3Error.service(status: response.status, code: ListingParser.element("Code", in: text) ?? "HTTP \(response.status)",
                              message: ListingParser.element("Message", in: text) ?? "")
    }
}

/// AWS Signature Version 4 for S3 (header-based, `AWS4-HMAC-SHA256`).
enum SigV4 {
    static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    struct Signed {
        var encodedPath: String
        var encodedQuery: String
        /// Every header to send, `authorization` included.
        var headers: [(String, String)]
    }

    /// Signs a request: the canonical request over the method, path, sorted query, the `host`
    /// and `x-amz-*` headers and the payload hash; the string to sign with the scope; the key
    /// derived from the secret, date, region and service.
    static func sign(method: String, path: String, query: [(String, String)], headers extra: [(String, String)], payloadHash: String,
                     host: String, region: String, credentials: S3Credentials, date: Date) -> Signed {
        let (amzDate, day) = timestamps(date)
        var headers: [(String, String)] = [("host", host), ("x-amz-content-sha256", payloadHash), ("x-amz-date", amzDate)]
        if let token = credentials.sessionToken { headers.append(("x-amz-security-token", token)) }
        headers += extra.map { ($0.0.lowercased(), $0.1.trimmingCharacters(in: .whitespaces)) }
        let sortedHeaders = headers.sorted { $0.0 < $1.0 }
        let signedHeaders = sortedHeaders.map(\.0).joined(separator: ";")
        let canonicalHeaders = sortedHeaders.map { "\($0.0):\($0.1)\n" }.joined()
        let encodedPath = encode(path, keepSlash: true)
        let pairs: [(name: String, value: String)] = query.map { pair in
            (name: encode(pair.0, keepSlash: false), value: encode(pair.1, keepSlash: false))
        }
        let sortedPairs = pairs.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        let encodedQuery = sortedPairs.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
        let canonicalRequest = [method, encodedPath, encodedQuery, canonicalHeaders, signedHeaders, payloadHash].joined(separator: "\n")
        let scope = "\(day)/\(region)/s3/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, hex(SHA256.hash(data: Data(canonicalRequest.utf8)))].joined(separator: "\n")
        var key = SymmetricKey(data: Data("AWS4\(credentials.secretKey)".utf8))
        for part in [day, region, "s3", "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        let signature = hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key))
        let authorization = "AWS4-HMAC-SHA256 Credential=\(credentials.accessKey)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signed(encodedPath: encodedPath, encodedQuery: encodedQuery, headers: sortedHeaders.filter { $0.0 != "host" } + [("authorization", authorization)])
    }

    /// `20261122T213000Z` and `20261122`, in UTC.
    static func timestamps(_ date: Date) -> (String, String) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let day = String(format: "%04d%02d%02d", c.year!, c.month!, c.day!)
        return (day + String(format: "T%02d%02d%02dZ", c.hour!, c.minute!, c.second!), day)
    }

    /// RFC 3986 percent-encoding of everything but the unreserved characters (and `/` in paths).
    static func encode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(Character(Unicode.Scalar(byte)))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// Reads the few elements of S3's XML that are used: a listing's `Contents` (`Key`, `Size`,
/// `LastModified`), `IsTruncated` and `NextContinuationToken`, and an error's `Code` and
/// `Message`. Bounded by the response limit; anything it cannot read is an error, not a guess.
enum ListingParser {
    static func parse(_ xml: String, stripping prefix: String) throws -> (objects: [S3Object], next: String?) {
        var objects: [S3Object] = []
        var rest = xml[...]
        while let start = rest.range(of: "<Contents>"), let end = rest.range(of: "</Contents>", range: start.upperBound..<rest.endIndex) {
            let entry = String(rest[start.upperBound..<end.lowerBound])
            guard let key = element("Key", in: entry), let size = element("Size", in: entry).flatMap(Int.init) else {
                throw S3Error.malformed("a listing entry without Key or Size")
            }
            guard key.hasPrefix(prefix) else { throw S3Error.malformed("a listed key outside the prefix: \(key)") }
            let modified = element("LastModified", in: entry).flatMap { try? Date($0, strategy: .iso8601) }
                ?? element("LastModified", in: entry).flatMap(Self.fractionalDate)
            objects.append(S3Object(key: String(key.dropFirst(prefix.count)), size: size, lastModified: modified))
            rest = rest[end.upperBound...]
        }
        let truncated = element("IsTruncated", in: xml) == "true"
        let next = element("NextContinuationToken", in: xml)
        if truncated && next == nil { throw S3Error.malformed("a truncated listing without a continuation token") }
        return (objects, truncated ? next : nil)
    }

    /// The text of the first `<name>…</name>`, entities decoded.
    static func element(_ name: String, in xml: String) -> String? {
        guard let open = xml.range(of: "<\(name)>"), let close = xml.range(of: "</\(name)>", range: open.upperBound..<xml.endIndex) else { return nil }
        return String(xml[open.upperBound..<close.lowerBound])
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }

    private static func fractionalDate(_ text: String) -> Date? {
        try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
