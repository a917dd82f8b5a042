import Foundation
import HTTPTypes
import Hummingbird
import RichPushCore

/// The caller's account: device sessions and their name, time zone, locale and topics (`Endpoint.sessions`, `Endpoint.me`).
struct AccountsController: Sendable {
    /// How long a session lasts, in seconds.
    let sessionLifetime: TimeInterval
    let users: UserStore
    let sessions: SessionStore
    let topics: TopicStore
    let authenticator: Authenticator

    // MARK: sessions (docs/api.md#admins-imported-accounts-and-device-sessions)

    func createSession(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        guard principal.sessionToken == nil else {
            throw Problem(.forbidden, "a session is created with Basic credentials (user name and password), not with another session's token")
        }
        let session = try await sessions.create(for: principal.user, lifetime: sessionLifetime)
        // Known here from now on: the device's first request with it needs no database read.
        authenticator.remember(session: session.token, of: Principal(user: principal.user, admin: principal.admin), expires: session.expires)
        return try JSONResponse.encode(SessionResponse(token: session.token, expires: session.expires.formatted(.iso8601)), status: .created)
    }

    func deleteCurrentSession(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        guard let token = principal.sessionToken else {
            throw Problem(.unauthorized, "send the session's own token (Authorization: Bearer …) to revoke it",
                          headers: [.wwwAuthenticate: "Bearer realm=\"RichPush\""])
        }
        try await sessions.revoke(token)
        if let header = request.headers[.authorization] { authenticator.forget(header) }
        return Response(status: .noContent)
    }

    // MARK: the caller (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries)

    func showMe(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try context.requirePrincipal()
        guard let user = try await users.find(caller.user) else { throw Problem(.notFound, "no user \(caller.user)") }
        return try JSONResponse.encode(try await me(user))
    }

    func updateMe(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try context.requirePrincipal()
        let body = try await request.body.collect(upTo: 64 * 1024)
        let bytes = Data(body.readableBytesView)
        let update = try RequestBody.decode(MeUpdate.self, from: bytes, shape: "{\"timezone\",\"locale\",\"quietHours\"}")
        // `"quietHours":null` clears them; left out, they stay.
        var quietHours: QuietHours?? = nil
        if let asked = update.quietHours {
            quietHours = .some(try asked.quietHours)
        } else if ((try? JSONSerialization.jsonObject(with: bytes)) as? [String: Any])?["quietHours"] is NSNull {
            quietHours = .some(nil)
        }
        let user = try await users.setPreferences(caller.user, timezone: update.timezone, locale: update.locale, quietHours: quietHours)
        return try JSONResponse.encode(try await me(user))
    }

    /// What `GET` and `PUT /api/me` answer: the account, and the topics it follows now.
    private func me(_ user: User) async throws -> MeResponse {
        MeResponse(name: user.name, admin: user.admin, timezone: user.timezone ?? "UTC", locale: user.locale,
                   topics: try await topics.list(of: user.name), quietHours: user.quietHours.map(QuietHoursRequest.init))
    }
}
