import Crypto
import Foundation
import Resilience
import SQLEngine
import NIOCore
import NIOPosix
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    let threadPool: NIOThreadPool
    private let tmpCounter = TmpCounter()
    /// Variants being made by this process: concurrent first requests wait for one maker.
    let variantsInFlight = NIOLockedValueBox<[String: Task<MediaItem, any Error>]>([:])

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
    /// `also` runs in the transaction that records it, with its id (the audit log's entry).
    public func ingest(file path: String, name: String? = nil,
                       also: (@Sendable (SQLConnection, MediaID) throws -> Void)? = nil) async throws -> IngestResult {
        if let name { try MediaIndex.validateName(name) }
        let limit = limits.maxBytes
        let read = try await threadPool.runIfActive { try FileOps.readFile(path, limit: limit) }
        switch read {
        case .tooLarge(let size):
            throw limits.checkSize(size)!
        case .bytes(let bytes):
            return try await ingest(bytes: bytes, name: name, also: also)
        }
    }

    /// Validates and stores `bytes`; throws `MediaRejection` when refused, leaving nothing behind.
    /// `keepMetadata` overrides the store's limits (a copy between stores keeps every byte).
    /// `also` runs in the transaction that records it, with its id.
    public func ingest(bytes: [UInt8], name: String? = nil, keepMetadata: Bool? = nil,
                       also: (@Sendable (SQLConnection, MediaID) throws -> Void)? = nil) async throws -> IngestResult {
        if let name { try MediaIndex.validateName(name) }
        var limits = self.limits
        if let keepMetadata { limits.keepMetadata = keepMetadata }
        let prepared = try await Self.prepare(bytes, limits: limits)
        var result = try await store(prepared.bytes, id: prepared.id, info: prepared.info, name: name, also: Self.bound(also, to: prepared.id))
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
    func store(_ bytes: [UInt8], id: MediaID, info: ImageInfo, name: String?,
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
    /// on any refusal or error. `also` runs in the transaction that records it, with its id.
    public func ingest(upload chunks: some AsyncSequence<ByteBuffer, any Error>, declaredLength: Int?, name: String? = nil,
                       also: (@Sendable (SQLConnection, MediaID) throws -> Void)? = nil) async throws -> IngestResult {
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
            var result = try await store(prepared.bytes, id: prepared.id, info: prepared.info, name: name, also: Self.bound(also, to: prepared.id))
            result.stripped = prepared.stripped
            return result
        }
        let info = prepared.info
        // The temp file becomes the blob on the file store (synced first); for a bucket it is only
        // read back for the PUT and removed.
        if remote == nil { try await threadPool.runIfActive { try file.sync() } }
        if let remote { return try await commitRemote(remote, id: id, bytes: bytes, info: info, name: name, also: Self.bound(also, to: id)) }
        return try await commit(id: id, size: size, info: info, tmpPath: path, name: name, also: Self.bound(also, to: id))
    }

    /// `also` given the id it is about.
    private static func bound(_ also: (@Sendable (SQLConnection, MediaID) throws -> Void)?, to id: MediaID) -> (@Sendable (SQLConnection) throws -> Void)? {
        guard let also else { return nil }
        return { db in try also(db, id) }
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
}
