import Foundation
import Hummingbird
import MediaStore
import RichPushCore

extension Endpoint {
    /// Every route of docs/api.md#http-api, §9–§11 and §14, in the order `/openapi.json` lists them.
    static let all: [Endpoint] = ops + media + registrations + webPush + notifications + sessions + campaigns + me + payloadLinks + insight + console

    static let webPush: [Endpoint] = [
        Endpoint(method: .get, path: "/api/webpush/key", access: .open, summary: "The VAPID public key a browser subscribes with (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).",
                 parameters: [.query("app", .string, "The app (docs/api.md#apps-and-api-keys); default when left out.")],
                 responses: [
                     200: .json(WebPushKeyResponse.self, "The key, for pushManager.subscribe({applicationServerKey})."),
                     404: .problem("This server (or the app) sends no Web Push (no --vapid-key), or there is no app of that name (never listed: docs/security.md)."),
                 ]) { s, r, _ in try s.webPushKey(r) },
        Endpoint(method: .get, path: "/webpush-demo", access: .open, summary: "A page where a browser subscribes for an account.",
                 responses: [200: APIResponse(description: "HTML, no external resources.", content: [("text/html", .string)])]) { _, _, _ in
            WebPushDemo.response(WebPushDemo.page, contentType: "text/html; charset=utf-8")
        },
        Endpoint(method: .get, path: "/webpush-sw.js", access: .open, summary: "The demo page's service worker: shows each message with its image.",
                 responses: [200: APIResponse(description: "JavaScript.", content: [("text/javascript", .string)])]) { _, _, _ in
            WebPushDemo.response(WebPushDemo.serviceWorker, contentType: "text/javascript; charset=utf-8")
        },
    ]

    /// The console (docs/api.md#console): its page and the calls its script makes, with the session cookie
    /// the page's sign-in sets (no Authorization header).
    static let console: [Endpoint] = [
        Endpoint(method: .get, path: "/console", access: .open,
                 summary: "The admin console: its sign-in form without a session cookie, the console with an admin's, 403 with another user's.",
                 responses: [200: APIResponse(description: "HTML, no external resources.", content: [("text/html", .string)]),
                             403: APIResponse(description: "The session is not an admin's (HTML).", content: [("text/html", .string)])]) { s, r, c in
            try await s.consolePage(r, c)
        },
        Endpoint(method: .post, path: "/console/session", access: .open, summary: "Signs in to the console (form: name, password); sets the session cookie.",
                 requestBody: APIRequestBody(required: true, content: [("application/x-www-form-urlencoded", JSONSchema.type("object").with {
                     $0.properties = ["name": JSONSchema.string.with { $0.minLength = 1 }, "password": .string]
                     $0.required = ["name", "password"]
                 })], description: "The sign-in form."),
                 responses: [303: APIResponse(description: "Signed in: to /console, with the session cookie.", headers: ["Location": "/console", "Set-Cookie": "The session (HttpOnly, SameSite=Strict)."]),
                             400: APIResponse(description: "No name or password (HTML).", content: [("text/html", .string)]),
                             401: APIResponse(description: "Wrong name or password (HTML).", content: [("text/html", .string)]),
                             403: APIResponse(description: "Not an admin, or posted from another site (HTML).", content: [("text/html", .string)]),
                             429: APIResponse(description: "Too many failed sign-ins (HTML).", content: [("text/html", .string)], headers: ["Retry-After": "Seconds to wait."])]) { s, r, c in
            try await s.consoleSignIn(r, c)
        },
        Endpoint(method: .post, path: "/console/session/end", access: .open, summary: "Signs out of the console (form: csrf).",
                 requestBody: APIRequestBody(required: false, content: [("application/x-www-form-urlencoded", JSONSchema.type("object").with { $0.properties = ["csrf": .string] })],
                                             description: "The page's CSRF token."),
                 responses: [303: APIResponse(description: "Signed out: to /console, the cookie cleared.", headers: ["Location": "/console"]),
                             403: .problem("The CSRF token is wrong, or the request came from another site.")]) { s, r, c in
            try await s.consoleSignOut(r, c)
        },
        Endpoint(method: .get, path: "/console/api/media", access: .open, summary: "The console's image list, with where each image is used.",
                 responses: [200: .jsonArray(of: ConsoleMediaItem.self, "Newest first, variants left out."),
                             401: .problem("No console session."), 403: .problem("The session is not an admin's.")]) { s, r, c in
            try await s.consoleMediaList(r, c)
        },
        Endpoint(method: .post, path: "/console/api/media", access: .open, summary: "An upload from the console (X-CSRF-Token required).",
                 parameters: [.header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/octet-stream", .binary)], description: "A PNG, JPEG or GIF file."),
                 responses: [201: .json(MediaResponse.self, "Stored."), 200: .json(MediaResponse.self, "Already stored."),
                             401: .problem("No console session."), 403: .problem("Not an admin, no CSRF token, or another site's request."),
                             413: .problem("Over the size limit."), 415: .problem("Not PNG, JPEG or GIF."), 422: .problem("It does not decode.")]) { s, r, c in
            try await s.consoleUpload(r, c)
        },
        Endpoint(method: .get, path: "/console/api/apps", access: .open, summary: "The server's apps, each with its registered devices (docs/api.md#apps-and-api-keys).",
                 responses: [200: .jsonArray(of: ConsoleApp.self, "By name, default included."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's.")]) { s, r, c in
            try await s.consoleApps(r, c)
        },
        Endpoint(method: .get, path: "/console/api/audience", access: .open, summary: "Who a campaign would reach: everyone, listed users, or a tag expression.",
                 parameters: [.query("users", .string, "User names, comma-separated."), .query("tags", .string, "A tag expression."),
                              .query("all", .string, "Everyone (the default)."), .query("app", .string, "Only this app's devices.")],
                 responses: [200: .json(ConsoleReach.self, "Users and devices it reaches now, and the listed names that are no user."), 400: .problem("The expression or the list is malformed (in words)."),
                             422: .problem("No app of that name on this server."),
                             401: .problem("No console session."), 403: .problem("The session is not an admin's.")]) { s, r, c in
            try await s.consoleAudience(r, c)
        },
        Endpoint(method: .get, path: "/console/api/campaigns", access: .open, summary: "The console's campaigns panel: campaigns, newest first, with their counts and schedules.",
                 parameters: [.query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 50)."),
                              .query("before", .integer, "Only campaigns with smaller ids (the next page).")],
                 responses: [200: .jsonArray(of: CampaignResponse.self, "As GET /api/admin/campaigns lists them."), 400: .problem("limit is out of range."),
                             401: .problem("No console session."), 403: .problem("The session is not an admin's.")]) { s, r, c in
            try await s.consoleCampaigns(r, c)
        },
        Endpoint(method: .post, path: "/console/api/campaigns", access: .open, summary: "Sends a campaign from the console (X-CSRF-Token required).",
                 parameters: [.header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("CampaignRequest"))], description: "As POST /api/admin/campaigns takes it."),
                 responses: [202: .json(CampaignResponse.self, "Queued.", headers: ["Location": "Its progress."]), 400: .problem("A malformed body."),
                             401: .problem("No console session."), 403: .problem("Not an admin, no CSRF token, or another site's request."),
                             422: .problem("Unknown image or users, or too long for a push.")]) { s, r, c in
            try await s.consoleSend(r, c)
        },
        Endpoint(method: .get, path: "/console/api/campaigns/{id}", access: .open, summary: "A campaign's counts and its failed deliveries' reasons.",
                 parameters: [.path("id", .integer, "The campaign id.")],
                 responses: [200: .json(ConsoleProgress.self, "Counts and failures."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's."), 404: .problem("No such campaign.")]) { s, r, c in
            try await s.consoleWatch(r, c)
        },
        Endpoint(method: .get, path: "/console/api/campaigns/{id}/stats", access: .open, summary: "A campaign's funnel and timeline, for the console's chart.",
                 parameters: [.path("id", .integer, "The campaign id.")],
                 responses: [200: .json(CampaignStatsResponse.self, "As /api/admin/campaigns/{id}/stats."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's."), 404: .problem("No such campaign.")]) { s, r, c in
            try await s.consoleStats(r, c)
        },
        Endpoint(method: .delete, path: "/console/api/campaigns/{id}", access: .open, summary: "Cancels a campaign from the console (X-CSRF-Token required).",
                 parameters: [.path("id", .integer, "The campaign id."), .header("X-CSRF-Token", "The token of the console page.")],
                 responses: [200: .json(CampaignResponse.self, "Cancelled."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."), 404: .problem("No such campaign."),
                             409: .problem("The campaign is done.")]) { s, r, c in
            try await s.consoleCancel(r, c)
        },
        Endpoint(method: .get, path: "/console/api/users", access: .open, summary: "Users whose name contains q, with their device counts.",
                 parameters: [.query("q", .string, "Part of a name (any case).")],
                 responses: [200: .jsonArray(of: ConsoleUser.self, "By name, at most 200."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's.")]) { s, r, c in
            try await s.consoleUsers(r, c)
        },
        Endpoint(method: .get, path: "/console/api/users/{name}", access: .open, summary: "A user's devices and last ten pushes.",
                 parameters: [.path("name", .string, "The user name.")],
                 responses: [200: .json(ConsoleUserDetail.self, "Devices and pushes."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's."), 404: .problem("No such user.")]) { s, r, c in
            try await s.consoleUser(r, c)
        },
        Endpoint(method: .delete, path: "/console/api/registrations/{id}", access: .open, summary: "Removes a user's device (X-CSRF-Token required).",
                 parameters: [.path("id", .string, "The registration id."), .query("user", .string, "Its owner."),
                              .header("X-CSRF-Token", "The token of the console page.")],
                 responses: [200: .json(RegistrationDeleted.self, "Removed."), 400: .problem("No ?user=."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."),
                             404: .problem("No such registration for that user."), 410: .problem("It was already removed or expired.")]) { s, r, c in
            try await s.consoleRemoveDevice(r, c)
        },
        Endpoint(method: .get, path: "/console/media/{sha256}", access: .open, summary: "An image for the console's grid (the session cookie instead of credentials).",
                 parameters: imageParameters(.path("sha256", mediaID, "The media id."), variants: true),
                 responses: imageResponses(notFound: "No such media.", variants: true).merging([401: .problem("No console session."),
                                                                                                403: .problem("The session is not an admin's.")]) { a, _ in a }) { s, r, c in
            try await s.consoleImage(r, c)
        },
    ]

    static let ops: [Endpoint] = [
        Endpoint(method: .get, path: "/", access: .open, summary: "The server's root: a redirect to the console.",
                 responses: [302: APIResponse(description: "To /console.", headers: ["Location": "/console"])]) { _, _, _ in
            Response(status: .found, headers: [.location: "/console"])
        },
        Endpoint(method: .get, path: "/health", access: .open, summary: "Liveness: 200 while the server runs.",
                 responses: [200: .json(HealthResponse.self, "The server is up.")]) { s, r, c in try s.health(r, c) },
        Endpoint(method: .get, path: "/ready", access: .open, summary: "Readiness: 200 when the database and the blobs answer and no push provider fails on the server's own settings, else 503 naming what fails.",
                 responses: [200: .json(ReadyResponse.self, "Every dependency answered."),
                             503: APIResponse.json(ReadyResponse.self, "A dependency did not answer within 2 s, or a push provider's sends fail for a cause in the server's settings (untrusted certificate, refused token, wrong topic, nothing listening): `failing` names it (`database`, `blobs`, `PLATFORM:APP` such as `apns:default`).",
                                                  headers: ["Retry-After": "Seconds to wait."])]) { s, r, c in
            try await s.ready(r, c)
        },
        Endpoint(method: .get, path: "/metrics", access: .open, summary: "Metrics in Prometheus' text format.",
                 responses: [200: APIResponse(description: "Prometheus text format 0.0.4.", content: [("text/plain", .string)])]) { s, r, c in
            try s.metrics(r, c)
        },
        Endpoint(method: .get, path: "/openapi.json", access: .open, summary: "This document.",
                 responses: [200: APIResponse(description: "OpenAPI 3.1.", content: [("application/json", .type("object"))])]) { s, _, _ in
            s.openAPIResponse()
        },
    ]

    static let media: [Endpoint] = [
        Endpoint(method: .get, path: "/media/{sha256}", access: .media, summary: "An image, by its media id.",
                 parameters: imageParameters(.path("sha256", mediaID, "The media id: SHA-256 of the bytes, 64 hex digits."), variants: true),
                 keys: .read,
                 responses: imageResponses(notFound: "No such media.", variants: true)) { s, r, c in try await s.serveMedia(r, c) },
        Endpoint(method: .head, path: "/media/{sha256}", access: .media, summary: "An image's headers, by its media id.",
                 parameters: imageParameters(.path("sha256", mediaID, "The media id: SHA-256 of the bytes, 64 hex digits."), variants: true),
                 keys: .read,
                 responses: imageResponses(notFound: "No such media.", variants: true)) { s, r, c in try await s.serveMedia(r, c) },
        Endpoint(method: .post, path: "/api/media", access: .user, summary: "Store an image (PNG, JPEG or GIF), checked by decoding it whole.",
                 parameters: [.query("name", ValuePattern.string(ValuePattern.mediaName), "A name for the image (admins only); a name of other bytes is 409.")],
                 requestBody: APIRequestBody(required: true, content: [("image/png", .binary), ("image/jpeg", .binary), ("image/gif", .binary), ("application/octet-stream", .binary)],
                                             description: "The image's bytes."),
                 keys: .send,
                 responses: [
                     201: .json(MediaResponse.self, "Stored.", headers: ["Location": "Where the image is served."]),
                     200: .json(MediaResponse.self, "Already stored.", headers: ["Location": "Where the image is served."]),
                     400: .problem("The upload broke off, or the name is not valid."),
                     403: .problem("Only admins may name media."),
                     409: .problem("The name already names other bytes."),
                     411: .problem("The upload has no length."),
                     413: .problem("too_large: over the size or pixel limits."),
                     415: .problem("unsupported: not a PNG, JPEG or GIF."),
                     422: .problem("corrupt: it does not decode."),
                     503: .problem("Too many uploads are being checked; try again.", headers: ["Retry-After": "Seconds to wait."]),
                 ]) { s, r, c in try await s.uploadMedia(r, c) },
    ]

    static let registrations: [Endpoint] = [
        Endpoint(method: .post, path: "/api/register", access: .user, summary: "A new registration id for a device (the tutorial's first step).",
                 parameters: [.query("handle", ValuePattern.string(ValuePattern.deviceToken), "The device's current token: its stale registrations are removed first.")],
                 responses: [
                     200: APIResponse.json(RegistrationCreated.self, "The new id.")
                         .linking("SetRegistration", to: "putApiRegisterId", parameter: "id", from: "registrationId")
                         .linking("DeleteRegistration", to: "deleteApiRegisterId", parameter: "id", from: "registrationId"),
                     400: .problem("The handle is not a device token."),
                     409: .problem("The account has the most registrations allowed."),
                 ]) { s, r, c in try await s.createRegistration(r, c) },
        Endpoint(method: .put, path: "/api/register/{id}", access: .user, summary: "Set a registration's platform, device token and tags.",
                 parameters: [.path("id", .string, "A registration id from POST /api/register.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("RegistrationUpdate"))],
                                             description: "Keys in any case; the server adds username:<user> to the tags. The handle is an APNs token in hex (apns), an FCM registration token (fcm), or a browser's PushSubscription as an object or its JSON text (web)."),
                 responses: [
                     200: .json(RegistrationResponse.self, "Saved."),
                     400: .problem("A field is missing or malformed, the handle is not one of its platform, or a tag is not valid."),
                     403: .problem("A tag names another user."),
                     409: .problem("The device token is registered to another account, or the account has the most registrations allowed."),
                     410: .problem("The registration expired; POST /api/register again."),
                     413: .problem("The body is over 64 KiB."),
                     422: .problem("The platform is not supported, or a Web Push endpoint RichPush will not send to (not https on 443, or not a public address)."),
                     503: .problem("The Web Push endpoint's host could not be looked up now.", headers: ["Retry-After": "Seconds to wait."]),
                     502: .problem("Saved here, but the push service did not take it."),
                 ]) { s, r, c in try await s.updateRegistration(r, c) },
        Endpoint(method: .delete, path: "/api/register/{id}", access: .user, summary: "Remove a registration.",
                 parameters: [.path("id", .string, "A registration id.")],
                 responses: [
                     200: .json(RegistrationDeleted.self, "Removed."),
                     404: .problem("No such registration for this user."),
                 ]) { s, r, c in try await s.deleteRegistration(r, c) },
    ]

    static let notifications: [Endpoint] = [
        Endpoint(method: .post, path: "/api/notifications", access: .user,
                 summary: "Create a rich notification for the caller (or, for an admin or a send key, the user named in to) and send its push to each of their devices (of app, when named).",
                 parameters: [.query("pns", .string, "Ignored (the tutorial's client sends it)."),
                              .query("to_tag", .string, "Ignored (the tutorial's client sends it)."), idempotencyKey],
                 requestBody: APIRequestBody(required: false, content: [("application/json", .oneOf([
                     JSONSchema.string.with { $0.description = "The message (the tutorial's body)." }, .ref("NotificationRequest"),
                 ]))], description: "Empty (every default), a JSON string (the message), or an object; keys in any case."),
                 keys: .send,
                 responses: [
                     201: APIResponse.json(NotificationCreated.self, "Created and queued.")
                         .linking("FetchPayload", to: "getApiNotificationsId", parameter: "id", from: "id")
                         .linking("PayloadHeaders", to: "headApiNotificationsId", parameter: "id", from: "id"),
                     400: .problem("The body is not one of the accepted shapes, or a field has the wrong type."),
                     403: .problem("A user named another user in to, or an API key asked for an app it is not bound to, or lacks the scope."),
                     413: .problem("The body is over 64 KiB."),
                     422: .problem("No media of that id or name, no such user or app, the push would be too large, or the notification cannot be made as asked."),
                     429: .problem("The caller made --notifications-per-minute notifications in the last minute (for an API key: the recipient was sent that many by keys).", headers: ["Retry-After": "Seconds to wait."]),
                 ]) { s, r, c in try await s.createNotification(r, c) },
        Endpoint(method: .get, path: "/api/notifications", access: .user, summary: "The caller's notifications, newest first.",
                 parameters: [.query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 100)."),
                              .query("before", .integer, "Only notifications with smaller ids (the next page).")],
                 responses: [
                     200: .jsonArray(of: NotificationSummary.self, "The notifications."),
                     400: .problem("limit is out of range."),
                 ]) { s, r, c in try await s.listNotifications(r, c) },
        Endpoint(method: .get, path: "/api/notifications/{id}", access: .user,
                 summary: "The notification's payload image, for its recipient alone; marks it read.",
                 parameters: imageParameters(.path("id", notificationID, "The notification id.")),
                 responses: imageResponses(notFound: "No such notification for this user, or its payload is gone.")) { s, r, c in
            try await s.fetchPayload(r, c)
        },
        Endpoint(method: .head, path: "/api/notifications/{id}", access: .user, summary: "The payload image's headers.",
                 parameters: imageParameters(.path("id", notificationID, "The notification id.")),
                 responses: imageResponses(notFound: "No such notification for this user, or its payload is gone.")) { s, r, c in
            try await s.fetchPayload(r, c)
        },
    ]

    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: `Idempotency-Key` on the POSTs that create.
    static let idempotencyKey = APIParameter(name: "Idempotency-Key", location: .header,
                                             schema: JSONSchema.string.with { $0.minLength = 1; $0.maxLength = 255 }, description: "Any string up to 255 bytes: a repeat with the same key and body within 24 h answers what the first did (Idempotent-Replayed: true) and creates nothing; the same key with another body is 422.")

    static let sessions: [Endpoint] = [
        Endpoint(method: .post, path: "/api/sessions", access: .password, summary: "A session token for a device, made with Basic credentials.",
                 responses: [
                     201: .json(SessionResponse.self, "The token and when it expires."),
                     403: .problem("Sessions are made with Basic credentials, not with another session."),
                 ]) { s, r, c in try await s.createSession(r, c) },
        Endpoint(method: .delete, path: "/api/sessions/current", access: .session, summary: "Revoke the session token this request carries.",
                 responses: [
                     204: APIResponse(description: "Revoked."),
                     401: .problem("No session token (Basic credentials have no session to revoke), or an unknown one.",
                                   headers: ["WWW-Authenticate": "How to authenticate."]),
                 ]) { s, r, c in try await s.deleteCurrentSession(r, c) },
    ]

    static let campaigns: [Endpoint] = [
        Endpoint(method: .post, path: "/api/admin/campaigns", access: .admin,
                 summary: "Send one rich notification to everyone, to listed users, or to the devices a tag expression matches: now, at sendAt, or at localTime in each recipient's zone.",
                 parameters: [idempotencyKey],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("CampaignRequest"))],
                                             description: "audience holds exactly one of all (true), users or tags."),
                 keys: .send,
                 responses: [
                     202: APIResponse.json(CampaignResponse.self, "Queued: the first 5,000 recipients (a smaller campaign whole); the rest follows in the background as the sends go out, counted in its progress.",
                                           headers: ["Location": "The campaign's progress."])
                         .linking("Progress", to: "getApiAdminCampaignsId", parameter: "id", from: "id"),
                     400: .problem("The body, the audience or the tag expression is not valid."),
                     409: .problem("The creator has 1,000 campaigns scheduled and not yet sent, the most one may have waiting."),
                     413: .problem("The body is over 256 KiB, or content has more than 50 locales."),
                     422: .problem("A listed user or the payload does not exist, or the push would be too large."),
                 ]) { s, r, c in try await s.createCampaign(r, c) },
        Endpoint(method: .get, path: "/api/admin/campaigns", access: .admin, summary: "Campaigns, newest first, with their counts.",
                 parameters: [.query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 50)."),
                              .query("before", .integer, "Only campaigns with smaller ids (the next page).")],
                 keys: .read,
                 responses: [
                     200: .jsonArray(of: CampaignResponse.self, "The campaigns."),
                     400: .problem("limit is out of range."),
                 ]) { s, r, c in try await s.listCampaigns(r, c) },
        Endpoint(method: .get, path: "/api/admin/campaigns/{id}", access: .admin, summary: "A campaign's progress.",
                 parameters: [.path("id", JSONSchema.integer.with { $0.minimum = 1 }, "The campaign id.")],
                 keys: .read,
                 responses: [
                     200: .json(CampaignResponse.self, "The campaign and its counts."),
                     404: .problem("No such campaign."),
                 ]) { s, r, c in try await s.showCampaign(r, c) },
        Endpoint(method: .delete, path: "/api/admin/campaigns/{id}", access: .admin,
                 summary: "Cancel what has not been sent (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries): nothing more is queued, pushes not yet handed to a push service are dropped, recipients who got nothing lose the inbox entry.",
                 parameters: [.path("id", JSONSchema.integer.with { $0.minimum = 1 }, "The campaign id.")],
                 keys: .send,
                 responses: [
                     200: .json(CampaignResponse.self, "Cancelled (or already): its status is cancelled, sent counts what went out."),
                     403: .problem("A send key that did not create the campaign (docs/security.md: an admin cancels any)."),
                     404: .problem("No such campaign."),
                     409: .problem("The campaign is done: every push was sent."),
                 ]) { s, r, c in try await s.cancelCampaign(r, c) },
    ]

    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: the caller's time zone and locale.
    static let me: [Endpoint] = [
        Endpoint(method: .get, path: "/api/me", access: .user, summary: "The caller's account: name, role, time zone and locale.",
                 responses: [200: .json(MeResponse.self, "The account.")]) { s, r, c in try await s.showMe(r, c) },
        Endpoint(method: .put, path: "/api/me", access: .user, summary: "Set the caller's time zone (IANA) and locale (BCP 47), each optional.",
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("MeUpdate"))], description: "{\"timezone\",\"locale\"}"),
                 responses: [200: .json(MeResponse.self, "The account as it is now."),
                             400: .problem("An unknown time zone, a malformed locale, or a field the body does not have."),
                             413: .problem("The body is over 64 KiB.")]) { s, r, c in try await s.updateMe(r, c) },
    ]

    static let payloadLinks: [Endpoint] = [
        Endpoint(method: .get, path: "/p/{token}", access: .open, summary: "A payload image through a signed, expiring payload URL (no credentials).",
                 parameters: imageParameters(.path("token", .string, "The token of an alert push's richUrl."), variants: true),
                 responses: imageResponses(notFound: "The token is not valid (changed, or its key was rotated).", gone: true, variants: true)) { s, r, c in
            try await s.fetchPayloadByLink(r, c)
        },
        Endpoint(method: .head, path: "/p/{token}", access: .open, summary: "A payload image's headers through a payload URL.",
                 parameters: imageParameters(.path("token", .string, "The token of an alert push's richUrl."), variants: true),
                 responses: imageResponses(notFound: "The token is not valid (changed, or its key was rotated).", gone: true, variants: true)) { s, r, c in
            try await s.fetchPayloadByLink(r, c)
        },
        Endpoint(method: .post, path: "/p/{token}/opened", access: .open,
                 summary: "The device says the notification of this payload URL was opened (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks); counted once.",
                 parameters: [.path("token", .string, "The token of an alert push's richUrl.")],
                 responses: [204: APIResponse(description: "Counted (or already: then nothing is written)."),
                             404: .problem("The token is not valid (changed, or its key was rotated)."),
                             410: .problem("The payload URL expired, or its notification was withdrawn."),
                             429: .problem("Too many opens from this client address in a minute (--opens-per-minute).",
                                           headers: ["Retry-After": "Seconds until one more is taken."])]) { s, r, c in
            try await s.reportOpenedByLink(r, c)
        },
    ]

    /// docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: opened reports and a campaign's stats.
    static let insight: [Endpoint] = [
        Endpoint(method: .post, path: "/api/notifications/{id}/opened", access: .user,
                 summary: "The recipient's device says the notification was opened (tapped); counted once.",
                 parameters: [.path("id", notificationID, "The notification id.")],
                 responses: [204: APIResponse(description: "Counted (or already: then nothing is written)."),
                             404: .problem("No such notification for this user."),
                             429: .problem("Too many opens from this client address in a minute (--opens-per-minute).",
                                           headers: ["Retry-After": "Seconds until one more is taken."])]) { s, r, c in
            try await s.reportOpened(r, c)
        },
        Endpoint(method: .get, path: "/api/admin/campaigns/{id}/stats", access: .admin,
                 summary: "A campaign's funnel (queued, sent, failed, displayed, opened), by platform, its failure reasons and a per-minute timeline.",
                 parameters: [.path("id", JSONSchema.integer.with { $0.minimum = 1 }, "The campaign id.")],
                 keys: .read,
                 responses: [200: .json(CampaignStatsResponse.self, "From counters kept as pushes happen."),
                             404: .problem("No such campaign.")]) { s, r, c in
            try await s.campaignStats(r, c)
        },
    ]

    private static let mediaID = JSONSchema.string.with { $0.pattern = "^[0-9a-fA-F]{64}$" }
    private static let notificationID = JSONSchema.integer.with { $0.minimum = 1 }

    private static func imageParameters(_ id: APIParameter, variants: Bool = false) -> [APIParameter] {
        [id, .header("Range", "bytes=FIRST-LAST, FIRST- or -SUFFIX: one range."),
         .header("If-None-Match", "The ETag held; 304 when it is still the image's.")]
            + (variants ? [.query("variant", JSONSchema.string.with { $0.enumeration = MediaVariant.allCases.map(\.rawValue) },
                                  "thumb (fits 320×320, or the image itself when that is smaller in bytes) or push (a JPEG of at most 1 MB and 2048 px), made on first request; its ETag is its own SHA-256.")]
                        : [])
    }

    /// docs/api.md#http-api: every image response has the same headers, and honours If-None-Match, Range and HEAD.
    private static func imageResponses(notFound: String, gone: Bool = false, variants: Bool = false) -> [Int: APIResponse] {
        let headers = ["ETag": "The SHA-256, strong.", "Cache-Control": "private, or public with --public-media for /media.",
                       "Accept-Ranges": "bytes", "X-Content-Type-Options": "nosniff"]
        var responses: [Int: APIResponse] = [
            200: .image("The image, with its stored type.", headers: headers),
            206: .image("One range of it.", headers: headers.merging(["Content-Range": "The range sent."]) { a, _ in a }),
            304: APIResponse(description: "If-None-Match named this image.", headers: ["ETag": "The SHA-256, strong."]),
            404: .problem(notFound),
            416: .problem("The range is outside the image.", headers: ["Content-Range": "bytes */SIZE"]),
        ]
        if gone { responses[410] = .problem("The payload URL expired; the app fetches with its credentials instead.") }
        if variants { responses[400] = .problem("variant is neither thumb nor push.") }
        return responses
    }
}
