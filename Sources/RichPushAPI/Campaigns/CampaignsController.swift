import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PushDelivery
import RichPushCore
import Telemetry

/// Campaigns: sent, listed, shown and cancelled (`Endpoint.campaigns`).
struct CampaignsController: Sendable {
    /// The server's apps.
    let apps: AppCatalog
    let campaigns: CampaignStore
    /// Queues a POSTed campaign's recipients past its first `ahead`.
    let campaignQueuer: CampaignQueuer
    /// `Idempotency-Key`s seen (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries).
    let idempotency: IdempotencyStore
    let dispatcher: any PushDispatching
    /// Notifications made or fetched here: a change of image or a retraction drops its entries at once.
    let payloadIndex: PayloadIndex

    // MARK: campaigns (docs/api.md#campaigns)

    func createCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let admin = try context.requirePrincipal()
        let audit = context.auditActor(request)
        let idempotencyHeader = request.headers[HTTPField.Name("Idempotency-Key")!]
        let body = try await RequestBody.collect(request, upTo: Self.campaignBodyLimit, what: "a campaign body")
        let bytes = Data(body.readableBytesView)
        let request = try RequestBody.decode(CampaignRequest.self, from: bytes,
                                             shape: "{\"audience\":{\"all\":true} or {\"users\":[names]} or {\"tags\":\"expression\"} or {\"segment\":\"name\"} or {\"filter\":{…}},\"message\",\"title\",\"payload\",\"richType\",\"mode\",\"app\",\"sendAt\",\"localTime\",\"localDate\",\"content\",\"defaultLocale\",\"options\",\"badge\",\"ratePerMinute\",\"limits\",\"dryRun\"}")
        let content = NotificationDraft(message: request.message, richType: request.richType ?? NotificationDraft.defaultRichType,
                                        payload: request.payload, title: request.title, mode: request.mode ?? .alert,
                                        options: PushOptions.with(request.options, badge: request.badge))
        if let count = request.content?.locales.count, count > Campaign.maxLocales {
            throw Problem(.contentTooLarge, "content has \(count) locales; a campaign has at most \(Campaign.maxLocales)")
        }
        let app = try apps.appAllowed(request.app, for: admin)
        let schedule: CampaignSchedule?
        do { schedule = try Self.schedule(request) } catch let error as CoreError { throw Problem(.unprocessableContent, error.message) }
        var draft = CampaignDraft(audience: try request.audience.audience, content: content, app: app, schedule: schedule,
                                  locales: request.content?.locales ?? [:], defaultLocale: request.defaultLocale ?? "en",
                                  ratePerMinute: request.ratePerMinute, limits: request.limits ?? true)
        // docs/api.md#ab-tests-and-conversions: variants, shares and the winner's rule (checked by the store, 400 naming the field).
        draft.experiment = try request.experiment
        // docs/operations.md#traces: its queueing and pushes, on any node, continue this request's trace.
        draft.traceparent = Telemetry.traceparent()
        let key = try idempotencyHeader.map { try IdempotencyKey(owner: admin.user, route: "POST /api/admin/campaigns", key: $0, body: bytes) }
        // docs/api.md#dry-runs: checked as a send is; nothing is stored, queued or sent, and the key is neither looked up nor kept.
        if request.dryRun == true { return try await dryRun(draft, by: admin.user) }
        // The first pushes are queued before the answer (a small campaign whole), the rest in
        // the background as the sends go out: a million recipients answer in a second.
        let dispatcher = self.dispatcher, queuer = campaignQueuer
        let launcher = CampaignLauncher(campaigns: campaigns, addressing: dispatcher.addressing, maxBatches: queuer.firstBatches,
                                        handOff: { queuer.finish($0) }, outboxChanged: { dispatcher.outboxChanged() })
        let launch: CampaignLauncher.Launch
        switch try await launcher.launch(draft, by: admin.user, idempotency: key, audit: audit) {
        case .launched(let launched): launch = launched
        case .replayed(let replay): return try await campaignReplay(replay, key: key!)
        }
        let campaign = launch.campaign
        guard let progress = launch.progress else { throw Problem(.notFound, "campaign \(campaign.id) vanished") }
        context.logger.info(campaign.schedule == nil ? "campaign queued" : "campaign scheduled",
                            metadata: ["campaign": "\(campaign.id)", "recipients": "\(progress.campaign.recipients)",
                                       "devices": "\(progress.campaign.devices)", "by": "\(admin.user)"])
        var response = try JSONResponse.encode(CampaignResponse(progress), status: .accepted)
        response.headers[.location] = "/api/admin/campaigns/\(campaign.id)"
        return response
    }

    /// What the first request with an `Idempotency-Key` answered: its campaign, as it stands.
    private func campaignReplay(_ replay: IdempotentReplay, key: IdempotencyKey) async throws -> Response {
        var id = replay.resource
        if id == nil { id = try await idempotency.resource(for: key) }
        guard let id, let progress = try await campaigns.progress(id) else {
            throw Problem(.conflict, "a request with this Idempotency-Key is still being made; try again in a second", headers: [.retryAfter: "1"])
        }
        var response = try JSONResponse.encode(CampaignResponse(progress), status: .accepted)
        response.headers[.location] = "/api/admin/campaigns/\(id)"
        response.headers[HTTPField.Name("Idempotent-Replayed")!] = "true"
        return response
    }

    /// `sendAt` (RFC 3339), or `localTime` with an optional `localDate`; 400 for both, a date
    /// without a time, or a malformed value.
    static func schedule(_ request: CampaignRequest) throws -> CampaignSchedule? {
        if let sendAt = request.sendAt {
            guard request.localTime == nil, request.localDate == nil else {
                throw Problem(.unprocessableContent, "give sendAt, or localTime (with an optional localDate), not both")
            }
            guard let date = CampaignSchedule.rfc3339(sendAt) else {
                throw Problem(.unprocessableContent, "sendAt must be an RFC 3339 time such as 2026-12-01T09:00:00Z, got '\(sendAt.prefix(40))'")
            }
            return .at(date)
        }
        if let time = request.localTime {
            return .localTime(try LocalTime(time), date: try request.localDate.map(LocalDate.init))
        }
        if request.localDate != nil { throw Problem(.unprocessableContent, "localDate needs localTime") }
        return nil
    }

    /// The longest campaign body taken (docs/security.md).
    static let campaignBodyLimit = 256 << 10

    /// `DELETE /api/admin/campaigns/{id}`: cancels what has not been sent (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries). An admin
    /// (an account or an `admin` key) cancels any campaign of its app; a `send` key only those
    /// it created (docs/security.md).
    func cancelCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try await revisable(context, verb: "cancels")
        let progress = try await campaigns.cancel(id, audit: context.auditActor(request))
        let by = context.principal?.user ?? ""
        context.logger.notice("campaign cancelled", metadata: ["campaign": "\(id)", "sent": "\(progress.sent)", "by": "\(by)"])
        return try JSONResponse.encode(CampaignResponse(progress))
    }

    /// The campaign `{id}` names, for a caller who may cancel, change or take it back: an admin
    /// (an account or an `admin` key) any of its app's, a `send` key only its own (403); 404
    /// where the caller could not read it.
    private func revisable(_ context: AppRequestContext, verb: String) async throws -> Int64 {
        let raw = try context.parameters.require("id")
        let caller = try context.requirePrincipal()
        let bound = caller.apiKey?.app
        guard let id = Int64(raw), id > 0, let before = try await campaigns.progress(id), bound == nil || before.campaign.app == bound else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        if let key = caller.apiKey, !key.scope.covers(.admin), before.campaign.createdBy != caller.user {
            throw Problem(.forbidden, "API key \(key.name) did not create campaign \(id); a send key \(verb) only its own campaigns (an admin key or account \(verb) any)")
        }
        return id
    }

    /// `PATCH /api/admin/campaigns/{id}` (docs/api.md#change-or-take-back-what-was-sent): new
    /// words, image or options for what was sent and what is still to go.
    func changeCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try await revisable(context, verb: "changes")
        let body = try await RequestBody.collect(request, upTo: Self.campaignBodyLimit, what: "a campaign change")
        let asked = try RequestBody.decode(ContentChangeRequest.self, from: Data(body.readableBytesView), shape: ContentChangeRequest.shape)
        if let count = asked.content?.locales.count, count > Campaign.maxLocales {
            throw Problem(.contentTooLarge, "content has \(count) locales; a campaign has at most \(Campaign.maxLocales)")
        }
        let (progress, outcome) = try await campaigns.change(id, asked.change, audit: context.auditActor(request))
        payloadIndex.remove(outcome.repointed)
        dispatcher.outboxChanged()
        context.logger.notice("campaign changed", metadata: ["campaign": "\(id)", "notifications": "\(outcome.notifications)",
                                                             "replacements": "\(outcome.replacements.values.reduce(0, +))", "by": "\(context.principal?.user ?? "")"])
        return try JSONResponse.encode(CampaignChangeResponse(notifications: outcome.notifications, pending: outcome.pending,
                                                              replacements: PlatformCounts(outcome.replacements), campaign: CampaignResponse(progress)))
    }

    /// `POST /api/admin/campaigns/{id}/retract` (docs/api.md#change-or-take-back-what-was-sent):
    /// takes it back from every inbox and every device that got it.
    func retractCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try await revisable(context, verb: "takes back")
        let asked = try await RetractRequest.read(request)
        let (progress, outcome) = try await campaigns.retract(id, text: asked.retractedText, audit: context.auditActor(request))
        payloadIndex.remove(outcome.retracted)
        dispatcher.outboxChanged()
        context.logger.notice("campaign retracted", metadata: ["campaign": "\(id)", "inboxes": "\(outcome.inboxes)", "cancelled": "\(outcome.cancelled)",
                                                               "by": "\(context.principal?.user ?? "")"])
        return try JSONResponse.encode(RetractResponse(outcome, status: progress.status))
    }

    func listCampaigns(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let (limit, before) = try Paging.page(request, defaultLimit: 50)
        // A key bound to an app reads that app's campaigns only.
        let bound = try context.requirePrincipal().apiKey?.app
        return try JSONResponse.encode(try await campaigns.list(limit: limit, before: before, app: bound).map(CampaignResponse.init))
    }

    func showCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let raw = try context.parameters.require("id")
        let bound = try context.requirePrincipal().apiKey?.app
        guard let id = Int64(raw), id > 0, let progress = try await campaigns.progress(id), bound == nil || progress.campaign.app == bound else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        return try JSONResponse.encode(CampaignResponse(progress))
    }
}
