import Foundation
import HTTPTypes
import Hummingbird
import RichPushCore

/// What happened to pushes (`Endpoint.insight`, docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks):
/// opened reports and a campaign's stats.
struct InsightController: Sendable {
    let notifications: NotificationStore
    let campaigns: CampaignStore
    /// Opens reported per client address (`--opens-per-minute`): `POST /p/{token}/opened` needs no credentials.
    let openRate: RateLimiter

    /// `POST /api/notifications/{id}/opened` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks): the recipient's device says it was opened.
    func reportOpened(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try limitOpens(context)
        let user = try context.requireUser()
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0, try await notifications.markOpened(id: id, recipient: user) else {
            throw Problem(.notFound, "no notification \(raw.prefix(40)) for \(user)")
        }
        return Response(status: .noContent)
    }

    /// `GET /api/admin/campaigns/{id}/stats` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks): from counters, never a scan of the outbox.
    func campaignStats(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let raw = try context.parameters.require("id")
        let bound = try context.requirePrincipal().apiKey?.app
        guard let id = Int64(raw), id > 0, let progress = try await campaigns.progress(id), bound == nil || progress.campaign.app == bound,
              let stats = try await campaigns.stats(id) else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        return try JSONResponse.encode(CampaignStatsResponse(stats))
    }

    /// Opens are reported without limit by nobody: each client address has `--opens-per-minute`.
    func limitOpens(_ context: AppRequestContext) throws {
        if let wait = openRate.take(context.clientAddress ?? "unknown") {
            throw Problem(.tooManyRequests, "more opens reported from this address in the last minute than this server takes (\(openRate.perMinute)); try again in \(wait) s",
                          headers: [.retryAfter: String(wait)])
        }
    }
}
