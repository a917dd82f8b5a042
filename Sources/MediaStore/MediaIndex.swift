import Foundation
import SQLEngine

/// A stored image as the index knows it.
public struct MediaItem: Sendable, Equatable {
    /// SHA-256 of the bytes.
    public var id: MediaID
    /// Size in bytes.
    public var size: Int
    /// Type and dimensions from the decode.
    public var info: ImageInfo
    /// When the blob was first stored.
    public var createdAt: Date
    /// When it was last stored or re-added (gc's grace counts from here).
    public var touchedAt: Date
    /// Names pointing at it.
    public var names: [String]
    /// How many other records (notifications) reference it.
    public var references: Int
}

/// SQL over the `media`, `media_names` and `media_refs` tables. Functions take a `SQLConnection`
/// so callers can compose them into their own transactions.
public enum MediaIndex {
    /// The media tables' migrations.
    public static let migrations: [SQLMigration] = [
        SQLMigration("media-v1", sqlite: """
                CREATE TABLE media (
                    sha256      TEXT PRIMARY KEY NOT NULL CHECK (length(sha256) = 64),
                    size        INTEGER NOT NULL CHECK (size > 0),
                    contentType TEXT NOT NULL,
                    width       INTEGER NOT NULL,
                    height      INTEGER NOT NULL,
                    bitDepth    INTEGER NOT NULL,
                    colorModel  TEXT NOT NULL,
                    interlaced  INTEGER NOT NULL,
                    createdAt   REAL NOT NULL,
                    touchedAt   REAL NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE media_names (
                    name      TEXT PRIMARY KEY NOT NULL,
                    sha256    TEXT NOT NULL REFERENCES media(sha256) ON DELETE CASCADE,
                    createdAt REAL NOT NULL
                );
                CREATE INDEX media_names_sha256 ON media_names(sha256);
                CREATE TABLE media_refs (
                    sha256    TEXT NOT NULL REFERENCES media(sha256) ON DELETE RESTRICT,
                    owner     TEXT NOT NULL,
                    createdAt REAL NOT NULL,
                    PRIMARY KEY (sha256, owner)
                ) WITHOUT ROWID;
                """),
        RemoteBlobs.migration,
        // Variants (docs/configuration.md#the-media-store): each is a media row and blob of its own, kept from gc by a
        // `variant:<source>` reference, and found here by its source and kind.
        SQLMigration("media-v3-variants", sqlite: """
                CREATE TABLE media_variants (
                    source    TEXT NOT NULL REFERENCES media(sha256) ON DELETE CASCADE,
                    kind      TEXT NOT NULL,
                    variant   TEXT NOT NULL,
                    createdAt REAL NOT NULL,
                    PRIMARY KEY (source, kind)
                ) WITHOUT ROWID;
                CREATE INDEX media_variants_variant ON media_variants(variant);
                """),
    ]

    /// Checks that `name` can be used as a media name.
    public static func validateName(_ name: String) throws {
        if name.isEmpty { throw MediaStoreError.invalidName(name, "it is empty") }
        if name.utf8.count > 255 { throw MediaStoreError.invalidName(name, "longer than 255 bytes") }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw MediaStoreError.invalidName(name, "it contains control characters")
        }
        if MediaID(name) != nil { throw MediaStoreError.invalidName(name, "64 hex digits would read as a media id") }
    }

    /// The item with `id`, or nil.
    public static func item(_ db: SQLConnection, id: MediaID) throws -> MediaItem? {
        guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM media WHERE sha256 = ?", arguments: [id.hex]) else {
            return nil
        }
        return try item(db, row: row)
    }

    /// Resolves a media id or a name.
    public static func resolve(_ db: SQLConnection, _ key: String) throws -> MediaItem? {
        if let id = MediaID(key) { return try item(db, id: id) }
        guard let hex = try String.fetchOne(db, sql: "SELECT sha256 FROM media_names WHERE name = ?", arguments: [key]),
              let id = MediaID(hex) else { return nil }
        return try item(db, id: id)
    }

    /// Every item, newest first; without the unnamed variants of other images unless `variants`.
    public static func all(_ db: SQLConnection, variants: Bool = true) throws -> [MediaItem] {
        let filter = variants ? "" : """
            WHERE NOT EXISTS (SELECT 1 FROM media_variants v WHERE v.variant = m.sha256 AND v.source <> m.sha256)
               OR EXISTS (SELECT 1 FROM media_names n WHERE n.sha256 = m.sha256)
            """
        return try SQLRow.fetchAll(db, sql: "SELECT * FROM media m \(filter) ORDER BY createdAt DESC, sha256").map { try item(db, row: $0) }
    }

    /// Records that `owner` (e.g. `notification:12`) uses the media, so gc keeps it.
    public static func addReference(_ db: SQLConnection, id: MediaID, owner: String, now: Date = Date()) throws {
        try db.execute(
            sql: "INSERT INTO media_refs (sha256, owner, createdAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            arguments: [id.hex, owner, now.timeIntervalSince1970])
    }

    /// Drops `owner`'s reference.
    public static func removeReference(_ db: SQLConnection, id: MediaID, owner: String) throws {
        try db.execute(sql: "DELETE FROM media_refs WHERE sha256 = ? AND owner = ?", arguments: [id.hex, owner])
    }

    static func item(_ db: SQLConnection, row: SQLRow) throws -> MediaItem {
        let hex: String = row["sha256"]
        guard let id = MediaID(hex) else { throw MediaStoreError.notFound(hex) }
        let names = try String.fetchAll(db, sql: "SELECT name FROM media_names WHERE sha256 = ? ORDER BY name", arguments: [hex])
        let refs = try Int.fetchOne(db, sql: "SELECT count(*) FROM media_refs WHERE sha256 = ?", arguments: [hex]) ?? 0
        return MediaItem(
            id: id, size: row["size"],
            info: ImageInfo(contentType: row["contentType"], width: row["width"], height: row["height"],
                            bitDepth: row["bitDepth"], colorModel: row["colorModel"], interlaced: row["interlaced"]),
            createdAt: Date(timeIntervalSince1970: row["createdAt"]),
            touchedAt: Date(timeIntervalSince1970: row["touchedAt"]),
            names: names, references: refs)
    }

    static func insert(_ db: SQLConnection, id: MediaID, size: Int, info: ImageInfo, now: Date) throws {
        try db.execute(
            sql: """
                INSERT INTO media (sha256, size, contentType, width, height, bitDepth, colorModel, interlaced, createdAt, touchedAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [id.hex, size, info.contentType, info.width, info.height, info.bitDepth, info.colorModel,
                        info.interlaced, now.timeIntervalSince1970, now.timeIntervalSince1970])
    }

    static func touch(_ db: SQLConnection, id: MediaID, now: Date) throws {
        try db.execute(sql: "UPDATE media SET touchedAt = ? WHERE sha256 = ?", arguments: [now.timeIntervalSince1970, id.hex])
    }

    /// True when `name` is free, false when it already names `id`; throws when it names other bytes.
    static func checkName(_ db: SQLConnection, _ name: String, id: MediaID) throws -> Bool {
        guard let current = try String.fetchOne(db, sql: "SELECT sha256 FROM media_names WHERE name = ?", arguments: [name]) else {
            return true
        }
        guard current == id.hex else { throw MediaStoreError.nameTaken(name, by: current) }
        return false
    }

    /// Points `name` at `id`; refuses a name that already names other bytes (a name is moved
    /// only by removing it first, so nobody can silently change what a name shows).
    static func setName(_ db: SQLConnection, _ name: String, id: MediaID, now: Date) throws {
        guard try checkName(db, name, id: id) else { return }
        try db.execute(sql: "INSERT INTO media_names (name, sha256, createdAt) VALUES (?, ?, ?)",
                       arguments: [name, id.hex, now.timeIntervalSince1970])
    }
}
