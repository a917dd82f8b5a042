import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MediaStore
import PushDelivery
import RichPushCore

/// What a payload URL's token allows, decided the same way by the router and the fast path.
enum PayloadLinkCheck: Equatable {
    case valid(notification: Int64, payload: MediaID)
    case expired(notification: Int64)
    case invalid

    /// Checks the signature (the token names its notification and image, so no lookup is needed), then the expiry.
    /// (Concrete: inside a generic function the call below would bind to `PayloadLinks`'s
    /// generic `claims`, which copies the token into a new `String`.)
    static func check(_ token: Substring, links: PayloadLinks, now: Date = Date()) -> PayloadLinkCheck {
        guard let claims = PayloadLinks.claims(token), links.isAuthentic(claims) else { return .invalid }
        guard now.timeIntervalSince1970 < Double(claims.expires) else { return .expired(notification: claims.notification) }
        return .valid(notification: claims.notification, payload: claims.payload)
    }

    static func check(_ token: String, links: PayloadLinks, now: Date = Date()) -> PayloadLinkCheck {
        check(token[...], links: links, now: now)
    }
}

extension Services {
    // MARK: sessions (docs/api.md#admins-imported-accounts-and-device-sessions)

    func createSession(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let principal = try principal(context)
        guard principal.sessionToken == nil else {
            throw Problem(.forbidden, "a session is created with Basic credentials (user name and password), not with another session's token")
        }
        let session = try await sessions.create(for: principal.user, lifetime: configuration.sessionLifetime)
        // Known here from now on: the device's first request with it needs no database read.
        authenticator.remember(session: session.token, of: Principal(user: principal.user, admin: principal.admin), expires: session.expires)
        return try encode(SessionResponse(token: session.token, expires: session.expires.formatted(.iso8601)), status: .created)
    }

    func deleteCurrentSession(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let principal = try principal(context)
        guard let token = principal.sessionToken else {
            throw Problem(.unauthorized, "send the session's own token (Authorization: Bearer …) to revoke it",
                          headers: [.wwwAuthenticate: "Bearer realm=\"RichPush\""])
        }
        try await sessions.revoke(token)
        if let header = request.headers[.authorization] { authenticator.forget(header) }
        return Response(status: .noContent)
    }

    // MARK: campaigns (docs/api.md#campaigns)

    func createCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let admin = try principal(context)
        let idempotencyHeader = request.headers[HTTPField.Name("Idempotency-Key")!]
        let body = try await RequestBody.collect(request, upTo: Self.campaignBodyLimit, what: "a campaign body")
        let bytes = Data(body.readableBytesView)
        let request = try RequestBody.decode(CampaignRequest.self, from: bytes,
                                             shape: "{\"audience\":{\"all\":true} or {\"users\":[names]} or {\"tags\":\"expression\"},\"message\",\"title\",\"payload\",\"richType\",\"mode\",\"app\",\"sendAt\",\"localTime\",\"localDate\",\"content\",\"defaultLocale\",\"options\",\"badge\",\"ratePerMinute\"}")
        let content = NotificationDraft(message: request.message, richType: request.richType ?? NotificationDraft.defaultRichType,
                                        payload: request.payload, title: request.title, mode: request.mode ?? .alert,
                                        options: PushOptions.with(request.options, badge: request.badge))
        if let count = request.content?.locales.count, count > Campaign.maxLocales {
            throw Problem(.contentTooLarge, "content has \(count) locales; a campaign has at most \(Campaign.maxLocales)")
        }
        let app = try appAllowed(request.app, for: admin)
        let schedule: CampaignSchedule?
        do { schedule = try Self.schedule(request) } catch let error as CoreError { throw Problem(.unprocessableContent, error.message) }
        let draft = CampaignDraft(audience: try request.audience.audience, content: content, app: app, schedule: schedule,
                                  locales: request.content?.locales ?? [:], defaultLocale: request.defaultLocale ?? "en",
                                  ratePerMinute: request.ratePerMinute)
        let key = try idempotencyHeader.map { try IdempotencyKey(owner: admin.user, route: "POST /api/admin/campaigns", key: $0, body: bytes) }
        let campaign: Campaign
        do {
            campaign = try await campaigns.create(draft, by: admin.user, idempotency: key)
        } catch let replay as IdempotentReplay {
            return try await campaignReplay(replay, key: key!)
        }
        var handOff: Int64?
        if campaign.schedule == nil {
            // The first pushes are queued before the answer (a small campaign whole), the rest
            // in the background as the sends go out: a million recipients answer in a second.
            let dispatcher = self.dispatcher
            let queued = try await campaigns.queue(campaign.id, addressing: dispatcher.addressing,
                                                   maxBatches: campaignQueuer.firstBatches) { dispatcher.outboxChanged() }
            handOff = queued.queued ? nil : campaign.id
        }
        // The answer counts what is queued as the rest is handed over (handed over whatever
        // the count does: a campaign left leased would wait for its lease to lapse).
        let counted: Result<CampaignProgress?, any Error>
        do { counted = .success(try await campaigns.progress(campaign.id)) } catch { counted = .failure(error) }
        if let handOff { campaignQueuer.finish(handOff) }
        guard let progress = try counted.get() else { throw Problem(.notFound, "campaign \(campaign.id) vanished") }
        context.logger.info(campaign.schedule == nil ? "campaign queued" : "campaign scheduled",
                            metadata: ["campaign": "\(campaign.id)", "recipients": "\(progress.campaign.recipients)",
                                       "devices": "\(progress.campaign.devices)", "by": "\(admin.user)"])
        var response = try encode(CampaignResponse(progress), status: .accepted)
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
        var response = try encode(CampaignResponse(progress), status: .accepted)
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

    /// `GET /api/admin/campaigns/{id}/stats` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks): from counters, never a scan of the outbox.
    func campaignStats(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let raw = try context.parameters.require("id")
        let bound = try principal(context).apiKey?.app
        guard let id = Int64(raw), id > 0, let progress = try await campaigns.progress(id), bound == nil || progress.campaign.app == bound,
              let stats = try await campaigns.stats(id) else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        return try encode(CampaignStatsResponse(stats))
    }

    /// The longest campaign body taken (docs/security.md).
    static let campaignBodyLimit = 256 << 10

    /// `POST /api/notifications/{id}/opened` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks): the recipient's device says it was opened.
    func reportOpened(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try limitOpens(context)
        let user = try user(context)
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0, try await notifications.markOpened(id: id, recipient: user) else {
            throw Problem(.notFound, "no notification \(raw.prefix(40)) for \(user)")
        }
        return Response(status: .noContent)
    }

    /// `POST /p/{token}/opened`: the same, with the payload URL for credentials, while the URL
    /// serves its payload: 410 once it expired or its notification was withdrawn (docs/security.md).
    func reportOpenedByLink(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try limitOpens(context)
        let token = try context.parameters.require("token")
        switch PayloadLinkCheck.check(token, links: links) {
        case .invalid:
            throw Problem(.notFound, "this payload URL is not valid (changed, or signed with a key that was rotated)")
        case .expired(let id):
            throw Problem(.gone, "this payload URL expired; the app reports the open with its credentials at POST /api/notifications/\(id)/opened")
        case .valid(let id, _):
            guard try await notifications.markOpened(id: id) else {
                throw Problem(.gone, "notification \(id) was withdrawn (its campaign cancelled, or its recipient removed)")
            }
            return Response(status: .noContent)
        }
    }

    /// Opens are reported without limit by nobody: each client address has `--opens-per-minute`.
    private func limitOpens(_ context: AppRequestContext) throws {
        if let wait = openRate.take(context.clientAddress ?? "unknown") {
            throw Problem(.tooManyRequests, "more opens reported from this address in the last minute than this server takes (\(openRate.perMinute)); try again in \(wait) s",
                          headers: [.retryAfter: String(wait)])
        }
    }

    /// `DELETE /api/admin/campaigns/{id}`: cancels what has not been sent (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries). An admin
    /// (an account or an `admin` key) cancels any campaign of its app; a `send` key only those
    /// it created (docs/security.md).
    func cancelCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let raw = try context.parameters.require("id")
        let caller = try principal(context)
        let bound = caller.apiKey?.app
        guard let id = Int64(raw), id > 0, let before = try await campaigns.progress(id), bound == nil || before.campaign.app == bound else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        if let key = caller.apiKey, !key.scope.covers(.admin), before.campaign.createdBy != caller.user {
            throw Problem(.forbidden, "API key \(key.name) did not create campaign \(id); a send key cancels only its own campaigns (an admin key or account cancels any)")
        }
        let progress = try await campaigns.cancel(id)
        let by = caller.user
        context.logger.notice("campaign cancelled", metadata: ["campaign": "\(id)", "sent": "\(progress.sent)", "by": "\(by)"])
        return try encode(CampaignResponse(progress))
    }

    // MARK: the caller (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries)

    func showMe(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try principal(context)
        guard let user = try await users.find(caller.user) else { throw Problem(.notFound, "no user \(caller.user)") }
        return try encode(MeResponse(name: user.name, admin: user.admin, timezone: user.timezone ?? "UTC", locale: user.locale))
    }

    func updateMe(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try principal(context)
        let body = try await request.body.collect(upTo: 64 * 1024)
        let update = try RequestBody.decode(MeUpdate.self, from: Data(body.readableBytesView), shape: "{\"timezone\",\"locale\"}")
        let user = try await users.setPreferences(caller.user, timezone: update.timezone, locale: update.locale)
        return try encode(MeResponse(name: user.name, admin: user.admin, timezone: user.timezone ?? "UTC", locale: user.locale))
    }

    func listCampaigns(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let (limit, before) = try Self.page(request, defaultLimit: 50)
        // A key bound to an app reads that app's campaigns only.
        let bound = try principal(context).apiKey?.app
        return try encode(try await campaigns.list(limit: limit, before: before, app: bound).map(CampaignResponse.init))
    }

    func showCampaign(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let raw = try context.parameters.require("id")
        let bound = try principal(context).apiKey?.app
        guard let id = Int64(raw), id > 0, let progress = try await campaigns.progress(id), bound == nil || progress.campaign.app == bound else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        return try encode(CampaignResponse(progress))
    }

    // MARK: payload URLs (docs/api.md#alert-pushes-and-payload-urls)

    /// `GET`/`HEAD /p/{token}`: the payload as `/api/notifications/{id}` answers it, for whoever
    /// holds the URL; 404 for a changed or unknown token, 410 for an expired one.
    func fetchPayloadByLink(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let token = try context.parameters.require("token")
        switch PayloadLinkCheck.check(token, links: links) {
        case .invalid:
            throw Problem(.notFound, "this payload URL is not valid (changed, or signed with a key that was rotated)")
        case .expired(let id):
            throw Problem(.gone, "this payload URL expired; the app can fetch the payload with its credentials at /api/notifications/\(id)")
        case .valid(let id, let payload):
            // Withdrawn (a cancelled campaign's, a removed user's): no longer served, here as on the fast path.
            var known = payloadIndex.get(id) != nil
            if !known { known = try await notifications.exists(id) }
            guard known else {
                throw Problem(.gone, "notification \(id) was withdrawn; its payload is no longer served")
            }
            let served = try await variantOrSelf(request, payload)
            guard let source = try await blobs.servable(served) else {
                throw Problem(.notFound, "the payload of notification \(id) is no longer stored")
            }
            let (response, outcome) = try ImageResponse.make(request, source: source, cacheControl: "private")
            if outcome != .head {
                try await readMarks.mark(id)
                Metric.linkFetches.increment()
            }
            return response
        }
    }

    // MARK: helpers

    func principal(_ context: AppRequestContext) throws -> Principal {
        guard let principal = context.principal else { throw Authenticator.unauthorized("credentials are required") }
        return principal
    }

    func encode(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: "application/json", .contentLength: String(data.count)],
                        body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
