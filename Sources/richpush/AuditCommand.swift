import ArgumentParser
import Foundation
import RichPushCore

/// `richpush audit` (docs/operations.md#audit-log): who changed what, when and from where.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Show the audit log: every change by an admin, an API key, the console or the CLI, newest first.",
        discussion: """
            As GET /api/admin/audit answers it: time, actor (an account, key:NAME, or the OS user of a command), its kind \
            (user, key, console, cli), action (campaign.create, apikey.add, console.signin, …), target, client address and \
            request id. Never a secret. Entries are kept serve --audit-days days (default 365).
            """)

    @OptionGroup var dataOptions: DataOptions
    @Option(help: "Only entries since then: an RFC 3339 time (2026-01-01T00:00:00Z) or how long ago (24h, 7d).") var since: String?
    @Option(help: "Only this actor's (alice, key:ci, or an OS user).") var actor: String?
    @Option(help: "Only this action (campaign.create), or every action of a kind (campaign).") var action: String?
    @Option(help: "Only changes of this (campaign:12, user:alice).") var target: String?
    @Option(help: "At most this many (1 to 500).") var limit = 50
    @Option(help: "Only entries with smaller ids (the next page: the last id shown).") var before: Int64?
    @Flag(help: "A JSON array of {\"id\",\"at\",\"actor\",\"actorKind\",\"action\",\"target\",\"requestId\",\"client\",\"detail\"}.") var json = false

    func validate() throws {
        guard (1...500).contains(limit) else { throw ValidationError("--limit must be 1 to 500") }
        _ = try sinceDate(now: Date())
    }

    /// `--since`: an RFC 3339 time, or a duration before `now`.
    func sinceDate(now: Date) throws -> Date? {
        guard let since else { return nil }
        if let date = CampaignSchedule.rfc3339(since) { return date }
        guard let ago = try? Duration.parse(since) else {
            throw ValidationError("--since '\(since.prefix(40))' is neither an RFC 3339 time (2026-01-01T00:00:00Z) nor a duration (24h, 7d)")
        }
        return now.addingTimeInterval(-ago)
    }

    func run() async throws {
        let data = try await dataOptions.open()
        defer { data.close() }
        let filter = AuditStore.Filter(since: try sinceDate(now: Date()), actor: actor, action: action, target: target)
        let records = try await data.audit.list(filter, limit: limit, before: before)
        let formatter = ISO8601DateFormatter()
        if json {
            print(JSONOut.array(records.map { record in
                let entry = record.entry
                var object: [String: Any] = ["id": record.id, "at": formatter.string(from: record.at), "actor": entry.actor.name,
                                             "actorKind": entry.actor.kind, "action": entry.action]
                object["target"] = entry.target
                object["requestId"] = entry.actor.requestId
                object["client"] = entry.actor.client
                object["detail"] = entry.detail.flatMap { try? JSONSerialization.jsonObject(with: Data($0.text.utf8)) }
                return object
            }))
            return
        }
        ListTable.print(["ID", "TIME", "ACTOR", "KIND", "ACTION", "TARGET", "CLIENT", "REQUEST"], records.map { record in
            let entry = record.entry
            return [String(record.id), formatter.string(from: record.at), entry.actor.name, entry.actor.kind, entry.action,
                    entry.target ?? "-", entry.actor.client ?? "-", entry.actor.requestId ?? "-"]
        }, empty: "no audit entries" + (actor != nil || action != nil || target != nil || since != nil ? " match" : " yet"))
    }
}
