import Foundation
import GRDB
import MediaStore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A blob ready to serve: its bytes and stored type.
struct ServedBlob: Sendable {
    let id: MediaID
    let contentType: String
    let bytes: ByteBuffer
}

/// Keeps hot blobs in memory. Blobs are immutable, so a cached copy is always right while the
/// blob exists; an entry re-checks that its file still exists once a second (the CLI may remove it).
final class BlobCache: Sendable {
    private struct Entry {
        var blob: ServedBlob
        var checkedAt: UInt64
        var lastUsed: UInt64
    }

    private struct State {
        var entries: [MediaID: Entry] = [:]
        var bytes = 0
        var tick: UInt64 = 0
    }

    private let store: MediaStore
    private let capacity: Int
    /// Blobs larger than this are read per request, never cached.
    private let maxEntry: Int
    private let state = NIOLockedValueBox(State())

    init(store: MediaStore, capacity: Int) {
        self.store = store
        self.capacity = capacity
        self.maxEntry = max(0, capacity / 8)
    }

    /// The blob with `id`, or nil when the store has none.
    func blob(_ id: MediaID) async throws -> ServedBlob? {
        let now = DispatchTime.now().uptimeNanoseconds
        let hit: (blob: ServedBlob, stale: Bool)? = state.withLockedValue { state in
            state.tick += 1
            guard var entry = state.entries[id] else { return nil }
            entry.lastUsed = state.tick
            let stale = now - entry.checkedAt > 1_000_000_000
            if stale { entry.checkedAt = now }
            state.entries[id] = entry
            return (entry.blob, stale)
        }
        if let hit {
            if !hit.stale || access(store.blobPath(id), F_OK) == 0 { return hit.blob }
            remove(id)
            return nil
        }
        guard let item = try await store.database.read({ db in try MediaIndex.item(db, id: id) }) else { return nil }
        let path = store.blobPath(id)
        let data = try await NIOThreadPool.singleton.runIfActive { () -> [UInt8]? in
            FileManager.default.contents(atPath: path).map { [UInt8]($0) }
        }
        guard let data else { return nil }
        let blob = ServedBlob(id: id, contentType: item.info.contentType, bytes: ByteBuffer(bytes: data))
        if data.count <= maxEntry { insert(blob, now: now) }
        return blob
    }

    private func insert(_ blob: ServedBlob, now: UInt64) {
        state.withLockedValue { state in
            if state.entries[blob.id] != nil { return }
            state.tick += 1
            state.entries[blob.id] = Entry(blob: blob, checkedAt: now, lastUsed: state.tick)
            state.bytes += blob.bytes.readableBytes
            while state.bytes > capacity, let oldest = state.entries.min(by: { $0.value.lastUsed < $1.value.lastUsed }) {
                state.entries[oldest.key] = nil
                state.bytes -= oldest.value.blob.bytes.readableBytes
            }
        }
    }

    private func remove(_ id: MediaID) {
        state.withLockedValue { state in
            if let entry = state.entries.removeValue(forKey: id) { state.bytes -= entry.blob.bytes.readableBytes }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
