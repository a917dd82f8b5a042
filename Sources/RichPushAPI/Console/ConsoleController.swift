import Foundation
import HTTPTypes
import Hummingbird
import MediaStore
import RichPushCore

/// The console's routes (`Endpoint.console`): its page, its sign-in and the calls its script
/// makes, several of them the API's own handlers behind the console's session.
struct ConsoleController: Sendable {
    /// The server's apps.
    let apps: AppCatalog
    /// The image a campaign without one shows (`serve --default-image`).
    let defaultImage: String
    /// A trace viewer's URL with `{traceId}` (`serve --trace-url`): a campaign's page links to its trace.
    let traceURL: String?
    /// How long a console session lasts, in seconds.
    let sessionLifetime: TimeInterval
    /// The server is reached over HTTPS (`--tls-cert`, or an `https://` `--public-url`): its
    /// session cookie is `Secure`.
    let servedOverHTTPS: Bool
    let authenticator: Authenticator
    let sessions: SessionStore
    let media: MediaStore
    let users: UserStore
    let registrations: RegistrationStore
    let notifications: NotificationStore
    let campaigns: CampaignStore
    /// Saved segments, counted for the audience check.
    let segments: SegmentStore
    /// The outbox, read (the console's failed deliveries).
    let deliveries: DeliveryStore
    /// Uploads and serves the console's images.
    let mediaRoom: MediaController
    /// Removes a user's device.
    let devicesRoom: DevicesController
    /// Lists, sends, cancels, changes and withdraws campaigns.
    let campaignsRoom: CampaignsController
    /// A campaign's stats.
    let insightRoom: InsightController
    /// Lists and saves segments.
    let segmentsRoom: SegmentsController
    /// Lists, starts, shows, updates and ends Live Activities.
    let liveActivitiesRoom: LiveActivitiesController
    /// Reads the audit log (the console's Audit log panel).
    let auditRoom: AuditController

    /// The principal of the console's session cookie; nil without a live session.
    func consolePrincipal(_ request: Request) async -> Principal? {
        guard let token = Console.sessionToken(request) else { return nil }
        return try? await authenticator.authenticate("Bearer \(token)")
    }

    /// The admin of a console API request: 401 without a session, 403 for a non-admin, and for
    /// anything but GET and HEAD also 403 without the session's CSRF token or from another site.
    func consoleAdmin(_ request: Request) async throws -> Principal {
        guard let principal = await consolePrincipal(request), let token = principal.sessionToken else {
            throw Problem(.unauthorized, "sign in at /console first")
        }
        guard principal.admin else { throw Problem(.forbidden, "\(principal.user) is not an admin") }
        if request.method != .get && request.method != .head {
            try Console.checkSameOrigin(request)
            guard Console.sameToken(request.headers[HTTPField.Name("X-CSRF-Token")!], Console.csrfToken(for: token)) else {
                throw Problem(.forbidden, "the console's CSRF token is missing or wrong: reload /console")
            }
        }
        return principal
    }

    func consolePage(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        guard let principal = await consolePrincipal(request), let token = principal.sessionToken else {
            return Console.html(Console.signInPage(error: nil))
        }
        guard principal.admin else { return Console.html(Console.forbiddenPage(user: principal.user), status: .forbidden) }
        return Console.html(Console.appPage(user: principal.user, csrf: Console.csrfToken(for: token), defaultImage: defaultImage, traceURL: traceURL))
    }

    /// `POST /console/session`: the sign-in form.
    func consoleSignIn(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        do {
            try Console.checkSameOrigin(request, required: true) // no login CSRF
        } catch let problem as Problem {
            return Console.html(Console.signInPage(error: problem.detail), status: .forbidden)
        }
        let fields = Console.form(try await request.body.collect(upTo: 16 * 1024))
        guard let name = fields["name"], let password = fields["password"], !name.isEmpty else {
            return Console.html(Console.signInPage(error: "Give a user name and a password."), status: .badRequest)
        }
        let basic = "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
        let principal: Principal
        do {
            principal = try await authenticator.authenticate(basic, from: context.clientAddress)
        } catch let problem as Problem {
            let words = problem.status == .unauthorized ? "That user name and password do not match." : problem.detail
            return Console.html(Console.signInPage(error: words), status: problem.status,
                                headers: HTTPFields(problem.headers.filter { $0.name == .retryAfter }))
        }
        guard principal.admin else { return Console.html(Console.forbiddenPage(user: principal.user), status: .forbidden) }
        // docs/operations.md#audit-log: who signed in, and from where (never the password or the token).
        let session = try await sessions.create(for: principal.user, lifetime: sessionLifetime,
                                                audit: context.auditActor(request, name: principal.user, kind: AuditActor.Kind.console))
        authenticator.remember(session: session.token, of: Principal(user: principal.user, admin: true), expires: session.expires)
        // Secure when this server speaks HTTPS, its public URL is https://, or a trusted proxy
        // (`--trusted-proxy`) says the client used HTTPS; anyone else's X-Forwarded-Proto is ignored.
        let secure = servedOverHTTPS || context.forwardedProto == "https" ? "; Secure" : ""
        let cookie = "\(Console.cookieName)=\(session.token); Path=/console; HttpOnly; SameSite=Strict; Max-Age=\(Int(sessionLifetime))\(secure)"
        return Response(status: .seeOther, headers: [.location: "/console", .setCookie: cookie, .cacheControl: "no-store"])
    }

    /// `POST /console/session/end`: signs out (the form carries the CSRF token).
    func consoleSignOut(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try Console.checkSameOrigin(request)
        guard let token = Console.sessionToken(request) else {
            return Response(status: .seeOther, headers: [.location: "/console"])
        }
        let fields = Console.form(try await request.body.collect(upTo: 4096))
        guard Console.sameToken(fields["csrf"], Console.csrfToken(for: token)) else {
            throw Problem(.forbidden, "the console's CSRF token is missing or wrong: reload /console")
        }
        _ = try await sessions.revoke(token)
        authenticator.forget("Bearer \(token)")
        return Response(status: .seeOther, headers: [.location: "/console", .setCookie: "\(Console.cookieName)=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0"])
    }

    func consoleMediaList(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let items = try await media.list(variants: false)
        let uses = try await media.references()
        return try JSONResponse.encode(items.map { item in
            ConsoleMediaItem(sha256: item.id.hex, contentType: item.info.contentType, width: item.info.width, height: item.info.height,
                             size: Int64(item.size), names: item.names, usedBy: uses[item.id] ?? [])
        })
    }

    func consoleUpload(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request) // an admin may name what it uploads
        context.consoleAdmin = context.principal?.user
        return try await mediaRoom.uploadMedia(request, context)
    }

    /// `GET /console/api/audience?all=1 | users=a,b | tags=expr | segment=NAME | filter=JSON`: who
    /// a campaign would reach, or the expression's fault in words (400; a filter's starts with
    /// its JSON path), as the admin types; for a list, the names that are no user (as
    /// `POST /api/admin/campaigns` would refuse them).
    func consoleAudience(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let admin = try await consoleAdmin(request)
        let query = request.uri.queryParameters
        let segment: String? = query.get("segment").map { String($0) }
        let filterText: String? = query.get("filter").map { String($0) }
        if segment != nil || filterText != nil {
            let filter: SegmentFilter
            do {
                if let segment {
                    try SegmentStore.validateName(segment)
                    filter = .segment(segment)
                } else {
                    filter = try SegmentFilter(jsonText: filterText ?? "")
                }
            } catch let error as CoreError {
                throw Problem(.badRequest, error.message)
            }
            let app = try apps.knownApp(query.get("app").map { String($0) }, for: admin)
            // Every app: the segment's own count; one app: the campaign's reach, its devices in that app.
            let reach: (users: Int, devices: Int)
            if let app {
                reach = try await campaigns.reach(.filter(filter), app: app)
            } else {
                reach = try await segments.count(filter)
            }
            return try JSONResponse.encode(ConsoleReach(users: reach.users, devices: reach.devices, unknown: []))
        }
        let audience: Audience
        do {
            if let tags = query.get("tags") {
                audience = .tags(try TagExpression(tags))
            } else if let users = query.get("users") {
                audience = try .listing(users.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            } else {
                audience = .all
            }
        } catch let error as CoreError {
            throw Problem(.badRequest, error.message)
        }
        let app = try apps.knownApp(query.get("app").map { String($0) }, for: admin)
        let (reached, devices) = try await campaigns.reach(audience, app: app)
        var unknown: [String] = []
        // The reach counts every listed name that is a user: when it counts them all, none is unknown.
        if case .users(let names) = audience, reached < names.count {
            unknown = try await users.unknown(names)
        }
        return try JSONResponse.encode(ConsoleReach(users: reached, devices: devices, unknown: unknown))
    }

    /// `GET /console/api/apps`: this server's apps (and any other that devices are registered to), with their devices.
    func consoleApps(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let counts = try await registrations.devicesByApp()
        let names = Set(apps.names).union(counts.keys)
        return try JSONResponse.encode(names.sorted().map { ConsoleApp(name: $0, devices: counts[$0] ?? 0) })
    }

    /// Answers as `route` does for the console's admin: the session's principal, checked to be an
    /// admin's (and, for a write, its CSRF token), stands for the request's credentials.
    private func asAdmin(_ request: Request, _ context: AppRequestContext,
                         _ route: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        var context = context
        let admin = try await consoleAdmin(request)
        context.principal = admin
        context.consoleAdmin = admin.user
        return try await route(request, context)
    }

    /// `GET /console/api/campaigns?limit=&before=`: campaigns newest first with their counts, as
    /// `GET /api/admin/campaigns` lists them (the console's campaigns panel).
    func consoleCampaigns(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, campaignsRoom.listCampaigns)
    }

    /// `POST /console/api/campaigns`: sends a campaign, as `POST /api/admin/campaigns` does.
    func consoleSend(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, campaignsRoom.createCampaign)
    }

    /// `GET /console/api/campaigns/{id}/stats`: as `GET /api/admin/campaigns/{id}/stats` answers it.
    func consoleStats(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, insightRoom.campaignStats)
    }

    /// `DELETE /console/api/campaigns/{id}`: cancels it, as `DELETE /api/admin/campaigns/{id}` does.
    func consoleCancel(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, campaignsRoom.cancelCampaign)
    }

    /// `PATCH /console/api/campaigns/{id}`: changes a sent campaign's words, as
    /// `PATCH /api/admin/campaigns/{id}` does: its inbox entries and payload links show
    /// them, pushes not yet sent carry them, and devices that already got it get a replacement.
    func consoleChange(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, campaignsRoom.changeCampaign)
    }

    /// `POST /console/api/campaigns/{id}/retract`: withdraws a sent campaign, as
    /// `POST /api/admin/campaigns/{id}/retract` does: it leaves the inboxes,
    /// and the devices that showed it get a push that removes it.
    func consoleRetract(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, campaignsRoom.retractCampaign)
    }

    /// `GET /console/api/campaigns/{id}`: its counts, and the reasons of its failed deliveries.
    func consoleWatch(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0, let progress = try await campaigns.progress(id) else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        let failed = try await deliveries.failed(campaign: id).map { ConsoleFailure(target: String($0.target.prefix(24)), reason: $0.reason ?? "") }
        return try JSONResponse.encode(ConsoleProgress(campaign: CampaignResponse(progress), failures: failed))
    }

    /// `GET /console/api/live-activities?limit=`: Live Activities newest first, as
    /// `GET /api/live-activities` lists them (the console's Live Activities panel).
    func consoleLiveActivities(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, liveActivitiesRoom.listActivities)
    }

    /// `POST /console/api/live-activities`: starts a Live Activity, as `POST /api/live-activities` does.
    func consoleStartActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, liveActivitiesRoom.startActivity)
    }

    /// `GET /console/api/live-activities/{id}`: its state, counts and devices, as
    /// `GET /api/live-activities/{id}` answers it.
    func consoleShowActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, liveActivitiesRoom.showActivity)
    }

    /// `PATCH /console/api/live-activities/{id}`: updates it on every device, as
    /// `PATCH /api/live-activities/{id}` does.
    func consoleUpdateActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, liveActivitiesRoom.updateActivity)
    }

    /// `DELETE /console/api/live-activities/{id}`: ends it, as `DELETE /api/live-activities/{id}` does.
    func consoleEndActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, liveActivitiesRoom.endActivity)
    }

    /// `GET /console/api/users?q=`: users whose name contains `q`, with their device counts.
    func consoleUsers(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let query: String? = request.uri.queryParameters.get("q").map { String($0) }
        let search = query.flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        return try JSONResponse.encode(try await users.overview(matching: search, limit: 200).map {
            ConsoleUser(name: $0.user.name, admin: $0.user.admin, devices: $0.devices, created: $0.user.createdAt.formatted(.iso8601))
        })
    }

    /// `GET /console/api/users/{name}`: a user's devices and last ten pushes.
    func consoleUser(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let name = try context.parameters.require("name")
        guard try await users.credentials(of: name) != nil else { throw Problem(.notFound, "no user \(name.prefix(80))") }
        let devices = try await registrations.list(for: name).filter { $0.handle != nil }.map {
            ConsoleDevice(registrationId: $0.id, platform: $0.platform ?? "apns", app: $0.app, handle: String(($0.handle ?? "").prefix(24)),
                          tags: $0.tags.filter { !$0.hasPrefix("username:") }, updated: $0.updatedAt.formatted(.iso8601))
        }
        let pushes = try await notifications.list(for: name, limit: 10).map {
            ConsolePush(id: $0.id, title: $0.title, message: $0.message, mode: $0.mode, read: $0.read, created: $0.createdAt.formatted(.iso8601))
        }
        return try JSONResponse.encode(ConsoleUserDetail(name: name, devices: devices, pushes: pushes))
    }

    /// `DELETE /console/api/registrations/{id}?user=`: removes a device, as its owner's
    /// `DELETE /api/register/{id}` does.
    func consoleRemoveDevice(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let admin = try await consoleAdmin(request)
        guard let owner: String = request.uri.queryParameters.get("user").map({ String($0) }) else {
            throw Problem(.badRequest, "name the device's owner: ?user=NAME")
        }
        var context = context
        context.principal = Principal(user: owner, admin: false)
        context.consoleAdmin = admin.user // the audit log names the admin, not the owner
        return try await devicesRoom.deleteRegistration(request, context)
    }

    /// `GET /console/api/audit?actor=&action=&since=&limit=&before=`: the audit log, newest first,
    /// as `GET /api/admin/audit` answers it (the console's Audit log panel).
    func consoleAudit(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, auditRoom.list)
    }

    /// `GET /console/api/segments`: the saved segments, as `GET /api/admin/segments` lists them.
    func consoleSegments(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, segmentsRoom.list)
    }

    /// `PUT /console/api/segments/{name}`: saves a filter as a segment, as `PUT /api/admin/segments/{name}` does.
    func consoleSaveSegment(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await asAdmin(request, context, segmentsRoom.save)
    }

    /// `POST /console/api/preview`: a campaign's title, message and subtitle rendered for one
    /// user as the campaign would render them (404 for no such user, 422 for a template that
    /// does not parse, naming the field and where, as `POST /api/admin/campaigns` refuses it).
    func consolePreview(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let body = try await RequestBody.collect(request, upTo: CampaignsController.campaignBodyLimit, what: "a preview body")
        let asked = try RequestBody.decode(ConsolePreviewRequest.self, from: Data(body.readableBytesView),
                                           shape: "{\"user\",\"title\",\"message\",\"options\":{\"subtitle\",…}}")
        let content = NotificationDraft(message: asked.message, title: asked.title, mode: .alert, options: asked.options ?? PushOptions())
        let words = try await campaigns.preview(content, for: asked.user)
        return try JSONResponse.encode(ConsolePreview(title: words.title, message: words.message, subtitle: words.subtitle))
    }

    func consoleImage(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        return try await mediaRoom.serveImage(request, context, cacheControl: "private, max-age=31536000, immutable")
    }
}
