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

extension MediaStore {
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
    /// Given an id, the blob and its names go, unless a notification references it. `also` runs in
    /// the same transaction, with the image's id (the audit log's entry).
    public func remove(_ key: String, also: (@Sendable (SQLConnection, MediaID) throws -> Void)? = nil) async throws -> Removal {
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
            try also?(db, item.id)
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
