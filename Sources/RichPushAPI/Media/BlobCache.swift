import Foundation
import Hummingbird
import HTTPEdge
import HTTPTypes
import Logging
import NIOHTTP1
import MediaStore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A blob ready to serve: its bytes, stored type, and the headers of a full response, built once.
/// A class: the fast path hands it around per request, and one reference is cheaper to pass than
/// a dozen.
final class ServedBlob: Sendable {
    let id: MediaID
    let contentType: String
    let bytes: ByteBuffer
    /// `"<sha256>"`.
    let etag: String
    /// Headers of a 200 response per `Cache-Control` value (docs/api.md#http-api has three).
    let fullHeaders: [String: HTTPFields]
    /// For the event-loop fast path: the status line and every header of a 200 response but
    /// `Date`, encoded once as NIO's HTTP/1.1 encoder would (the router's headers plus `Server`),
    /// by `Caching`.
    private let heads: [ByteBuffer]
    /// The answers over plain HTTP/1.1 as files (`WireFile`), by `Caching`: the one of the
    /// latest second it was asked for, made on its first use. Not kept by the blob: its budget
    /// and the connections writing it keep it (nil when it could not be made, or is let go).
    private let wireFiles = NIOLockedValueBox<[LatestWireFile]>(Array(repeating: LatestWireFile(), count: Caching.allCases.count))

    private struct LatestWireFile {
        var second = -1
        weak var file: WireFile?
    }

    static let cacheControls = Caching.allCases.map(\.cacheControl)

    /// The three ways a 200 is cached (docs/api.md#http-api), each with its own `Cache-Control`.
    enum Caching: Int, CaseIterable, Sendable {
        /// `/media/{sha256}` with `--public-media`.
        case publicImmutable
        /// `/media/{sha256}` to a signed-in user.
        case privateImmutable
        /// A notification's payload.
        case `private`

        var cacheControl: String {
            switch self {
            case .publicImmutable: "public, max-age=31536000, immutable"
            case .privateImmutable: "private, max-age=31536000, immutable"
            case .private: "private"
            }
        }
    }

    init(id: MediaID, contentType: String, bytes: ByteBuffer) {
        self.id = id
        self.contentType = contentType
        self.bytes = bytes
        self.etag = "\"\(id.hex)\""
        var headers: [String: HTTPFields] = [:]
        for cacheControl in Self.cacheControls {
            headers[cacheControl] = ImageResponse.baseHeaders(contentType: contentType, etag: etag, cacheControl: cacheControl)
                + [HTTPField(name: .contentLength, value: String(bytes.readableBytes))]
        }
        self.fullHeaders = headers
        self.heads = Caching.allCases.map { caching in
            var buffer = ByteBuffer(string: "HTTP/1.1 200 OK\r\n")
            for field in headers[caching.cacheControl]! { buffer.writeString("\(field.name.rawName): \(field.value)\r\n") }
            buffer.writeString("Server: RichPush\r\n")
            return buffer
        }
    }

    /// The encoded head of a 200 cached as `caching`, without `Date`.
    func head(_ caching: Caching) -> ByteBuffer { heads[caching.rawValue] }

    /// The whole answer cached as `caching` with `date` (the second's `HTTPDate`) as a file:
    /// the one already made this second, or a new one when `budget` has room for it; nil when
    /// it has none (or the file cannot be made), and the answer is written from memory.
    func wireFile(_ caching: Caching, date: HTTPDate.Now, budget: WireFile.Budget) -> WireFile? {
        let index = caching.rawValue
        // A thread that read the clock just before another made the next second's file writes from memory.
        let latest = wireFiles.withLockedValue { $0[index] }
        guard date.second > latest.second else { return date.second == latest.second ? latest.file : nil }
        // Made outside the lock (the other loops go on answering); of two made at once, the first in stays.
        let head = head(caching)
        let made = WireFile(budget: budget, name: id.hex, second: date.second,
                            count: head.readableBytes + date.line.readableBytes + bytes.readableBytes) { answer in
            answer.writeImmutableBuffer(head)
            answer.writeImmutableBuffer(date.line)
            answer.writeImmutableBuffer(bytes)
        }
        return wireFiles.withLockedValue { files in
            // A file that cannot be made is not tried again within the second.
            if files[index].second >= date.second { return files[index].second == date.second ? files[index].file : nil }
            files[index] = LatestWireFile(second: date.second, file: made)
            return made
        }
    }
}

/// The edge serves a blob in each of its `Caching` styles (`style` is the case's raw value).
extension ServedBlob: HotBody {
    func head(_ style: Int) -> ByteBuffer { heads[style] }

    func fields(_ style: Int) -> HTTPFields { fullHeaders[Self.cacheControls[style]] ?? [:] }

    func wireFile(_ style: Int, date: HTTPDate.Now, budget: WireFile.Budget) -> WireFile? {
        wireFile(Caching(rawValue: style) ?? .private, date: date, budget: budget)
    }
}

/// A blob too large to keep in memory, served from the store a chunk at a time.
struct FileBlob: Sendable {
    let id: MediaID
    let contentType: String
    let store: MediaStore
    let size: Int
    var etag: String { "\"\(id.hex)\"" }
}

/// What can be served: a blob in memory, or one streamed from its file.
enum Servable: Sendable {
    case memory(ServedBlob)
    case file(FileBlob)
}

/// Keeps hot blobs in memory. Blobs are immutable, so a cached copy is always right while the
/// blob exists; an entry re-checks that its file still exists once a second (the CLI may remove it).
package final class BlobCache: Sendable {
    private struct Entry {
        var blob: ServedBlob
        var checkedAt: UInt64
        var lastUsed: UInt64
        /// When the re-check started ahead of time (before the entry went stale) that is under way began.
        var refreshStartedAt: UInt64?
    }

    private struct State {
        var entries: [MediaID: Entry] = [:]
        var bytes = 0
        var tick: UInt64 = 0
    }

    private let store: MediaStore
    private let capacity: Int
    /// What the answers as files (`WireFile`) may hold beside the cache: half its capacity.
    let wireBudget: WireFile.Budget
    /// Blobs larger than this are read per request, never cached.
    private let maxEntry: Int
    private let state = NIOLockedValueBox(State())
    /// Variants looked up by the router (`?variant=`), by source and kind, and when: the fast
    /// path serves one it finds here for a second after the router's lookup, as it serves a cached
    /// blob it checked less than a second ago; then the router looks again (the source may be
    /// gone). Bounded: cleared past 100,000.
    private let variants = NIOLockedValueBox<[VariantKey: (variant: MediaID, at: UInt64)]>([:])

    private struct VariantKey: Hashable {
        var source: MediaID
        var kind: MediaVariant
    }

    /// The variant of `source` the router found or made less than a second ago, if it did.
    func knownVariant(_ source: MediaID, _ kind: MediaVariant) -> MediaID? {
        let now = DispatchTime.now().uptimeNanoseconds
        return variants.withLockedValue { known in
            guard let entry = known[VariantKey(source: source, kind: kind)], now &- entry.at < 1_000_000_000 else { return nil }
            return entry.variant
        }
    }

    /// Remembers what the router found or made for `source` and `kind`.
    func remember(variant: MediaID, of source: MediaID, _ kind: MediaVariant) {
        let now = DispatchTime.now().uptimeNanoseconds
        variants.withLockedValue { known in
            if known.count >= 100_000 { known.removeAll() }
            known[VariantKey(source: source, kind: kind)] = (variant, now)
        }
    }

    /// Loads blob `id` and its `push` variant (made now if it never was) into memory, so that a
    /// broadcast's first fetches of either find it there (docs/design/fast-path.md). Returns the variant's id.
    @discardableResult
    func warm(_ id: MediaID) async throws -> MediaID {
        _ = try await blob(id)
        let variant = try await store.variant(.push, of: id).id
        remember(variant: variant, of: id, .push)
        _ = try await blob(variant)
        return variant
    }

    /// Monotonic nanoseconds for the entries' checks (a test steps its own).
    private let clock: @Sendable () -> UInt64

    package init(store: MediaStore, capacity: Int, clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.store = store
        self.capacity = capacity
        self.maxEntry = max(0, capacity / 8)
        self.wireBudget = WireFile.Budget(limit: capacity / 2)
        self.clock = clock
    }

    /// The cached blob with `id` when it was checked within the last second, or is being
    /// re-checked (below); never waits for the store.
    ///
    /// A blob in use is re-checked in the background before its second is up, so that it stays
    /// fresh while it is hot: a request the fast path cannot answer waits for a check
    /// (`FastPathFront`) or goes to the router, and an HTTP/1.1 connection that went there once
    /// stays on the full pipeline. While that
    /// re-check runs (it answers within `recheckPatience`), the copy is served for up to
    /// `refreshGrace` after it began; a removal is seen when it ends.
    func freshBlob(_ id: MediaID) -> ServedBlob? {
        if case .fresh(let blob) = lookUp(id) { return blob }
        return nil
    }

    /// What the cache has for `id` without waiting for the store.
    enum Lookup {
        /// Checked within the last second, or being re-checked (`freshBlob`).
        case fresh(ServedBlob)
        /// Cached, but due for its check: `blob(_:)` or `recheck(_:)` makes it.
        case due
        case absent
    }

    /// `freshBlob`, telling a blob due for its check from one not cached.
    func lookUp(_ id: MediaID) -> Lookup {
        let now = clock()
        let (found, refresh) = state.withLockedValue { state -> (Lookup, Bool) in
            guard let index = state.entries.index(forKey: id) else { return (.absent, false) }
            let entry = state.entries.values[index]
            let age = now > entry.checkedAt ? now - entry.checkedAt : 0
            let refreshing = entry.refreshStartedAt.map { now < $0 || now - $0 <= Self.refreshGrace } ?? false
            // A stale entry is re-checked before it is served again (`blob(_:)`, `recheck(_:)`).
            guard age <= 1_000_000_000 || refreshing else { return (.due, false) }
            let refresh = entry.refreshStartedAt == nil && age > Self.refreshAfter
            if refresh { state.entries.values[index].refreshStartedAt = now }
            state.tick += 1
            state.entries.values[index].lastUsed = state.tick
            return (.fresh(entry.blob), refresh)
        }
        if refresh { Task { await self.refresh(id, startedAt: now) } }
        return found
    }

    /// Makes the check of a cached blob that is due (as `blob(_:)` does, without loading one
    /// that is not cached): when this returns, the blob is fresh again, or gone from the cache.
    /// It takes at most `recheckPatience`.
    func recheck(_ id: MediaID) async {
        guard case .due(let blob) = take(id) else { return }
        _ = await confirm(blob)
    }

    /// Whether a re-check ahead of `id` is under way (for tests).
    func isRefreshing(_ id: MediaID) -> Bool {
        state.withLockedValue { $0.entries[id]?.refreshStartedAt != nil }
    }

    /// How old a check may grow before a use of the entry starts the next one (of the second it lasts).
    private static let refreshAfter: UInt64 = 500_000_000
    /// How long after a re-check ahead began the copy is still served while it runs: its
    /// patience, and as long again for a busy machine to run it.
    private static let refreshGrace: UInt64 = 2_000_000_000

    /// Re-checks a cached blob ahead of time: still stored, it counts as checked when this began;
    /// gone, it leaves the cache.
    private func refresh(_ id: MediaID, startedAt: UInt64) async {
        guard await stillStored(id) else { return remove(id) }
        state.withLockedValue { state in
            // The entry may have left and come back meanwhile: its own re-check is left alone.
            guard let index = state.entries.index(forKey: id), state.entries.values[index].refreshStartedAt == startedAt else { return }
            state.entries.values[index].refreshStartedAt = nil
            state.entries.values[index].checkedAt = max(state.entries.values[index].checkedAt, startedAt)
        }
    }

    /// The blob with `id` to serve: from memory when it fits the cache, else from its file (so
    /// a request for a large blob never holds it whole); nil when the store has none.
    func servable(_ id: MediaID) async throws -> Servable? {
        switch lookUp(id) {
        case .fresh(let blob): return .memory(blob)
        // A cached blob is served without the database: only its re-check asks the store.
        case .due: return try await blob(id).map { .memory($0) }
        case .absent: break
        }
        guard let item = try await store.item(id) else { return nil }
        if item.size > maxEntry {
            guard await store.hasBlob(id) else { return nil }
            return .file(FileBlob(id: id, contentType: item.info.contentType, store: store, size: item.size))
        }
        return try await blob(id).map { .memory($0) }
    }

    /// The blob with `id`, or nil when the store has none.
    func blob(_ id: MediaID) async throws -> ServedBlob? {
        switch take(id) {
        case .fresh(let blob): return blob
        case .due(let blob): return await confirm(blob)
        case .absent: break
        }
        guard let item = try await store.item(id), let bytes = try await store.read(id, length: item.size) else { return nil }
        let blob = ServedBlob(id: id, contentType: item.info.contentType, bytes: bytes)
        if bytes.readableBytes <= maxEntry { insert(blob) }
        return blob
    }

    /// A use of entry `id`: fresh, or due for its check, which this use makes (from now on the
    /// entry counts as checked, so the uses meanwhile need not wait; `confirm` ends the check).
    private func take(_ id: MediaID) -> Taken {
        state.withLockedValue { state in
            state.tick += 1
            guard var entry = state.entries[id] else { return .absent }
            entry.lastUsed = state.tick
            // The clock is read under the lock, so `checkedAt` never lies in this thread's future.
            let now = clock()
            let stale = Self.isStale(entry, now: now)
            if stale { entry.checkedAt = now }
            state.entries[id] = entry
            return stale ? .due(entry.blob) : .fresh(entry.blob)
        }
    }

    private enum Taken {
        case fresh(ServedBlob)
        case due(ServedBlob)
        case absent
    }

    /// The check `take` began: `blob` when it is still stored; else it leaves the cache.
    private func confirm(_ blob: ServedBlob) async -> ServedBlob? {
        if await stillStored(blob.id) { return blob }
        remove(blob.id)
        return nil
    }

    /// How long a re-check may take before the copy is served anyway.
    static let recheckPatience: Duration = .seconds(1)

    /// Whether blob `id` is still stored: its row is in the index (a removal, by any process,
    /// deletes it at once) and, for files, its file is there. A store that cannot be asked (a
    /// database or bucket that is down, refused at once by its breaker) or does not answer within
    /// `recheckPatience` is no evidence that the blob is gone, and a blob never changes: the
    /// cached copy is served (docs/operations.md#when-a-dependency-fails).
    private func stillStored(_ id: MediaID) async -> Bool {
        let store = self.store
        return await withCheckedContinuation { continuation in
            let answered = NIOLockedValueBox(false)
            @Sendable func answer(_ stored: Bool) {
                guard answered.withLockedValue({ done in defer { done = true }; return !done }) else { return }
                continuation.resume(returning: stored)
            }
            // Not a task group: it would wait for a check that hangs. The check runs on to its deadline.
            Task {
                let indexed: Bool
                do { indexed = try await store.item(id) != nil } catch { indexed = true }
                // A bucket's objects outlive their rows by a minute (media gc): the row decides.
                guard indexed, !store.blobsAreRemote else { return answer(indexed) }
                answer(await store.hasBlob(id))
            }
            Task {
                try? await Task.sleep(for: Self.recheckPatience)
                answer(true)
            }
        }
    }

    /// An entry is re-checked against the file system once a second.
    private static func isStale(_ entry: Entry, now: UInt64) -> Bool {
        now > entry.checkedAt && now - entry.checkedAt > 1_000_000_000
    }

    private func insert(_ blob: ServedBlob) {
        state.withLockedValue { state in
            if state.entries[blob.id] != nil { return }
            state.tick += 1
            state.entries[blob.id] = Entry(blob: blob, checkedAt: clock(), lastUsed: state.tick)
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

/// Streams blobs too large for memory.
enum FileChunks {
    /// Bytes sent per write when a blob is streamed (the async writer buffers a few writes per
    /// connection before it pushes back, so this bounds memory per slow client).
    static let chunk = 64 * 1024

    /// Writes `range` of the blob to `writer` a chunk at a time: each write waits until the
    /// connection takes it, so a slow client holds one chunk, not the blob.
    static func stream(_ blob: FileBlob, range: ClosedRange<Int>, to writer: inout any ResponseBodyWriter) async throws {
        var offset = range.lowerBound
        while offset <= range.upperBound {
            let length = min(chunk, range.upperBound - offset + 1)
            guard let buffer = try await blob.store.read(blob.id, offset: offset, length: length) else {
                throw MediaStoreError.io("cannot read", path: blob.store.blobPath(blob.id), errno: errno)
            }
            try await writer.write(buffer)
            offset += length
        }
        try await writer.finish(nil)
    }
}

/// Puts payloads in the memory cache before their pushes go out (docs/design/fast-path.md): a campaign's image
/// and its `push` variant, when this node queues the campaign (before its first batch), when it
/// claims pushes to send (before it sends them), and when it sees the notifications of a
/// campaign another node queued (within the half second its index follower takes).
///
/// Each image is warmed at most once a minute: a warm-up is a few cache lookups when the image
/// is still there, and the cache may have let it go since.
package final class PayloadWarmer: Sendable {
    let blobs: BlobCache
    let logger: Logger
    /// An image's last warm-up: when it began (uptime, ns), and the load while it runs.
    private struct WarmUp {
        var startedAt: UInt64
        var loading: Task<Void, Never>?
    }
    /// Image → its last warm-up. Bounded: cleared past 10,000.
    private let warmed = NIOLockedValueBox<[MediaID: WarmUp]>([:])
    private static let interval: UInt64 = 60_000_000_000

    /// How long a caller waits for a warm-up.
    let patience: Duration

    package init(blobs: BlobCache, logger: Logger, patience: Duration = PayloadWarmer.patience) {
        self.blobs = blobs
        self.logger = logger
        self.patience = patience
    }

    /// How long a caller waits for a warm-up unless told otherwise: a campaign's POST and a node's
    /// first pushes wait no longer for a store that is slow or stalled (the warm-up goes on behind them).
    package static let patience: Duration = .seconds(2)

    /// Warms each of `ids` not warmed (or tried) in the last minute, waiting at most `patience`
    /// for them, and for those whose warm-up another caller began and is still running (the index
    /// follower may begin one just before the dispatcher claims the campaign's first pushes); a
    /// failure is logged (the fetches then load it as they would have), never thrown.
    package func warm(_ ids: some Sequence<MediaID>) async {
        let now = DispatchTime.now().uptimeNanoseconds
        let running = warmed.withLockedValue { warmed -> [Task<Void, Never>] in
            var running: [Task<Void, Never>] = []
            for id in ids {
                if let last = warmed[id], now &- last.startedAt < Self.interval {
                    if let loading = last.loading { running.append(loading) }
                    continue
                }
                if warmed.count >= 10_000 { warmed.removeAll() }
                let loading = Task { await self.load(id, startedAt: now) }
                warmed[id] = WarmUp(startedAt: now, loading: loading)
                running.append(loading)
            }
            return running
        }
        guard !running.isEmpty else { return }
        let done = NIOLockedValueBox(false)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            @Sendable func resume() {
                if done.withLockedValue({ finished in defer { finished = true }; return !finished }) { continuation.resume() }
            }
            Task {
                for loading in running { await loading.value }
                resume()
            }
            Task { try? await Task.sleep(for: patience); resume() }
        }
    }

    private func load(_ id: MediaID, startedAt: UInt64) async {
        do {
            let variant = try await blobs.warm(id)
            logger.debug("payload warmed", metadata: ["media": "\(id.hex)", "push": "\(variant.hex)"])
        } catch {
            // Not tried again for a minute: with the store failing, pushes must not wait on it per batch.
            logger.warning("cannot warm a payload", metadata: ["media": "\(id.hex)", "error": "\(error)"])
        }
        // Done: later callers within the minute need not wait for it (unless a newer one began).
        warmed.withLockedValue { warmed in
            if warmed[id]?.startedAt == startedAt { warmed[id]?.loading = nil }
        }
    }
}
