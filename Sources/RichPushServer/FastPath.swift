import Crypto
import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import MediaStore
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import RichPushCore
import ServiceLifecycle

/// Answers the hottest requests synchronously on the event loop, when everything the answer
/// needs is already in memory: `GET /media/{sha256}` of a cached blob,
/// `GET /api/notifications/{id}` by its recipient with cached credentials (a session opened
/// here, or a verified password) of a notification made or fetched here, and `GET /p/{token}` of a valid payload URL whose image is cached (the token
/// names its notification and image, so a device's first fetch needs no database; the read
/// mark is committed just after, in a batch). Anything else (a miss, a conditional or ranged
/// request, HEAD, a first read through the API, an unknown credential, an expired URL) goes
/// through Hummingbird unchanged, and so do the rules: the answers are byte-for-byte what the
/// router would send, with `Connection: close` added when the client asked to close.
///
/// It is a cache hit path, like nginx's open-file cache: no decision is made here that the
/// router would not make the same way.
final class FastPath: Sendable {
    let blobs: BlobCache
    let authenticator: Authenticator
    let payloads: PayloadIndex
    let links: PayloadLinks
    let readMarks: ReadMarks
    let publicMedia: Bool
    let accessLog: AccessLog
    /// Who the access log names as the client (`--trusted-proxy`).
    let clientAddresses: ClientAddressResolver
    private let mediaMetrics = RouteMetrics(route: "/media/{sha256}")
    private let payloadMetrics = RouteMetrics(route: "/api/notifications/{id}", fetches: Metric.credentialFetches)
    private let linkMetrics = RouteMetrics(route: "/p/{token}", fetches: Metric.linkFetches)

    init(blobs: BlobCache, authenticator: Authenticator, payloads: PayloadIndex, links: PayloadLinks, readMarks: ReadMarks,
         publicMedia: Bool, accessLog: AccessLog, clientAddresses: ClientAddressResolver = .init(trustedProxies: [])) {
        self.accessLog = accessLog
        self.clientAddresses = clientAddresses
        self.blobs = blobs
        self.authenticator = authenticator
        self.payloads = payloads
        self.links = links
        self.readMarks = readMarks
        self.publicMedia = publicMedia
    }

    /// A complete answer, ready to write: the blob, and how it is cached (which picks its head).
    struct Answer {
        var blob: ServedBlob
        var caching: ServedBlob.Caching
        var metrics: RouteMetrics
        /// The client asked to close after this answer (HTTP/1.1 `Connection: close`).
        var close = false
        /// The request's URI when this answer is one the access log samples.
        var logged: String?
        /// The client's address, when `logged`.
        var remote: String?
        /// The encoded head, without `Date`.
        var head: ByteBuffer { blob.head(caching) }
    }

    /// The answer to `head` if it can be given from memory now; nil sends the request to the router.
    func answer(_ head: HTTPRequestHead) -> Answer? {
        // HTTP/1.1 only: the heads are encoded for it (HTTP/1.0 goes to the router).
        guard head.method == .GET, head.version == .http1_1 else { return nil }
        guard var answer = route(head) else { return nil }
        answer.close = !head.isKeepAlive
        return answer
    }

    /// Marks `answer` for the access log when it is one the log samples: its URI and the client
    /// (`--trusted-proxy` decides whether `forwardedFor`, read only then, names it).
    func sample(_ answer: inout Answer, uri: String?, peer: @autoclosure () -> String?, forwardedFor: @autoclosure () -> [String]) {
        guard accessLog.sampled else { return }
        answer.logged = uri
        answer.remote = clientAddresses.client(peer: peer(), forwardedFor: forwardedFor())
    }

    private static let connectionClose = ByteBuffer(string: "Connection: close\r\n")

    /// Writes an HTTP/1.1 answer through `raw`, a context below any HTTP encoder: the encoded
    /// head, `Connection: close` when the client asked to close, the `Date` line and the body,
    /// in one `writev`. When the client asked to close, `connection` is closed once it is
    /// written, as the router would. Then records it (`record`).
    func writeHTTP1(_ answer: Answer, through raw: ChannelHandlerContext, closing connection: ChannelHandlerContext, since start: UInt64) {
        raw.write(NIOAny(answer.head), promise: nil)
        if answer.close { raw.write(NIOAny(Self.connectionClose), promise: nil) }
        raw.write(NIOAny(HTTPDate.line()), promise: nil)
        if answer.close {
            let bound = NIOLoopBound(connection, eventLoop: connection.eventLoop)
            raw.writeAndFlush(NIOAny(answer.blob.bytes)).whenComplete { _ in bound.value.close(promise: nil) }
        } else {
            raw.writeAndFlush(NIOAny(answer.blob.bytes), promise: nil)
        }
        record(answer, since: start, Metric.memoryAnswersHTTP1)
    }

    /// HTTP/1.1 connections `FastPathFront` gave to the full pipeline (also counted in
    /// `richpush_http1_handoffs_total`, which every server of the process adds to).
    var handOffs: Int { handOffCount.withLockedValue { $0 } }
    private let handOffCount = NIOLockedValueBox(0)

    /// Counts a connection `FastPathFront` gives to the full pipeline.
    func noteHandOff() {
        handOffCount.withLockedValue { $0 += 1 }
        Metric.frontHandOffs.increment()
    }

    /// Records an answer written from memory `since` its request arrived (uptime, ns): the
    /// router's request metrics, the payload fetch count, `protocolCount`, and the access log
    /// when the answer is one it samples.
    func record(_ answer: Answer, since start: UInt64, _ protocolCount: Counter) {
        protocolCount.increment()
        answer.metrics.requests.increment()
        answer.metrics.fetches?.increment()
        let elapsed = NIODeadline.now().uptimeNanoseconds - start
        answer.metrics.duration.recordNanoseconds(Int64(elapsed))
        if let uri = answer.logged {
            accessLog.record(method: "GET", uri: uri, status: 200, nanoseconds: elapsed, remote: answer.remote)
        }
    }

    /// The answer to an HTTP/2 stream's request if it can be given from memory now; nil sends
    /// the request to the router.
    func answer(_ request: HTTPRequest) -> Answer? {
        guard request.method == .get, let path = request.path else { return nil }
        // One pass over the headers: conditional and ranged requests go to the router.
        var authorization: String?
        for field in request.headerFields {
            switch field.name {
            case .range, .ifRange, .ifNoneMatch: return nil
            case .authorization:
                guard authorization == nil else { return nil } // two are the router's to refuse
                authorization = field.value
            default: continue
            }
        }
        var memo: CredentialMemo?
        var recheck: MediaID?
        return route(uri: path, authorization: authorization, memo: &memo, recheck: &recheck)
    }

    /// The answer to a plain HTTP/1.1 `GET` of `uri` that `FastPathFront` read (it leaves ranged
    /// and conditional requests to the full pipeline); nil sends the request there. `memo` is
    /// the connection's: the key of the credentials it sent last. When nil because the image
    /// is cached but due for its once-a-second check, `recheck` names it: once
    /// `BlobCache.recheck` is done, the request may be answered here.
    func answer(uri: String, authorization: String?, memo: inout CredentialMemo?, recheck: inout MediaID?) -> Answer? {
        route(uri: uri, authorization: authorization, memo: &memo, recheck: &recheck)
    }

    /// The answer as a file to `sendfile` over plain HTTP/1.1 (`WireFile`), when one can be had
    /// for it; nil when it is written from memory (`writeHTTP1`), as answers that close are.
    func wireFile(_ answer: Answer) -> WireFile? {
        answer.close ? nil : answer.blob.wireFile(answer.caching, date: HTTPDate.now(), budget: blobs.wireBudget)
    }

    private func route(_ head: HTTPRequestHead) -> Answer? {
        // One pass over the headers: conditional and ranged requests go to the router.
        var authorization: String?
        for (name, value) in head.headers {
            switch name.utf8.count {
            case 5 where name.lowercased() == "range": return nil
            case 8 where name.lowercased() == "if-range": return nil
            case 13 where name.lowercased() == "if-none-match": return nil
            case 13 where name.lowercased() == "authorization":
                // Two are the router's to refuse (it reads them joined), not one to pick here.
                guard authorization == nil else { return nil }
                authorization = value
            default: continue
            }
        }
        var memo: CredentialMemo?
        var recheck: MediaID?
        return route(uri: head.uri, authorization: authorization, memo: &memo, recheck: &recheck)
    }

    private func route(uri path: String, authorization: String?, memo: inout CredentialMemo?, recheck: inout MediaID?) -> Answer? {
        let uri = path.utf8
        // The path's length in bytes: up to a `?`, found in the string's own bytes where it has
        // them in one piece (it does as the front reads it; the index walk is 1% of a hot fetch).
        let length = uri.withContiguousStorageIfAvailable { $0.firstIndex(of: UInt8(ascii: "?")) ?? $0.count }
            ?? uri.distance(from: uri.startIndex, to: uri.firstIndex(of: UInt8(ascii: "?")) ?? uri.endIndex)
        // `?variant=thumb|push` is served here once the router has looked it up (or made it);
        // any other query goes to the router.
        var variant: MediaVariant?
        if length < uri.count {
            let query = uri.dropFirst(length + 1)
            guard query.starts(with: "variant=".utf8), let kind = Self.variant(query.dropFirst(8)) else {
                // Another query is ignored, as the router ignores it; another variant is the router's 400.
                return path.contains("variant=") ? nil : answer(path, authorization: authorization, length: length, variant: nil, memo: &memo, recheck: &recheck)
            }
            variant = kind
        }
        return answer(path, authorization: authorization, length: length, variant: variant, memo: &memo, recheck: &recheck)
    }

    /// `thumb` or `push`, read without making a string.
    private static func variant(_ name: Substring.UTF8View.SubSequence) -> MediaVariant? {
        if name.elementsEqual("push".utf8) { return .push }
        if name.elementsEqual("thumb".utf8) { return .thumb }
        return nil
    }

    /// What an API key needs for `GET /media/{sha256}` and `GET /api/notifications/{id}`, read
    /// from the routes' own declarations (`Endpoint.keyScope`): nil where keys are refused.
    static let mediaScope = Endpoint.all.first { $0.method == .get && $0.path == "/media/{sha256}" }?.keyScope
    static let payloadScope = Endpoint.all.first { $0.method == .get && $0.path == "/api/notifications/{id}" }?.keyScope

    /// Whether `principal` passes the router's key check for a route needing `scope`: an
    /// account always (its group decides), a key only with a scope that covers it.
    static func keyMay(_ principal: Principal, _ scope: APIKeyScope?) -> Bool {
        guard let key = principal.apiKey else { return true }
        guard let scope else { return false }
        return key.scope.covers(scope)
    }

    /// The answer for the path (its first `length` bytes), serving the `variant` of the image.
    private func answer(_ uri: String, authorization: String?, length: Int, variant: MediaVariant?, memo: inout CredentialMemo?,
                        recheck: inout MediaID?) -> Answer? {
        /// The image to serve for `id`: itself, or its known variant.
        func served(_ id: MediaID) -> MediaID? {
            guard let variant else { return id }
            return blobs.knownVariant(id, variant)
        }
        /// The cached image `id` when it is fresh; when it is due for its check, `recheck` names it.
        func fresh(_ id: MediaID) -> ServedBlob? {
            switch blobs.lookUp(id) {
            case .fresh(let blob): return blob
            case .due: recheck = id; return nil
            case .absent: return nil
            }
        }
        if length == 7 + 64, uri.hasPrefix("/media/") {
            // Checked in place where the path's bytes are in one piece; uppercase digits (and
            // any other string) through a string of their own, as the router reads them.
            let inPlace: MediaID? = uri.utf8.withContiguousStorageIfAvailable { MediaID(lowercaseHex: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: $0[7..<71]))) } ?? nil
            guard let id = inPlace ?? MediaID(String(uri.utf8.dropFirst(7).prefix(64))!) else { return nil }
            if !publicMedia {
                // An API key only with the route's scope, as the router decides (SPEC §24).
                guard let principal = authenticator.cachedPrincipal(authorization, memo: &memo),
                      Self.keyMay(principal, Self.mediaScope) else { return nil }
            }
            guard let shown = served(id), let blob = fresh(shown) else { return nil }
            return Answer(blob: blob, caching: publicMedia ? .publicImmutable : .privateImmutable, metrics: mediaMetrics)
        }
        if length > 19, uri.hasPrefix("/api/notifications/") {
            guard let digits = String(uri.utf8.dropFirst(19).prefix(length - 19)), let id = Int64(digits), id > 0,
                  let principal = authenticator.cachedPrincipal(authorization, memo: &memo), Self.keyMay(principal, Self.payloadScope),
                  let known = payloads.get(id), known.recipient == principal.user,
                  let shown = served(known.payload), let blob = fresh(shown) else { return nil }
            // A first fetch: its read mark is committed just after, in a batch (as for /p/).
            if !known.read, payloads.markRead(id) { readMarks.markSoon(id) }
            return Answer(blob: blob, caching: .private, metrics: payloadMetrics)
        }
        if length == 3 + PayloadLinks.tokenLength, uri.hasPrefix("/p/") {
            // By bytes, not characters (both ends are ASCII boundaries: after "/p/", and the path's end).
            let token = Substring(uri.utf8.dropFirst(3).prefix(PayloadLinks.tokenLength))
            // Only a notification this node knows: a withdrawn one has left the index, and one
            // not yet known is the router's to look up.
            guard case .valid(let id, let payload) = PayloadLinkCheck.check(token, links: links), payloads.get(id) != nil,
                  let shown = served(payload), let blob = fresh(shown) else { return nil }
            readMarks.markSoon(id)
            return Answer(blob: blob, caching: .private, metrics: linkMetrics)
        }
        return nil
    }
}

/// The same metrics Hummingbird's `MetricsMiddleware` records for a 200 on a route, and the
/// payload fetch counter where the route serves payloads.
struct RouteMetrics: Sendable {
    let requests: Counter
    let duration: Metrics.Timer
    let fetches: Counter?

    init(route: String, fetches: Counter? = nil) {
        self.fetches = fetches
        let dimensions = [("http.route", route), ("http.request.method", "GET"), ("http.response.status_code", "200")]
        requests = Counter(label: "hb.requests", dimensions: dimensions)
        duration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions)
    }
}

/// Notifications by id, with the two things a payload fetch needs: the recipient and the
/// payload, which never change once a notification exists (ids are never reused), and whether
/// its read mark is already taken care of.
///
/// Filled as notifications are made here (a campaign's batches, `POST /api/notifications`) and
/// as they are fetched, so a device's first fetch with a session finds its notification
/// without a database read. Bounded: two generations of at most `capacity / 2` entries each,
/// the older dropped whole when the newer fills. Cleared when a user is removed (their
/// notifications are deleted, and the name may be taken again).
final class PayloadIndex: Sendable {
    struct Entry: Sendable {
        var recipient: String
        var payload: MediaID
        /// Its read mark is committed or queued.
        var read: Bool
    }
    private struct Generations {
        var current: [Int64: Entry] = [:]
        var previous: [Int64: Entry] = [:]

        subscript(id: Int64) -> Entry? { current[id] ?? previous[id] }

        /// Stores `entry` in the newer generation, which becomes the older one when it is full.
        mutating func insert(_ id: Int64, _ entry: Entry, half: Int) {
            if current.count >= half, current[id] == nil {
                previous = current
                current = [:]
            }
            current[id] = entry
        }
    }
    private let generations = NIOLockedValueBox(Generations())
    private let half: Int

    init(capacity: Int = 200_000) {
        half = max(1, capacity / 2)
    }

    func get(_ id: Int64) -> Entry? {
        generations.withLockedValue { $0[id] }
    }

    func set(_ id: Int64, _ entry: Entry) {
        generations.withLockedValue { $0.insert(id, entry, half: half) }
    }

    /// Records notifications just made (unread).
    func made(_ notifications: [QueuedNotification]) {
        generations.withLockedValue { g in
            for n in notifications { g.insert(n.id, Entry(recipient: n.recipient, payload: n.payload, read: false), half: half) }
        }
    }

    /// Marks `id` read here; true if it was not yet (then the caller queues its read mark).
    func markRead(_ id: Int64) -> Bool {
        generations.withLockedValue { g in
            guard var entry = g[id], !entry.read else { return false }
            entry.read = true
            g.insert(id, entry, half: half)
            return true
        }
    }

    /// Records notifications read from the database, keeping what is known here already.
    func load(_ entries: [(notification: QueuedNotification, read: Bool)]) {
        generations.withLockedValue { g in
            for (n, read) in entries where g[n.id] == nil {
                g.insert(n.id, Entry(recipient: n.recipient, payload: n.payload, read: read), half: half)
            }
        }
    }

    func removeAll() {
        generations.withLockedValue { $0 = Generations() }
    }

    /// Forgets notifications that were removed (withdrawn, or their recipient removed).
    func remove(_ ids: [Int64]) {
        guard !ids.isEmpty else { return }
        generations.withLockedValue { g in
            for id in ids {
                g.current[id] = nil
                g.previous[id] = nil
            }
        }
    }

    /// Entries kept at most.
    var capacity: Int { 2 * half }

    var count: Int { generations.withLockedValue { $0.current.count + $0.previous.count } }
}

/// Keeps a `PayloadIndex` up with the notifications table: the newest at start, then every
/// half second those made since (by this process, or by `richpush send` or another node), whose
/// images it warms (SPEC §21: every node has a campaign's image in memory, not only the node
/// that queued it).
struct PayloadIndexFollower: Service {
    let index: PayloadIndex
    let notifications: NotificationStore
    let warmer: PayloadWarmer?
    let logger: Logger
    private let last = NIOLockedValueBox<Int64>(0)

    init(index: PayloadIndex, notifications: NotificationStore, warmer: PayloadWarmer? = nil, logger: Logger) {
        self.index = index
        self.notifications = notifications
        self.warmer = warmer
        self.logger = logger
    }

    /// Loads the newest notifications (up to the index's capacity); call before serving.
    func start() async throws {
        removedSince.withLockedValue { $0 = nil }
        let since = try await notifications.databaseNow()
        let newest = try await notifications.indexEntries(after: nil, limit: index.capacity / 2)
        index.load(newest)
        last.withLockedValue { $0 = newest.last?.notification.id ?? 0 }
        removedSince.withLockedValue { $0 = since }
    }

    /// Where the reading of removals goes on from (the database's clock).
    private let removedSince = NIOLockedValueBox<Double?>(nil)
    /// How far back each read of removals looks again: a transaction stamps its removals with
    /// its start, and may commit up to this much later (PostgreSQL; SQLite's are serial).
    static let removalOverlap: Double = 10

    /// Drops from the index what was removed since the last look, on this node or another.
    func followRemovals() async throws {
        guard let since = removedSince.withLockedValue({ $0 }) else { return }
        let (ids, latest) = try await notifications.removals(since: since - Self.removalOverlap)
        index.remove(ids)
        removedSince.withLockedValue { $0 = max(since, latest) }
    }

    func run() async throws {
        var compacted = ContinuousClock.now
        for await _ in AsyncTimerSequence.repeating(every: .milliseconds(500)).cancelOnGracefulShutdown() {
            do {
                try await followRemovals()
                if ContinuousClock.now - compacted > .seconds(3600) {
                    compacted = .now
                    try await notifications.compactRemovals()
                }
            } catch {
                logger.warning("cannot follow removed notifications", metadata: ["error": "\(error)"])
            }
            do {
                while true {
                    let batch = try await notifications.indexEntries(after: last.withLockedValue { $0 }, limit: 5_000)
                    index.load(batch)
                    if let warmer, !batch.isEmpty { await warmer.warm(Set(batch.map(\.notification.payload))) }
                    if let id = batch.last?.notification.id { last.withLockedValue { $0 = id } }
                    if batch.count < 5_000 { break }
                }
            } catch {
                logger.warning("cannot follow new notifications", metadata: ["error": "\(error)"])
            }
        }
    }
}

/// Hummingbird's HTTP/1 channel with `FastPathHandler` between NIO's HTTP/1 codec and the
/// conversion to HTTP types, and a `RawOutlet` in front of the codec for its answers.
struct FastPathHTTP1Channel: HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>
    let responder: HTTPChannelHandler.Responder
    let fastPath: FastPath
    /// How long a request head may take to arrive, from its first byte.
    let headTimeout: TimeAmount
    /// A connection with no request in flight is closed after this long (the fast path's too).
    let idleTimeout: Duration
    /// Behind TLS (`https` requests).
    var secure = false
    /// How fast a request body must keep coming once its head has arrived.
    var bodyRate = BodyRateLimit.default

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try configure(channel, logger: logger)
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    /// Adds the connection's handlers, from the socket to the conversion to HTTP types
    /// (`HTTPListener` adds its `Handoff` after them, Hummingbird's server its async channel).
    func configure(_ channel: any Channel, logger: Logger) throws {
        let outlet = RawOutlet()
        let deadline = HeadDeadline(timeout: headTimeout)
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(LingeringCloseHandler())
        try pipeline.addHandler(HeadDeadline.Start(deadline))
        try pipeline.addHandler(outlet)
        // The HTTP/1 codec, unpaired: `configureHTTPServerPipeline` has the decoder queue each
        // request's method in the encoder, which pops one per response head to leave the bodies of
        // HEAD responses out. The fast path answers below the encoder, so that queue would fall out
        // of step, and a later GET's body would be dropped as a HEAD's. `FastPathHandler` keeps
        // the same queue for the requests it forwards instead.
        try pipeline.addHandler(HTTPResponseEncoder(configuration: .init()))
        try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: Self.decoderLimits)))
        try pipeline.addHandler(HeadDeadline.End(deadline))
        let fastPathHandler = FastPathHandler(fastPath: fastPath, outlet: outlet)
        // Before the fast path, so that it sees every body, answered here or by the router.
        try pipeline.addHandler(BodyRateHandler<HTTP1BodyRate>(limit: bodyRate, mayAnswer: { fastPathHandler.mayAnswerNow }))
        try pipeline.addHandler(fastPathHandler)
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: secure))
        try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
    }

    /// Request heads of at most 100 fields and 32 KiB: what devices and browsers send fits many times over.
    static let decoderLimits: NIOHTTPDecoderLimitConfiguration = {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = 16 * 1024
        limits.maxHeaderListSize = 32 * 1024
        limits.maxHeaderFieldCount = 100
        return limits
    }()

    func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }

}

/// Per connection: answers from `FastPath` when it can, keeping responses in request order.
final class FastPathHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Current {
        case idle
        case forwarding
        case answering(FastPath.Answer, start: UInt64)
    }

    private let fastPath: FastPath
    private let outlet: RawOutlet
    private var current = Current.idle
    /// Requests handed to the router whose response has not ended: while any is, nothing is
    /// answered here (a pipelined request must not overtake an earlier one).
    private var routerPending = 0
    /// Whether each request handed to the router whose response head is not written yet is a
    /// `HEAD`, in order: a HEAD's response head goes out, its body parts do not (RFC 9110 §9.3.2).
    private var forwardedHeads = CircularBuffer<Bool>()
    private var suppressingBody = false
    /// Whether this connection has had an answer from here (then a graceful close waits for
    /// the socket to take every byte written before it).
    private var answered = false
    private var quiescing = false

    /// The connection's front (`FastPathFront`) answered before handing it here: a graceful close
    /// waits for those answers too.
    func noteEarlierAnswers() {
        answered = true
    }

    /// Whether an answer written now would be read as the answer to the request being received:
    /// no earlier request still awaits its answer, and this one's has not begun.
    var mayAnswerNow: Bool {
        switch current {
        case .idle, .answering: return routerPending == 0
        case .forwarding: return routerPending == 1 && forwardedHeads.count == 1
        }
    }

    init(fastPath: FastPath, outlet: RawOutlet) {
        self.fastPath = fastPath
        self.outlet = outlet
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if routerPending == 0, var answer = fastPath.answer(head) {
                fastPath.sample(&answer, uri: head.uri, peer: context.remoteAddress?.ipAddress, forwardedFor: head.headers["X-Forwarded-For"])
                current = .answering(answer, start: NIODeadline.now().uptimeNanoseconds)
            } else {
                current = .forwarding
                routerPending += 1
                forwardedHeads.append(head.method == .HEAD)
                context.fireChannelRead(data)
            }
        case .body:
            if case .forwarding = current { context.fireChannelRead(data) } // an answered GET's body is dropped
        case .end:
            switch current {
            case .answering(let answer, let start):
                write(answer, start: start, context: context)
            case .forwarding:
                context.fireChannelRead(data)
            case .idle:
                break
            }
            current = .idle
        }
    }

    /// Writes the encoded head, the `Date` line and the body below the HTTP encoder: three
    /// buffers built before this request, one `writev`.
    private func write(_ answer: FastPath.Answer, start: UInt64, context: ChannelHandlerContext) {
        guard let raw = outlet.context else { return }
        fastPath.writeHTTP1(answer, through: raw, closing: context, since: start)
        answered = true
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            // A 1xx other than 101 is followed by the final head of the same request.
            if !((100..<200).contains(head.status.code) && head.status.code != 101) {
                suppressingBody = forwardedHeads.popFirst() ?? false
            }
        case .body where suppressingBody:
            promise?.succeed()
            return
        case .body:
            break
        case .end:
            routerPending = max(0, routerPending - 1)
            if suppressingBody {
                // Nothing more of a HEAD's answer goes out: a chunked head's terminator would be read as the next answer.
                suppressingBody = false
                promise?.succeed()
                context.flush()
                return
            }
        }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Graceful shutdown closes idle connections: not before our own answers are out. Writes
        // complete in order, so an empty write's promise marks the moment all earlier ones have.
        if event is ChannelShouldQuiesceEvent, answered, let raw = outlet.context {
            guard !quiescing else { return }
            quiescing = true
            let promise = context.eventLoop.makePromise(of: Void.self)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            promise.futureResult.whenComplete { _ in bound.value.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
            raw.writeAndFlush(NIOAny(ByteBuffer()), promise: promise)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Per HTTP/2 stream, after the conversion to HTTP types: answers the stream's request from
/// `FastPath` when it can (the same answers, headers and rules as over HTTP/1.1, with the
/// router's `Date` and `Server`), so a cached image or payload over h2 needs neither the router
/// nor a request object; anything else passes on to Hummingbird untouched.
///
/// A stream answered here gets no task (`FastPathHTTP2Connection`): it ends by itself once both
/// sides have ended it. An answer larger than the stream's flow-control window is still being
/// written after the request has ended, and closing the stream would cut it off (RST_STREAM), so
/// nothing that would close it passes this handler before the answer's last frame is written:
/// not the end of input, not a graceful shutdown.
final class H2FastPathHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let fastPath: FastPath
    private var answering: (answer: FastPath.Answer, start: UInt64)?
    private var forwarding = false
    /// The answer's last frame is not yet written.
    private var writing = false
    /// The end of input, held while `writing`.
    private var heldInputClosed = false

    init(fastPath: FastPath) {
        self.fastPath = fastPath
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if forwarding { return context.fireChannelRead(data) }
        switch unwrapInboundIn(data) {
        case .head(let request):
            if answering == nil, !writing, var answer = fastPath.answer(request) {
                fastPath.sample(&answer, uri: request.path, peer: (context.remoteAddress ?? context.channel.parent?.remoteAddress)?.ipAddress,
                                forwardedFor: request.headerFields[values: HTTPField.Name("X-Forwarded-For")!])
                answering = (answer, NIODeadline.now().uptimeNanoseconds)
            } else {
                forwarding = true
                context.fireChannelRead(data)
            }
        case .body:
            break // an answered GET's body is dropped
        case .end:
            guard let (answer, start) = answering else { return }
            answering = nil
            write(answer, start: start, context: context)
        }
    }

    private func write(_ answer: FastPath.Answer, start: UInt64, context: ChannelHandlerContext) {
        var fields = answer.blob.fullHeaders[answer.caching.cacheControl] ?? [:]
        fields[.date] = HTTPDate.value()
        fields[.server] = "RichPush"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .ok, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(answer.blob.bytes)), promise: nil)
        writing = true
        let written = context.eventLoop.makePromise(of: Void.self)
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in
            let (handler, context) = bound.value
            handler.writing = false
            if handler.heldInputClosed {
                handler.heldInputClosed = false
                context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        fastPath.record(answer, since: start, Metric.memoryAnswersH2)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, writing || answering != nil {
            heldInputClosed = true
            return
        }
        // A graceful shutdown lets an answer from here finish: the stream ends by itself after it
        // (the connection closes once its streams are done), and the handlers behind, which
        // never saw this request, would close the stream at once.
        if event is ChannelShouldQuiesceEvent, writing || answering != nil { return }
        context.fireUserInboundEventTriggered(event)
    }
}

/// The first handler of the pipeline, next to the socket: the fast path writes its already
/// encoded answers through this handler's context, past the HTTP/1 encoder. Responses stay in
/// order because the fast path answers only when no router response is outstanding.
final class RawOutlet: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private(set) var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }
}

/// The `Date` line of a response head, encoded once per second.
enum HTTPDate {
    /// The second (Unix time) and its `Date` line.
    struct Now {
        var second: Int
        /// `Date: <now>` and the blank line that ends a head.
        var line: ByteBuffer
        var value: String
    }

    private static let cache = NIOLockedValueBox(Now(second: 0, line: ByteBuffer(), value: ""))
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Date: <now>` and the blank line that ends a head.
    static func line() -> ByteBuffer { now().line }

    /// The value of a `Date` header now.
    static func value() -> String { now().value }

    /// The current second, with its line and value.
    static func now() -> Now {
        var seconds = time(nil)
        return cache.withLockedValue { cache in
            if cache.second == seconds { return cache }
            var t = tm()
            gmtime_r(&seconds, &t)
            let value = String(format: "%@, %02d %@ %04d %02d:%02d:%02d GMT", days[Int(t.tm_wday)], t.tm_mday, months[Int(t.tm_mon)],
                               Int(t.tm_year) + 1900, t.tm_hour, t.tm_min, t.tm_sec)
            let now = Now(second: seconds, line: ByteBuffer(string: "Date: \(value)\r\n\r\n"), value: value)
            // A thread that read the clock just before another stored the next second does not turn it back.
            if seconds > cache.second { cache = now }
            return now
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
