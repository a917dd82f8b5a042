import HTTPEdge
import MediaStore
import RichPushCore

/// `GET /p/{token}` answered from memory (docs/design/fast-path.md): the fast answer, beside the
/// routed one (`PayloadLinksController.fetchPayloadByLink`), deciding as it does through
/// `PayloadLinkCheck`. The token names its notification and image, so a device's first fetch
/// needs no database; the read mark is committed just after, in a batch.
struct PayloadLinkHotRoute: Sendable {
    let blobs: BlobCache
    let links: PayloadLinks
    let payloads: PayloadIndex
    let readMarks: ReadMarks
    private let metrics = RouteMetrics(route: "/p/{token}", fetches: Metric.linkFetches)

    init(blobs: BlobCache, links: PayloadLinks, payloads: PayloadIndex, readMarks: ReadMarks) {
        self.blobs = blobs
        self.links = links
        self.payloads = payloads
        self.readMarks = readMarks
    }

    /// The answer to `uri`, whose path is `/p/` and a token of `PayloadLinks.tokenLength` bytes.
    func answer(_ uri: String, variant: MediaVariant?, recheck: inout MediaID?) -> HotAnswer? {
        // By bytes, not characters (both ends are ASCII boundaries: after "/p/", and the path's end).
        let token = Substring(uri.utf8.dropFirst(3).prefix(PayloadLinks.tokenLength))
        // Only a notification this node knows: a withdrawn one has left the index (a changed
        // one's image too), and one not yet known is the router's to look up.
        // The image is the notification's now: a change may have replaced the one the token names.
        guard case .valid(let id, _) = PayloadLinkCheck.check(token, links: links), let known = payloads.get(id),
              let blob = blobs.hotBlob(known.payload, variant: variant, recheck: &recheck) else { return nil }
        readMarks.markSoon(id)
        return HotAnswer(body: blob, style: ServedBlob.Caching.private.rawValue, metrics: metrics)
    }
}
