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
        // A notification's payload keeps its key: the media store's references (`media_refs`)
        // keep an image in use, and the key is what would stop a delete they missed.
        // SQLite checks a key with one probe of the parent's primary key, and keeps both.
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
    ]
}
