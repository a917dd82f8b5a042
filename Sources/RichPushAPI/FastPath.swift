import HTTPEdge
import MediaStore
import RichPushCore

/// The server's hot routes, as the edge asks for them (docs/design/fast-path.md): the hottest
/// requests answered synchronously on the thread that read them when everything the answer needs is
/// already in memory. This is only the table: it reads the path and its `?variant=`, and each
/// route decides in its room, beside the router's handler for the same route
/// (`MediaHotRoute`, `PayloadHotRoute`, `PayloadLinkHotRoute`). Anything else (a miss, a first
/// read through the API, an unknown credential, an expired URL) goes through Hummingbird
/// unchanged, and so do the rules: the answers are byte-for-byte what the router would send.
///
/// It is a cache hit path, like nginx's open-file cache: no decision is made here that the
/// router would not make the same way.
package final class FastPath: HotRoutes {
    let blobs: BlobCache
    let payloads: PayloadIndex
    private let media: MediaHotRoute
    private let payload: PayloadHotRoute
    private let link: PayloadLinkHotRoute

    package init(blobs: BlobCache, authenticator: Authenticator, payloads: PayloadIndex, links: PayloadLinks, readMarks: ReadMarks, publicMedia: Bool) {
        self.blobs = blobs
        self.payloads = payloads
        media = MediaHotRoute(blobs: blobs, authenticator: authenticator, publicMedia: publicMedia)
        payload = PayloadHotRoute(blobs: blobs, authenticator: authenticator, payloads: payloads, readMarks: readMarks)
        link = PayloadLinkHotRoute(blobs: blobs, links: links, payloads: payloads, readMarks: readMarks)
    }

    /// The answer to a plain `GET` of `uri` that the edge read; nil sends the request to the
    /// router. `memo` is the connection's: the key of the credentials it sent last. When nil
    /// because the image is cached but due for its once-a-second check, `recheck` names it:
    /// once `BlobCache.recheck` is done, the request may be answered here.
    package func answer(uri path: String, authorization: String?, memo: inout CredentialMemo?, recheck: inout MediaID?) -> HotAnswer? {
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
            if query.starts(with: "variant=".utf8), let kind = Self.variant(query.dropFirst(8)) {
                variant = kind
            } else if path.contains("variant=") {
                // Another variant is the router's 400.
                return nil
            }
            // Another query is ignored, as the router ignores it.
        }
        if length == 7 + 64, path.hasPrefix("/media/") {
            return media.answer(path, variant: variant, authorization: authorization, memo: &memo, recheck: &recheck)
        }
        if length > 19, path.hasPrefix("/api/notifications/") {
            return payload.answer(path, length: length, variant: variant, authorization: authorization, memo: &memo, recheck: &recheck)
        }
        if length == 3 + PayloadLinks.tokenLength, path.hasPrefix("/p/") {
            return link.answer(path, variant: variant, recheck: &recheck)
        }
        return nil
    }

    package func recheck(_ item: MediaID) async {
        await blobs.recheck(item)
    }

    package var wireBudget: WireFile.Budget { blobs.wireBudget }

    /// `thumb` or `push`, read without making a string.
    private static func variant(_ name: Substring.UTF8View.SubSequence) -> MediaVariant? {
        if name.elementsEqual("push".utf8) { return .push }
        if name.elementsEqual("thumb".utf8) { return .thumb }
        return nil
    }
}
