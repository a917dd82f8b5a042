import Hummingbird
import RichPushCore

extension Endpoint {
    static let registrations: [Endpoint] = [
        Endpoint(method: .post, path: "/api/register", access: .user, summary: "A new registration id for a device (the tutorial's first step).",
                 parameters: [.query("handle", ValuePattern.string(ValuePattern.deviceToken), "The device's current token: its stale registrations are removed first.")],
                 responses: [
                     200: APIResponse.json(RegistrationCreated.self, "The new id.")
                         .linking("SetRegistration", to: "putApiRegisterId", parameter: "id", from: "registrationId")
                         .linking("DeleteRegistration", to: "deleteApiRegisterId", parameter: "id", from: "registrationId"),
                     400: .problem("The handle is not a device token."),
                     409: .problem("The account has the most registrations allowed."),
                 ]) { rooms, r, c in try await rooms.devices.createRegistration(r, c) },
        Endpoint(method: .put, path: "/api/register/{id}", access: .user,
                 summary: "Set a registration's platform, device token and tags, and the app's and OS's versions; the device is seen this hour.",
                 parameters: [.path("id", .string, "A registration id from POST /api/register.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("RegistrationUpdate"))],
                                             description: "Keys in any case; the server adds username:<user> to the tags. The handle is an APNs token in hex (apns), an FCM registration token (fcm), or a browser's PushSubscription as an object or its JSON text (web)."),
                 responses: [
                     200: .json(RegistrationResponse.self, "Saved."),
                     400: .problem("A field is missing or malformed, the handle is not one of its platform, a tag is not valid, or appVersion or osVersion is not 1 to 64 bytes of printable text (named)."),
                     403: .problem("A tag names another user."),
                     409: .problem("The device token is registered to another account, or the account has the most registrations allowed."),
                     410: .problem("The registration expired; POST /api/register again."),
                     413: .problem("The body is over 64 KiB."),
                     422: .problem("The platform is not supported, or a Web Push endpoint RichPush will not send to (not https on 443, or not a public address)."),
                     503: .problem("The Web Push endpoint's host could not be looked up now.", headers: ["Retry-After": "Seconds to wait."]),
                     502: .problem("Saved here, but the push service did not take it."),
                 ]) { rooms, r, c in try await rooms.devices.updateRegistration(r, c) },
        Endpoint(method: .delete, path: "/api/register/{id}", access: .user, summary: "Remove a registration.",
                 parameters: [.path("id", .string, "A registration id.")],
                 responses: [
                     200: .json(RegistrationDeleted.self, "Removed."),
                     404: .problem("No such registration for this user."),
                 ]) { rooms, r, c in try await rooms.devices.deleteRegistration(r, c) },
    ]

    static let webPush: [Endpoint] = [
        Endpoint(method: .get, path: "/api/webpush/key", access: .open, summary: "The VAPID public key a browser subscribes with (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).",
                 parameters: [.query("app", .string, "The app (docs/api.md#apps-and-api-keys); default when left out.")],
                 responses: [
                     200: .json(WebPushKeyResponse.self, "The key, for pushManager.subscribe({applicationServerKey})."),
                     404: .problem("This server (or the app) sends no Web Push (no --vapid-key), or there is no app of that name (never listed: docs/security.md)."),
                 ]) { rooms, r, _ in try rooms.devices.webPushKey(r) },
        Endpoint(method: .get, path: "/webpush-demo", access: .open, summary: "A page where a browser subscribes for an account.",
                 responses: [200: APIResponse(description: "HTML, no external resources.", content: [("text/html", .string)])]) { _, _, _ in
            WebPushDemo.response(WebPushDemo.page, contentType: "text/html; charset=utf-8")
        },
        Endpoint(method: .get, path: "/webpush-sw.js", access: .open, summary: "The demo page's service worker: shows each message with its image.",
                 responses: [200: APIResponse(description: "JavaScript.", content: [("text/javascript", .string)])]) { _, _, _ in
            WebPushDemo.response(WebPushDemo.serviceWorker, contentType: "text/javascript; charset=utf-8")
        },
    ]
}
