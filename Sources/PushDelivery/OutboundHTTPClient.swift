import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import RichPushCore

/// An answer from a user-chosen URL: its status and headers, and at most
/// `OutboundPolicy.maxResponseBody` bytes of its body.
public struct OutboundResponse: Sendable {
    public var status: HTTPResponseStatus
    public var headers: HTTPHeaders
    public var body: ByteBuffer
    /// The body was longer than kept; the rest was not read.
    public var truncated: Bool
}

/// POSTs to URLs a user chose (Web Push endpoints; later webhooks), under an `OutboundPolicy`.
///
/// It resolves the host itself, refuses unless every address is public, and connects to exactly
/// an address it checked (DNS rebinding between check and connect changes nothing). TLS verifies
/// the certificate against the URL's host name (the system roots plus `--push-ca`). A redirect is
/// an answer like any other, never followed. One connection per request (`Connection: close`).
public final class OutboundHTTPClient: Sendable {
    /// The rules every call follows.
    public let policy: OutboundPolicy
    private let sslContext: NIOSSLContext

    /// A client trusting the system's roots and the PEM files `extraRoots`.
    public convenience init(policy: OutboundPolicy, extraRoots: [String] = []) throws {
        try self.init(policy: policy, tls: try PushTLS.configuration(extraRoots: extraRoots))
    }

    /// A client with its own TLS configuration (a client configuration: the peer is verified).
    public init(policy: OutboundPolicy, tls: TLSConfiguration) throws {
        self.policy = policy
        self.sslContext = try NIOSSLContext(configuration: tls)
    }

    /// POSTs `body` with `headers` to `url` (`Host`, `Content-Length` and `Connection: close`
    /// are set here). Throws `OutboundError`: refused by the policy, unresolved, timed out, or
    /// failed to connect or exchange.
    public func post(_ url: String, headers: HTTPHeaders, body: ByteBuffer) async throws -> OutboundResponse {
        let target = try policy.target(url)
        let deadline = NIODeadline.now() + policy.deadline
        let addresses = try await policy.addresses(for: target, within: policy.deadline)
        var failures: [String] = []
        for address in addresses {
            let remaining = deadline - NIODeadline.now()
            guard remaining > .zero else { break }
            let connected: (channel: any Channel, answer: EventLoopFuture<OutboundResponse>)
            do {
                connected = try await connect(to: address, for: target, headers: headers, body: body,
                                              timeout: min(policy.connectTimeout, remaining))
            } catch {
                // Nothing was sent: the next address may be tried.
                failures.append("\(address.ipAddress ?? "?"): \(Self.describe(error))")
                continue
            }
            return try await exchange(on: connected.channel, answer: connected.answer, deadline: deadline, target: target)
        }
        if NIODeadline.now() >= deadline {
            throw OutboundError(.timedOut, "\(policy.subject) \(target.authority) did not answer within \(OutboundPolicy.seconds(policy.deadline))")
        }
        throw OutboundError(.connect, "cannot connect to \(policy.subject) \(target.authority): \(failures.joined(separator: "; "))")
    }

    /// Opens a connection to `address` whose pipeline sends the request once connected; the
    /// channel, and the answer to come.
    private func connect(to address: SocketAddress, for target: OutboundURL, headers: HTTPHeaders, body: ByteBuffer,
                         timeout: TimeAmount) async throws -> (any Channel, EventLoopFuture<OutboundResponse>) {
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: target.target, headers: headers)
        head.headers.replaceOrAdd(name: "host", value: target.authority)
        head.headers.replaceOrAdd(name: "content-length", value: String(body.readableBytes))
        head.headers.replaceOrAdd(name: "connection", value: "close")
        head.headers.remove(name: "transfer-encoding")
        if !head.headers.contains(name: "user-agent") { head.headers.add(name: "user-agent", value: "RichPush") }
        let request = head
        let tls: NIOSSLContext? = target.isHTTPS ? sslContext : nil
        // SNI and certificate names for a name; an IP literal (allowed only with private
        // addresses) is matched against the certificate's IP addresses instead.
        let serverName: String? = PublicAddress.bytes(of: target.host) == nil ? target.host : nil
        let limit = policy.maxResponseBody
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = loop.makePromise(of: OutboundResponse.self)
        do {
            let channel = try await ClientBootstrap(group: loop)
                .connectTimeout(timeout)
                .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { opened in
                    opened.eventLoop.makeCompletedFuture {
                        let sync = opened.pipeline.syncOperations
                        if let tls { try sync.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName)) }
                        try sync.addHTTPClientHandlers()
                        try sync.addHandler(SingleExchangeHandler(request: request, body: body, limit: limit, promise: promise))
                    }
                }
                .connect(to: address)
                .get()
            return (channel, promise.futureResult)
        } catch {
            promise.fail(error) // the handler may never have been added
            throw error
        }
    }

    /// Waits for the answer until `deadline`, then closes the connection whatever happened.
    private func exchange(on channel: any Channel, answer: EventLoopFuture<OutboundResponse>, deadline: NIODeadline,
                          target: OutboundURL) async throws -> OutboundResponse {
        let promise = channel.eventLoop.makePromise(of: OutboundResponse.self)
        let message = "\(policy.subject) \(target.authority) did not answer within \(OutboundPolicy.seconds(policy.deadline))"
        let timer = channel.eventLoop.scheduleTask(deadline: deadline) {
            promise.fail(OutboundError(.timedOut, message))
        }
        answer.cascade(to: promise)
        promise.futureResult.whenComplete { _ in
            timer.cancel()
            channel.close(promise: nil)
        }
        do {
            return try await promise.futureResult.get()
        } catch let error as OutboundError {
            throw error
        } catch {
            throw OutboundError(.exchange, "\(policy.subject) \(target.authority): \(Self.describe(error))")
        }
    }

    /// An error's words, with the common ones said plainly.
    static func describe(_ error: any Error) -> String {
        if let channelError = error as? ChannelError, case .connectTimeout(let amount) = channelError {
            return "no connection within \(OutboundPolicy.seconds(amount))"
        }
        if let error = error as? OutboundError { return error.message }
        let text = "\(error)"
        // Never BoringSSL's words (they carry the path of the file it was built from).
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "its certificate is not trusted (a stand-in's CA is passed with --push-ca FILE)"
        }
        return ConnectionWords.clean(text)
    }
}

/// Sends one request when the connection becomes active and completes `promise` with the answer:
/// interim (1xx) answers skipped, the body kept up to `limit` bytes (then the connection is closed).
final class SingleExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: HTTPRequestHead
    private let body: ByteBuffer
    private let limit: Int
    private let promise: EventLoopPromise<OutboundResponse>
    private var head: HTTPResponseHead?
    private var received = ByteBuffer()
    private var finished = false

    init(request: HTTPRequestHead, body: ByteBuffer, limit: Int, promise: EventLoopPromise<OutboundResponse>) {
        self.request = request
        self.body = body
        self.limit = limit
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        // TLS buffers these until its handshake is done.
        context.write(wrapOutboundOut(.head(request)), promise: nil)
        if body.readableBytes > 0 { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !finished else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            if head.status.code >= 200 { self.head = head }
        case .body(var part):
            guard head != nil else { return }
            let room = limit - received.readableBytes
            if part.readableBytes > room {
                if room > 0, var kept = part.readSlice(length: room) { received.writeBuffer(&kept) }
                finish(context, truncated: true)
            } else {
                received.writeBuffer(&part)
            }
        case .end:
            finish(context, truncated: false)
        }
    }

    private func finish(_ context: ChannelHandlerContext, truncated: Bool) {
        guard !finished else { return }
        finished = true
        if let head {
            promise.succeed(OutboundResponse(status: head.status, headers: head.headers, body: received, truncated: truncated))
        } else {
            promise.fail(OutboundError(.exchange, "the answer ended before its status line"))
        }
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finished = true
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !finished {
            finished = true
            promise.fail(OutboundError(.exchange, "the connection closed before the answer was complete"))
        }
        context.fireChannelInactive()
    }
}
