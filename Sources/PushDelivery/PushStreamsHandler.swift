import HTTP2Client
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK

/// A push connection's HTTP/2, on the event loop, above TLS: `HTTP2ClientSession` frames the
/// requests and reads the answers; this handler writes what the session produced, hands each
/// answer to its request's completion, holds back requests beyond the peer's
/// `MAX_CONCURRENT_STREAMS`, and fails what cannot be answered.
final class PushStreamsHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private struct Stream {
        var completion: @Sendable (Result<PushHTTPResponse, any Error>) -> Void
        var deadline: NIODeadline
    }

    /// Each stream's receive window: an answer is at most `HTTP2PushClient.maximumBodySize`.
    static let streamWindow = 64 * 1024
    /// The connection's receive window.
    static let connectionWindow = 1 << 20
    /// Streams opened before the connection retires: client ids are odd and below 2^31, and
    /// the connection goes well before they run out.
    static let streamLimit = (1 << 30) - 1024
    /// Replies (PING and SETTINGS acknowledgements, window updates) the server may make us queue
    /// while it does not read them: past this the connection is dropped (ENHANCE_YOUR_CALM), as
    /// NIOHTTP2 bounds its buffered control frames.
    static let maxRepliesWhileBlocked = 1 << 20

    /// Set once no new stream may start here (GOAWAY, closed, ids nearly used up); read from any thread.
    private let retired: NIOLockedValueBox<Bool>
    private let timeout: TimeAmount
    /// `host:port`, as errors name it.
    private let endpoint: String
    private let authority: String
    private var session = HTTP2ClientSession(
        streamWindow: PushStreamsHandler.streamWindow, connectionWindow: PushStreamsHandler.connectionWindow,
        responseBodyLimit: HTTP2PushClient.maximumBodySize, headerTableSize: 4_096
    )
    /// Bytes the session produced, written and flushed at the end of each turn.
    private var out: [UInt8] = []
    private var events: [HTTP2Event] = []
    private var streams: [UInt32: Stream] = [:]
    /// Requests handed to the connection that the peer's stream limit holds back, oldest first.
    private var waiting = CircularBuffer<(request: PushConnection.Request, deadline: NIODeadline)>()
    private var opened = 0
    /// Bytes of replies the session made while the channel could not take more writes.
    private var repliesWhileBlocked = 0
    private var context: ChannelHandlerContext?
    private var failure: PushHTTPError?
    private var sweeper: RepeatedTask?

    init(timeout: TimeAmount, retired: NIOLockedValueBox<Bool>, endpoint: String, authority: String) {
        self.timeout = timeout
        self.retired = retired
        self.endpoint = endpoint
        self.authority = authority
        out.reserveCapacity(16 * 1024)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // Streams past their deadline are reset and failed; one timer per connection, not per push.
        let interval = TimeAmount.milliseconds(min(250, max(10, timeout.nanoseconds / 1_000_000 / 4)))
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        sweeper = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            bound.value.sweep()
        }
        if context.channel.isActive { begin() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sweeper?.cancel()
        failAll(.closed)
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        begin()
        context.fireChannelActive()
    }

    /// The connection preface and our SETTINGS (TLS holds them until its handshake is done).
    private func begin() {
        guard !session.started else { return }
        session.start(into: &out)
        flushOut()
    }

    /// Starts the requests as new streams (those the peer's limit allows; the rest wait) and flushes once.
    func start(_ requests: [PushConnection.Request]) {
        guard context != nil, failure == nil else {
            for request in requests { request.completion(.failure(failure ?? .closed)) }
            return
        }
        let now = NIODeadline.now()
        for request in requests { waiting.append((request, now + (request.timeout ?? timeout))) }
        openWaiting()
        flushOut()
    }

    /// Opens streams for the waiting requests while the peer takes more; after a GOAWAY, or with
    /// stream ids nearly used up, the connection retires and they fail (to be sent again elsewhere).
    ///
    /// Nothing is opened before the peer's SETTINGS: until then its MAX_CONCURRENT_STREAMS is
    /// unknown, and servers count streams beyond it as a protocol error (NIOHTTP2 answers them
    /// with GOAWAY; APNs starts a connection at a low limit and raises it once a token is good).
    ///
    /// While more wait than the peer has room for, streams open in runs (`openingRun`): each
    /// opening is a write, a TLS record and a system call on both sides, and opening one or two
    /// as each answer freed a slot made a write for every two pushes of a campaign.
    private func openWaiting() {
        guard session.peerSettingsReceived else { return }
        let room = session.peerMaxConcurrentStreams - session.openStreams
        let holding = waiting.count > room && room < openingRun && session.openStreams > 0
        while !holding, !waiting.isEmpty, session.canOpen, opened < Self.streamLimit {
            let (request, deadline) = waiting.removeFirst()
            let id = session.open(method: request.method, scheme: "https", authority: authority, path: request.path,
                                  headers: request.fields, body: request.body, into: &out)
            opened += 1
            streams[id] = Stream(completion: request.completion, deadline: deadline)
        }
        if isSpent {
            retire()
            while let (request, _) = waiting.popFirst() { request.completion(.failure(PushHTTPError.closed)) }
        }
    }

    /// The fewest streams opened at once while more wait than the peer has room for: an eighth
    /// of its MAX_CONCURRENT_STREAMS (12 of APNs' and the sandbox's 100), at most 16.
    private var openingRun: Int { max(1, min(16, session.peerMaxConcurrentStreams / 8)) }

    /// No stream will open here again: a GOAWAY came, or stream ids are nearly used up.
    private var isSpent: Bool {
        session.goAwayLastStreamID != nil || opened >= Self.streamLimit
    }

    /// A spent connection with nothing left open is closed.
    private func closeIfSpent() {
        guard isSpent, streams.isEmpty, let context else { return }
        flushOut()
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard failure == nil else { return }
        let buffer = unwrapInboundIn(data)
        events.removeAll(keepingCapacity: true)
        let before = out.count
        do {
            try buffer.withUnsafeReadableBytes { bytes in
                try self.session.receive(bytes, into: &self.out) { self.events.append($0) }
            }
        } catch {
            // What the read answered before the broken frame is handed on first: those pushes were sent.
            deliverEvents()
            let code = (error as? HTTP2ProtocolError)?.code ?? HTTP2Wire.ErrorCode.protocolError
            drop(with: code, .protocolError("\(error)"), context: context)
            return
        }
        if !context.channel.isWritable {
            repliesWhileBlocked += out.count - before
            if repliesWhileBlocked > Self.maxRepliesWhileBlocked {
                deliverEvents()
                drop(with: 0xB, .protocolError("\(endpoint) sent frames faster than it read our replies (ENHANCE_YOUR_CALM)"), context: context)
                return
            }
        }
        // Retired before any answer is handed on, so that a request its completion sends next goes to a new connection.
        if session.goAwayLastStreamID != nil { retire() }
        deliverEvents()
        openWaiting()
        closeIfSpent()
    }

    /// Sends GOAWAY with `code`, fails everything with `error`, and closes.
    private func drop(with code: UInt32, _ error: PushHTTPError, context: ChannelHandlerContext) {
        HTTP2ClientSession.appendGoAway(code: code, to: &out)
        flushOut()
        failAll(error)
        context.close(promise: nil)
    }

    /// Hands each stream's end, as the last read reported it, to its request.
    private func deliverEvents() {
        for event in events {
            switch event {
            case .answer(let answer):
                var headers = answer.headers
                if headers.first(name: ":status") == nil { headers.add(name: ":status", value: String(answer.status)) }
                finish(answer.stream, with: .success(PushHTTPResponse(status: answer.status, headers: headers, body: ByteBuffer(bytes: answer.body))))
            case .response(let stream, let status):
                finish(stream, with: .success(PushHTTPResponse(status: status, headers: [":status": String(status)], body: ByteBuffer())))
            case .reset(let stream, let code):
                finish(stream, with: .failure(PushHTTPError.reset(code)))
            case .tooLarge(let stream):
                finish(stream, with: .failure(PushHTTPError.bodyTooLarge))
            }
        }
        events.removeAll(keepingCapacity: true)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { repliesWhileBlocked = 0 }
        context.fireChannelWritabilityChanged()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushOut()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(.connection(ConnectionWords.describe(error, endpoint: endpoint)))
        context.close(promise: nil)
    }

    /// Writes what the session produced, in one buffer, and flushes.
    private func flushOut() {
        guard let context, !out.isEmpty else { return }
        var buffer = context.channel.allocator.buffer(capacity: out.count)
        buffer.writeBytes(out)
        out.removeAll(keepingCapacity: true)
        let promise = context.eventLoop.makePromise(of: Void.self)
        let channel = context.channel
        promise.futureResult.assumeIsolated().whenFailure { [self] error in
            // The connection's own failure (a refused certificate) says more than the write's.
            self.failAll(self.failure ?? .connection(ConnectionWords.describe(error, endpoint: self.endpoint)))
            channel.close(promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: promise)
    }

    private func finish(_ id: UInt32, with result: Result<PushHTTPResponse, any Error>) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.completion(result)
    }

    private func sweep() {
        let now = NIODeadline.now()
        var late: [UInt32] = []
        for (id, stream) in streams where stream.deadline < now { late.append(id) }
        for id in late {
            session.cancel(stream: id, into: &out)
            finish(id, with: .failure(PushHTTPError.timeout))
        }
        if waiting.contains(where: { $0.deadline < now }) {
            let held = waiting
            waiting.removeAll(keepingCapacity: true)
            for entry in held {
                if entry.deadline < now { entry.request.completion(.failure(PushHTTPError.timeout)) } else { waiting.append(entry) }
            }
            // A request that waited its whole time with no stream open: the server never sent its
            // SETTINGS, or allows no stream. The connection makes no progress and is replaced.
            if streams.isEmpty, let context {
                drop(with: HTTP2Wire.ErrorCode.noError, .timeout, context: context)
                return
            }
        }
        openWaiting()
        flushOut()
        closeIfSpent()
    }

    private func retire() {
        retired.withLockedValue { $0 = true }
    }

    private func failAll(_ error: PushHTTPError) {
        retire()
        if failure == nil { failure = error }
        let pending = streams
        streams.removeAll()
        for stream in pending.values { stream.completion(.failure(error)) }
        while let (request, _) = waiting.popFirst() { request.completion(.failure(error)) }
    }
}
