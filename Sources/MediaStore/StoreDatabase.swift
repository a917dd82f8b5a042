import Foundation
import SQLEngine

/// Opens a data directory's database: the SQLite file in the directory (WAL, foreign keys,
/// durable commits), or the PostgreSQL server `--database` names, with migrations applied.
public enum StoreDatabase {
    /// Opens (creating when needed) the database of `directory` and applies `migrations`:
    /// `richpush.sqlite` in the directory (or the file `--database sqlite:PATH` names), or the
    /// PostgreSQL database of `postgres`.
    ///
    /// SQLite commits are durable (`synchronous=FULL`). Several processes may open the same
    /// store; migrations are serialised (a file lock, PostgreSQL's advisory lock) so that two
    /// first starts at once do not race.
    public static func open(_ directory: DataDirectory, migrations: [SQLMigration], postgres: String? = nil) throws -> SQLDatabase {
        try directory.prepare()
        if let postgres {
            return try SQLDatabase.openPostgres(url: postgres, migrations: migrations)
        }
        return try SQLDatabase.openSQLite(path: directory.databasePath, migrations: migrations)
    }

    /// Every table of the media store.
    public static var mediaMigrations: [SQLMigration] { MediaIndex.migrations }
}
