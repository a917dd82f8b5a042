import Foundation
import Hummingbird
import PushDelivery
import RichPushCore

// docs/api.md#dry-runs: `"dryRun":true` on a send answers 200 with what it would do, checked as
// the send is checked (the same 400, 403, 409, 413 and 422 for the same body), having stored,
// queued and sent nothing. An `Idempotency-Key` sent with one is checked for its form and neither
// looked up nor kept: a later send with the same key is a first request.

extension CampaignsController {
    /// `POST /api/admin/campaigns` with `"dryRun":true`: `draft` checked and counted by
    /// `CampaignStore.dryRun` (recorded in a transaction that is rolled back), nothing queued.
    func dryRun(_ draft: CampaignDraft, by creator: String) async throws -> Response {
        let run = try await campaigns.dryRun(draft, by: creator, addressing: dispatcher.addressing)
        return try JSONResponse.encode(DryRunResponse(run))
    }
}

extension NotificationsController {
    /// `POST /api/notifications` with `"dryRun":true`: the body `asked` (parsed from `bytes`)
    /// checked as a send checks it (the app, the recipient, the payload and the push's size), the
    /// recipient's devices and pushes read; no rate limit is spent.
    func dryRun(_ asked: (NotificationDraft, to: String?, app: String?, dryRun: Bool), bytes: Data, idempotencyHeader: String?,
                caller: Principal) async throws -> Response {
        // A malformed key is the 400 a send would get; a well-formed one is not used.
        _ = try idempotencyHeader.map { try IdempotencyKey(owner: caller.user, route: "POST /api/notifications", key: $0, body: bytes) }
        let app = try apps.appAllowed(asked.app, for: caller)
        let recipient = try await recipient(asked.to, for: caller)
        let run = try await notifications.dryRun(for: recipient, draft: asked.0, defaultImage: defaultImage, addressing: dispatcher.addressing, app: app)
        return try JSONResponse.encode(DryRunResponse(run))
    }
}
