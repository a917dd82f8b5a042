import SQLEngine

extension CoreDatabase {
    /// SPEC §28's tables (docs/api.md#frequency-caps-and-quiet-hours, #ab-tests-and-conversions), after
    /// every earlier migration.
    static let guardrailMigrations: [SQLMigration] = [
        // docs/api.md#frequency-caps-and-quiet-hours: whether a campaign keeps its apps' caps and
        // quiet hours (`"limits":false`: it does not); a user's own quiet hours
        // (`QuietHours.stored`), indexed where set so the outbox asks whether anyone has them in
        // one probe; the campaign pushes held back, counted; each user's campaign sends per app
        // within the cap's window (`campaignId:at` entries), the row locked by the claim that counts.
        SQLMigration("core-v21-guardrails", sqlite: """
                ALTER TABLE campaigns ADD COLUMN limits INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE users ADD COLUMN quietHours TEXT;
                CREATE INDEX users_quiet_hours ON users(name) WHERE quietHours IS NOT NULL;
                ALTER TABLE campaign_stats ADD COLUMN capped INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE campaign_stats ADD COLUMN delayed INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE frequency_windows (
                    userName TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
                    app      TEXT NOT NULL,
                    sends    TEXT NOT NULL,
                    PRIMARY KEY (userName, app)
                );
                """),
        // docs/api.md#ab-tests-and-conversions: a campaign's A/B test (its variants resolved, as
        // JSON, and their names apart, so that polling a campaign never decodes their content;
        // `fallback` and `winner` are variants' indexes), when it started and when its winner is
        // due, the lease of the node deciding it, and its decision. Each user the campaign's
        // audience walk met, in their arm (a variant's index, -1 the holdout, -2 the rest), with
        // whether they were sent it, fetched it, opened it and converted, each set once; the same
        // counted per arm in the transactions that set them, so that stats read a few rows; users'
        // holdouts by user, for their conversions. Conversions, one per campaign and user, with the
        // arm (NULL: a campaign without a test). The PostgreSQL script is the derived one
        // (BIGINT, DOUBLE PRECISION, TEXT COLLATE "C"), written out.
        SQLMigration("core-v22-experiments", sqlite: """
                CREATE TABLE campaign_experiments (
                    campaignId   INTEGER PRIMARY KEY NOT NULL,
                    variants     TEXT NOT NULL,
                    variantNames TEXT NOT NULL,
                    testShare    REAL NOT NULL,
                    holdout      REAL NOT NULL,
                    metric       TEXT NOT NULL,
                    afterSeconds REAL NOT NULL,
                    afterText    TEXT NOT NULL,
                    fallback     INTEGER,
                    startedAt    REAL,
                    decideAt     REAL,
                    leaseUntil   REAL,
                    leasedBy     INTEGER,
                    decidedAt    REAL,
                    statistic    REAL,
                    pValue       REAL,
                    winner       INTEGER,
                    significant  INTEGER
                );
                CREATE INDEX campaign_experiments_due ON campaign_experiments(decideAt) WHERE decidedAt IS NULL;
                CREATE TABLE campaign_members (
                    campaignId INTEGER NOT NULL,
                    userName   TEXT NOT NULL,
                    arm        INTEGER NOT NULL,
                    sent       INTEGER NOT NULL DEFAULT 0,
                    displayed  INTEGER NOT NULL DEFAULT 0,
                    opened     INTEGER NOT NULL DEFAULT 0,
                    converted  INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (campaignId, userName)
                ) WITHOUT ROWID;
                CREATE INDEX campaign_members_holdout ON campaign_members(userName, campaignId) WHERE arm = -1;
                CREATE TABLE campaign_arms (
                    campaignId INTEGER NOT NULL,
                    arm        INTEGER NOT NULL,
                    users      INTEGER NOT NULL DEFAULT 0,
                    sent       INTEGER NOT NULL DEFAULT 0,
                    displayed  INTEGER NOT NULL DEFAULT 0,
                    opened     INTEGER NOT NULL DEFAULT 0,
                    converted  INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (campaignId, arm)
                );
                CREATE TABLE conversions (
                    campaignId INTEGER NOT NULL,
                    userName   TEXT NOT NULL,
                    name       TEXT NOT NULL,
                    arm        INTEGER,
                    at         REAL NOT NULL,
                    PRIMARY KEY (campaignId, userName)
                ) WITHOUT ROWID;
                """, postgres: """
                CREATE TABLE campaign_experiments (
                    campaignId   BIGINT PRIMARY KEY NOT NULL,
                    variants     TEXT COLLATE "C" NOT NULL,
                    variantNames TEXT COLLATE "C" NOT NULL,
                    testShare    DOUBLE PRECISION NOT NULL,
                    holdout      DOUBLE PRECISION NOT NULL,
                    metric       TEXT COLLATE "C" NOT NULL,
                    afterSeconds DOUBLE PRECISION NOT NULL,
                    afterText    TEXT COLLATE "C" NOT NULL,
                    fallback     BIGINT,
                    startedAt    DOUBLE PRECISION,
                    decideAt     DOUBLE PRECISION,
                    leaseUntil   DOUBLE PRECISION,
                    leasedBy     BIGINT,
                    decidedAt    DOUBLE PRECISION,
                    statistic    DOUBLE PRECISION,
                    pValue       DOUBLE PRECISION,
                    winner       BIGINT,
                    significant  BIGINT
                );
                CREATE INDEX campaign_experiments_due ON campaign_experiments(decideAt) WHERE decidedAt IS NULL;
                CREATE TABLE campaign_members (
                    campaignId BIGINT NOT NULL,
                    userName   TEXT COLLATE "C" NOT NULL,
                    arm        BIGINT NOT NULL,
                    sent       BIGINT NOT NULL DEFAULT 0,
                    displayed  BIGINT NOT NULL DEFAULT 0,
                    opened     BIGINT NOT NULL DEFAULT 0,
                    converted  BIGINT NOT NULL DEFAULT 0,
                    PRIMARY KEY (campaignId, userName)
                );
                CREATE INDEX campaign_members_holdout ON campaign_members(userName, campaignId) WHERE arm = -1;
                CREATE TABLE campaign_arms (
                    campaignId BIGINT NOT NULL,
                    arm        BIGINT NOT NULL,
                    users      BIGINT NOT NULL DEFAULT 0,
                    sent       BIGINT NOT NULL DEFAULT 0,
                    displayed  BIGINT NOT NULL DEFAULT 0,
                    opened     BIGINT NOT NULL DEFAULT 0,
                    converted  BIGINT NOT NULL DEFAULT 0,
                    PRIMARY KEY (campaignId, arm)
                );
                CREATE TABLE conversions (
                    campaignId BIGINT NOT NULL,
                    userName   TEXT COLLATE "C" NOT NULL,
                    name       TEXT COLLATE "C" NOT NULL,
                    arm        BIGINT,
                    at         DOUBLE PRECISION NOT NULL,
                    PRIMARY KEY (campaignId, userName)
                );
                """),
    ]
}
