import SQLEngine

extension CoreDatabase {
    /// docs/operations.md#traces: the W3C `traceparent` of the request that made a campaign,
    /// kept while tracing is on, so that its queueing, its pushes on every node and its webhook
    /// deliveries are spans of that request's trace.
    static let traceMigrations: [SQLMigration] = [
        SQLMigration("core-v24-traces", sqlite: """
                ALTER TABLE campaigns ADD COLUMN traceparent TEXT;
                """),
    ]
}
