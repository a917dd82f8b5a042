import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Opens the data directory's SQLite database: WAL, foreign keys, durable commits, migrations.
public enum StoreDatabase {
    /// Opens (creating when needed) `richpush.sqlite` in `directory` and applies `migrator`.
    ///
    /// Commits are durable (`synchronous=FULL`): a row that was committed survives a crash.
    /// Several processes may open the same file; migrations are serialised by an advisory
    /// lock so that two first starts at once do not race.
    public static func open(_ directory: DataDirectory, migrator: DatabaseMigrator) throws -> DatabasePool {
        try directory.prepare()
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(30)
        configuration.maximumReaderCount = 8
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let lockPath = directory.databasePath + ".migrate-lock"
        let lockFD = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lockFD >= 0 else { throw MediaStoreError.io("cannot open", path: lockPath, errno: errno) }
        defer { close(lockFD) }
        while flock(lockFD, LOCK_EX) != 0 && errno == EINTR {}
        defer { flock(lockFD, LOCK_UN) }
        // SQLite gives the -wal and -shm files the database file's mode: create it owner-only.
        let created = Glibc.open(directory.databasePath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if created >= 0 { close(created) }
        let pool = try DatabasePool(path: directory.databasePath, configuration: configuration)
        try migrator.migrate(pool)
        return pool
    }

    /// A migrator holding every table of the media store.
    public static func mediaMigrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        MediaIndex.registerMigrations(&migrator)
        return migrator
    }
}
