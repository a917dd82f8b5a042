import Crypto
import Foundation
import Resilience
import SQLEngine
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether an ingest wrote a new blob or found the same bytes already stored.
public enum IngestStatus: String, Sendable, Codable {
    case stored
    case exists
}

/// The outcome of a successful ingest.
public struct IngestResult: Sendable {
    /// The stored item, with its names.
    public var item: MediaItem
    /// `stored` when this call wrote the blob, `exists` when it was already there.
    public var status: IngestStatus
    /// What was stripped from the upload before it was stored (SPEC §16), sorted.
    public var stripped: [StrippedMetadata] = []
}

/// The content-addressed media store: validated images in SHA-256-named blobs, indexed in SQLite.
///
/// Safe to share between tasks, and between processes on the same data directory: the blob
/// rename and the row insert happen inside one SQLite write transaction, so the same bytes
/// added at once by many tasks or processes end as one blob, one `stored` and the rest `exists`.
public final class MediaStore: Sendable {
    /// Where the files are.
    let directory: DataDirectory
    /// The metadata database (shared with the other stores of the same data directory).
    let database: SQLDatabase
    /// Limits for every ingest through this store.
    public let limits: MediaLimits
    /// The bucket holding the blobs, when they are not files (`--blobs s3://…`).
    let remote: RemoteBlobs?
    private let threadPool: NIOThreadPool
    private let tmpCounter = TmpCounter()
    /// Variants being made by this process: concurrent first requests wait for one maker.
    private let variantsInFlight = NIOLockedValueBox<[String: Task<MediaItem, any Error>]>([:])

    /// Opens the store over an already opened database (see `StoreDatabase.open`); `DataStore`
    /// does this for the whole schema.
    public init(directory: DataDirectory, database: SQLDatabase, limits: MediaLimits = .default, bucket: S3Client? = nil,
                threadPool: NIOThreadPool = .singleton) {
        self.directory = directory
        self.database = database
        self.limits = limits
        self.remote = bucket.map { RemoteBlobs(client: $0) }
        self.threadPool = threadPool
    }

    /// Opens `path` as a data directory with only the media tables migrated.
    public convenience init(path: String, limits: MediaLimits = .default) throws {
        let directory = DataDirectory(path: path)
        let database = try StoreDatabase.open(directory, migrations: StoreDatabase.mediaMigrations)
        self.init(directory: directory, database: database, limits: limits)
    }

    // MARK: Readiness

    /// The database's circuit breaker, when it is PostgreSQL.
    public var databaseBreaker: CircuitBreaker? { database.breaker }

    /// The bucket's circuit breaker, when the blobs are in one.
    public var bucketBreaker: CircuitBreaker? { remote?.client.breaker }

    /// Whether the blobs are objects in a bucket (else files of the data directory).
    public var blobsAreRemote: Bool { remote != nil }

    /// Whether the blobs can be reached now (`GET /ready`): the bucket answers a HEAD, or the
    /// blob directory is a directory that can be listed. Throws what failed.
    public func probeBlobs() async throws {
        if let remote {
            _ = try await remote.client.head(key: "sha256/ready-probe")
            return
        }
        let path = directory.blobsPath
        try await threadPool.runIfActive {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue,
                  let handle = opendir(path) else {
                throw MediaStoreError.io("cannot list", path: path, errno: errno == 0 ? ENOTDIR : errno)
            }
            closedir(handle)
        }
    }

    /// Whether the metadata database answers a read now.
    public func probeDatabase() async throws {
        try await database.read { db in _ = try db.fetchOne(sql: "SELECT 1 AS one") }
    }

    // MARK: Ingest

    /// Reads, validates and stores the file at `path`; throws `MediaRejection` when refused.
    public func ingest(file path: String, name: String? = nil) async throws -> IngestResult {
        if let name { try MediaIndex.validateName(name) }
        let limit = limits.maxBytes
        let read = try await threadPool.runIfActive { try FileOps.readFile(path, limit: limit) }
        switch read {
        case .tooLarge(let size):
            throw limits.checkSize(size)!
        case .bytes(let bytes):
            return try await ingest(bytes: bytes, name: name)
        }
    }

    /// Validates and stores `bytes`; throws `MediaRejection` when refused, leaving nothing behind.
    /// `keepMetadata` overrides the store's limits (a copy between stores keeps every byte).
    public func ingest(bytes: [UInt8], name: String? = nil, keepMetadata: Bool? = nil) async throws -> IngestResult {
        if let name { try MediaIndex.validateName(name) }
        var limits = self.limits
        if let keepMetadata { limits.keepMetadata = keepMetadata }
        let prepared = try await Self.prepare(bytes, limits: limits)
        var result = try await store(prepared.bytes, id: prepared.id, info: prepared.info, name: name)
        result.stripped = prepared.stripped
        return result
    }

    /// What an upload becomes: its bytes stripped (unless the limits keep metadata), validated
    /// by a full decode, and hashed (`unchangedID`, hashed as it streamed in, when nothing was
    /// stripped); on the decode pool.
    private static func prepare(_ bytes: [UInt8], limits: MediaLimits, unchangedID: MediaID? = nil) async throws
        -> (bytes: [UInt8], stripped: [StrippedMetadata], id: MediaID, info: ImageInfo) {
        try await DecodePool.shared.runIfActive {
            let (kept, stripped) = limits.keepMetadata ? (bytes, []) : MetadataStripper.strip(bytes)
            let info = try ImageInspector.inspect(kept, limits: limits)
            let id = stripped.isEmpty ? unchangedID ?? MediaID(hashing: kept) : MediaID(hashing: kept)
            return (kept, stripped, id, info)
        }
    }

    /// Writes validated `bytes` durably (unless the blob is there) and records them; `also` runs
    /// in the same transaction as the row.
    private func store(_ bytes: [UInt8], id: MediaID, info: ImageInfo, name: String?,
                       also: (@Sendable (SQLConnection) throws -> Void)? = nil) async throws -> IngestResult {
        if let remote { return try await commitRemote(remote, id: id, bytes: bytes, info: info, name: name, also: also) }
        let blobPath = directory.blobPath(id)
        let alreadyThere = try await database.read { db in try MediaIndex.item(db, id: id) != nil }
            && FileOps.fileSize(blobPath) == bytes.count
        var tmpPath: String?
        if !alreadyThere {
            let path = "\(directory.tmpPath)/\(TmpName.prefix)\(tmpCounter.next()).\(id.hex.prefix(16)).part"
            try await threadPool.runIfActive {
                try bytes.withUnsafeBytes { try FileOps.writeDurably($0, to: path) }
            }
            tmpPath = path
        }
        defer { if let tmpPath { unlink(tmpPath) } }
        return try await commit(id: id, size: bytes.count, info: info, tmpPath: tmpPath, name: name, also: also)
    }

    /// Streams an upload to `tmp/` while hashing it, then validates and stores it like `ingest(bytes:)`.
    ///
    /// `declaredLength` (a request's Content-Length) over the limit is refused before anything is
    /// read; a body that grows past the limit is refused as soon as it does. Nothing is left behind
    /// on any refusal or error.
    public func ingest(upload chunks: some AsyncSequence<ByteBuffer, any Error>, declaredLength: Int?, name: String? = nil) async throws -> IngestResult {
        if let name { try MediaIndex.validateName(name) }
        if let declaredLength, let rejection = limits.checkSize(declaredLength) { throw rejection }
        let path = "\(directory.tmpPath)/\(TmpName.prefix)\(tmpCounter.next()).upload.part"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o444)
        guard fd >= 0 else { throw MediaStoreError.io("cannot create", path: path, errno: errno) }
        let file = UploadFile(fd: fd, path: path)
        defer { file.closeAndRemove() }
        var hasher = SHA256()
        var size = 0
        for try await chunk in chunks {
            size += chunk.readableBytes
            if size > limits.maxBytes {
                throw MediaRejection(.tooLarge, "body is over the limit of \(limits.maxBytes) bytes")
            }
            chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            try await threadPool.runIfActive { try file.write(chunk) }
        }
        let id = MediaID(digest: hasher.finalize())
        let limits = self.limits
        let total = size
        let bytes = try await threadPool.runIfActive { () throws -> [UInt8] in
            guard case .bytes(let bytes) = try FileOps.readFile(path, limit: limits.maxBytes) else {
                throw limits.checkSize(total)!
            }
            return bytes
        }
        guard bytes.count == size else { throw MediaStoreError.io("upload changed while reading", path: path, errno: EIO) }
        let prepared = try await Self.prepare(bytes, limits: limits, unchangedID: id)
        if !prepared.stripped.isEmpty {
            // What is stored is the stripped image, written (and synced) anew; the streamed file
            // goes with the upload, never synced.
            var result = try await store(prepared.bytes, id: prepared.id, info: prepared.info, name: name)
            result.stripped = prepared.stripped
            return result
        }
        let info = prepared.info
        // The temp file becomes the blob on the file store (synced first); for a bucket it is only
        // read back for the PUT and removed.
        if remote == nil { try await threadPool.runIfActive { try file.sync() } }
        if let remote { return try await commitRemote(remote, id: id, bytes: bytes, info: info, name: name) }
        return try await commit(id: id, size: size, info: info, tmpPath: path, name: name)
    }

    /// Stores the object (unless the bucket already has it) and records the row, agreeing with
    /// removals and `gc` through `media_pending` (see `RemoteBlobs`).
    private func commitRemote(_ remote: RemoteBlobs, id: MediaID, bytes: [UInt8], info: ImageInfo, name: String?,
                              also: (@Sendable (SQLConnection) throws -> Void)? = nil) async throws -> IngestResult {
        if let name { _ = try await database.read { db in try MediaIndex.checkName(db, name, id: id) } }
        try await remote.beginUpload(id, database: database)
        do {
            // A new blob is PUT at once; one the index already has is PUT only if its object is missing.
            let indexed = try await database.read { db in try MediaIndex.item(db, id: id) != nil }
            let present = indexed ? try await remote.client.head(key: remote.key(id)) == bytes.count : false
            if !present {
                try await remote.put(id, bytes: bytes, contentType: info.contentType)
            }
            return try await database.write { db in
                let now = Date()
                let existing = try MediaIndex.item(db, id: id)
                if let name { _ = try MediaIndex.checkName(db, name, id: id) }
                if existing == nil {
                    try MediaIndex.insert(db, id: id, size: bytes.count, info: info, now: now)
                } else {
                    try MediaIndex.touch(db, id: id, now: now)
                }
                if let name { try MediaIndex.setName(db, name, id: id, now: now) }
                try also?(db)
                try RemoteBlobs.uploadCommitted(db, id)
                return IngestResult(item: try MediaIndex.item(db, id: id)!, status: existing == nil ? .stored : .exists)
            }
        } catch {
            await remote.abandonUpload(id, database: database)
            throw error
        }
    }

    /// Moves the fsynced temp file (if any) into place and records the row, in one transaction.
    private func commit(id: MediaID, size: Int, info: ImageInfo, tmpPath: String?, name: String?,
                        also: (@Sendable (SQLConnection) throws -> Void)? = nil) async throws -> IngestResult {
        let directory = self.directory
        return try await database.write { db in
            let now = Date()
            let blobPath = directory.blobPath(id)
            let existing = try MediaIndex.item(db, id: id)
            // A taken name refuses the upload before its file is moved into place.
            if let name { _ = try MediaIndex.checkName(db, name, id: id) }
            if FileOps.fileSize(blobPath) != size {
                // New blob, or a row whose file went missing: (re)place the file.
                guard let tmpPath else { throw MediaStoreError.io("blob vanished while adding", path: blobPath, errno: ENOENT) }
                let shard = (blobPath as NSString).deletingLastPathComponent
                let newShard = FileOps.fileSize(shard) == nil && !FileManager.default.fileExists(atPath: shard)
                if newShard { try FileOps.makeDirectories(shard) }
                try FileOps.rename(tmpPath, blobPath)
                try FileOps.syncDirectory(shard)
                if newShard { try FileOps.syncDirectory(directory.blobsPath) }
            }
            if existing == nil {
                try MediaIndex.insert(db, id: id, size: size, info: info, now: now)
            } else {
                try MediaIndex.touch(db, id: id, now: now)
            }
            if let name { try MediaIndex.setName(db, name, id: id, now: now) }
            try also?(db)
            return IngestResult(item: try MediaIndex.item(db, id: id)!, status: existing == nil ? .stored : .exists)
        }
    }

    // MARK: Queries

    /// The item for a media id or name.
    public func resolve(_ key: String) async throws -> MediaItem? {
        try await database.read { db in try MediaIndex.resolve(db, key) }
    }

    /// Every stored item, newest first.
    ///
    /// `variants: false` leaves out the variants made from other images (unless named).
    public func list(variants: Bool = true) async throws -> [MediaItem] {
        try await database.read { db in try MediaIndex.all(db, variants: variants) }
    }

    /// Who uses each image (`notification:12`, `campaign:3`), variants' references left out.
    public func references() async throws -> [MediaID: [String]] {
        try await database.read { db in
            var uses: [MediaID: [String]] = [:]
            for row in try SQLRow.fetchAll(db, sql: "SELECT sha256, owner FROM media_refs WHERE owner NOT LIKE 'variant:%' ORDER BY sha256, owner") {
                if let id = MediaID(row["sha256"] as String) { uses[id, default: []].append(row["owner"]) }
            }
            return uses
        }
    }

    /// The item with `id`, or nil when the store has none.
    public func item(_ id: MediaID) async throws -> MediaItem? {
        try await database.read { db in try MediaIndex.item(db, id: id) }
    }

    /// Where blob `id` is (its file, or its `s3://` object), as `media show` reports it.
    public func blobPath(_ id: MediaID) -> String { remote?.location(id) ?? directory.blobPath(id) }

    /// Whether blob `id`'s bytes are still stored (a cache holding a copy checks now and then:
    /// another process may have removed it).
    public func hasBlob(_ id: MediaID) async -> Bool {
        if let remote {
            // A bucket that cannot be asked right now is not evidence that the blob is gone: a
            // cache keeps serving its copy (blobs never change, and a removal waits a minute).
            do { return try await remote.client.head(key: remote.key(id)) != nil } catch { return true }
        }
        return access(directory.blobPath(id), F_OK) == 0
    }

    /// `length` bytes of blob `id` from `offset`, read straight into a buffer (from the file on
    /// the store's thread pool, or by a ranged GET); nil when the blob is gone or shorter.
    public func read(_ id: MediaID, offset: Int = 0, length: Int) async throws -> ByteBuffer? {
        if let remote {
            guard length > 0 else { return ByteBuffer() }
            let body = try await remote.client.get(key: remote.key(id), range: offset...(offset + length - 1), limit: length)
            return body.flatMap { $0.readableBytes == length ? $0 : nil }
        }
        let path = directory.blobPath(id)
        return try await threadPool.runIfActive { FileOps.readRange(path, offset: offset, length: length) }
    }

    // MARK: Variants

    /// Variants of different sources made (or waiting to be made) at once; past it `variant`
    /// throws `busy` (503 with `Retry-After`), so that waiting makers hold a bounded memory.
    public static let maxVariantsInFlight = 8

    /// Variants being made (or waiting to be) now.
    var variantsBeingMade: Int { variantsInFlight.withLockedValue { $0.count } }

    /// The `kind` variant of image `id` (SPEC §16): made on its first request, stored
    /// content-addressed and recorded against its source; the source itself when it already is
    /// that variant. Concurrent first requests in this process make it once; two processes may
    /// both make it, and, the bytes being the same, store one blob.
    public func variant(_ kind: MediaVariant, of id: MediaID) async throws -> MediaItem {
        if let known = try await recordedVariant(kind, of: id) { return known }
        let key = "\(id.hex):\(kind.rawValue)"
        let task = variantsInFlight.withLockedValue { flights -> Task<MediaItem, any Error>? in
            if let running = flights[key] { return running }
            // Each maker holds its source (up to the upload limit) while it waits for the one
            // variant thread: past a few, refuse instead of queueing without bound.
            guard flights.count < Self.maxVariantsInFlight else { return nil }
            let task = Task { try await self.makeVariant(kind, of: id) }
            flights[key] = task
            return task
        }
        guard let task else {
            throw MediaStoreError.busy("\(Self.maxVariantsInFlight) variants are being made; try again in a second")
        }
        defer {
            variantsInFlight.withLockedValue { flights in
                if flights[key] == task { flights[key] = nil } // not a newer maker's
            }
        }
        return try await task.value
    }

    private func recordedVariant(_ kind: MediaVariant, of id: MediaID) async throws -> MediaItem? {
        try await database.read { db in
            guard let hex = try String.fetchOne(db, sql: "SELECT variant FROM media_variants WHERE source = ? AND kind = ?",
                                                arguments: [id.hex, kind.rawValue]),
                  let variant = MediaID(hex) else { return nil }
            return try MediaIndex.item(db, id: variant)
        }
    }

    private func makeVariant(_ kind: MediaVariant, of id: MediaID) async throws -> MediaItem {
        if let known = try await recordedVariant(kind, of: id) { return known }
        guard let source = try await item(id) else { throw MediaStoreError.notFound(id.hex) }
        guard let buffer = try await read(id, length: source.size) else { throw MediaStoreError.notFound(id.hex) }
        let bytes = Array(buffer.readableBytesView)
        let limits = self.limits
        let made = try await DecodePool.variants.runIfActive { () throws -> ([UInt8], MediaID, ImageInfo)? in
            guard let variant = try VariantMaker.make(kind, of: bytes, info: source.info) else { return nil }
            return (variant, MediaID(hashing: variant), try ImageInspector.inspect(variant, limits: limits))
        }
        let record = { @Sendable (db: SQLConnection, variant: MediaID) throws in
            guard try MediaIndex.item(db, id: id) != nil else { throw MediaStoreError.notFound(id.hex) } // removed meanwhile
            if variant != id { try MediaIndex.addReference(db, id: variant, owner: "variant:\(id.hex)") }
            try db.execute(sql: """
                INSERT INTO media_variants (source, kind, variant, createdAt) VALUES (?, ?, ?, ?)
                ON CONFLICT (source, kind) DO UPDATE SET variant = excluded.variant
                """, arguments: [id.hex, kind.rawValue, variant.hex, db.now])
        }
        guard let (variant, variantID, info) = made else {
            // The source is its own variant: recorded too, so it is not read again to find out.
            try await database.write { db in try record(db, id) }
            return source
        }
        // The variant's row, its reference and the record in one transaction: gc never sees it unreferenced.
        return try await store(variant, id: variantID, info: info, name: nil) { db in try record(db, variantID) }.item
    }

    // MARK: Removal

    /// What `remove` did.
    public struct Removal: Sendable {
        /// The name removed, when a name was given.
        public var name: String?
        /// The blob deleted, if it was.
        public var deletedBlob: MediaID?
    }

    /// Removes a name, or a blob with all its names.
    ///
    /// Given a name, the name goes; the blob goes too when nothing else names or references it.
    /// Given an id, the blob and its names go, unless a notification references it.
    public func remove(_ key: String) async throws -> Removal {
        let directory = self.directory
        let remote = self.remote != nil
        return try await database.write { db in
            var removal = Removal()
            guard let item = try MediaIndex.resolve(db, key) else { throw MediaStoreError.notFound(key) }
            var deleteBlob = MediaID(key) != nil
            if !deleteBlob {
                try db.execute(sql: "DELETE FROM media_names WHERE name = ?", arguments: [key])
                removal.name = key
                deleteBlob = item.names.count == 1 && item.references == 0
            }
            if deleteBlob {
                if item.references > 0 { throw MediaStoreError.inUse(item.id.hex, item.references) }
                try Self.delete(db, item.id, directory: directory, remote: remote)
                removal.deletedBlob = item.id
            }
            return removal
        }
    }

    /// Deletes the row and blob of `id`, and its variants that nothing else names or uses
    /// (a variant of a variant too: `depth` bounds the walk).
    private static func delete(_ db: SQLConnection, _ id: MediaID, directory: DataDirectory, remote: Bool, depth: Int = 0) throws {
        let variants = try String.fetchAll(db, sql: "SELECT variant FROM media_variants WHERE source = ?", arguments: [id.hex])
            .compactMap(MediaID.init)
        for variant in Set(variants) where variant != id {
            try MediaIndex.removeReference(db, id: variant, owner: "variant:\(id.hex)")
            if depth < 3, let left = try MediaIndex.item(db, id: variant), left.names.isEmpty, left.references == 0 {
                try delete(db, variant, directory: directory, remote: remote, depth: depth + 1)
            }
        }
        try db.execute(sql: "DELETE FROM media WHERE sha256 = ?", arguments: [id.hex])
        if remote {
            try RemoteBlobs.removed(db, id)
        } else {
            try unlinkBlob(directory, id)
        }
    }

    private static func unlinkBlob(_ directory: DataDirectory, _ id: MediaID) throws {
        let path = directory.blobPath(id)
        if unlink(path) != 0 && errno != ENOENT { throw MediaStoreError.io("cannot remove", path: path, errno: errno) }
        try FileOps.syncDirectory((path as NSString).deletingLastPathComponent)
    }

    // MARK: Verify

    /// One inconsistency found by `verify`.
    public struct Problem: Sendable, CustomStringConvertible {
        /// The blob's path.
        public var path: String
        /// What is wrong with it.
        public var what: String
        public var description: String { "\(path): \(what)" }
    }

    /// Re-hashes every blob and checks rows against files; returns how many blobs were checked and every problem.
    public func verify() async throws -> (checked: Int, problems: [Problem]) {
        if let remote { return try await verifyRemote(remote) }
        let items = try await list()
        let directory = self.directory
        var problems: [Problem] = []
        var known = Set<String>()
        let found = NIOLockedValueBox<[Problem]>([])
        let threadPool = self.threadPool
        await Concurrently.forEach(count: items.count, width: max(2, ProcessInfo.processInfo.activeProcessorCount)) { index in
            let problem: Problem?
            do {
                problem = try await threadPool.runIfActive { Self.check(items[index], directory) }
            } catch {
                problem = Problem(path: directory.blobPath(items[index].id), what: "not checked: \(error)")
            }
            if let problem { found.withLockedValue { $0.append(problem) } }
        }
        problems = found.withLockedValue { $0 }
        for item in items { known.insert(item.id.hex) }
        // Files without rows, and files that are not named like blobs.
        let shards = (try? FileManager.default.contentsOfDirectory(atPath: directory.blobsPath)) ?? []
        for shard in shards.sorted() {
            let shardPath = "\(directory.blobsPath)/\(shard)"
            let files = (try? FileManager.default.contentsOfDirectory(atPath: shardPath)) ?? []
            for file in files.sorted() {
                let path = "\(shardPath)/\(file)"
                if let id = MediaID(file), id.hex == file, file.hasPrefix(shard) {
                    if !known.contains(file) { problems.append(Problem(path: path, what: "file has no row in the index (orphan; `media gc` removes it)")) }
                } else {
                    problems.append(Problem(path: path, what: "not a blob name"))
                }
            }
        }
        problems.sort { $0.path < $1.path }
        return (items.count, problems)
    }

    /// `verify` on a bucket: every object re-hashed by a GET, and every object without a row.
    private func verifyRemote(_ remote: RemoteBlobs) async throws -> (checked: Int, problems: [Problem]) {
        let items = try await list()
        let found = NIOLockedValueBox<[Problem]>([])
        await Concurrently.forEach(count: items.count, width: 8) { index in
            if let what = await remote.check(items[index]) {
                found.withLockedValue { $0.append(Problem(path: remote.location(items[index].id), what: what)) }
            }
        }
        let marked = Set(try await database.read { db in try String.fetchAll(db, sql: "SELECT sha256 FROM media_pending") })
        var problems = found.withLockedValue { $0 }
        for stray in try await remote.strays(known: Set(items.map(\.id.hex)), marked: marked) {
            problems.append(Problem(path: stray.location, what: stray.what))
        }
        problems.sort { $0.path < $1.path }
        return (items.count, problems)
    }

    private static func check(_ item: MediaItem, _ directory: DataDirectory) -> Problem? {
        let path = directory.blobPath(item.id)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return Problem(path: path, what: "missing: the index has a row for it but the file cannot be opened (\(String(cString: strerror(errno))))") }
        defer { close(fd) }
        var hasher = SHA256()
        var size = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return Problem(path: path, what: "read error: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            size += n
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        let actual = MediaID(digest: hasher.finalize())
        if size != item.size { return Problem(path: path, what: "size is \(size) bytes, the index says \(item.size)") }
        if actual != item.id { return Problem(path: path, what: "content hashes to \(actual.hex): the blob is damaged") }
        return nil
    }

    // MARK: Garbage collection

    /// What `collectGarbage` removed.
    public struct CollectionReport: Sendable {
        /// Blobs whose rows and files were deleted.
        public var removed: [MediaID] = []
        /// Bytes freed by those blobs and orphan files.
        public var freedBytes = 0
        /// Files without rows that were deleted.
        public var orphansRemoved = 0
    }

    /// Deletes blobs that nothing names or references and that were last added before `now - grace`,
    /// and orphan files older than the grace.
    public func collectGarbage(grace: TimeInterval, now: Date = Date()) async throws -> CollectionReport {
        let cutoff = now.timeIntervalSince1970 - grace
        let directory = self.directory
        let remote = self.remote
        var report = try await database.write { db in
            var report = CollectionReport()
            let rows = try SQLRow.fetchAll(db, sql: """
                SELECT sha256, size FROM media m
                WHERE touchedAt < ?
                  AND NOT EXISTS (SELECT 1 FROM media_names n WHERE n.sha256 = m.sha256)
                  AND NOT EXISTS (SELECT 1 FROM media_refs r WHERE r.sha256 = m.sha256)
                """, arguments: [cutoff])
            for row in rows {
                guard let id = MediaID(row["sha256"] as String) else { continue }
                try Self.delete(db, id, directory: directory, remote: remote != nil) // its variants go with it
                report.removed.append(id)
                report.freedBytes += row["size"] as Int
            }
            return report
        }
        if let remote {
            // Objects of blobs removed at least a minute ago, and orphans older than the grace.
            let collected = try await remote.collect(database: database, grace: grace, now: now)
            report.freedBytes = collected.bytes
            report.orphansRemoved = collected.ids.filter { !report.removed.contains($0) }.count
            return report
        }
        // Orphans: files with no row, left by a crash between rename and commit.
        let known = Set(try await database.read { db in try String.fetchAll(db, sql: "SELECT sha256 FROM media") })
        let shards = (try? FileManager.default.contentsOfDirectory(atPath: directory.blobsPath)) ?? []
        for shard in shards {
            let shardPath = "\(directory.blobsPath)/\(shard)"
            for file in (try? FileManager.default.contentsOfDirectory(atPath: shardPath)) ?? [] where !known.contains(file) {
                let path = "\(shardPath)/\(file)"
                guard let modified = FileOps.modificationDate(path), modified.timeIntervalSince1970 < cutoff else { continue }
                let size = FileOps.fileSize(path) ?? 0
                // Re-check under the write lock: an ingest may be committing this very blob.
                let removed = try await database.write { db -> Bool in
                    let indexed = try Bool.fetchOne(db, sql: "SELECT 1 FROM media WHERE sha256 = ?", arguments: [file]) ?? false
                    guard !indexed else { return false }
                    return unlink(path) == 0
                }
                if removed {
                    report.orphansRemoved += 1
                    report.freedBytes += size
                }
            }
        }
        return report
    }
}

/// An upload's temp file: written from the thread pool, removed on every path.
final class UploadFile: Sendable {
    let fd: Int32
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    func write(_ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw MediaStoreError.io("cannot write", path: path, errno: errno)
                }
                offset += n
            }
        }
    }

    func sync() throws {
        if fsync(fd) != 0 { throw MediaStoreError.io("cannot fsync", path: path, errno: errno) }
    }

    /// Closes the file and removes it unless a commit already renamed it into place.
    func closeAndRemove() {
        close(fd)
        unlink(path)
    }
}

/// Decoding has threads of its own, one per core: a hostile image keeps at most those busy,
/// and password checks, blob reads and fsyncs on the shared pool go on meanwhile. Uploads
/// beyond its width wait their turn.
enum DecodePool {
    static let shared: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: max(1, System.coreCount))
        pool.start()
        return pool
    }()

    /// Variants are made one at a time: a 40-megapixel source takes some 300 MB while it is
    /// decoded and resampled, and hostile requests for many of them must not add that up.
    static let variants: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()
}

/// Temp files are named `<pid>.<instance>.<counter>…`: the random instance tag tells this
/// process's files from those of an earlier process that had the same pid (in a container,
/// `serve` is pid 1 on every start).
enum TmpName {
    /// This process's random tag.
    static let instance = String(format: "%08x", UInt32.random(in: .min ... .max))
    /// The start of every temp name this process makes.
    static let prefix = "\(getpid()).\(instance)."
}

/// A process-wide counter for unique temp-file names.
final class TmpCounter: Sendable {
    private let value = NIOLockedValueBox(0)
    func next() -> Int { value.withLockedValue { $0 += 1; return $0 } }
}

import NIOConcurrencyHelpers
