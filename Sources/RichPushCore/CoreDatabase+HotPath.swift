import SQLEngine

extension CoreDatabase {
    /// What a campaign's pushes cost the database (issue #51).
    static let hotPathMigrations: [SQLMigration] = [
        // `revisedAt`: when any notification of the campaign was first changed or taken back,
        // itself or with the campaign. Until then its counters (pushes queued, less those counted
        // sent, failed or capped) say exactly what is left to send (`Insight.finishCampaigns`).
        //
        // On PostgreSQL a foreign key is checked by a trigger per row inserted, a query that
        // locks the referenced row (a WAL record when it is a row of its own): two of them made
        // inserting a campaign's notifications and outbox rows take 2–5 times as long as the rows
        // alone (100,000 of each: 898 and 643 ms against 154 and 284). Two are dropped there:
        // - an outbox row's notification: a trigger on deleting a notification deletes its rows
        //   instead, as the key's cascade did (for every node, one from before this too), and
        //   inserting checks nothing;
        // - a notification's campaign: campaigns are never deleted.
        // A notification's payload keeps its key here (the media store's references, `media_refs`,
        // keep an image in use, and the key is what would stop a delete they missed); core-v27
        // checks it per statement instead. SQLite checks a key with one probe of the parent's primary key, and keeps both.
        SQLMigration("core-v26-campaign-keys", sqlite: """
                ALTER TABLE campaigns ADD COLUMN revisedAt REAL;
                UPDATE campaigns SET revisedAt = coalesce(changedAt, retractedAt, createdAt)
                WHERE changedAt IS NOT NULL OR retractedAt IS NOT NULL
                    OR EXISTS (SELECT 1 FROM notifications n WHERE n.campaignId = campaigns.id AND (n.changedAt IS NOT NULL OR n.retractedAt IS NOT NULL));
                """, postgres: """
                ALTER TABLE campaigns ADD COLUMN revisedAt DOUBLE PRECISION;
                UPDATE campaigns SET revisedAt = coalesce(changedAt, retractedAt, createdAt)
                WHERE changedAt IS NOT NULL OR retractedAt IS NOT NULL
                    OR EXISTS (SELECT 1 FROM notifications n WHERE n.campaignId = campaigns.id AND (n.changedAt IS NOT NULL OR n.retractedAt IS NOT NULL));
                ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_notificationid_fkey;
                ALTER TABLE notifications DROP CONSTRAINT IF EXISTS notifications_campaignid_fkey;
                CREATE FUNCTION richpush_notification_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    DELETE FROM deliveries WHERE notificationId = OLD.id;
                    RETURN OLD;
                END
                $$;
                CREATE TRIGGER notifications_cascade AFTER DELETE ON notifications
                    FOR EACH ROW EXECUTE FUNCTION richpush_notification_deleted();
                """),
        // On PostgreSQL, a notification's payload is checked once per statement, not per row:
        // the key's trigger per row inserted was 5.5 µs of PostgreSQL's CPU a push, where a
        // statement's check is 1.5 (200 inserts of 500 rows: 1,690–1,884 ms with the key,
        // 1,215–1,286 with the check, 1,045–1,160 with neither). The check does what the key did:
        // the images a statement names are locked against deletion (FOR KEY SHARE) until it
        // commits, and a missing one is the key's error (SQLSTATE 23503); a payload changed is
        // checked row by row (revisions, rare); deleting, renaming or truncating an image a
        // notification names is refused. Unlike the key's check, the delete's trigger reads on
        // its transaction's snapshot, which at SERIALIZABLE can predate an insert it waited for:
        // a serializable insert is then caught by PostgreSQL's serializable checks (40001,
        // retried, then 23503); a read-committed one writes the image's row instead of locking
        // it, so the delete fails as a concurrent update (40001). Media is never deleted at
        // REPEATABLE READ (`PostgresEngineTests.payloadRace` runs every order and isolation).
        SQLMigration("core-v27-payload-check", sqlite: """
                -- SQLite keeps the key: one probe of the image's primary key a row.
                """, postgres: """
                ALTER TABLE notifications DROP CONSTRAINT IF EXISTS notifications_payload_fkey;
                CREATE FUNCTION richpush_payloads_added() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE
                    locked BIGINT;
                    missing TEXT;
                BEGIN
                    -- What is locked is what is checked: an image not locked here is missing.
                    IF current_setting('transaction_isolation') = 'read committed' THEN
                        -- Written, not only locked: a serializable delete that waited for this
                        -- then fails (40001) instead of deleting on its older snapshot.
                        UPDATE media SET touchedAt = touchedAt WHERE sha256 IN (SELECT DISTINCT payload FROM added);
                    ELSE
                        PERFORM 1 FROM media m WHERE m.sha256 IN (SELECT DISTINCT payload FROM added) FOR KEY SHARE OF m;
                    END IF;
                    GET DIAGNOSTICS locked = ROW_COUNT;
                    IF locked < (SELECT count(DISTINCT payload) FROM added) THEN
                        SELECT p.payload INTO missing FROM (SELECT DISTINCT payload FROM added) p
                            WHERE NOT EXISTS (SELECT 1 FROM media m WHERE m.sha256 = p.payload) LIMIT 1;
                        RAISE EXCEPTION 'insert or update on table "notifications" violates foreign key constraint "notifications_payload_fkey"'
                            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (payload)=(%s) is not present in table "media".', missing);
                    END IF;
                    RETURN NULL;
                END
                $$;
                CREATE TRIGGER notifications_payloads_added AFTER INSERT ON notifications REFERENCING NEW TABLE AS added
                    FOR EACH STATEMENT EXECUTE FUNCTION richpush_payloads_added();
                CREATE FUNCTION richpush_payload_changed() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF current_setting('transaction_isolation') = 'read committed' THEN
                        UPDATE media SET touchedAt = touchedAt WHERE sha256 = NEW.payload;
                    ELSE
                        PERFORM 1 FROM media WHERE sha256 = NEW.payload FOR KEY SHARE;
                    END IF;
                    IF NOT FOUND THEN
                        RAISE EXCEPTION 'insert or update on table "notifications" violates foreign key constraint "notifications_payload_fkey"'
                            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (payload)=(%s) is not present in table "media".', NEW.payload);
                    END IF;
                    RETURN NULL;
                END
                $$;
                CREATE TRIGGER notifications_payload_changed AFTER UPDATE OF payload ON notifications
                    FOR EACH ROW WHEN (OLD.payload IS DISTINCT FROM NEW.payload) EXECUTE FUNCTION richpush_payload_changed();
                CREATE FUNCTION richpush_media_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF EXISTS (SELECT 1 FROM notifications WHERE payload = OLD.sha256) THEN
                        RAISE EXCEPTION 'update or delete on table "media" violates foreign key constraint "notifications_payload_fkey" on table "notifications"'
                            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (sha256)=(%s) is still referenced from table "notifications".', OLD.sha256);
                    END IF;
                    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
                    RETURN NEW;
                END
                $$;
                CREATE TRIGGER media_deleted BEFORE DELETE ON media FOR EACH ROW EXECUTE FUNCTION richpush_media_deleted();
                CREATE TRIGGER media_renamed BEFORE UPDATE OF sha256 ON media
                    FOR EACH ROW WHEN (OLD.sha256 IS DISTINCT FROM NEW.sha256) EXECUTE FUNCTION richpush_media_deleted();
                CREATE FUNCTION richpush_media_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF EXISTS (SELECT 1 FROM notifications) THEN
                        RAISE EXCEPTION 'cannot truncate table "media": notifications name its images' USING ERRCODE = 'foreign_key_violation';
                    END IF;
                    RETURN NULL;
                END
                $$;
                CREATE TRIGGER media_truncated BEFORE TRUNCATE ON media FOR EACH STATEMENT EXECUTE FUNCTION richpush_media_truncated();
                """),
        // A lease is its own column (docs/design/outbox.md#a-claim-is-a-lease): claiming a row no
        // longer moves `nextAttemptAt`, the key of the due index, so on PostgreSQL the lease is a
        // HOT update (the row's new version on its own page, no index entry written), given room
        // on the page: inserts fill 40% of a page, room for each row's leased version (about 10%
        // longer). Pages written before keep their fill. A lease held now stays as it is, in
        // `nextAttemptAt`, as every lease of a holder from before is.
        // `outboxVersion`: 2 for holders that lease this way; NULL, a holder from before, whose
        // claims only see `nextAttemptAt`, so while one is alive claims move it too. And in case
        // one starts or wakes while a row is leased by the column alone: `leaseOwner` is the tag
        // that wrote `leaseUntil`, and while that lease lasts PostgreSQL refuses any other tag on
        // the row, none included (a claim, a hold-back or a take-back from before, which write
        // `leaseTag` alone): the older node's transaction fails instead of sending the push a
        // second time or dropping it. Whether a lease lasts is read on PostgreSQL's clock, and a
        // row that passes passes later too (a lease only ends), so a dump restores; existing rows
        // have no `leaseUntil` and are not scanned (NOT VALID).
        SQLMigration("core-v28-lease-until", sqlite: """
                ALTER TABLE outbox_holders ADD COLUMN outboxVersion INTEGER;
                ALTER TABLE deliveries ADD COLUMN leaseUntil REAL;
                ALTER TABLE deliveries ADD COLUMN leaseOwner INTEGER;
                """, postgres: """
                ALTER TABLE outbox_holders ADD COLUMN outboxVersion BIGINT;
                ALTER TABLE deliveries ADD COLUMN leaseUntil DOUBLE PRECISION, ADD COLUMN leaseOwner BIGINT;
                ALTER TABLE deliveries SET (fillfactor = 40);
                ALTER TABLE deliveries ADD CONSTRAINT deliveries_lease_kept CHECK (
                    leaseUntil IS NULL OR leaseOwner IS NOT DISTINCT FROM leaseTag
                    OR leaseUntil <= extract(epoch FROM clock_timestamp())) NOT VALID;
                """),
        // A first fetch marks its notification read (`NotificationStore.markRead`), and `read` was
        // the second key of a campaign's index: every mark deleted and wrote an index entry, 5.3%
        // of `serve`'s samples in a storm of first fetches on SQLite (BENCHMARKS.md, session
        // 37). Nothing reads that key any more: a campaign's fetched count is `campaign_stats`'
        // `displayed`, counted with the mark, and only a campaign from before that counter counts
        // its rows. The index keys the notification's id instead, which never changes (on SQLite
        // every index ends in the rowid already): a campaign's notifications in order, as a
        // change or take-back walks them (`CampaignRevisions`), on both engines. On PostgreSQL a
        // mark can then be a HOT update, where it never was (bench/read-marks.sh).
        SQLMigration("core-v29-read-marks", sqlite: """
                DROP INDEX notifications_campaign;
                CREATE INDEX notifications_campaign ON notifications(campaignId) WHERE campaignId IS NOT NULL;
                """, postgres: """
                DROP INDEX notifications_campaign;
                CREATE INDEX notifications_campaign ON notifications(campaignId, id) WHERE campaignId IS NOT NULL;
                """),
        // On SQLite, a campaign's outbox index keyed its pushes by `(campaignId, state)`: recording
        // a push sent deleted its entry and wrote another, and every entry carried the state's
        // text, compared at each step of a search. Now a campaign's pushes are keyed by
        // `campaignId` alone (its pushes in id order, for listing and counting them), with two
        // partial indexes for the states looked for: the pending ones (is anything left? how
        // much?) and the failed ones (which failed?). Recording a push sent only deletes its
        // pending entry. `bench/outbox-index.sh`: the outbox's statements (queue, claim, record)
        // took a sixth less of SQLite's CPU (BENCHMARKS.md, session 40). On PostgreSQL a record
        // is never a HOT update (its state is in an index's predicate), so it writes an entry in
        // every index the row's new version belongs to either way, and a second index on the
        // campaign would be one more entry per push queued: PostgreSQL keeps the index it has.
        SQLMigration("core-v30-campaign-outbox", sqlite: """
                DROP INDEX deliveries_campaign;
                CREATE INDEX deliveries_campaign ON deliveries(campaignId) WHERE campaignId IS NOT NULL;
                CREATE INDEX deliveries_campaign_pending ON deliveries(campaignId) WHERE campaignId IS NOT NULL AND state = 'pending';
                CREATE INDEX deliveries_campaign_failed ON deliveries(campaignId) WHERE campaignId IS NOT NULL AND state = 'failed';
                """, postgres: "SELECT 1"),
        // A campaign's first attempts as a row per run of pushes (docs/design/outbox.md#runs),
        // on PostgreSQL: a push sent sets a bit of its run instead of writing a row version and
        // an entry in every index of a row of its own (15 WAL records a push, 4.3 with runs;
        // BENCHMARKS.md, session 46). `settled`: the push's outcome is recorded (sent, or a row
        // of `deliveries` of its own, or dropped); `sent`: it was sent from the run; `sentAt`: the
        // last record that sent one (a conversion's window reads it). Notification
        // ids are drawn together for a batch, so a run's span of them (`span`, indexed) finds
        // the runs of a notification. SQLite keeps a row a push; its table stays empty, so that
        // statements shared by both engines can name it.
        SQLMigration("core-v31-outbox-runs", sqlite: """
                CREATE TABLE outbox_runs (id INTEGER PRIMARY KEY, campaignId INTEGER NOT NULL, app TEXT NOT NULL, platform TEXT NOT NULL,
                    state TEXT NOT NULL, nextAttemptAt REAL NOT NULL, leaseUntil REAL, leasedBy INTEGER, leaseTag INTEGER,
                    span TEXT NOT NULL, notificationIds TEXT NOT NULL,
                    registrationIds TEXT NOT NULL, targets TEXT NOT NULL, pushIds TEXT NOT NULL, settled TEXT NOT NULL, sent TEXT NOT NULL,
                    size INTEGER NOT NULL, remaining INTEGER NOT NULL, createdAt REAL NOT NULL, updatedAt REAL NOT NULL, sentAt REAL);
                CREATE INDEX outbox_runs_campaign ON outbox_runs(campaignId);
                """, postgres: """
                CREATE TABLE outbox_runs (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, campaignId BIGINT NOT NULL,
                    app TEXT NOT NULL, platform TEXT NOT NULL, state TEXT NOT NULL, nextAttemptAt DOUBLE PRECISION NOT NULL,
                    leaseUntil DOUBLE PRECISION, leasedBy BIGINT, leaseTag BIGINT,
                    span INT8RANGE NOT NULL, notificationIds BIGINT[] NOT NULL,
                    registrationIds TEXT[] NOT NULL, targets TEXT[] NOT NULL, pushIds TEXT[] NOT NULL,
                    settled BIT(512) NOT NULL, sent BIT(512) NOT NULL, size INTEGER NOT NULL CHECK (size BETWEEN 1 AND 512),
                    remaining INTEGER NOT NULL, createdAt DOUBLE PRECISION NOT NULL, updatedAt DOUBLE PRECISION NOT NULL,
                    sentAt DOUBLE PRECISION)
                    WITH (fillfactor = 40);
                CREATE INDEX outbox_runs_due ON outbox_runs(nextAttemptAt, id) WHERE state = 'pending';
                CREATE INDEX outbox_runs_campaign ON outbox_runs(campaignId, id);
                CREATE INDEX outbox_runs_campaign_pending ON outbox_runs(campaignId) WHERE state = 'pending';
                CREATE INDEX outbox_runs_span ON outbox_runs USING gist (span);
                """),
        // A run's arrays (up to 512 device tokens, registration and push ids: 10–70 kB) are
        // compressed out of line when written and decompressed when claimed; with lz4 rather
        // than PostgreSQL's default pglz, whose compression alone was 3.5% of PostgreSQL's CPU in
        // a campaign (BENCHMARKS.md, session 50). New values only; a server built without lz4
        // keeps pglz. SQLite's table stays empty.
        SQLMigration("core-v32-outbox-runs-lz4", sqlite: "SELECT 1", postgres: """
                DO $$
                BEGIN
                    ALTER TABLE outbox_runs ALTER COLUMN notificationIds SET COMPRESSION lz4,
                        ALTER COLUMN registrationIds SET COMPRESSION lz4, ALTER COLUMN targets SET COMPRESSION lz4,
                        ALTER COLUMN pushIds SET COMPRESSION lz4;
                EXCEPTION WHEN feature_not_supported THEN
                    RAISE NOTICE 'outbox_runs keeps pglz: %', SQLERRM;
                END
                $$;
                """),
    ]
}
