import Hummingbird
import RichPushCore

extension Endpoint {
    /// docs/operations.md#audit-log: who changed what, when, from where.
    static let audit: [Endpoint] = [
        Endpoint(method: .get, path: "/api/admin/audit", access: .admin,
                 summary: "The audit log, newest first: every change by an admin, an API key, the console or the CLI, with who, what, when, the request id and the client's address (never a secret).",
                 parameters: [
                     .query("since", JSONSchema.integer.with { $0.minimum = 0; $0.maximum = 100_000_000_000 },
                            "Only entries recorded at or after this time: seconds since 1970 (an RFC 3339 time is taken too)."),
                     .query("actor", .string, "Only this actor's: an account's name, key:NAME for an API key, or the OS user of a CLI command."),
                     .query("action", .string, "Only this action (campaign.create), or, without a dot, every action of that kind (campaign)."),
                     .query("target", .string, "Only changes of this (campaign:12, user:alice)."),
                     .query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 50)."),
                     .query("before", .integer, "Only entries with smaller ids (the next page: the last id seen)."),
                 ],
                 responses: [
                     200: .jsonArray(of: AuditEntryResponse.self, "The entries, newest first."),
                     400: .problem("since, limit or before is not valid, or a filter is given twice."),
                 ]) { rooms, r, c in try await rooms.audit.list(r, c) },
    ]
}
