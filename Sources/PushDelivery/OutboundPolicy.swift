import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RichPushCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The rules for calling a URL a user chose (a Web Push endpoint; later a webhook): https on port
/// 443 to a named host whose every address is public, within a short deadline, with no redirect
/// followed. `OutboundHTTPClient` sends under it; registration checks a URL with `check(_:)`.
///
/// `allowPrivate` lifts the address, scheme and port rules together, for local stand-ins and
/// development (`serve --allow-private-push-endpoints`); never in production.
public struct OutboundPolicy: Sendable {
    /// Private, loopback, link-local and other non-public addresses, and IP-literal hosts, are allowed.
    public var allowPrivateAddresses: Bool
    /// `http://` is allowed.
    public var allowPlainHTTP: Bool
    /// Ports other than 443 (80 for http) are allowed.
    public var allowAnyPort: Bool
    /// How long a TCP connect may take.
    public var connectTimeout: TimeAmount = .seconds(5)
    /// How long one call may take, from resolving the host to the answer's last byte.
    public var deadline: TimeAmount = .seconds(10)
    /// The most bytes of an answer's body kept; the rest is not read.
    public var maxResponseBody = 16 * 1024
    /// How messages name the URL, e.g. "the push endpoint".
    public var subject: String
    /// What lifts the rules, named in refusals, e.g. "serve --allow-private-push-endpoints".
    public var overrideHint: String

    /// Every rule on (`allowPrivate` false) or off (true).
    public init(allowPrivate: Bool, subject: String = "the push endpoint",
                overrideHint: String = "serve --allow-private-push-endpoints") {
        self.allowPrivateAddresses = allowPrivate
        self.allowPlainHTTP = allowPrivate
        self.allowAnyPort = allowPrivate
        self.subject = subject
        self.overrideHint = overrideHint
    }

    /// Reads `text` and applies the rules that need no lookup: scheme, port, and no IP literal.
    public func target(_ text: String) throws -> OutboundURL {
        let url: OutboundURL
        do { url = try OutboundURL(text) } catch let error as CoreError {
            throw OutboundError(.refused, "\(subject): \(error.message)")
        }
        if !allowPlainHTTP && !url.isHTTPS {
            throw OutboundError(.refused, "\(subject) must be an https:// URL, not http://\(url.authority) (\(overrideHint) allows plain http for local stand-ins)")
        }
        if !allowAnyPort && url.port != 443 {
            throw OutboundError(.refused, "\(subject) must use port 443, not \(url.port) (\(overrideHint) allows other ports for local stand-ins)")
        }
        if !allowPrivateAddresses && url.hostIsIPAddress {
            let kind = PublicAddress.bytes(of: url.host).flatMap(PublicAddress.refusal(for:)).map { ", \($0)" } ?? ""
            throw OutboundError(.refused, "\(subject) names the IP address \(url.host)\(kind); it must name its host, and RichPush sends only to public addresses (\(overrideHint) allows others, for local stand-ins)")
        }
        return url
    }

    /// The addresses to connect to for `url`, resolved here, each public unless private ones are
    /// allowed: the caller connects to these and no others, so that a name that resolves
    /// differently a moment later (DNS rebinding) changes nothing.
    public func addresses(for url: OutboundURL, within timeout: TimeAmount) async throws -> [SocketAddress] {
        if let bytes = PublicAddress.bytes(of: url.host), let literal = try? SocketAddress(ipAddress: url.host, port: url.port) {
            if !allowPrivateAddresses, let why = PublicAddress.refusal(for: bytes) {
                throw OutboundError(.refused, "\(subject) names \(url.host), \(why); RichPush sends only to public addresses (\(overrideHint) allows others, for local stand-ins)")
            }
            return [literal]
        }
        let resolved = try await Self.resolve(host: url.host, port: url.port, timeout: timeout, subject: subject)
        if !allowPrivateAddresses {
            for address in resolved {
                if let why = PublicAddress.refusal(for: address.bytes) {
                    throw OutboundError(.refusedAddress, "\(subject) host \(url.host) resolves to \(address.text), \(why); RichPush sends only to public addresses (\(overrideHint) allows others, for local stand-ins)")
                }
            }
        }
        return resolved.map(\.address)
    }

    /// What registration checks: the URL's rules, and that its host resolves, within the connect
    /// timeout, to public addresses only (the lookup is skipped when private addresses are allowed).
    public func check(_ text: String) async throws {
        let url = try target(text)
        guard !allowPrivateAddresses else { return }
        _ = try await addresses(for: url, within: connectTimeout)
    }

    // MARK: resolving

    /// One address a name resolved to: its bytes (for the check) and the socket address (to connect).
    struct ResolvedAddress: Sendable {
        var bytes: [UInt8]
        var address: SocketAddress
        var text: String { address.ipAddress ?? "an address" }
    }

    /// The threads `getaddrinfo` blocks on: its own, so that a name server that stops answering
    /// (a user's, on purpose) holds lookups and nothing else (never a blob read or an fsync of
    /// `NIOThreadPool.singleton`).
    static let resolverPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 4)
        pool.start()
        return pool
    }()
    /// Lookups started and not yet returned (a timed-out one still holds its thread).
    private static let lookupsRunning = NIOLockedValueBox(0)
    /// Past this many, a lookup is refused at once as timed out (the pool's queue stays short).
    static let maxLookupsRunning = 16

    /// `getaddrinfo` on `resolverPool`, given up after `timeout` (the lookup itself cannot be
    /// stopped; its late answer is dropped).
    static func resolve(host: String, port: Int, timeout: TimeAmount, subject: String) async throws -> [ResolvedAddress] {
        let admitted = lookupsRunning.withLockedValue { running -> Bool in
            guard running < maxLookupsRunning else { return false }
            running += 1
            return true
        }
        guard admitted else {
            throw OutboundError(.timedOut, "\(subject) host \(host) was not looked up: \(maxLookupsRunning) lookups are waiting on name servers already")
        }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = loop.makePromise(of: [ResolvedAddress].self)
        let timer = loop.scheduleTask(in: timeout) {
            promise.fail(OutboundError(.timedOut, "\(subject) host \(host) did not resolve within \(Self.seconds(timeout))"))
        }
        resolverPool.runIfActive(eventLoop: loop) {
            defer { lookupsRunning.withLockedValue { $0 -= 1 } }
            return try lookup(host: host, port: port, subject: subject)
        }.cascade(to: promise)
        promise.futureResult.whenComplete { _ in timer.cancel() }
        return try await promise.futureResult.get()
    }

    /// Every TCP address of `host`, without duplicates; blocks.
    static func lookup(host: String, port: Int, subject: String) throws -> [ResolvedAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            let why = status == 0 ? "no addresses" : String(cString: gai_strerror(status))
            if status == EAI_AGAIN {
                // The name server did not answer now: a passing failure, not a wrong name.
                throw OutboundError(.timedOut, "\(subject) host \(host) could not be looked up now (\(why)); try again")
            }
            throw OutboundError(.unresolved, "\(subject) host \(host) does not resolve (\(why)); check the URL")
        }
        defer { freeaddrinfo(first) }
        var found: [ResolvedAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            cursor = info.pointee.ai_next
            guard let raw = info.pointee.ai_addr else { continue }
            let entry: ResolvedAddress
            switch info.pointee.ai_family {
            case AF_INET:
                let address = UnsafeRawPointer(raw).load(as: sockaddr_in.self)
                // sin_addr: 4 bytes at offset 4 (read as bytes: the field's type is another module's).
                entry = ResolvedAddress(bytes: Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(raw) + 4, count: 4)), address: SocketAddress(address, host: host))
            case AF_INET6:
                let address = UnsafeRawPointer(raw).load(as: sockaddr_in6.self)
                // sin6_addr: 16 bytes at offset 8.
                entry = ResolvedAddress(bytes: Array(UnsafeRawBufferPointer(start: UnsafeRawPointer(raw) + 8, count: 16)), address: SocketAddress(address, host: host))
            default:
                continue
            }
            if !found.contains(where: { $0.bytes == entry.bytes }) { found.append(entry) }
        }
        guard !found.isEmpty else {
            throw OutboundError(.unresolved, "\(subject) host \(host) has no IPv4 or IPv6 address; check the URL")
        }
        return found
    }

    /// `5 s`, `500 ms`.
    static func seconds(_ amount: TimeAmount) -> String {
        amount.nanoseconds % 1_000_000_000 == 0 ? "\(amount.nanoseconds / 1_000_000_000) s" : "\(amount.nanoseconds / 1_000_000) ms"
    }
}

/// Why a call to a user-chosen URL did not get an answer, in words a person can act on.
public struct OutboundError: Error, Sendable, CustomStringConvertible {
    enum Code: Sendable, Equatable {
        /// The policy forbids the destination (an IP address, scheme, port, malformed URL).
        case refused
        /// The host name resolves, today, to an address the policy forbids.
        case refusedAddress
        /// The host name does not resolve.
        case unresolved
        /// The deadline passed.
        case timedOut
        /// No connection could be made (refused, reset, TLS failed).
        case connect
        /// Connected, but the exchange failed (closed early, not HTTP).
        case exchange
    }

    let code: Code
    /// What happened, and what to do about it.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// RichPush will not call this destination: the URL itself, or what its name resolves to now.
    public var isRefusal: Bool { code == .refused || code == .refusedAddress }
    /// The URL itself can never be called (scheme, port, an IP address): not a matter of DNS.
    public var refusesTheURL: Bool { code == .refused }
    /// The host name did not resolve.
    public var isUnresolved: Bool { code == .unresolved }
    /// The deadline passed (resolving, connecting or waiting for the answer).
    public var isTimeout: Bool { code == .timedOut }

    public var description: String { message }
}
