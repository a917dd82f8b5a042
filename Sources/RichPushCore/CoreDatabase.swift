import GRDB
import MediaStore

/// The whole schema of a RichPush data directory: media tables plus users, registrations,
/// notifications and their push deliveries (the outbox).
public enum CoreDatabase {
    /// A migrator with every table, media first.
    public static func migrator() -> DatabaseMigrator {
        var migrator = StoreDatabase.mediaMigrator()
        migrator.registerMigration("core-v1") { db in
            try db.execute(sql: """
                CREATE TABLE users (
                    name         TEXT PRIMARY KEY NOT NULL,
                    passwordHash TEXT NOT NULL,
                    createdAt    REAL NOT NULL
                );
                CREATE TABLE meta (
                    key   TEXT PRIMARY KEY NOT NULL,
                    value INTEGER NOT NULL
                );
                INSERT INTO meta (key, value) VALUES ('usersEpoch', 0);
                CREATE TABLE registrations (
                    id        TEXT PRIMARY KEY NOT NULL,
                    username  TEXT NOT NULL,
                    platform  TEXT,
                    handle    TEXT,
                    tags      TEXT NOT NULL DEFAULT '[]',
                    createdAt REAL NOT NULL,
                    updatedAt REAL NOT NULL
                );
                CREATE INDEX registrations_username ON registrations(username);
                CREATE UNIQUE INDEX registrations_handle ON registrations(platform, handle) WHERE handle IS NOT NULL;
                CREATE TABLE notifications (
                    id        INTEGER PRIMARY KEY AUTOINCREMENT,
                    recipient TEXT NOT NULL,
                    message   TEXT NOT NULL,
                    richType  TEXT NOT NULL,
                    payload   TEXT NOT NULL REFERENCES media(sha256),
                    push      BLOB NOT NULL,
                    read      INTEGER NOT NULL DEFAULT 0,
                    createdAt REAL NOT NULL,
                    readAt    REAL
                );
                CREATE INDEX notifications_recipient ON notifications(recipient, id DESC);
                CREATE TABLE deliveries (
                    id             INTEGER PRIMARY KEY AUTOINCREMENT,
                    notificationId INTEGER NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
                    registrationId TEXT,
                    target         TEXT NOT NULL,
                    state          TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),
                    attempts       INTEGER NOT NULL DEFAULT 0,
                    reason         TEXT,
                    pushId         TEXT NOT NULL,
                    nextAttemptAt  REAL NOT NULL,
                    createdAt      REAL NOT NULL,
                    updatedAt      REAL NOT NULL
                );
                CREATE INDEX deliveries_due ON deliveries(state, nextAttemptAt);
                CREATE INDEX deliveries_notification ON deliveries(notificationId);
                """)
        }
        migrator.registerMigration("core-v2-leases") { db in
            try db.execute(sql: "ALTER TABLE deliveries ADD COLUMN leasedBy INTEGER")
        }
        return migrator
    }

    /// Opens a data directory with the whole schema.
    public static func open(_ directory: DataDirectory) throws -> DatabasePool {
        try StoreDatabase.open(directory, migrator: migrator())
    }
}
