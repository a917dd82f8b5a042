import Atomics
import CTLS
import Foundation
import HTTP2Client

/// Everything the load threads share, made once before they start: where to connect, each
/// target's request serialized for its protocol, the TLS context.
final class LoadPlan: @unchecked Sendable {
    let address: SocketAddress
    /// HTTP/1.1: each target's request bytes.
    let http1: [[UInt8]]
    /// HTTP/2: each target's header block and body.
    let http2: [HTTP2Request]
    let isHTTP2: Bool
    let streams: Int
    let newConnection: Bool
    /// False for HEAD, whose responses carry no body.
    let expectsBody: Bool
    let tls: TLSContext?
    /// The name the TLS handshake offers (SNI) and checks the certificate against.
    let serverName: String
    /// `--requests`: how many requests the run makes in all, or nil for as many as its duration allows.
    let limit: Int?
    private let next = ManagedAtomic<Int>(0)

    init(_ configuration: LoadConfiguration, address: SocketAddress) throws(LoadError) {
        self.address = address
        let method = configuration.method.uppercased()
        isHTTP2 = configuration.http2
        streams = configuration.http2 ? max(1, configuration.streams) : 1
        newConnection = configuration.newConnection
        expectsBody = method != "HEAD"
        serverName = configuration.host
        limit = configuration.requests
        if configuration.http2 {
            http1 = []
            http2 = configuration.targets.map {
                HTTP2Request(method: method, scheme: configuration.scheme, authority: configuration.hostHeader, path: $0,
                             headers: [("user-agent", "richpush-bench")] + configuration.headers, body: configuration.body)
            }
        } else {
            http2 = []
            http1 = configuration.targets.map { Self.http1Request(configuration, method: method, target: $0) }
        }
        tls = configuration.isTLS ? try TLSContext(insecure: configuration.insecure, caFile: configuration.caFile, http2: configuration.http2) : nil
    }

    /// The index of the next request's target (every thread's requests take the targets in
    /// turn), or nil once `limit` requests have been issued.
    func nextTarget() -> Int? {
        let issued = next.loadThenWrappingIncrement(ordering: .relaxed) & Int.max
        if let limit, issued >= limit { return nil }
        let count = max(http1.count, http2.count)
        return count == 1 ? 0 : issued % count
    }

    /// How many requests have been issued (at most `limit`).
    var issued: Int { min(next.load(ordering: .relaxed), limit ?? .max) }

    /// Every request of `limit` has been issued.
    var exhausted: Bool { limit.map { next.load(ordering: .relaxed) >= $0 } ?? false }

    static func http1Request(_ configuration: LoadConfiguration, method: String, target: String) -> [UInt8] {
        var headers: [(String, String)] = [
            ("Host", configuration.hostHeader),
            ("User-Agent", "richpush-bench"),
        ]
        func replaceOrAdd(_ name: String, _ value: String) {
            headers.removeAll { $0.0.lowercased() == name.lowercased() }
            headers.append((name, value))
        }
        for (name, value) in configuration.headers { replaceOrAdd(name, value) }
        if configuration.newConnection, !headers.contains(where: { $0.0.lowercased() == "connection" }) { replaceOrAdd("Connection", "close") }
        if let body = configuration.body { replaceOrAdd("Content-Length", String(body.count)) }
        var text = "\(method) \(target) HTTP/1.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + (configuration.body ?? [])
    }
}

/// An OpenSSL client context (the system's libssl, as wrk's and h2load's), shared by the threads.
final class TLSContext: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer

    init(insecure: Bool, caFile: String?, http2: Bool) throws(LoadError) {
        // ALPN: h2 alone for --http2 (a server that cannot is an error, as h2load's), else http/1.1.
        let alpn: [UInt8] = http2 ? [2] + Array("h2".utf8) : [8] + Array("http/1.1".utf8)
        var error = [CChar](repeating: 0, count: 256)
        let context = alpn.withUnsafeBufferPointer { protocols in
            ctls_context_new(insecure ? 1 : 0, caFile, protocols.baseAddress, UInt32(protocols.count), &error, error.count)
        }
        guard let context else {
            let reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw LoadError(caFile.map { "cannot use --ca \($0): \(reason)" } ?? "cannot set up TLS: \(reason)")
        }
        pointer = context
    }

    deinit { ctls_context_free(pointer) }
}
