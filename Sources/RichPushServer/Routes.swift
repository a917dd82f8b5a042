import HTTPEdge
import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MediaStore
import Metrics
import NIOConcurrencyHelpers
import Prometheus
import PushDelivery
import Resilience
import RichPushCore

/// Everything the routes need, built once by `buildApplication`.
struct Services: Sendable {
    let configuration: ServerConfiguration
    let media: MediaStore
    let blobs: BlobCache
    let users: UserStore
    let registrations: RegistrationStore
    let notifications: NotificationStore
    let sessions: SessionStore
    let campaigns: CampaignStore
    /// Queues a POSTed campaign's recipients past its first `ahead`.
    let campaignQueuer: CampaignQueuer
    /// The outbox, read (the console's failed deliveries).
    let deliveries: DeliveryStore
    /// `Idempotency-Key`s seen (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries).
    let idempotency: IdempotencyStore
    /// Signs and checks payload URLs.
    let links: PayloadLinks
    /// Records payload fetches as read, a batch per commit.
    let readMarks: ReadMarks
    let authenticator: Authenticator
    let dispatcher: any PushDispatching
    /// Notification Hubs' copy of the registrations, when delivering through a hub.
    let mirror: (any RegistrationMirror)?
    let prometheus: PrometheusCollectorRegistry
    /// Notifications made or fetched here: recipient and payload, so fetches need no database read.
    let payloadIndex: PayloadIndex
    /// Uploads being received and decoded now.
    let uploads: Gate
    /// `--access-log`.
    let accessLog: AccessLog
    /// `/openapi.json`, made once.
    let openAPI: Data
    /// `POST /api/notifications` per user (`--notifications-per-minute`).
    let notificationRate: RateLimiter
    /// Opens reported per client address (`--opens-per-minute`): `POST /p/{token}/opened` needs no credentials.
    let openRate: RateLimiter
    /// Who a request is from (`--trusted-proxy`), for the router and the fast path alike.
    let clientAddresses: ClientAddressResolver
}

/// Counts holders up to a limit, and each key's (a user's) up to a share of it; `enter`
/// refuses past either instead of queueing.
final class Gate: Sendable {
    private let limit: Int
    /// Holders one key may be at once: a quarter of the limit, so one user cannot take every slot.
    let perKey: Int
    private struct Counts {
        var total = 0
        var byKey: [String: Int] = [:]
    }
    private let counts = NIOLockedValueBox(Counts())

    init(limit: Int) {
        self.limit = limit
        self.perKey = max(1, limit / 4)
    }

    /// Why a holder was refused.
    enum Refusal: Error { case full, keyFull }

    /// Takes a slot for `key`; throws `.full` when every slot is held, `.keyFull` when the key holds its share.
    func enter(key: String? = nil) throws(Refusal) {
        let refusal = counts.withLockedValue { counts -> Refusal? in
            guard counts.total < limit else { return .full }
            if let key {
                guard counts.byKey[key, default: 0] < perKey else { return .keyFull }
                counts.byKey[key, default: 0] += 1
            }
            counts.total += 1
            return nil
        }
        if let refusal { throw refusal }
    }

    /// Gives back the slot `enter(key:)` took.
    func leave(key: String? = nil) {
        counts.withLockedValue { counts in
            counts.total -= 1
            if let key {
                let left = counts.byKey[key, default: 1] - 1
                counts.byKey[key] = left > 0 ? left : nil
            }
        }
    }
}

extension Services {
    // MARK: ops

    func health(_ request: Request, _ context: AppRequestContext) throws -> Response {
        try encode(HealthResponse(status: "ok"))
    }

    /// Readiness (docs/operations.md#when-a-dependency-fails): the database and the blobs each answer within 2 s, probed at once;
    /// 503 naming those that did not. Nothing is cached: a dependency that comes back is ready
    /// at the next probe.
    ///
    /// A push provider whose last sends failed for a cause a person must mend (its certificate
    /// not trusted, its key or topic refused, nothing listening: `ProviderHealth`) is named too,
    /// as `PLATFORM:APP` (`apns:default`), after the dependencies, until one of its pushes is sent.
    /// The dispatcher logged its cause and fix once; a probe does not log it again.
    func ready(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let media = self.media
        let probes: [(String, @Sendable () async throws -> Void)] = [("database", { try await media.probeDatabase() }),
                                                                     ("blobs", { try await media.probeBlobs() })]
        let failing = await withTaskGroup(of: String?.self) { group in
            for (name, probe) in probes {
                group.addTask {
                    let answered = await withTaskGroup(of: Bool.self) { race in
                        race.addTask { (try? await probe()) != nil }
                        race.addTask { try? await Task.sleep(for: .seconds(2)); return false }
                        let first = await race.next() ?? false
                        race.cancelAll()
                        return first
                    }
                    return answered ? nil : name
                }
            }
            var failing: [String] = []
            for await name in group { if let name { failing.append(name) } }
            return failing.sorted()
        }
        let providers = dispatcher.providerHealth?.failing ?? []
        guard failing.isEmpty && providers.isEmpty else {
            if !failing.isEmpty { context.logger.warning("not ready", metadata: ["failing": "\(failing)"]) }
            var response = try encode(ReadyResponse(status: "unready", failing: failing + providers), status: .serviceUnavailable)
            response.headers[.retryAfter] = "5"
            return response
        }
        return try encode(ReadyResponse(status: "ready"))
    }

    func metrics(_ request: Request, _ context: AppRequestContext) throws -> Response {
        // With `--metrics-port`, metrics are served there only: here they are no route at all.
        guard configuration.metricsPort == nil else { throw Problem(.notFound, "no such route") }
        return MetricsListener.response(prometheus)
    }

    func openAPIResponse() -> Response {
        Response(status: .ok, headers: [.contentType: "application/json", .contentLength: String(openAPI.count)],
                 body: .init(byteBuffer: ByteBuffer(bytes: openAPI)))
    }

    // MARK: media

    func uploadMedia(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let declared = request.headers[.contentLength].flatMap(Int.init)
        let name = request.uri.queryParameters.get("name")
        if name != nil, context.principal?.admin != true {
            throw Problem(.forbidden, "media names are shared by every user, so only admins may name media; upload without ?name= and use the sha256")
        }
        let uploader = context.principal?.user
        do {
            try uploads.enter(key: uploader)
        } catch .full {
            throw Problem(.serviceUnavailable, "\(configuration.maxConcurrentUploads) uploads are being checked already; try again in a moment",
                          headers: [.retryAfter: "1"])
        } catch .keyFull {
            throw Problem(.tooManyRequests, "\(uploader ?? "this user") has \(uploads.perKey) uploads being checked already (a quarter of the server's \(configuration.maxConcurrentUploads)); wait for their answers",
                          headers: [.retryAfter: "1"])
        }
        defer { uploads.leave(key: uploader) }
        let result: IngestResult
        do {
            result = try await media.ingest(upload: request.body, declaredLength: declared, name: name)
        } catch let rejection as MediaRejection {
            Metric.ingest(rejection.kind.rawValue)
            throw rejection
        } catch let error as MediaStoreError where error.isNameTaken {
            throw Problem(.conflict, error.message)
        } catch let error as DependencyUnavailable {
            throw error
        } catch let error as MediaStoreError where error.isIO {
            // The message names server paths: it goes to the log, the client gets the kind of failure.
            context.logger.error("cannot store an upload", metadata: ["error": "\(error.message)"])
            if error.isOutOfSpace {
                throw Problem(HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"),
                              "the server's storage is full; nothing was stored (try again once an operator has made room)")
            }
            throw Problem(.internalServerError, "the server could not store the upload; nothing was stored; its log has details under request id \(context.id)")
        } catch let error as MediaStoreError {
            throw Problem(.badRequest, error.message) // the name given, or the like: the client's to mend
        } catch let error as S3Error {
            context.logger.error("the media bucket did not store an upload", metadata: ["error": "\(error)"])
            throw Self.bucketRefusal(error, requestID: context.id)
        } catch let error as any HTTPResponseError {
            throw error
        } catch {
            // The client went away or broke the body off: its problem, not a server error worth a log line.
            throw Problem(.badRequest, "the upload ended before its body did (\(error))")
        }
        Metric.ingest(result.status.rawValue)
        let item = result.item
        let url = "/media/\(item.id.hex)"
        var response = try encode(MediaResponse(sha256: item.id.hex, contentType: item.info.contentType, width: item.info.width,
                                                height: item.info.height, size: Int64(item.size), url: url,
                                                stripped: result.stripped.map(\.rawValue)),
                                  status: result.status == .stored ? .created : .ok)
        response.headers[.location] = url
        return response
    }

    func serveMedia(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await serveImage(request, context, cacheControl: configuration.publicMedia ? "public, max-age=31536000, immutable"
                                                                                     : "private, max-age=31536000, immutable")
    }

    /// The image (or its `?variant=`) whose id is the `sha256` path parameter.
    func serveImage(_ request: Request, _ context: AppRequestContext, cacheControl: String) async throws -> Response {
        let raw = try context.parameters.require("sha256")
        guard let id = MediaID(raw) else {
            throw Problem(.notFound, "'\(raw.prefix(80))' is not a media id (64 hex digits)")
        }
        let served = try await variantOrSelf(request, id)
        guard let source = try await blobs.servable(served) else { throw Problem(.notFound, "no media \(id.hex)") }
        return try ImageResponse.make(request, source: source, cacheControl: cacheControl).0
    }

    /// The image `?variant=thumb|push` asks for (made on its first request), else `id` itself;
    /// 400 for another variant name, 404 when `id` is not stored.
    func variantOrSelf(_ request: Request, _ id: MediaID) async throws -> MediaID {
        guard let name = request.uri.queryParameters.get("variant") else { return id }
        guard let kind = MediaVariant(rawValue: name) else {
            throw Problem(.badRequest, "variant must be thumb or push, not '\(name.prefix(40))'")
        }
        do {
            let variant = try await media.variant(kind, of: id).id
            blobs.remember(variant: variant, of: id, kind)
            return variant
        } catch let error as MediaStoreError where error.isNotFound {
            throw Problem(.notFound, "no media \(id.hex)")
        }
    }

    // MARK: registrations

    func createRegistration(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let handle = request.uri.queryParameters.get("handle")
        let registration = try await registrations.create(for: try user(context), replacingHandle: handle)
        return try encode(RegistrationCreated(registrationId: registration.id))
    }

    func updateRegistration(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let body = try await request.body.collect(upTo: 64 * 1024)
        let update = try RequestBody.decode(RegistrationUpdate.self, from: Data(body.readableBytesView),
                                            shape: "{\"platform\":\"apns\"|\"fcm\"|\"web\",\"handle\":<APNs hex token, FCM token or PushSubscription>,\"tags\":[...]}")
        let app = try knownApp(update.app, for: context.principal) ?? AppName.default
        let throughHub = mirror != nil && hubApps.contains(app)
        if throughHub && update.platform.lowercased() != "apns" {
            throw Problem(.unprocessableContent, "this server delivers app \(app) through Notification Hubs, which RichPush uses for APNs only; platform '\(update.platform.prefix(20))' needs FCM or Web Push credentials instead")
        }
        if update.platform.lowercased() == "web" { try await checkPushEndpoint(update.handle.text) }
        let registration = try await registrations.update(id: id, for: try user(context),
                                                          with: DeviceRegistration(platform: update.platform, handle: update.handle.text,
                                                                                   tags: update.tags ?? [], replaces: update.replaces, app: app))
        if let mirror, throughHub {
            do { try await mirror.upsert(registration) } catch let error as DependencyUnavailable {
                throw Problem(.serviceUnavailable, "registration \(id) is saved, but \(error.dependency.phrase) is not answering; PUT it again in \(error.retryAfter) s",
                              headers: [.retryAfter: String(error.retryAfter)])
            } catch {
                // The hub's own words (its namespace, its errors) go to the log, not to the device.
                context.logger.error("the hub did not take a registration", metadata: ["registration": "\(id)", "error": "\(error)"])
                throw Problem(.badGateway, "registration \(id) is saved, but the push service did not take it; PUT it again (request id \(context.id))")
            }
        }
        return try encode(RegistrationResponse(registrationId: registration.id, platform: registration.platform ?? "",
                                               handle: registration.handle ?? "", tags: registration.tags, app: registration.app))
    }

    /// Refuses (422) a subscription whose endpoint RichPush would never send to: not https, not
    /// port 443, an IP address, or a name that does not resolve or resolves to any non-public
    /// address (`--allow-private-push-endpoints` lifts this, for local stand-ins). A malformed
    /// subscription is 400, as the registration store would say.
    func checkPushEndpoint(_ handle: String) async throws {
        let subscription = try WebPushSubscription(jsonText: handle)
        do {
            try await OutboundPolicy(allowPrivate: configuration.allowPrivatePushEndpoints).check(subscription.endpoint)
        } catch let error as OutboundError where error.isTimeout {
            // A name server that did not answer now says nothing of the endpoint: try again later.
            throw Problem(.serviceUnavailable, error.message, headers: [.retryAfter: "30"])
        } catch let error as OutboundError {
            throw Problem(.unprocessableContent, error.message)
        }
    }

    func deleteRegistration(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        try await registrations.delete(id: id, for: try user(context))
        if let mirror {
            do { try await mirror.delete(registrationID: id) } catch {
                context.logger.warning("registration deleted here but not in the hub", metadata: ["id": "\(id)", "error": "\(error)"])
            }
        }
        return try encode(RegistrationDeleted(registrationId: id, deleted: true))
    }

    func webPushKey(_ request: Request) throws -> Response {
        let app = try knownApp(request.uri.queryParameters.get("app").map { String($0) }, isPublic: true) ?? AppName.default
        guard let key = app == AppName.default ? configuration.vapidPublicKey : configuration.apps[app]?.vapidPublicKey else {
            throw Problem(.notFound, app == AppName.default ? "this server sends no Web Push; start serve with --vapid-key and --vapid-subject"
                                                            : "app \(app) sends no Web Push: give it \"webpush\" in serve --apps")
        }
        return try encode(WebPushKeyResponse(publicKey: key))
    }

    // MARK: notifications

    func createNotification(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try principal(context)
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
        // A repeat is answered first: it makes nothing, so it costs no share of the limit.
        let key = try idempotencyHeader.map { try IdempotencyKey(owner: sender, route: "POST /api/notifications", key: $0, body: bytes) }
        if let key, let id = try await idempotency.resource(for: key) { return try await notificationReplay(id) }
        if caller.apiKey == nil { try limit(sender, "\(sender) has created \(notificationRate.perMinute) notifications") }
        let (draft, to, requestedApp) = try Self.parseDraft(bytes)
        let app = try appAllowed(requestedApp, for: caller)
        let recipient = try await recipient(to, for: caller)
        if caller.apiKey != nil { try limit("to:" + recipient, "\(recipient) has been sent \(notificationRate.perMinute) notifications by API keys") }
        let created: CreatedNotification
        do {
            created = try await notifications.create(for: recipient, draft: draft, defaultImage: configuration.defaultImage,
                                                     addressing: dispatcher.addressing, app: app, idempotency: key)
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
        return try encode(NotificationCreated(id: n.id, message: n.message, richType: n.richType, payload: n.payload.hex, read: n.read,
                                              mode: n.mode, title: n.title, richUrl: created.richUrl), status: .created)
    }

    /// What the first request with an `Idempotency-Key` answered: its notification.
    private func notificationReplay(_ id: Int64) async throws -> Response {
        guard let (n, richUrl) = try await notifications.created(id: id) else {
            throw Problem(.gone, "the notification this Idempotency-Key made (\(id)) was removed")
        }
        var response = try encode(NotificationCreated(id: n.id, message: n.message, richType: n.richType, payload: n.payload.hex, read: n.read,
                                                      mode: n.mode, title: n.title, richUrl: richUrl), status: .created)
        response.headers[HTTPField.Name("Idempotent-Replayed")!] = "true"
        return response
    }

    /// Empty body, a JSON string (the message), or `{"message","richType","payload","title","mode"}`.
    /// The body of `POST /api/notifications`: the draft, its recipient (`to`) and its app, when named.
    static func parseDraft(_ body: Data) throws -> (NotificationDraft, to: String?, app: String?) {
        let shape = "{\"message\",\"richType\",\"payload\",\"title\",\"mode\",\"to\",\"app\"}"
        let body = body.starts(with: [0xEF, 0xBB, 0xBF]) ? body.dropFirst(3) : body // a UTF-8 byte order mark
        let text = body.drop { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        if text.isEmpty { return (NotificationDraft(), nil, nil) }
        if text.first == UInt8(ascii: "\"") {
            guard let message = try? JSONDecoder().decode(String.self, from: body) else {
                throw Problem(.badRequest, "the body must be empty, a JSON string (the message), or \(shape)")
            }
            return (NotificationDraft(message: message), nil, nil)
        }
        guard text.first == UInt8(ascii: "{") else {
            throw Problem(.badRequest, "the body must be empty, a JSON string (the message), or \(shape)")
        }
        let request = try RequestBody.decode(NotificationRequest.self, from: body, shape: shape)
        return (request.draft(defaultMode: .silent), request.to, request.app)
    }

    // MARK: apps and API keys (docs/api.md#apps-and-api-keys)

    /// The apps whose registrations are mirrored into a hub.
    var hubApps: Set<String> {
        dispatcher.addressing.tagApps.union(configuration.apps.filter(\.value.hub).keys)
    }

    /// `name` when it is one of this server's apps (`default` or one of `serve --apps`); 422 otherwise.
    /// `name` when it is an app of this server's; else 422, or 404 on a public route
    /// (`isPublic`). Only an admin is told the apps' names: the configuration is no one else's
    /// to read (docs/security.md).
    func knownApp(_ name: String?, for caller: Principal? = nil, isPublic: Bool = false) throws -> String? {
        guard let name else { return nil }
        guard name == AppName.default || configuration.apps[name] != nil else {
            if isPublic { throw Problem(.notFound, "no app named '\(name.prefix(64))' on this server") }
            guard caller?.admin == true else {
                throw Problem(.unprocessableContent, "no app named '\(name.prefix(64))' on this server; the app's developers know its name")
            }
            let known = ([AppName.default] + configuration.apps.keys.sorted()).joined(separator: ", ")
            throw Problem(.unprocessableContent, "no app named '\(name.prefix(64))' on this server; its apps are \(known)")
        }
        return name
    }

    /// The app a notification or campaign goes to: the one asked for (known, 422 otherwise), and
    /// for a key bound to an app, that app alone (403 for another; its own when none is named).
    func appAllowed(_ requested: String?, for caller: Principal) throws -> String? {
        let app = try knownApp(requested, for: caller)
        guard let bound = caller.apiKey?.app else { return app }
        // A key made for an app this server does not have would reach no device, silently.
        guard bound == AppName.default || configuration.apps[bound] != nil else {
            throw Problem(.forbidden, "API key \(caller.apiKey!.name) is bound to app \(bound), which this server does not have; "
                          + "start serve with that app in --apps, or make a key for one of its apps (richpush api-keys add NAME --app APP)")
        }
        guard app == nil || app == bound else {
            throw Problem(.forbidden, "API key \(caller.apiKey!.name) is bound to app \(bound); it cannot send to app \(app!)")
        }
        return bound
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
        let (limit, before) = try Self.page(request, defaultLimit: 100)
        // A fetch answered from memory just before shows as read (a failed mark is logged where it fails).
        try? await readMarks.settle()
        let list = try await notifications.list(for: try user(context), limit: limit, before: before)
        return try encode(list.map {
            NotificationSummary(id: $0.id, message: $0.message, richType: $0.richType, payload: $0.payload.hex, read: $0.read,
                                created: $0.createdAt.formatted(.iso8601))
        })
    }

    func fetchPayload(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let user = try user(context)
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0 else { throw Problem(.notFound, "no notification \(raw.prefix(40))") }
        if let known = payloadIndex.get(id) {
            guard known.recipient == user else { throw Problem(.notFound, "no notification \(id) for \(user)") }
            return try await payloadResponse(request, notification: id, payload: known.payload, recipient: user, alreadyRead: known.read)
        }
        guard let notification = try await notifications.find(id: id, for: user) else {
            throw Problem(.notFound, "no notification \(id) for \(user)")
        }
        return try await payloadResponse(request, notification: id, payload: notification.payload, recipient: user, alreadyRead: false)
    }

    /// The payload image of notification `id`, marking it read on its first full or ranged GET.
    func payloadResponse(_ request: Request, notification id: Int64, payload: MediaID, recipient: String, alreadyRead: Bool) async throws -> Response {
        let served = try await variantOrSelf(request, payload)
        guard let source = try await blobs.servable(served) else {
            throw Problem(.notFound, "the payload of notification \(id) is no longer stored")
        }
        let (response, outcome) = try ImageResponse.make(request, source: source, cacheControl: "private")
        if outcome != .head { Metric.credentialFetches.increment() }
        if !alreadyRead && outcome != .head {
            try await readMarks.mark(id)
            payloadIndex.set(id, .init(recipient: recipient, payload: payload, read: true))
        }
        return response
    }

    // MARK: helpers

    /// `?limit=1…500&before=ID` of a list; a value that is not a whole number is a 400, not the default.
    static func page(_ request: Request, defaultLimit: Int) throws -> (limit: Int, before: Int64?) {
        func number(_ name: String) throws -> Int64? {
            let values = request.uri.queryParameters.getAll(name)
            guard let text = values.first else { return nil }
            guard values.count == 1, let value = Int64(text) else { throw Problem(.badRequest, "\(name) must be one whole number, got '\(text.prefix(40))'") }
            return value
        }
        let limit = try number("limit") ?? Int64(defaultLimit)
        guard (1...500).contains(limit) else { throw Problem(.badRequest, "limit must be 1 to 500") }
        return (Int(limit), try number("before"))
    }

    func user(_ context: AppRequestContext) throws -> String {
        guard let user = context.user else { throw Authenticator.unauthorized("credentials are required") }
        return user
    }
}

extension Services {
    /// The answer to an upload the bucket answered but did not store (docs/operations.md#when-a-dependency-fails): never the
    /// client's fault. Its own trouble (a 5xx, still there after the client's retries) is a 503
    /// naming the bucket, to be tried again; a refusal (403 for wrong credentials, a missing
    /// bucket) is a 500 whose details go to the log. Either way nothing was stored.
    static func bucketRefusal(_ error: S3Error, requestID: String) -> Problem {
        if case .service(let status, _, _) = error, status >= 500 {
            return Problem(.serviceUnavailable, "the media bucket is failing (it answered \(status) to every try); nothing was stored; try again in a few seconds",
                           headers: [.retryAfter: "5"])
        }
        return Problem(.internalServerError, "the media bucket refused to store the upload; nothing was stored; the server's log has details under request id \(requestID)")
    }
}
