import SQLEngine

extension CoreDatabase {
    /// What a campaign's pushes cost the database (issue #51).
    static let hotPathMigrations: [SQLMigration] = [
        // On PostgreSQL a foreign key is checked by a trigger per row inserted, a query that
        // locks the referenced row (a WAL record when it is a row of its own): two of them made
        // inserting a campaign's notifications and outbox rows take 2–5 times as long as the rows
        // alone (100,000 of each: 898 and 643 ms against 154 and 284). Two are dropped there:
        // - an outbox row's notification, whose cascade the one path that deletes notifications
        //   with pushes, a user's removal (`UserStore`), now does itself, on both engines;
        // - a notification's campaign: campaigns are never deleted.
        // A notification's payload keeps its key: the media store's references (`media_refs`)
        // keep an image in use, and the key is what would stop a delete they missed.
        // SQLite checks a key with one probe of the parent's primary key, and keeps both.
        SQLMigration("core-v26-campaign-keys", sqlite: "", postgres: """
                ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_notificationid_fkey;
                ALTER TABLE notifications DROP CONSTRAINT IF EXISTS notifications_campaignid_fkey;
                """),
    ]
}
