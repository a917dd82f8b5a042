import SQLEngine
import MediaStore

/// The whole schema of a RichPush data directory: media tables plus users, registrations,
/// notifications and their push deliveries (the outbox).
public enum CoreDatabase {
    /// Every table's migrations, media first.
    public static let migrations: [SQLMigration] = StoreDatabase.mediaMigrations + [
        SQLMigration("core-v1", sqlite: """
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
                """),
        SQLMigration("core-v2-leases", sqlite: "ALTER TABLE deliveries ADD COLUMN leasedBy INTEGER"),
        SQLMigration("core-v3-campaigns", sqlite: """
                ALTER TABLE users ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;
                INSERT INTO meta (key, value) VALUES ('sessionsEpoch', 0);
                CREATE TABLE settings (
                    key   TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                );
                CREATE TABLE sessions (
                    tokenHash BLOB PRIMARY KEY NOT NULL,
                    username  TEXT NOT NULL,
                    createdAt REAL NOT NULL,
                    expiresAt REAL NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX sessions_username ON sessions(username);
                CREATE TABLE campaigns (
                    id         INTEGER PRIMARY KEY AUTOINCREMENT,
                    audience   TEXT NOT NULL,
                    message    TEXT NOT NULL,
                    title      TEXT,
                    richType   TEXT NOT NULL,
                    payload    TEXT NOT NULL REFERENCES media(sha256),
                    mode       TEXT NOT NULL CHECK (mode IN ('alert', 'silent')),
                    createdBy  TEXT NOT NULL,
                    recipients INTEGER NOT NULL DEFAULT 0,
                    devices    INTEGER NOT NULL DEFAULT 0,
                    cursor     TEXT,
                    queued     INTEGER NOT NULL DEFAULT 0,
                    queuedBy   INTEGER,
                    createdAt  REAL NOT NULL
                );
                ALTER TABLE notifications ADD COLUMN campaignId INTEGER REFERENCES campaigns(id);
                ALTER TABLE notifications ADD COLUMN title TEXT;
                ALTER TABLE notifications ADD COLUMN mode TEXT NOT NULL DEFAULT 'silent';
                CREATE INDEX notifications_campaign ON notifications(campaignId, read) WHERE campaignId IS NOT NULL;
                ALTER TABLE deliveries ADD COLUMN campaignId INTEGER;
                CREATE INDEX deliveries_campaign ON deliveries(campaignId, state) WHERE campaignId IS NOT NULL;
                """),
        // A lease names its holder by a random tag as well as a pid: in a container every
        // start is pid 1, and a pid alone cannot tell this process from the one before.
        SQLMigration("core-v4-lease-tags", sqlite: "ALTER TABLE deliveries ADD COLUMN leaseTag INTEGER"),
        // Every deleted registration, whoever deleted it (users rm in another process, a 410,
        // a device moving its token), so that `serve` can remove its hub installation too.
        SQLMigration("core-v5-mirror-deletions", sqlite: """
                CREATE TABLE mirror_deletions (
                    registrationId TEXT PRIMARY KEY NOT NULL,
                    createdAt      REAL NOT NULL
                );
                CREATE TRIGGER registrations_mirror_deletions AFTER DELETE ON registrations BEGIN
                    INSERT OR REPLACE INTO mirror_deletions (registrationId, createdAt)
                    VALUES (old.id, (julianday('now') - 2440587.5) * 86400.0);
                END;
                """, postgres: """
                CREATE TABLE mirror_deletions (
                    registrationId TEXT COLLATE "C" PRIMARY KEY NOT NULL,
                    createdAt      DOUBLE PRECISION NOT NULL
                );
                CREATE FUNCTION registrations_mirror_deletions() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO mirror_deletions (registrationId, createdAt) VALUES (OLD.id, extract(epoch FROM clock_timestamp()))
                    ON CONFLICT (registrationId) DO UPDATE SET createdAt = excluded.createdAt;
                    RETURN OLD;
                END $$;
                CREATE TRIGGER registrations_mirror_deletions AFTER DELETE ON registrations
                    FOR EACH ROW EXECUTE FUNCTION registrations_mirror_deletions();
                """),
        // Dispatchers say they are alive here, so that a node can take back the leases of a
        // node that died (a pid means nothing across machines).
        SQLMigration("core-v6-outbox-holders", sqlite: """
                CREATE TABLE outbox_holders (
                    tag    INTEGER PRIMARY KEY NOT NULL,
                    pid    INTEGER NOT NULL,
                    host   TEXT NOT NULL,
                    seenAt REAL NOT NULL
                );
                """),
        // docs/delivery.md#android-fcm-http-v1-and-browsers-web-push: a delivery names its device's platform (NULL: APNs, or a hub's tag), and a
        // notification keeps its payload URL for the platforms whose pushes carry it in both modes.
        SQLMigration("core-v7-platforms", sqlite: """
                ALTER TABLE deliveries ADD COLUMN platform TEXT;
                ALTER TABLE notifications ADD COLUMN richUrl TEXT;
                """),
        // docs/api.md#apps-and-api-keys: a registration belongs to one app (those made before apps belong to
        // `default`), a delivery goes out with its app's credentials, a campaign may be for one
        // app; API keys for servers, kept as the SHA-256 of the key alone.
        SQLMigration("core-v8-apps", sqlite: """
                ALTER TABLE registrations ADD COLUMN app TEXT NOT NULL DEFAULT 'default';
                ALTER TABLE deliveries ADD COLUMN app TEXT;
                ALTER TABLE campaigns ADD COLUMN app TEXT;
                CREATE TABLE api_keys (
                    name       TEXT PRIMARY KEY NOT NULL,
                    hash       BLOB NOT NULL UNIQUE,
                    scope      TEXT NOT NULL CHECK (scope IN ('send', 'read', 'admin')),
                    app        TEXT,
                    createdAt  REAL NOT NULL,
                    lastUsedAt REAL
                );
                """),
        // docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: users' time zones and locales; campaigns scheduled (sendAt), at each
        // recipient's local time (atLocalTime and onLocalDate, as PostgreSQL reserves LOCALTIME;
        // queued zone by zone, each zone's progress in campaign_zones), cancelled, with
        // per-locale content, and leased by the one node that queues them;
        // Idempotency-Key answers, kept 24 h.
        SQLMigration("core-v9-schedules", sqlite: """
                ALTER TABLE users ADD COLUMN timezone TEXT;
                ALTER TABLE users ADD COLUMN locale TEXT;
                CREATE INDEX users_timezone ON users(timezone, name);
                ALTER TABLE campaigns ADD COLUMN sendAt REAL;
                ALTER TABLE campaigns ADD COLUMN atLocalTime TEXT;
                ALTER TABLE campaigns ADD COLUMN onLocalDate TEXT;
                ALTER TABLE campaigns ADD COLUMN cancelledAt REAL;
                ALTER TABLE campaigns ADD COLUMN content TEXT;
                ALTER TABLE campaigns ADD COLUMN defaultLocale TEXT;
                ALTER TABLE campaigns ADD COLUMN leaseUntil REAL;
                ALTER TABLE campaigns ADD COLUMN zonesCheckedAt REAL;
                CREATE TABLE campaign_zones (
                    campaignId INTEGER NOT NULL,
                    zone       TEXT NOT NULL,
                    dueAt      REAL NOT NULL,
                    cursor     TEXT NOT NULL DEFAULT '',
                    queued     INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (campaignId, zone)
                );
                CREATE TABLE idempotency_keys (
                    owner     TEXT NOT NULL,
                    route     TEXT NOT NULL,
                    key       TEXT NOT NULL,
                    bodyHash  BLOB NOT NULL,
                    resource  INTEGER NOT NULL,
                    createdAt REAL NOT NULL,
                    PRIMARY KEY (owner, route, key)
                );
                CREATE INDEX idempotency_keys_created ON idempotency_keys(createdAt);
                """),
        // docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: opened as the device reports it (displayed is the first fetch, `read`);
        // counters per campaign, minute and platform, and failure reasons, kept as pushes happen;
        // the webhook event queue, and each webhook's place in it.
        SQLMigration("core-v10-insight", sqlite: """
                ALTER TABLE notifications ADD COLUMN openedAt REAL;
                ALTER TABLE campaigns ADD COLUMN doneAt REAL;
                CREATE TABLE campaign_stats (
                    campaignId INTEGER NOT NULL,
                    minute     INTEGER NOT NULL,
                    platform   TEXT NOT NULL,
                    sent       INTEGER NOT NULL DEFAULT 0,
                    failed     INTEGER NOT NULL DEFAULT 0,
                    displayed  INTEGER NOT NULL DEFAULT 0,
                    opened     INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (campaignId, minute, platform)
                );
                CREATE TABLE campaign_failures (
                    campaignId INTEGER NOT NULL,
                    reason     TEXT NOT NULL,
                    n          INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (campaignId, reason)
                );
                CREATE TABLE events (
                    id             INTEGER PRIMARY KEY AUTOINCREMENT,
                    type           TEXT NOT NULL,
                    at             REAL NOT NULL,
                    campaignId     INTEGER,
                    notificationId INTEGER,
                    recipient      TEXT,
                    platform       TEXT,
                    reason         TEXT
                );
                CREATE INDEX events_at ON events(at);
                CREATE TABLE webhooks (
                    id            INTEGER PRIMARY KEY AUTOINCREMENT,
                    url           TEXT NOT NULL,
                    events        TEXT NOT NULL,
                    secret        TEXT NOT NULL,
                    createdAt     REAL NOT NULL,
                    cursor        INTEGER NOT NULL DEFAULT 0,
                    attempts      INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt REAL NOT NULL DEFAULT 0,
                    leaseUntil    REAL,
                    delivered     INTEGER NOT NULL DEFAULT 0,
                    dropped       INTEGER NOT NULL DEFAULT 0,
                    lastError     TEXT
                );
                """),
        // docs/api.md#options-badges-and-paced-sends: platform options and the badge, stored as JSON; a campaign's pace, and when each
        // paced push is due (its life counts from then).
        SQLMigration("core-v11-options", sqlite: """
                ALTER TABLE notifications ADD COLUMN options TEXT;
                ALTER TABLE campaigns ADD COLUMN options TEXT;
                ALTER TABLE campaigns ADD COLUMN ratePerMinute INTEGER;
                ALTER TABLE campaigns ADD COLUMN paceNextAt REAL;
                ALTER TABLE deliveries ADD COLUMN dueAt REAL;
                """),
        // Issue #28: a campaign made from here on has every sent, failed and displayed in its
        // campaign_stats (kept since core-v10), so its progress sums a few counter rows instead
        // of counting its whole audience; earlier campaigns keep being counted row by row.
        SQLMigration("core-v12-progress", sqlite: """
                ALTER TABLE campaigns ADD COLUMN countedInStats INTEGER NOT NULL DEFAULT 0;
                """),
        // Issue #28: pushes queued (a hub's are one per user, not per device), from which a
        // large campaign's pending is told without counting its rows; NULL for earlier ones.
        SQLMigration("core-v13-pushes", sqlite: """
                ALTER TABLE campaigns ADD COLUMN pushes INTEGER;
                """),
        // Issue #28: the due index holds pending pushes only. Every query that reads it asks
        // for pending ones, and a push recorded sent or failed now leaves it (one entry removed)
        // instead of moving to the 'sent' end of it (removed and added), where a million sent
        // pushes stayed for good. Claims, records and queueing each took 15-25% less time in
        // SQLite (200,000 rows, bench figures in BENCHMARKS.md, session 19). PostgreSQL's
        // index names `id` too: its claims order by it, and PostgreSQL appends no row id. There
        // the new index is built before the old one is dropped: other nodes keep reading the
        // outbox while it is built (writes wait, as for any index build), and the drop's
        // exclusive lock is held only until the commit that follows it.
        SQLMigration("core-v14-due-pending", sqlite: """
                DROP INDEX deliveries_due;
                CREATE INDEX deliveries_due ON deliveries(nextAttemptAt) WHERE state = 'pending';
                """, postgres: """
                CREATE INDEX deliveries_due_pending ON deliveries(nextAttemptAt, id) WHERE state = 'pending';
                DROP INDEX deliveries_due;
                ALTER INDEX deliveries_due_pending RENAME TO deliveries_due;
                """),
        // Issue #50: notifications removed (a cancelled campaign's unsent ones, a removed
        // user's), so that every node drops them from its payload index and stops serving their
        // payloads within a second; kept a day. A campaign's locale names apart from its
        // content, so that listing and polling campaigns never decodes their content.
        SQLMigration("core-v15-removals", sqlite: """
                CREATE TABLE notification_removals (
                    notificationId INTEGER NOT NULL,
                    at             REAL NOT NULL
                );
                CREATE INDEX notification_removals_at ON notification_removals(at);
                ALTER TABLE campaigns ADD COLUMN localeNames TEXT;
                """),
        // docs/api.md#attributes-devices-versions-and-topics: a user's attributes as one JSON
        // object on their row (read and written whole; NULL: none), so that they go with the
        // account; who follows which topic, keyed by user (a user's list, the cap) and indexed by
        // topic (its followers); what a device last said of its app and OS, and the hour it was
        // last seen (the start of the hour, UTC: a device's registrations are not tracked closer).
        // The column is `username`, as in registrations: USER is reserved in PostgreSQL. The
        // PostgreSQL script is the derived one (TEXT COLLATE "C", DOUBLE PRECISION, no WITHOUT ROWID).
        SQLMigration("core-v16-audiences", sqlite: """
                ALTER TABLE users ADD COLUMN attributes TEXT;
                CREATE TABLE topics (
                    username  TEXT NOT NULL,
                    topic     TEXT NOT NULL,
                    createdAt REAL NOT NULL,
                    PRIMARY KEY (username, topic)
                ) WITHOUT ROWID;
                CREATE INDEX topics_topic ON topics(topic, username);
                ALTER TABLE registrations ADD COLUMN appVersion TEXT;
                ALTER TABLE registrations ADD COLUMN osVersion TEXT;
                ALTER TABLE registrations ADD COLUMN lastSeen REAL;
                """),
        // docs/api.md#segments: saved filters by name (the filter's JSON; its creator kept when
        // it is saved again). A device's appVersion in a form whose byte order is version order
        // (AppVersionKey; '' for a version that does not start with a number), written with it,
        // so that both engines compare versions as text; devices that reported a version before
        // this get theirs from RegistrationStore.fillAppVersionKeys when a server starts, found
        // through registrations_unkeyed (empty once they are done). Selecting by device reads
        // registrations by platform, app, version key and hour last seen, each with the user,
        // so that PostgreSQL may join on them and SQLite probe each user's devices in the index.
        // The PostgreSQL script is the derived one (TEXT COLLATE "C": keys compare byte for byte).
        SQLMigration("core-v17-segments", sqlite: """
                CREATE TABLE segments (
                    name      TEXT PRIMARY KEY NOT NULL,
                    filter    TEXT NOT NULL,
                    createdBy TEXT,
                    updatedAt REAL NOT NULL
                );
                ALTER TABLE registrations ADD COLUMN appVersionKey TEXT;
                CREATE INDEX registrations_platform ON registrations(platform, username);
                CREATE INDEX registrations_app ON registrations(app, username);
                CREATE INDEX registrations_app_version ON registrations(appVersionKey, username);
                CREATE INDEX registrations_last_seen ON registrations(lastSeen, username);
                CREATE INDEX registrations_unkeyed ON registrations(id) WHERE appVersion IS NOT NULL AND appVersionKey IS NULL;
                """),
        // On PostgreSQL the attributes' JSON text parsed once, when written (a stored generated
        // column), so that a segment's count does not parse every user's text at every read
        // (bench/segments.sh: the cast per row was most of a 1,000,000-user count). SQLite reads
        // its JSON text in place with json_extract: nothing to do there.
        SQLMigration("core-v18-attributes-jsonb", sqlite: "", postgres: """
                ALTER TABLE users ADD COLUMN attributes_json jsonb GENERATED ALWAYS AS (attributes::jsonb) STORED;
                """),
        // docs/api.md#change-or-take-back-what-was-sent: what a push of the outbox is (NULL: the
        // notification's own; `update`, `update-alert`: its changed content to a device that got
        // it; `retract`: the background push that takes it back) and, for a retraction, the
        // notifications it takes back (several, when a device's background pushes were
        // coalesced) and the text browsers show instead, as JSON (`RetractionExtra`). Who sent a
        // notification (a user or a key's name; NULL for a campaign's, whose creator is the
        // campaign's), when it was changed and when taken back (NULL: never); the same times for
        // a campaign. The counts of replacement and retract pushes sent. A device's
        // retractions by due time, to keep its background pushes within two an hour; the
        // revisions that wait for a push in flight (`Revisions.waitsForInFlight`), by notification.
        SQLMigration("core-v19-change-retract", sqlite: """
                ALTER TABLE deliveries ADD COLUMN kind TEXT;
                ALTER TABLE deliveries ADD COLUMN extra TEXT;
                ALTER TABLE notifications ADD COLUMN sender TEXT;
                ALTER TABLE notifications ADD COLUMN changedAt REAL;
                ALTER TABLE notifications ADD COLUMN retractedAt REAL;
                ALTER TABLE campaigns ADD COLUMN changedAt REAL;
                ALTER TABLE campaigns ADD COLUMN retractedAt REAL;
                ALTER TABLE campaign_stats ADD COLUMN updated INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE campaign_stats ADD COLUMN retracted INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX deliveries_retractions ON deliveries(target, dueAt) WHERE kind = 'retract';
                CREATE INDEX deliveries_waiting ON deliveries(notificationId) WHERE reason = 'waits for the push before it, in flight';
                """),
        SQLMigration("core-v20-live-activities", sqlite: """
                CREATE TABLE activity_start_tokens (
                    registrationId TEXT NOT NULL REFERENCES registrations(id) ON DELETE CASCADE,
                    type           TEXT NOT NULL,
                    token          TEXT NOT NULL,
                    updatedAt      REAL NOT NULL,
                    PRIMARY KEY (registrationId, type)
                );
                CREATE INDEX activity_start_tokens_type ON activity_start_tokens(type, registrationId);
                CREATE TABLE live_activities (
                    id            TEXT PRIMARY KEY NOT NULL,
                    type          TEXT NOT NULL,
                    app           TEXT NOT NULL,
                    state         TEXT NOT NULL CHECK (state IN ('active', 'ended')),
                    channelId     TEXT,
                    attributes    TEXT NOT NULL,
                    contentState  TEXT NOT NULL,
                    staleDate     REAL,
                    devices       INTEGER NOT NULL,
                    updates       INTEGER NOT NULL,
                    failures      INTEGER NOT NULL,
                    lastUpdate    REAL,
                    lastTimestamp INTEGER NOT NULL,
                    createdAt     REAL NOT NULL,
                    endedAt       REAL,
                    createdBy     TEXT NOT NULL
                );
                CREATE INDEX live_activities_created ON live_activities(createdAt);
                CREATE TABLE activity_devices (
                    activityId     TEXT NOT NULL REFERENCES live_activities(id) ON DELETE CASCADE,
                    registrationId TEXT NOT NULL,
                    platform       TEXT NOT NULL,
                    updateToken    TEXT,
                    PRIMARY KEY (activityId, registrationId)
                );
                CREATE TABLE activity_events (
                    id         INTEGER PRIMARY KEY AUTOINCREMENT,
                    activityId TEXT NOT NULL REFERENCES live_activities(id) ON DELETE CASCADE,
                    event      TEXT NOT NULL,
                    timestamp  INTEGER NOT NULL,
                    priority   INTEGER NOT NULL,
                    apns       BLOB NOT NULL,
                    twin       BLOB NOT NULL,
                    createdAt  REAL NOT NULL
                );
                CREATE INDEX activity_events_activity ON activity_events(activityId, timestamp);
                CREATE TABLE activity_pushes (
                    id             INTEGER PRIMARY KEY AUTOINCREMENT,
                    eventId        INTEGER NOT NULL REFERENCES activity_events(id) ON DELETE CASCADE,
                    activityId     TEXT NOT NULL,
                    lane           TEXT NOT NULL,
                    registrationId TEXT,
                    platform       TEXT NOT NULL,
                    app            TEXT NOT NULL,
                    target         TEXT NOT NULL,
                    timestamp      INTEGER NOT NULL,
                    state          TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),
                    attempts       INTEGER NOT NULL,
                    reason         TEXT,
                    pushId         TEXT NOT NULL,
                    nextAttemptAt  REAL NOT NULL,
                    leasedBy       INTEGER,
                    leaseTag       INTEGER,
                    createdAt      REAL NOT NULL,
                    updatedAt      REAL NOT NULL
                );
                CREATE INDEX activity_pushes_due ON activity_pushes(state, nextAttemptAt);
                CREATE INDEX activity_pushes_lane ON activity_pushes(activityId, lane, timestamp);
                CREATE INDEX activity_pushes_event ON activity_pushes(eventId);
                """),
    ] + guardrailMigrations + operatorMigrations + traceMigrations + hotPathMigrations

    /// Opens a data directory with the whole schema (on PostgreSQL when `postgres` is given).
    static func open(_ directory: DataDirectory, postgres: String? = nil) throws -> SQLDatabase {
        try StoreDatabase.open(directory, migrations: migrations, postgres: postgres)
    }
}

/// Small named values shared by every process on a data directory (the public URL `serve`
/// announces, so that `richpush send` signs payload URLs devices can reach).
public struct SettingsStore: Sendable {
    /// The database.
    let database: SQLDatabase

    /// Creates the store over a database opened with `CoreDatabase`.
    init(database: SQLDatabase) {
        self.database = database
    }

    /// The key under which `serve` records its public URL.
    public static let publicURL = "publicUrl"
    /// The key under which `serve` records its apps' names (comma-separated), for the CLI.
    public static let apps = "apps"
    /// The key that, set to `off`, has campaigns queued a row a push on PostgreSQL rather than in
    /// runs (docs/design/outbox.md#runs): to read each push with SQL, or to compare the layouts.
    public static let outboxRuns = "outboxRuns"

    /// The value of `key`, or nil.
    public func value(_ key: String) async throws -> String? {
        try await database.read { db in try String.fetchOne(db, sql: "SELECT value FROM settings WHERE key = ?", arguments: [key]) }
    }

    /// Sets `key` unless it has a value already.
    public func setIfMissing(_ key: String, _ value: String) async throws {
        try await database.write { db in
            try db.execute(sql: "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING", arguments: [key, value])
        }
    }

    /// Sets `key`, telling listeners on `notify`'s channel.
    public func set(_ key: String, _ value: String, notify: DataChange? = nil) async throws {
        try await database.write { db in
            try db.execute(sql: "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                           arguments: [key, value])
            if let notify { try db.notify(notify.rawValue) }
        }
    }
}
