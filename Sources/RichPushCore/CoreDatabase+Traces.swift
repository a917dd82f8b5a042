import SQLEngine

extension CoreDatabase {
    /// docs/operations.md#traces: the W3C `traceparent` of the request that made a campaign,
    /// kept while tracing is on, so that its queueing, its pushes on every node and its webhook
    /// deliveries are spans of that request's trace.
    static let traceMigrations: [SQLMigration] = [
        SQLMigration("core-v24-traces", sqlite: """
                ALTER TABLE campaigns ADD COLUMN traceparent TEXT;
                """),
        // `doneAt` came in core-v10 without a value for the campaigns done before it: they get
        // their last push's time here, quietly (no `campaign.done` event), so that every node's
        // sweep of campaigns left unmarked (`finishStragglers`) finds only new ones.
        SQLMigration("core-v25-done-backfill", sqlite: """
                UPDATE campaigns SET doneAt = coalesce((SELECT max(d.updatedAt) FROM deliveries d WHERE d.campaignId = campaigns.id), createdAt)
                WHERE queued = 1 AND doneAt IS NULL AND cancelledAt IS NULL
                    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.campaignId = campaigns.id AND d.state = 'pending')
                    AND NOT EXISTS (SELECT 1 FROM campaign_experiments e WHERE e.campaignId = campaigns.id AND e.decidedAt IS NULL);
                """),
    ]
}
