import CoreMetrics
import Foundation
import HTTPTypes
import HTTPEdge
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
final class FastPath: HotRoutes {
    let blobs: BlobCache
    let authenticator: Authenticator
    let payloads: PayloadIndex
    let links: PayloadLinks
    let readMarks: ReadMarks
    let publicMedia: Bool
    private let mediaMetrics = RouteMetrics(route: "/media/{sha256}")
    private let payloadMetrics = RouteMetrics(route: "/api/notifications/{id}", fetches: Metric.credentialFetches)
    private let linkMetrics = RouteMetrics(route: "/p/{token}", fetches: Metric.linkFetches)

    init(blobs: BlobCache, authenticator: Authenticator, payloads: PayloadIndex, links: PayloadLinks, readMarks: ReadMarks, publicMedia: Bool) {
        self.blobs = blobs
        self.authenticator = authenticator
        self.payloads = payloads
        self.links = links
        self.readMarks = readMarks
        self.publicMedia = publicMedia
    }

    /// docs/design/fast-path.md: the answer to a plain `GET` of `uri` that the edge read; nil
    /// sends the request to the router. `memo` is the connection's: the key of the credentials
    /// it sent last. When nil because the image is cached but due for its once-a-second check,
    /// `recheck` names it: once `BlobCache.recheck` is done, the request may be answered here.
    func answer(uri: String, authorization: String?, memo: inout CredentialMemo?, recheck: inout MediaID?) -> HotAnswer? {
        route(uri: uri, authorization: authorization, memo: &memo, recheck: &recheck)
    }

    func recheck(_ item: MediaID) async {
        await blobs.recheck(item)
    }

    var wireBudget: WireFile.Budget { blobs.wireBudget }

    private func route(uri path: String, authorization: String?, memo: inout CredentialMemo?, recheck: inout MediaID?) -> HotAnswer? {
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
                        recheck: inout MediaID?) -> HotAnswer? {
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
            return HotAnswer(body: blob, style: (publicMedia ? ServedBlob.Caching.publicImmutable : .privateImmutable).rawValue, metrics: mediaMetrics)
        }
        if length > 19, uri.hasPrefix("/api/notifications/") {
            guard let digits = String(uri.utf8.dropFirst(19).prefix(length - 19)), let id = Int64(digits), id > 0,
                  let principal = authenticator.cachedPrincipal(authorization, memo: &memo), Self.keyMay(principal, Self.payloadScope),
                  let known = payloads.get(id), known.recipient == principal.user,
                  let shown = served(known.payload), let blob = fresh(shown) else { return nil }
            // A first fetch: its read mark is committed just after, in a batch (as for /p/).
            if !known.read, payloads.markRead(id) { readMarks.markSoon(id) }
            return HotAnswer(body: blob, style: ServedBlob.Caching.private.rawValue, metrics: payloadMetrics)
        }
        if length == 3 + PayloadLinks.tokenLength, uri.hasPrefix("/p/") {
            // By bytes, not characters (both ends are ASCII boundaries: after "/p/", and the path's end).
            let token = Substring(uri.utf8.dropFirst(3).prefix(PayloadLinks.tokenLength))
            // Only a notification this node knows: a withdrawn one has left the index, and one
            // not yet known is the router's to look up.
            guard case .valid(let id, let payload) = PayloadLinkCheck.check(token, links: links), payloads.get(id) != nil,
                  let shown = served(payload), let blob = fresh(shown) else { return nil }
            readMarks.markSoon(id)
            return HotAnswer(body: blob, style: ServedBlob.Caching.private.rawValue, metrics: linkMetrics)
        }
        return nil
    }
}

#if canImport(Glibc)
import Glibc
#endif
