import Crypto
import Foundation
import SQLEngine
import NIOCore

/// A `--database` value that cannot be used, saying why.
public struct DatabaseConfigurationError: Error, CustomStringConvertible {
    public let description: String
}

/// Which database a store uses: `sqlite:PATH` (the default is `sqlite:<data>/richpush.sqlite`)
/// or `postgres://USER:PASSWORD@HOST[:PORT]/DATABASE`, as `--database` names it (docs/operations.md#more-than-one-node).
public enum DatabaseLocation: Sendable, Equatable {
    case sqlite(path: String)
    case postgres(url: String)

    /// Parses `--database`.
    public init(_ text: String) throws {
        if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst(7))
            guard !path.isEmpty else { throw DatabaseConfigurationError(description: "--database sqlite:PATH needs a path, got '\(text)'") }
            self = .sqlite(path: path)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            do {
                _ = try PostgresURL(text)
            } catch let error as SQLEngineError {
                throw DatabaseConfigurationError(description: error.message)
            }
            self = .postgres(url: text)
        } else {
            // Only the scheme is repeated: the rest may hold a password.
            let scheme = text.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            throw DatabaseConfigurationError(description: "--database must be sqlite:PATH or postgres://…, got a '\(scheme.prefix(20)):' URL")
        }
    }
}

/// Where a store keeps its blob bytes: `file:DIR` (the data directory's `blobs/`, the default)
/// or an S3 bucket (`s3://BUCKET[/PREFIX]?endpoint=…`), as `--blobs` names it (docs/operations.md#more-than-one-node).
public enum BlobsLocation: Sendable, Equatable {
    /// Files under the data directory.
    case files
    /// Objects in a bucket.
    case s3(S3Location)

    /// Parses `--blobs`: `file:DIR` (only the data directory's own `blobs` for now) or `s3://…`.
    public init(_ text: String, dataPath: String) throws {
        if text.hasPrefix("s3://") {
            self = .s3(try S3Location(text))
        } else if text.hasPrefix("file:") {
            let dir = URL(fileURLWithPath: String(text.dropFirst(5))).standardizedFileURL.path
            let own = URL(fileURLWithPath: dataPath).appendingPathComponent("blobs").standardizedFileURL.path
            guard dir == own else {
                throw S3Error.configuration("--blobs \(text): file blobs live in the data directory (file:\(own)); use --data to move them")
            }
            self = .files
        } else {
            throw S3Error.configuration("--blobs must be file:DIR or s3://BUCKET[/PREFIX]?endpoint=URL, got '\(text)'")
        }
    }
}

/// Blobs in a bucket, keyed as the file layout is (`[PREFIX/]sha256/<first 2 hex>/<64 hex>`).
///
/// A PUT cannot run inside the index's transaction, so ingest and removal agree through
/// `media_pending` instead: an ingest marks the id `uploading` before its PUT and clears the
/// mark when its row is committed; a removal marks it `removed`; `gc` turns a `removed` mark
/// older than a minute (with no row and no upload under way) into `deleting`, deletes the
/// object, then drops the mark, and an ingest waits while an id is `deleting`. Every step is a
/// write transaction, so an upload of the same bytes racing a removal or a collection never ends
/// with a row whose object is gone. Marks of processes that died expire after ten minutes.
struct RemoteBlobs: Sendable {
    let client: S3Client

    /// How long a `removed` mark waits before `gc` may delete the object.
    static let removalGrace: TimeInterval = 60
    /// How long an `uploading` or `deleting` mark holds when its process stopped updating it.
    static let markExpiry: TimeInterval = 600

    func key(_ id: MediaID) -> String {
        "sha256/\(id.hex.prefix(2))/\(id.hex)"
    }

    func location(_ id: MediaID) -> String {
        location(key: key(id))
    }

    /// `s3://BUCKET/[PREFIX/]KEY`, as `media show` and `media verify` name an object.
    func location(key: String) -> String {
        "s3://\(client.location.bucket)/\(client.location.prefix)\(key)"
    }

    /// `media_pending`: one mark per id whose object is being written or removed.
    static let migration = SQLMigration("media-v2-pending", sqlite: """
                CREATE TABLE media_pending (
                    sha256 TEXT PRIMARY KEY NOT NULL CHECK (length(sha256) = 64),
                    state  TEXT NOT NULL CHECK (state IN ('uploading', 'removed', 'deleting')),
                    at     REAL NOT NULL
                ) WITHOUT ROWID;
                """)

    /// Marks `id` as being uploaded, waiting (up to 30 s) while a collection deletes its object.
    func beginUpload(_ id: MediaID, database: SQLDatabase) async throws {
        for _ in 0..<300 {
            let started = try await database.write { db -> Bool in
                let now = db.now
                let mark = try SQLRow.fetchOne(db, sql: "SELECT state, at FROM media_pending WHERE sha256 = ?", arguments: [id.hex])
                if let mark, mark["state"] as String == "deleting", (mark["at"] as Double) > now - Self.markExpiry { return false }
                try db.execute(sql: """
                    INSERT INTO media_pending (sha256, state, at) VALUES (?, 'uploading', ?)
                    ON CONFLICT(sha256) DO UPDATE SET state = 'uploading', at = excluded.at
                    """, arguments: [id.hex, now])
                return true
            }
            if started { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw MediaStoreError.io("the blob is being deleted by media gc; try again", path: location(id), errno: EBUSY)
    }

    /// Clears an upload's mark when its row was not committed (the PUT or the commit failed):
    /// the object, if written, is an orphan for `gc`.
    func abandonUpload(_ id: MediaID, database: SQLDatabase) async {
        _ = try? await database.write { db in
            try db.execute(sql: "UPDATE media_pending SET state = 'removed', at = ? WHERE sha256 = ? AND state = 'uploading'",
                           arguments: [db.now, id.hex])
        }
    }

    /// The object's bytes: PUT with their SHA-256 (the id) as `x-amz-content-sha256`.
    func put(_ id: MediaID, bytes: [UInt8], contentType: String) async throws {
        try await client.put(key: key(id), body: ByteBuffer(bytes: bytes), sha256Hex: id.hex, contentType: contentType)
    }

    /// Inside the commit's transaction: the row is there, the mark goes.
    static func uploadCommitted(_ db: SQLConnection, _ id: MediaID) throws {
        try db.execute(sql: "DELETE FROM media_pending WHERE sha256 = ?", arguments: [id.hex])
    }

    /// Inside a removal's transaction: the row is gone, the object goes at a later `gc`
    /// (unless an upload of the same bytes is under way, whose commit brings the row back).
    static func removed(_ db: SQLConnection, _ id: MediaID) throws {
        try db.execute(sql: """
            INSERT INTO media_pending (sha256, state, at) VALUES (?, 'removed', ?)
            ON CONFLICT(sha256) DO UPDATE SET state = 'removed', at = excluded.at WHERE media_pending.state != 'uploading'
            """, arguments: [id.hex, db.now])
    }

    /// Deletes the objects of removed blobs (marks older than `removalGrace`) and orphan objects
    /// (no row, no mark, older than `grace`). Returns what was deleted and its bytes.
    func collect(database: SQLDatabase, grace: TimeInterval, now: Date) async throws -> (ids: [MediaID], bytes: Int) {
        let objects = try await client.listAll(prefix: "sha256/")
        var listed: [String: (Int, Date?)] = [:]
        for object in objects {
            if let id = Self.id(fromKey: object.key) { listed[id.hex] = (object.size, object.lastModified) }
        }
        let sizes = listed
        // `now` is this machine's time (a test may move it ahead); the marks keep the database's.
        let ahead = now.timeIntervalSince1970 - Date().timeIntervalSince1970
        let claimed: [MediaID] = try await database.write { db in
            let cutoff = db.now + ahead
            var claimed: [MediaID] = []
            let marks = try SQLRow.fetchAll(db, sql: "SELECT sha256, state, at FROM media_pending")
            var marked = Set<String>()
            for mark in marks {
                let hex: String = mark["sha256"], state: String = mark["state"], at: Double = mark["at"]
                marked.insert(hex)
                let expired = at < cutoff - Self.markExpiry
                let due = (state == "removed" && at < cutoff - Self.removalGrace) || (state != "removed" && expired)
                guard due, let id = MediaID(hex), try MediaIndex.item(db, id: id) == nil else { continue }
                try db.execute(sql: "UPDATE media_pending SET state = 'deleting', at = ? WHERE sha256 = ?", arguments: [cutoff, hex])
                claimed.append(id)
            }
            for (hex, (_, modified)) in sizes where !marked.contains(hex) {
                guard let id = MediaID(hex), let modified, modified.timeIntervalSince1970 < cutoff - grace,
                      try MediaIndex.item(db, id: id) == nil else { continue }
                try db.execute(sql: "INSERT INTO media_pending (sha256, state, at) VALUES (?, 'deleting', ?)", arguments: [hex, cutoff])
                claimed.append(id)
            }
            return claimed
        }
        var deleted: [MediaID] = []
        var bytes = 0
        for id in claimed {
            do {
                try await client.delete(key: key(id))
                if let (size, _) = sizes[id.hex] {
                    deleted.append(id)
                    bytes += size
                }
            } catch {
                // Left `deleting`: the next gc takes it again once the mark expires.
                continue
            }
            try await database.write { db in
                try db.execute(sql: "DELETE FROM media_pending WHERE sha256 = ? AND state = 'deleting'", arguments: [id.hex])
            }
        }
        return (deleted, bytes)
    }

    /// Re-hashes `item`'s object: nil when it matches the row, else what is wrong.
    func check(_ item: MediaItem) async -> String? {
        do {
            guard let body = try await client.get(key: key(item.id), limit: item.size + 1) else {
                return "missing: the index has a row for it but the bucket has no object"
            }
            if body.readableBytes != item.size { return "size is \(body.readableBytes) bytes, the index says \(item.size)" }
            let actual = MediaID(digest: body.withUnsafeReadableBytes { SHA256.hash(data: $0) })
            if actual != item.id { return "content hashes to \(actual.hex): the blob is damaged" }
            return nil
        } catch {
            return "not checked: \(error)"
        }
    }

    /// The objects under `sha256/` that no row names: orphans, or not blob names at all.
    func strays(known: Set<String>, marked: Set<String>) async throws -> [(location: String, what: String)] {
        var found: [(String, String)] = []
        for object in try await client.listAll(prefix: "sha256/") {
            let where_ = location(key: object.key)
            guard let id = Self.id(fromKey: object.key) else {
                found.append((where_, "not a blob name"))
                continue
            }
            if !known.contains(id.hex) && !marked.contains(id.hex) {
                found.append((where_, "object has no row in the index (orphan; `media gc` removes it)"))
            }
        }
        return found
    }

    /// The id of a key laid out as `sha256/ab/ab…`, or nil.
    static func id(fromKey key: String) -> MediaID? {
        let parts = key.split(separator: "/")
        guard parts.count == 3, parts[0] == "sha256", let id = MediaID(String(parts[2])), id.hex == parts[2], parts[2].hasPrefix(parts[1]),
              parts[1].count == 2 else { return nil }
        return id
    }
}
