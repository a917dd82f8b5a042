import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import MediaStore
import PushDelivery
import RichPushCore

/// A user's notifications: made, listed, and their payloads fetched with credentials (`Endpoint.notifications`).
struct NotificationsController: Sendable {
    /// The server's apps.
    let apps: AppCatalog
    /// The image a notification without one shows (`serve --default-image`).
    let defaultImage: String
    let users: UserStore
    let notifications: NotificationStore
    /// `Idempotency-Key`s seen (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries).
    let idempotency: IdempotencyStore
    let dispatcher: any PushDispatching
    /// Notifications made or fetched here: recipient and payload, so fetches need no database read.
    let payloadIndex: PayloadIndex
    /// Records payload fetches as read, a batch per commit.
    let readMarks: ReadMarks
    let blobs: BlobCache
    /// `POST /api/notifications` per user (`--notifications-per-minute`).
    let notificationRate: RateLimiter
    /// Serves a payload's `?variant=`.
    let mediaRoom: MediaController

    func createNotification(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try context.requirePrincipal()
        let sender = caller.user
        let idempotencyHeader = request.headers[HTTPField.Name("Idempotency-Key")!]
        // A person is limited by what they send; an API key (a backend notifying many users) by
        // what each recipient gets, so that it can serve everyone and flood no one.
        func limit(_ key: String, _ who: String) throws {
            if let wait = notificationRate.take(key) {
                throw Problem(.tooManyRequests, "\(who) in the last minute, this server's limit (\(notificationRate.perMinute)); try again in \(wait) s",
                              headers: [.retryAfter: String(wait)])
            }
        }
        let body = try await request.body.collect(upTo: 64 * 1024)
        let bytes = Data(body.readableBytesView)
        // docs/api.md#dry-runs: checked as a send is; nothing is stored, queued or sent, the
        // Idempotency-Key is neither looked up nor kept, and no share of the rate limit is spent.
        let asked = try? Self.parseDraft(bytes)
        if let asked, asked.dryRun { return try await dryRun(asked, bytes: bytes, idempotencyHeader: idempotencyHeader, caller: caller) }
        // A repeat is answered first: it makes nothing, so it costs no share of the limit.
        let key = try idempotencyHeader.map { try IdempotencyKey(owner: sender, route: "POST /api/notifications", key: $0, body: bytes) }
        if let key, let id = try await idempotency.resource(for: key) { return try await notificationReplay(id) }
        if caller.apiKey == nil { try limit(sender, "\(sender) has created \(notificationRate.perMinute) notifications") }
        let (draft, to, requestedApp, _) = try asked ?? Self.parseDraft(bytes)
        let app = try apps.appAllowed(requestedApp, for: caller)
        let recipient = try await recipient(to, for: caller)
        if caller.apiKey != nil { try limit("to:" + recipient, "\(recipient) has been sent \(notificationRate.perMinute) notifications by API keys") }
        let created: CreatedNotification
        do {
            created = try await notifications.create(for: recipient, draft: draft, defaultImage: defaultImage,
                                                     addressing: dispatcher.addressing, app: app, idempotency: key, sender: caller.user,
                                                     audit: context.auditActor(request))
        } catch let replay as IdempotentReplay {
            var id = replay.resource
            if id == nil, let key { id = try await idempotency.resource(for: key) }
            guard let id else {
                throw Problem(.conflict, "a request with this Idempotency-Key is still being made; try again in a second", headers: [.retryAfter: "1"])
            }
            return try await notificationReplay(id)
        }
        Metric.pushes("queued", byApp: created.deliveriesByApp)
        dispatcher.enqueued(created, logger: context.logger)
        let n = created.notification
        payloadIndex.made([QueuedNotification(id: n.id, recipient: n.recipient, payload: n.payload)])
        return try JSONResponse.encode(NotificationCreated(id: n.id, message: n.message, richType: n.richType, payload: n.payload.hex, read: n.read,
                                                           mode: n.mode, title: n.title, richUrl: created.richUrl), status: .created)
    }

    /// What the first request with an `Idempotency-Key` answered: its notification.
    private func notificationReplay(_ id: Int64) async throws -> Response {
        guard let (n, richUrl) = try await notifications.created(id: id) else {
            throw Problem(.gone, "the notification this Idempotency-Key made (\(id)) was removed")
        }
        var response = try JSONResponse.encode(NotificationCreated(id: n.id, message: n.message, richType: n.richType, payload: n.payload.hex, read: n.read,
                                                                   mode: n.mode, title: n.title, richUrl: richUrl), status: .created)
        response.headers[HTTPField.Name("Idempotent-Replayed")!] = "true"
        return response
    }

    /// Empty body, a JSON string (the message), or `{"message","richType","payload","title","mode"}`.
    /// The body of `POST /api/notifications`: the draft, its recipient (`to`) and its app, when named.
    static func parseDraft(_ body: Data) throws -> (NotificationDraft, to: String?, app: String?, dryRun: Bool) {
        let shape = "{\"message\",\"richType\",\"payload\",\"title\",\"mode\",\"to\",\"app\",\"dryRun\"}"
        let body = body.starts(with: [0xEF, 0xBB, 0xBF]) ? body.dropFirst(3) : body // a UTF-8 byte order mark
        let text = body.drop { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        if text.isEmpty { return (NotificationDraft(), nil, nil, false) }
        if text.first == UInt8(ascii: "\"") {
            guard let message = try? JSONDecoder().decode(String.self, from: body) else {
                throw Problem(.badRequest, "the body must be empty, a JSON string (the message), or \(shape)")
            }
            return (NotificationDraft(message: message), nil, nil, false)
        }
        guard text.first == UInt8(ascii: "{") else {
            throw Problem(.badRequest, "the body must be empty, a JSON string (the message), or \(shape)")
        }
        let request = try RequestBody.decode(NotificationRequest.self, from: body, shape: shape)
        return (request.draft(defaultMode: .silent), request.to, request.app, request.dryRun ?? false)
    }

    /// Who a notification is for: the caller, or `to` when an admin or an API key names another
    /// (a key has no inbox: it must name one). 403 for a user naming someone else, 422 for nobody.
    func recipient(_ to: String?, for caller: Principal) async throws -> String {
        guard let to, to != caller.user else {
            if caller.apiKey != nil { throw Problem(.unprocessableContent, "an API key sends to a user: name them in \"to\"") }
            return caller.user
        }
        guard caller.admin || caller.apiKey != nil else {
            throw Problem(.forbidden, "\(caller.user) may create notifications for themselves only; \"to\" is for admins and API keys")
        }
        guard (try? UserStore.validateName(to)) != nil, try await users.credentials(of: to) != nil else {
            throw Problem(.unprocessableContent, "\"to\" names no user: '\(to.prefix(64))'")
        }
        return to
    }

    func listNotifications(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let (limit, before) = try Paging.page(request, defaultLimit: 100)
        // A fetch answered from memory just before shows as read (a failed mark is logged where it fails).
        try? await readMarks.settle()
        let list = try await notifications.list(for: try context.requireUser(), limit: limit, before: before)
        return try JSONResponse.encode(list.map {
            NotificationSummary(id: $0.id, message: $0.message, richType: $0.richType, payload: $0.payload.hex, read: $0.read,
                                created: $0.createdAt.formatted(.iso8601))
        })
    }

    func fetchPayload(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0 else { throw Problem(.notFound, "no notification \(raw.prefix(40))") }
        let mark = payloadIndex.mark()
        if let known = payloadIndex.get(id) {
            guard known.recipient == user else { throw Problem(.notFound, "no notification \(id) for \(user)") }
            return try await payloadResponse(request, notification: id, payload: known.payload, recipient: user, alreadyRead: known.read, since: mark)
        }
        guard let notification = try await notifications.find(id: id, for: user) else {
            if let owned = try await notifications.ownership(id), owned.recipient == user, owned.retractedAt != nil {
                throw Problem(.gone, "notification \(id) was withdrawn by its sender; its payload is no longer served")
            }
            throw Problem(.notFound, "no notification \(id) for \(user)")
        }
        return try await payloadResponse(request, notification: id, payload: notification.payload, recipient: user, alreadyRead: false, since: mark)
    }

    /// Notification `{id}`, for a caller who may change or take it back: an admin, or its sender
    /// (the user or key that made it). Its recipient otherwise is told 403; anyone else 404, as
    /// for reading it.
    private func revisable(_ context: AppRequestContext) async throws -> Int64 {
        let caller = try context.requirePrincipal()
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0, let owned = try await notifications.ownership(id) else {
            throw Problem(.notFound, "no notification \(raw.prefix(40))")
        }
        if caller.admin || owned.sender == caller.user { return id }
        guard owned.recipient == caller.user else { throw Problem(.notFound, "no notification \(id) for \(caller.user)") }
        let whose = owned.campaign.map { "it is campaign \($0)'s; an admin, or the key that sent the campaign, changes the campaign" }
            ?? "only its sender or an admin may change it or take it back"
        throw Problem(.forbidden, "notification \(id) was sent to you: \(whose)")
    }

    /// `PATCH /api/notifications/{id}` (docs/api.md#change-or-take-back-what-was-sent): new words,
    /// image or options, for its inbox entry, its payload URL and every device that got it.
    func changeNotification(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try await revisable(context)
        let body = try await RequestBody.collect(request, upTo: 64 * 1024, what: "a notification change")
        let asked = try RequestBody.decode(ContentChangeRequest.self, from: Data(body.readableBytesView), shape: ContentChangeRequest.shape)
        let (n, richUrl, outcome) = try await notifications.change(id, asked.change, defaultImage: defaultImage, audit: context.auditActor(request))
        payloadIndex.remove(outcome.repointed)
        dispatcher.outboxChanged()
        return try JSONResponse.encode(NotificationChangeResponse(id: n.id, message: n.message, title: n.title, payload: n.payload.hex, richUrl: richUrl,
                                                                  pending: outcome.pending, replacements: PlatformCounts(outcome.replacements)))
    }

    /// `DELETE /api/notifications/{id}` (docs/api.md#change-or-take-back-what-was-sent): takes it
    /// back from the inbox and from every device that got it.
    func retractNotification(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try await revisable(context)
        let asked = try await RetractRequest.read(request)
        let outcome = try await notifications.retract(id, text: asked.retractedText, audit: context.auditActor(request))
        payloadIndex.remove(outcome.retracted)
        dispatcher.outboxChanged()
        return try JSONResponse.encode(RetractResponse(outcome))
    }

    /// The payload image of notification `id`, marking it read on its first full or ranged GET
    /// (and storing it in the index, unless something was removed from it since `mark`).
    func payloadResponse(_ request: Request, notification id: Int64, payload: MediaID, recipient: String, alreadyRead: Bool,
                         since mark: UInt64) async throws -> Response {
        let served = try await mediaRoom.variantOrSelf(request, payload)
        guard let source = try await blobs.servable(served) else {
            throw Problem(.notFound, "the payload of notification \(id) is no longer stored")
        }
        let (response, outcome) = try ImageResponse.make(request, source: source, cacheControl: "private")
        if outcome != .head { Metric.credentialFetches.increment() }
        if !alreadyRead && outcome != .head {
            try await readMarks.mark(id)
            payloadIndex.set(id, .init(recipient: recipient, payload: payload, read: true), since: mark)
        }
        return response
    }
}
