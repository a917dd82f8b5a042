import Hummingbird
import RichPushCore

extension Endpoint {
    static let campaigns: [Endpoint] = [
        Endpoint(method: .post, path: "/api/admin/campaigns", access: .admin,
                 summary: "Send one rich notification to everyone, to listed users, to the devices a tag expression matches, or to the users a segment or a filter selects: now, at sendAt, or at localTime in each recipient's zone.",
                 parameters: [idempotencyKey],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("CampaignRequest"))],
                                             description: "audience holds exactly one of all (true), users, tags, segment (a saved segment's name, read now) or filter (docs/api.md#segments)."),
                 keys: .send,
                 responses: [
                     202: APIResponse.json(CampaignResponse.self, "Queued: the first 5,000 recipients (a smaller campaign whole); the rest follows in the background as the sends go out, counted in its progress.",
                                           headers: ["Location": "The campaign's progress."])
                         .linking("Progress", to: "getApiAdminCampaignsId", parameter: "id", from: "id"),
                     400: .problem("The body, the audience, the tag expression or the filter is not valid (a filter's fault starts with its JSON path, audience.filter…), or the segment named is not one."),
                     409: .problem("The creator has 1,000 campaigns scheduled and not yet sent, the most one may have waiting."),
                     413: .problem("The body is over 256 KiB, or content has more than 50 locales."),
                     422: .problem("A listed user or the payload does not exist, or the push would be too large."),
                 ]) { rooms, r, c in try await rooms.campaigns.createCampaign(r, c) },
        Endpoint(method: .get, path: "/api/admin/campaigns", access: .admin, summary: "Campaigns, newest first, with their counts.",
                 parameters: [.query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 50)."),
                              .query("before", .integer, "Only campaigns with smaller ids (the next page).")],
                 keys: .read,
                 responses: [
                     200: .jsonArray(of: CampaignResponse.self, "The campaigns."),
                     400: .problem("limit is out of range."),
                 ]) { rooms, r, c in try await rooms.campaigns.listCampaigns(r, c) },
        Endpoint(method: .get, path: "/api/admin/campaigns/{id}", access: .admin, summary: "A campaign's progress.",
                 parameters: [.path("id", JSONSchema.integer.with { $0.minimum = 1 }, "The campaign id.")],
                 keys: .read,
                 responses: [
                     200: .json(CampaignResponse.self, "The campaign and its counts."),
                     404: .problem("No such campaign."),
                 ]) { rooms, r, c in try await rooms.campaigns.showCampaign(r, c) },
        Endpoint(method: .delete, path: "/api/admin/campaigns/{id}", access: .admin,
                 summary: "Cancel what has not been sent (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries): nothing more is queued, pushes not yet handed to a push service are dropped, recipients who got nothing lose the inbox entry.",
                 parameters: [.path("id", JSONSchema.integer.with { $0.minimum = 1 }, "The campaign id.")],
                 keys: .send,
                 responses: [
                     200: .json(CampaignResponse.self, "Cancelled (or already): its status is cancelled, sent counts what went out."),
                     403: .problem("A send key that did not create the campaign (docs/security.md: an admin cancels any)."),
                     404: .problem("No such campaign."),
                     409: .problem("The campaign is done: every push was sent."),
                 ]) { rooms, r, c in try await rooms.campaigns.cancelCampaign(r, c) },
    ]
}
