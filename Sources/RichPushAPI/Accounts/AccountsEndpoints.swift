import Hummingbird
import RichPushCore

extension Endpoint {
    static let sessions: [Endpoint] = [
        Endpoint(method: .post, path: "/api/sessions", access: .password, summary: "A session token for a device, made with Basic credentials.",
                 responses: [
                     201: .json(SessionResponse.self, "The token and when it expires."),
                     403: .problem("Sessions are made with Basic credentials, not with another session."),
                 ]) { rooms, r, c in try await rooms.accounts.createSession(r, c) },
        Endpoint(method: .delete, path: "/api/sessions/current", access: .session, summary: "Revoke the session token this request carries.",
                 responses: [
                     204: APIResponse(description: "Revoked."),
                     401: .problem("No session token (Basic credentials have no session to revoke), or an unknown one.",
                                   headers: ["WWW-Authenticate": "How to authenticate."]),
                 ]) { rooms, r, c in try await rooms.accounts.deleteCurrentSession(r, c) },
    ]

    /// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries: the caller's time zone and locale
    /// (and the topics they follow, docs/api.md#attributes-devices-versions-and-topics).
    static let me: [Endpoint] = [
        Endpoint(method: .get, path: "/api/me", access: .user, summary: "The caller's account: name, role, time zone, locale and the topics they follow.",
                 responses: [200: .json(MeResponse.self, "The account.")]) { rooms, r, c in try await rooms.accounts.showMe(r, c) },
        Endpoint(method: .put, path: "/api/me", access: .user, summary: "Set the caller's time zone (IANA) and locale (BCP 47), each optional.",
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("MeUpdate"))], description: "{\"timezone\",\"locale\",\"quietHours\"}"),
                 responses: [200: .json(MeResponse.self, "The account as it is now."),
                             400: .problem("An unknown time zone, a malformed locale, or a field the body does not have."),
                             413: .problem("The body is over 64 KiB.")]) { rooms, r, c in try await rooms.accounts.updateMe(r, c) },
    ]
}
