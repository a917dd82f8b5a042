import HTTPEdge
import HTTPTypes
import MediaStore
import RichPushCore

/// `GET /media/{sha256}` answered from memory (docs/design/fast-path.md): the fast answer, beside
/// the routed one (`MediaController.serveMedia`), deciding as it does. Anything it is unsure of
/// (an uncached image, a credential not known here) is the router's.
struct MediaHotRoute: Sendable {
    let blobs: BlobCache
    let authenticator: Authenticator
    /// `--public-media`: no credentials, and cached publicly.
    let publicMedia: Bool
    private let metrics = RouteMetrics(route: "/media/{sha256}")

    /// What an API key needs, read from the route's own declaration: nil where keys are refused.
    static let keyScope = Endpoint.media.first { $0.method == .get && $0.path == "/media/{sha256}" }?.keyScope

    init(blobs: BlobCache, authenticator: Authenticator, publicMedia: Bool) {
        self.blobs = blobs
        self.authenticator = authenticator
        self.publicMedia = publicMedia
    }

    /// The answer to `uri`, a path of exactly `/media/` and 64 characters (any query already read
    /// into `variant`).
    func answer(_ uri: String, variant: MediaVariant?, authorization: String?, memo: inout CredentialMemo?, recheck: inout MediaID?) -> HotAnswer? {
        // Checked in place where the path's bytes are in one piece; uppercase digits (and
        // any other string) through a string of their own, as the router reads them.
        let inPlace: MediaID? = uri.utf8.withContiguousStorageIfAvailable { MediaID(lowercaseHex: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: $0[7..<71]))) } ?? nil
        guard let id = inPlace ?? MediaID(String(uri.utf8.dropFirst(7).prefix(64))!) else { return nil }
        if !publicMedia {
            // An API key only with the route's scope, as the router decides (docs/security.md).
            guard let principal = authenticator.cachedPrincipal(authorization, memo: &memo), principal.keyAllows(Self.keyScope) else { return nil }
        }
        guard let blob = blobs.hotBlob(id, variant: variant, recheck: &recheck) else { return nil }
        return HotAnswer(body: blob, style: (publicMedia ? ServedBlob.Caching.publicImmutable : .privateImmutable).rawValue, metrics: metrics)
    }
}
