import HTTPEdge
import HTTPTypes
import MediaStore
import RichPushCore

/// `GET /api/notifications/{id}` answered from memory (docs/design/fast-path.md): the fast
/// answer, beside the routed one (`NotificationsController.fetchPayload`), deciding as it does.
/// Only a notification made or fetched here, for its recipient with credentials known here; a
/// first fetch's read mark is committed just after, in a batch.
struct PayloadHotRoute: Sendable {
    let blobs: BlobCache
    let authenticator: Authenticator
    let payloads: PayloadIndex
    let readMarks: ReadMarks
    private let metrics = RouteMetrics(route: "/api/notifications/{id}", fetches: Metric.credentialFetches)

    /// What an API key needs, read from the route's own declaration: nil where keys are refused.
    static let keyScope = Endpoint.notifications.first { $0.method == .get && $0.path == "/api/notifications/{id}" }?.keyScope

    init(blobs: BlobCache, authenticator: Authenticator, payloads: PayloadIndex, readMarks: ReadMarks) {
        self.blobs = blobs
        self.authenticator = authenticator
        self.payloads = payloads
        self.readMarks = readMarks
    }

    /// The answer to `uri`, whose path (its first `length` bytes) is `/api/notifications/` and more.
    func answer(_ uri: String, length: Int, variant: MediaVariant?, authorization: String?, memo: inout CredentialMemo?, recheck: inout MediaID?) -> HotAnswer? {
        guard let digits = String(uri.utf8.dropFirst(19).prefix(length - 19)), let id = Int64(digits), id > 0,
              let principal = authenticator.cachedPrincipal(authorization, memo: &memo), principal.keyAllows(Self.keyScope),
              let known = payloads.get(id), known.recipient == principal.user,
              let blob = blobs.hotBlob(known.payload, variant: variant, recheck: &recheck) else { return nil }
        // A first fetch: its read mark is committed just after, in a batch (as for /p/).
        if !known.read, payloads.markRead(id) { readMarks.markSoon(id) }
        return HotAnswer(body: blob, style: ServedBlob.Caching.private.rawValue, metrics: metrics)
    }
}
