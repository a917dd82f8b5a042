import Foundation
import RichPushCore

/// One entry of the audit log, as `GET /api/admin/audit` answers it.
struct AuditEntryResponse: Codable, Sendable {
    /// Its place in the log (`?before=` this id is the next page).
    var id: Int64
    /// When it was recorded, RFC 3339.
    var at: String
    /// Who: an account's name, `key:NAME`, or the OS user of a CLI command.
    var actor: String
    /// `user` (an admin account), `key` (an API key), `console` or `cli`.
    var actorKind: String
    /// What: `campaign.create`, `apikey.add`, `console.signin`, ….
    var action: String
    /// On what: `campaign:12`, `user:alice`, ….
    var target: String?
    /// The request's `X-Request-Id`, else the id the server's log gave it.
    var requestId: String?
    /// The client's address.
    var client: String?
    /// More, as a small object (fields changed, a scope, counts): never a secret.
    var detail: JSONValue?

    init(_ record: AuditRecord) {
        id = record.id
        at = record.at.formatted(.iso8601)
        actor = record.entry.actor.name
        actorKind = record.entry.actor.kind
        action = record.entry.action
        target = record.entry.target
        requestId = record.entry.actor.requestId
        client = record.entry.actor.client
        detail = record.entry.detail
    }
}

extension JSONValue: DeclaredSchema {
    /// An audit entry's detail: any small object.
    public static var declaredSchema: JSONSchema {
        JSONSchema.type("object").with { $0.description = "A small JSON object: what changed (never a secret)." }
    }

    /// An empty object.
    public static var schemaExample: JSONValue { .object([:]) }
}
