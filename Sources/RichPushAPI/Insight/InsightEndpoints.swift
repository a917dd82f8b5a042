import Hummingbird
import RichPushCore

extension Endpoint {
    /// docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: opened reports and a campaign's stats.
    static let insight: [Endpoint] = [
        Endpoint(method: .post, path: "/api/notifications/{id}/opened", access: .user,
                 summary: "The recipient's device says the notification was opened (tapped); counted once.",
                 parameters: [.path("id", notificationID, "The notification id.")],
                 responses: [204: APIResponse(description: "Counted (or already: then nothing is written)."),
                             404: .problem("No such notification for this user."),
                             429: .problem("Too many opens from this client address in a minute (--opens-per-minute).",
                                           headers: ["Retry-After": "Seconds until one more is taken."])]) { rooms, r, c in
            try await rooms.insight.reportOpened(r, c)
        },
        Endpoint(method: .get, path: "/api/admin/campaigns/{id}/stats", access: .admin,
                 summary: "A campaign's funnel (queued, sent, failed, displayed, opened; updated and retracted, docs/api.md#change-or-take-back-what-was-sent), by platform, its failure reasons and a per-minute timeline.",
                 parameters: [.path("id", JSONSchema.integer.with { $0.minimum = 1 }, "The campaign id.")],
                 keys: .read,
                 responses: [200: .json(CampaignStatsResponse.self, "From counters kept as pushes happen."),
                             404: .problem("No such campaign.")]) { rooms, r, c in
            try await rooms.insight.campaignStats(r, c)
        },
    ]
}
