import HTTPEdge
import MediaStore

extension BlobCache {
    /// The cached image a hot route serves for `id`: itself, or its `variant` once the router
    /// has made it, when it is fresh. When it is cached but due for its once-a-second check,
    /// `recheck` names it (the edge waits for `recheck(_:)` and asks again); nil otherwise too.
    func hotBlob(_ id: MediaID, variant: MediaVariant?, recheck: inout MediaID?) -> ServedBlob? {
        let shown: MediaID
        if let variant {
            guard let known = knownVariant(id, variant) else { return nil }
            shown = known
        } else {
            shown = id
        }
        switch lookUp(shown) {
        case .fresh(let blob): return blob
        case .due: recheck = shown; return nil
        case .absent: return nil
        }
    }
}
