import Foundation
import HTTPTypes
import Hummingbird
import RichPushCore

/// The audit log (`Endpoint.audit`, docs/operations.md#audit-log): read by admins. Every
/// audited handler records through its store with `AppRequestContext.auditActor(_:)`.
struct AuditController: Sendable {
    let audit: AuditStore

    /// `GET /api/admin/audit?since=&actor=&action=&target=&limit=&before=`: entries newest first,
    /// paged as the other lists are (`before` the last id seen).
    func list(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let (limit, before) = try Paging.page(request, defaultLimit: 50)
        let query = request.uri.queryParameters
        func one(_ name: String) throws -> String? {
            let values = query.getAll(name)
            guard let first = values.first else { return nil }
            guard values.count == 1 else { throw Problem(.badRequest, "\(name) must be given once") }
            return first.isEmpty ? nil : String(first)
        }
        let since = try one("since").map(Self.since)
        let filter = AuditStore.Filter(since: since, actor: try one("actor"), action: try one("action"), target: try one("target"))
        // No actor, action or target holds a NUL (PostgreSQL's text cannot): nothing matches one.
        if [filter.actor, filter.action, filter.target].contains(where: { $0?.contains("\u{0}") == true }) {
            return try JSONResponse.encode([AuditEntryResponse]())
        }
        let records = try await audit.list(filter, limit: limit, before: before)
        return try JSONResponse.encode(records.map(AuditEntryResponse.init))
    }

    /// `since`: seconds since 1970, or an RFC 3339 time; 400 otherwise.
    static func since(_ text: String) throws -> Date {
        if let seconds = Int64(text), (0...100_000_000_000).contains(seconds) { return Date(timeIntervalSince1970: Double(seconds)) }
        if let date = CampaignSchedule.rfc3339(text) { return date }
        throw Problem(.badRequest, "since must be seconds since 1970 or an RFC 3339 time such as 2026-01-01T00:00:00Z, got '\(text.prefix(40))'")
    }
}

extension AppRequestContext {
    /// The header a client may name its request by; the audit log keeps it (up to 128 visible
    /// ASCII characters), else the id the server's log gives the request.
    static let requestIDHeader = HTTPField.Name("X-Request-Id")!

    /// Who the audit log names for this request's change: the console's admin, an API key
    /// (`key:NAME`) or an admin account, with the request's id and the client's address; nil
    /// for anyone else (a user's or a device's own changes are not audited: SPEC §29).
    func auditActor(_ request: Request) -> AuditActor? {
        if let consoleAdmin { return auditActor(request, name: consoleAdmin, kind: AuditActor.Kind.console) }
        guard let principal else { return nil }
        if principal.apiKey != nil { return auditActor(request, name: principal.user, kind: AuditActor.Kind.key) }
        guard principal.admin else { return nil }
        return auditActor(request, name: principal.user, kind: AuditActor.Kind.user)
    }

    /// `name` of `kind` as the actor of this request: its id and the client's address.
    func auditActor(_ request: Request, name: String, kind: String) -> AuditActor {
        AuditActor(name: name, kind: kind, requestId: Self.requestID(request) ?? id, client: clientAddress)
    }

    /// The request's `X-Request-Id` when it is 1 to 128 visible ASCII characters; nil otherwise.
    static func requestID(_ request: Request) -> String? {
        guard let value = request.headers[requestIDHeader], (1...128).contains(value.utf8.count),
              value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else { return nil }
        return value
    }
}
