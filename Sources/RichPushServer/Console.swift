import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import MediaStore
import Mustache
import RichPushCore

/// `/console` (docs/api.md#console): a page for admins, server-rendered with a little script, no build
/// step and nothing fetched from elsewhere. The pages are files (`ConsolePages`); this type
/// serves them and guards the session.
///
/// Signing in makes a session (§9) whose token lives only in an `HttpOnly`, `SameSite=Strict`
/// cookie scoped to `/console`; no password is kept. Every state-changing request must carry the
/// session's CSRF token (an HMAC of the session token the page is given, sent back in
/// `X-CSRF-Token` or a form field) and, when the browser names one, an `Origin` of this server.
enum Console {
    static let cookieName = "richpush_console"

    /// The session token in the request's cookie.
    static func sessionToken(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == cookieName, !parts[1].isEmpty { return String(parts[1]) }
            }
        }
        return nil
    }

    /// The CSRF token of a session: only a page this server rendered for the session has it.
    static func csrfToken(for session: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("richpush console csrf".utf8), using: SymmetricKey(data: Data(session.utf8)))
        return Base64URL.encode(Array(mac))
    }

    /// Refuses (403) a request another site made: an `Origin` (or, without one, a `Referer`)
    /// that is not this server's. With `required`, also one that names neither (the sign-in
    /// form: a browser always sends `Origin` with a form's POST).
    static func checkSameOrigin(_ request: Request, required: Bool = false) throws {
        let refused = Problem(.forbidden, "this request did not come from this server's console page; the console only takes its own")
        guard let claimed = request.headers[.origin] ?? request.headers[.referer] else {
            if required { throw refused }
            return
        }
        guard let url = URL(string: claimed), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { throw refused }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        // The Host this request was sent to, with the scheme's port when it names none.
        var authority = (request.head.authority ?? "").lowercased()
        let namesPort = authority.hasPrefix("[") ? authority.contains("]:") : authority.contains(":")
        if !namesPort { authority += ":\(scheme == "https" ? 443 : 80)" }
        let claimedHost = host.hasPrefix("[") || !host.contains(":") ? host : "[\(host)]" // IPv6 as Host writes it
        guard authority == "\(claimedHost):\(port)" else { throw refused }
    }

    /// Compares two tokens in time that does not depend on where they differ.
    static func sameToken(_ a: String?, _ b: String) -> Bool {
        guard let a else { return false }
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<x.count { difference |= x[i] ^ y[i] }
        return difference == 0
    }

    /// Fields of an `application/x-www-form-urlencoded` body.
    static func form(_ body: ByteBuffer) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                .map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    static func html(_ body: String, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
        headers[HTTPField.Name("Content-Security-Policy")!] = "default-src 'self'; img-src 'self' blob:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    /// The sign-in form, with why the last try was refused when it was.
    static func signInPage(error: String?) -> String {
        var values: [String: String] = ["css": ConsolePages.css]
        values["error"] = error // absent, not empty, when there is none: the template leaves its line blank
        return ConsolePages.signIn.render(values)
    }

    /// The page for a signed-in user who is not an admin.
    static func forbiddenPage(user: String) -> String {
        let values: [String: String] = ["css": ConsolePages.css, "user": user]
        return ConsolePages.forbidden.render(values)
    }

    /// The console itself, for an admin's session: the CSRF token goes in the page's
    /// `csrf-token` meta tag (the script sends it as `X-CSRF-Token`) and in the sign-out form.
    /// The server's default image (`--default-image`, by name) goes in `default-image`: the
    /// image picker starts on it.
    static func appPage(user: String, csrf: String, defaultImage: String) -> String {
        let values: [String: String] = ["css": ConsolePages.css, "script": ConsolePages.script, "user": user, "csrf": csrf, "defaultImage": defaultImage]
        return ConsolePages.app.render(values)
    }
}

/// The console's pages, from `Pages/` in the target's resources: Mustache templates for the
/// HTML, and the style sheet and script they inline.
///
/// The CSS and the script are inlined with `{{{…}}}` (never parsed as Mustache, never escaped),
/// since the console's CSP allows inline style and script and no other source. Values the server
/// fills in use `{{…}}`, which HTML-escapes them as the page always did (`& < > " '`). Each
/// template is loaded and parsed once, on first use; one that is missing or does not parse stops
/// the server there with its name, rather than serving a blank page.
enum ConsolePages {
    static let css = PageFile.text("console", "css")
    static let script = PageFile.text("console", "js")
    static let signIn = PageFile.template("console-signin")
    static let forbidden = PageFile.template("console-forbidden")
    static let app = PageFile.template("console-app")
}

/// A page's file in the target's resources (`Sources/RichPushServer/Pages`), compiled into the
/// binary by SwiftPM (`.embedInCode`): a deployed `richpush` needs no folder beside it.
///
/// Every file ends with one newline that is not part of the page: an editor may keep it, and the
/// bytes served stay those of the file without it. A name with no file, or an empty file, is a
/// build mistake, not a page: it stops the server naming the file.
enum PageFile {
    static let folder = "Pages"

    /// Loads and parses every page now, so that a broken install stops the server as it starts
    /// rather than at the first request for a page.
    static func loadAll() {
        _ = (ConsolePages.css, ConsolePages.script, ConsolePages.signIn, ConsolePages.forbidden, ConsolePages.app,
             WebPushDemo.page, WebPushDemo.serviceWorker)
    }

    /// Every embedded file, by its name in `Pages/`.
    private static let embedded: [String: [UInt8]] = [
        "console-app.mustache": PackageResources.console_app_mustache,
        "console-forbidden.mustache": PackageResources.console_forbidden_mustache,
        "console-signin.mustache": PackageResources.console_signin_mustache,
        "console.css": PackageResources.console_css,
        "console.js": PackageResources.console_js,
        "webpush-demo.html": PackageResources.webpush_demo_html,
        "webpush-sw.js": PackageResources.webpush_sw_js,
    ]

    /// The text of `Pages/NAME.EXT`, less its final newline.
    static func text(_ name: String, _ ext: String) -> String {
        let file = "\(name).\(ext)"
        guard let bytes = embedded[file] else {
            fatalError("RichPushServer has no page file \(folder)/\(file): add it to Pages/ and to the target's resources in Package.swift")
        }
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        guard !text.isEmpty else { fatalError("RichPushServer's page file \(folder)/\(file) is empty") }
        return text
    }

    /// The Mustache template `Pages/NAME.mustache`, parsed.
    static func template(_ name: String) -> MustacheTemplate {
        let source = text(name, "mustache")
        do {
            return try MustacheTemplate(string: source)
        } catch {
            fatalError("RichPushServer's page template \(folder)/\(name).mustache does not parse: \(error)")
        }
    }
}

/// What the console lists for an image.
struct ConsoleMediaItem: Codable, Sendable {
    var sha256: String
    var contentType: String
    var width: Int
    var height: Int
    var size: Int64
    var names: [String]
    /// Who references it: `notification:12`, `campaign:3`, …
    var usedBy: [String]
}

/// Who a campaign would reach.
struct ConsoleReach: Codable, Sendable {
    var users: Int
    var devices: Int
    /// The listed names that are no user of this server (a campaign naming them is refused);
    /// empty for everyone and for a tag expression.
    var unknown: [String]
}

/// An app and how many devices are registered to it.
struct ConsoleApp: Codable, Sendable {
    var name: String
    var devices: Int
}

/// A user in the console's list.
struct ConsoleUser: Codable, Sendable {
    var name: String
    var admin: Bool
    var devices: Int
    var created: String
}

/// A device in the console.
struct ConsoleDevice: Codable, Sendable {
    var registrationId: String
    var platform: String
    /// The app it belongs to.
    var app: String
    /// The token or handle, cut short.
    var handle: String
    var tags: [String]
    var updated: String
}

/// One of a user's last pushes.
struct ConsolePush: Codable, Sendable {
    var id: Int64
    var title: String?
    var message: String
    var mode: PushMode
    var read: Bool
    var created: String
}

/// A user's devices and last pushes.
struct ConsoleUserDetail: Codable, Sendable {
    var name: String
    var devices: [ConsoleDevice]
    var pushes: [ConsolePush]
}

/// A failed delivery, as the console shows it.
struct ConsoleFailure: Codable, Sendable {
    /// The device (its token or handle, cut short).
    var target: String
    var reason: String
}

/// A campaign's counts and its failures.
struct ConsoleProgress: Codable, Sendable {
    var campaign: CampaignResponse
    var failures: [ConsoleFailure]
}

extension Services {
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
        return Console.html(Console.appPage(user: principal.user, csrf: Console.csrfToken(for: token), defaultImage: configuration.defaultImage))
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
        let session = try await sessions.create(for: principal.user, lifetime: configuration.sessionLifetime)
        authenticator.remember(session: session.token, of: Principal(user: principal.user, admin: true), expires: session.expires)
        // Secure when this server speaks HTTPS, its public URL is https://, or a trusted proxy
        // (`--trusted-proxy`) says the client used HTTPS; anyone else's X-Forwarded-Proto is ignored.
        let httpsURL = configuration.publicURL?.lowercased().hasPrefix("https://") == true
        let secure = configuration.tlsCertificatePath != nil || httpsURL || context.forwardedProto == "https" ? "; Secure" : ""
        let cookie = "\(Console.cookieName)=\(session.token); Path=/console; HttpOnly; SameSite=Strict; Max-Age=\(Int(configuration.sessionLifetime))\(secure)"
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
        return try encode(items.map { item in
            ConsoleMediaItem(sha256: item.id.hex, contentType: item.info.contentType, width: item.info.width, height: item.info.height,
                             size: Int64(item.size), names: item.names, usedBy: uses[item.id] ?? [])
        })
    }

    func consoleUpload(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request) // an admin may name what it uploads
        return try await uploadMedia(request, context)
    }

    /// `GET /console/api/audience?all=1 | users=a,b | tags=expr`: who a campaign would reach,
    /// or the expression's fault in words (400), as the admin types; for a list, the names that
    /// are no user (as `POST /api/admin/campaigns` would refuse them).
    func consoleAudience(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let admin = try await consoleAdmin(request)
        let query = request.uri.queryParameters
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
        let app = try knownApp(query.get("app").map { String($0) }, for: admin)
        let (reached, devices) = try await campaigns.reach(audience, app: app)
        var unknown: [String] = []
        // The reach counts every listed name that is a user: when it counts them all, none is unknown.
        if case .users(let names) = audience, reached < names.count {
            unknown = try await users.unknown(names)
        }
        return try encode(ConsoleReach(users: reached, devices: devices, unknown: unknown))
    }

    /// `GET /console/api/apps`: this server's apps (and any other that devices are registered to), with their devices.
    func consoleApps(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let counts = try await registrations.devicesByApp()
        let names = Set([AppName.default]).union(configuration.apps.keys).union(counts.keys)
        return try encode(names.sorted().map { ConsoleApp(name: $0, devices: counts[$0] ?? 0) })
    }

    /// `GET /console/api/campaigns?limit=&before=`: campaigns newest first with their counts, as
    /// `GET /api/admin/campaigns` lists them (the console's campaigns panel).
    func consoleCampaigns(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request)
        return try await listCampaigns(request, context)
    }

    /// `POST /console/api/campaigns`: sends a campaign, as `POST /api/admin/campaigns` does.
    func consoleSend(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request)
        return try await createCampaign(request, context)
    }

    /// `GET /console/api/campaigns/{id}/stats`: as `GET /api/admin/campaigns/{id}/stats` answers it.
    func consoleStats(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request)
        return try await campaignStats(request, context)
    }

    /// `DELETE /console/api/campaigns/{id}`: cancels it, as `DELETE /api/admin/campaigns/{id}` does.
    func consoleCancel(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request)
        return try await cancelCampaign(request, context)
    }

    /// `GET /console/api/campaigns/{id}`: its counts, and the reasons of its failed deliveries.
    func consoleWatch(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0, let progress = try await campaigns.progress(id) else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        let failed = try await deliveries.failed(campaign: id).map { ConsoleFailure(target: String($0.target.prefix(24)), reason: $0.reason ?? "") }
        return try encode(ConsoleProgress(campaign: CampaignResponse(progress), failures: failed))
    }

    /// `GET /console/api/users?q=`: users whose name contains `q`, with their device counts.
    func consoleUsers(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let query: String? = request.uri.queryParameters.get("q").map { String($0) }
        let search = query.flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        return try encode(try await users.overview(matching: search, limit: 200).map {
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
        return try encode(ConsoleUserDetail(name: name, devices: devices, pushes: pushes))
    }

    /// `DELETE /console/api/registrations/{id}?user=`: removes a device, as its owner's
    /// `DELETE /api/register/{id}` does.
    func consoleRemoveDevice(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        guard let owner: String = request.uri.queryParameters.get("user").map({ String($0) }) else {
            throw Problem(.badRequest, "name the device's owner: ?user=NAME")
        }
        var context = context
        context.principal = Principal(user: owner, admin: false)
        return try await deleteRegistration(request, context)
    }

    func consoleImage(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        return try await serveImage(request, context, cacheControl: "private, max-age=31536000, immutable")
    }
}
