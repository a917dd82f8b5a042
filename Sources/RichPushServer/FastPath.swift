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
                // An API key only with the route's scope, as the router decides (docs/security.md).
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

#if canImport(Glibc)
import Glibc
#endif
