import SQLEngine

extension CoreDatabase {
    /// SPEC §29's tables (docs/operations.md#audit-log), after every earlier migration.
    static let operatorMigrations: [SQLMigration] = [
        // docs/operations.md#audit-log: every change by an admin, an API key, the console or the
        // CLI, appended in the transaction of the change (`Audit.record`) and never updated; rows
        // older than `serve --audit-days` are pruned (`AuditStore.prune`). Read newest first by
        // id, narrowed by time, actor or action. The PostgreSQL script is the derived one (BIGINT
        // identity, DOUBLE PRECISION, TEXT COLLATE "C").
        SQLMigration("core-v23-audit", sqlite: """
                CREATE TABLE audit_log (
                    id        INTEGER PRIMARY KEY AUTOINCREMENT,
                    at        REAL NOT NULL,
                    actor     TEXT NOT NULL,
                    actorKind TEXT NOT NULL,
                    action    TEXT NOT NULL,
                    target    TEXT,
                    requestId TEXT,
                    client    TEXT,
                    detail    TEXT
                );
                CREATE INDEX audit_log_at ON audit_log(at);
                CREATE INDEX audit_log_actor ON audit_log(actor, at);
                CREATE INDEX audit_log_action ON audit_log(action, at);
                """),
    ]
}
