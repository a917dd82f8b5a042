import Foundation
import HTTPEdge
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLEngine
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

/// SPEC §29's audit log (issue #48): every state-changing route writes one row naming who, what,
/// on what, the request id and the client; never a secret; kept `--audit-days`.
@Suite("The audit log (SPEC §29)")
struct AuditTests {
    static let requestID = HTTPField.Name("X-Request-Id")!
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    /// Who makes a step's request.
    enum Caller: Sendable {
        /// root, an admin account, by Basic.
        case admin
        /// The `send` key `ci`.
        case sendKey
        /// The `admin` key `ops`.
        case adminKey
        /// root in the console: its session cookie and CSRF token.
        case console
        /// root signing in to the console (the form).
        case signIn

        /// The actor and its kind the row must name.
        var actor: (name: String, kind: String) {
            switch self {
            case .admin: ("root", "user")
            case .sendKey: ("key:ci", "key")
            case .adminKey: ("key:ops", "key")
            case .console, .signIn: ("root", "console")
            }
        }
    }

    /// A request's body.
    enum Body: Sendable {
        case none
        case json(String)
        case form(String)
        /// A new PNG (of this seed), sent as this type.
        case png(UInt64, String)
    }

    /// One request of the walk. `uri`, a JSON body and `target` may name `{key}`s: the values
    /// earlier steps captured (`capture`: a key and the answer's field), and `{later}`, a day on.
    struct Step: Sendable {
        /// `METHOD /path` as `Endpoint.all` declares it.
        var route: String
        var caller: Caller
        var uri: String
        var body: Body
        var action: String
        var target: String
        var capture: (key: String, field: String)? = nil

        var method: HTTPRequest.Method { HTTPRequest.Method(String(route.split(separator: " ")[0]))! }
    }

    static let campaignBody = #"{"audience":{"users":["alice"]},"message":"Sale","sendAt":"{later}"}"#
    static let activityBody = #"{"type":"DeliveryAttributes","audience":{"users":["alice"]},"contentState":{"stage":"packed"},"alert":{"title":"Your order"}}"#
    static let goldFilter = #"{"filter":{"attribute":"plan","op":"eq","value":"gold"}}"#

    /// Every state-changing route an admin, a key or the console calls, in an order that makes each valid.
    static let steps: [Step] = [
        Step(route: "POST /api/media", caller: .admin, uri: "/api/media", body: .png(1, "image/png"), action: "media.add", target: "media:{media}",
             capture: ("media", "sha256")),
        Step(route: "POST /api/notifications", caller: .sendKey, uri: "/api/notifications", body: .json(#"{"to":"alice","message":"Hello"}"#),
             action: "notification.create", target: "notification:{notification}", capture: ("notification", "id")),
        Step(route: "PATCH /api/notifications/{id}", caller: .sendKey, uri: "/api/notifications/{notification}", body: .json(#"{"message":"Hello again"}"#),
             action: "notification.change", target: "notification:{notification}"),
        Step(route: "DELETE /api/notifications/{id}", caller: .sendKey, uri: "/api/notifications/{notification}", body: .none,
             action: "notification.retract", target: "notification:{notification}"),
        Step(route: "POST /api/admin/campaigns", caller: .admin, uri: "/api/admin/campaigns", body: .json(campaignBody),
             action: "campaign.create", target: "campaign:{campaign}", capture: ("campaign", "id")),
        Step(route: "PATCH /api/admin/campaigns/{id}", caller: .admin, uri: "/api/admin/campaigns/{campaign}", body: .json(#"{"message":"Bigger sale"}"#),
             action: "campaign.change", target: "campaign:{campaign}"),
        Step(route: "DELETE /api/admin/campaigns/{id}", caller: .admin, uri: "/api/admin/campaigns/{campaign}", body: .none,
             action: "campaign.cancel", target: "campaign:{campaign}"),
        Step(route: "POST /api/admin/campaigns/{id}/retract", caller: .admin, uri: "/api/admin/campaigns/{campaign}/retract", body: .none,
             action: "campaign.retract", target: "campaign:{campaign}"),
        Step(route: "POST /api/live-activities", caller: .admin, uri: "/api/live-activities", body: .json(activityBody),
             action: "liveactivity.start", target: "liveactivity:{activity}", capture: ("activity", "id")),
        Step(route: "PATCH /api/live-activities/{id}", caller: .admin, uri: "/api/live-activities/{activity}", body: .json(#"{"contentState":{"stage":"moving"}}"#),
             action: "liveactivity.update", target: "liveactivity:{activity}"),
        Step(route: "DELETE /api/live-activities/{id}", caller: .admin, uri: "/api/live-activities/{activity}", body: .none,
             action: "liveactivity.end", target: "liveactivity:{activity}"),
        Step(route: "PUT /api/admin/users/{name}/attributes", caller: .admin, uri: "/api/admin/users/alice/attributes", body: .json(#"{"attributes":{"plan":"gold"}}"#),
             action: "user.attributes", target: "user:alice"),
        Step(route: "PATCH /api/admin/users/{name}/attributes", caller: .adminKey, uri: "/api/admin/users/alice/attributes", body: .json(#"{"attributes":{"age":30}}"#),
             action: "user.attributes", target: "user:alice"),
        Step(route: "POST /api/admin/topics/{topic}/subscribers", caller: .adminKey, uri: "/api/admin/topics/news/subscribers", body: .json(#"{"add":["alice","bob"]}"#),
             action: "topic.subscribers", target: "topic:news"),
        Step(route: "PUT /api/admin/segments/{name}", caller: .admin, uri: "/api/admin/segments/gold", body: .json(goldFilter),
             action: "segment.put", target: "segment:gold"),
        Step(route: "DELETE /api/admin/segments/{name}", caller: .admin, uri: "/api/admin/segments/gold", body: .none,
             action: "segment.delete", target: "segment:gold"),
        // The console: its sign-in first, then its calls with the session it made.
        Step(route: "POST /console/session", caller: .signIn, uri: "/console/session", body: .form("name=root&password=rootpw"),
             action: "console.signin", target: "user:root"),
        Step(route: "POST /console/api/media", caller: .console, uri: "/console/api/media", body: .png(2, "application/octet-stream"),
             action: "media.add", target: "media:{media}", capture: ("media", "sha256")),
        Step(route: "POST /console/api/campaigns", caller: .console, uri: "/console/api/campaigns", body: .json(campaignBody),
             action: "campaign.create", target: "campaign:{campaign}", capture: ("campaign", "id")),
        Step(route: "PATCH /console/api/campaigns/{id}", caller: .console, uri: "/console/api/campaigns/{campaign}", body: .json(#"{"title":"Sale"}"#),
             action: "campaign.change", target: "campaign:{campaign}"),
        Step(route: "DELETE /console/api/campaigns/{id}", caller: .console, uri: "/console/api/campaigns/{campaign}", body: .none,
             action: "campaign.cancel", target: "campaign:{campaign}"),
        Step(route: "POST /console/api/campaigns/{id}/retract", caller: .console, uri: "/console/api/campaigns/{campaign}/retract",
             body: .json(#"{"retractedText":"Gone"}"#), action: "campaign.retract", target: "campaign:{campaign}"),
        Step(route: "POST /console/api/live-activities", caller: .console, uri: "/console/api/live-activities", body: .json(activityBody),
             action: "liveactivity.start", target: "liveactivity:{activity}", capture: ("activity", "id")),
        Step(route: "PATCH /console/api/live-activities/{id}", caller: .console, uri: "/console/api/live-activities/{activity}",
             body: .json(#"{"contentState":{"stage":"here"}}"#), action: "liveactivity.update", target: "liveactivity:{activity}"),
        Step(route: "DELETE /console/api/live-activities/{id}", caller: .console, uri: "/console/api/live-activities/{activity}", body: .none,
             action: "liveactivity.end", target: "liveactivity:{activity}"),
        Step(route: "DELETE /console/api/registrations/{id}", caller: .console, uri: "/console/api/registrations/{registration}?user=alice", body: .none,
             action: "registration.remove", target: "registration:{registration}"),
        Step(route: "PUT /console/api/segments/{name}", caller: .console, uri: "/console/api/segments/vip", body: .json(goldFilter),
             action: "segment.put", target: "segment:vip"),
    ]

    /// The state-changing routes the log leaves out, and why: SPEC §29 keeps what admins, keys
    /// and the CLI change, not what a user or a device does for itself.
    static let exempt: [String: String] = [
        "POST /api/sessions": "a device's own session token",
        "DELETE /api/sessions/current": "a device revoking its own session",
        "PUT /api/me": "a user's own time zone, locale and quiet hours",
        "PUT /api/me/attributes": "a user's own attributes",
        "PATCH /api/me/attributes": "a user's own attributes",
        "PUT /api/me/topics/{topic}": "a user following a topic",
        "DELETE /api/me/topics/{topic}": "a user unfollowing a topic",
        "POST /api/register": "a device registering itself",
        "PUT /api/register/{id}": "a device updating its own registration",
        "DELETE /api/register/{id}": "a device removing its own registration (an admin's removal in the console is walked)",
        "PUT /api/register/{id}/live-activities/{type}": "a device's own push-to-start token",
        "DELETE /api/register/{id}/live-activities/{type}": "a device's own push-to-start token",
        "PUT /api/live-activities/{id}/tokens": "a device reporting its activity's update token",
        "POST /api/notifications/{id}/opened": "a device reporting an open",
        "POST /p/{token}/opened": "a device reporting an open, with no credentials",
        "POST /api/events": "a user's app reporting a conversion event",
        "POST /console/session/end": "signing out ends the caller's own session",
        "POST /console/api/preview": "renders a campaign's words for one user; changes nothing",
    ]

    /// `text` with each `{key}` of `values` replaced.
    static func fill(_ text: String, _ values: [String: String]) -> String {
        values.reduce(text) { $0.replacingOccurrences(of: "{\($1.key)}", with: $1.value) }
    }

    @Test("the walk covers every state-changing route of Endpoint.all: each is walked or exempt, not both")
    func coverage() {
        let stateChanging = Set(Endpoint.all.filter { $0.method != .get && $0.method != .head }.map { "\($0.method.rawValue) \($0.path)" })
        let walked = Set(Self.steps.map(\.route))
        let exempt = Set(Self.exempt.keys)
        #expect(walked.isDisjoint(with: exempt), "walked and exempt: \(walked.intersection(exempt).sorted())")
        #expect(stateChanging.subtracting(walked).subtracting(exempt).isEmpty,
                "a state-changing route with no audit step (add one to AuditTests.steps, or a reason to exempt): \(stateChanging.subtracting(walked).subtracting(exempt).sorted())")
        #expect(walked.union(exempt).subtracting(stateChanging).isEmpty, "no such route: \(walked.union(exempt).subtracting(stateChanging).sorted())")
    }

    @Test("each state-changing route, called as an admin, a key or the console, writes exactly one row: actor, action, target, request id, client address")
    func walk() async throws {
        try await TestServer.run({ $0.trustedProxies = ["127.0.0.0/8", "::1"].compactMap { CIDR($0) } }) { s in
            let sendKey = try await s.data.apiKeys.add(name: "ci", scope: .send, app: nil)
            let adminKey = try await s.data.apiKeys.add(name: "ops", scope: .admin, app: nil)
            // alice's device, which the console removes (her registering it is her own: not audited).
            let (_, device) = try await s.json(.post, "/api/register", as: "alice")
            let registration = try #require((device as? [String: Any])?["registrationId"] as? String)
            var values = ["later": ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400)), "registration": registration]
            var (cookie, csrf) = ("", "")
            var last = try await s.data.audit.list(limit: 1).first?.id ?? 0
            #expect(last == 0, "nothing was audited before the walk")
            for (index, step) in Self.steps.enumerated() {
                let (requestID, client) = ("walk-\(index)", "203.0.113.\(index + 1)")
                var headers: HTTPFields = [Self.requestID: requestID, Self.forwardedFor: client]
                switch step.caller {
                case .admin: headers.append(contentsOf: TestServer.basic("root"))
                case .sendKey: headers[.authorization] = "Bearer \(sendKey)"
                case .adminKey: headers[.authorization] = "Bearer \(adminKey)"
                case .console:
                    headers[.cookie] = cookie
                    headers[Self.csrfHeader] = csrf
                case .signIn: headers[.origin] = "http://localhost"
                }
                var body: ByteBuffer?
                switch step.body {
                case .none: break
                case .json(let text):
                    headers[.contentType] = "application/json"
                    body = ByteBuffer(string: Self.fill(text, values))
                case .form(let text):
                    headers[.contentType] = "application/x-www-form-urlencoded"
                    body = ByteBuffer(string: text)
                case .png(let seed, let type):
                    headers[.contentType] = type
                    body = ByteBuffer(bytes: PNGBuilder.rgb(width: 8, height: 8, seed: seed))
                }
                let response = try await s.client.execute(uri: Self.fill(step.uri, values), method: step.method, headers: headers, body: body)
                #expect(response.status.code < 300 || response.status == .seeOther, "\(step.route): \(response.status) \(response.detail)")
                if let capture = step.capture {
                    let object = try? JSONSerialization.jsonObject(with: Data(response.bytes)) as? [String: Any]
                    let value = object?[capture.field]
                    values[capture.key] = (value as? Int).map(String.init) ?? (value as? String) ?? "?"
                }
                if step.caller == .signIn {
                    // The session the console's calls carry, and the CSRF token its page gives.
                    cookie = String(try #require(response.headers[.setCookie]?.split(separator: ";").first))
                    let html = String(decoding: try await s.get("/console", headers: [.cookie: cookie]).bytes, as: UTF8.self)
                    let start = try #require(html.range(of: #"name="csrf-token" content=""#))
                    let end = try #require(html[start.upperBound...].firstIndex(of: "\""))
                    csrf = String(html[start.upperBound..<end])
                }
                let rows = try await s.data.audit.list(limit: 500).filter { $0.id > last }
                #expect(rows.count == 1, "\(step.route): \(rows.count) new rows \(rows.map(\.entry.action))")
                guard let row = rows.first else { continue }
                last = rows.map(\.id).max() ?? last
                let entry = row.entry
                #expect(entry.actor.name == step.caller.actor.name && entry.actor.kind == step.caller.actor.kind,
                        "\(step.route): actor \(entry.actor.name) (\(entry.actor.kind))")
                #expect(entry.action == step.action, "\(step.route): \(entry.action)")
                #expect(entry.target == Self.fill(step.target, values), "\(step.route): target \(entry.target ?? "none")")
                #expect(entry.actor.requestId == requestID && entry.actor.client == client,
                        "\(step.route): request \(entry.actor.requestId ?? "none"), client \(entry.actor.client ?? "none")")
            }

            // The route answers them newest first, filtered by a kind of action, paged by id.
            let (listed, page) = try await s.json(.get, "/api/admin/audit?action=campaign&limit=3", as: "root")
            #expect(listed.status == .ok)
            let first = try #require(page as? [[String: Any]])
            #expect(first.map { $0["action"] as? String } == ["campaign.retract", "campaign.cancel", "campaign.change"])
            #expect(first.first?["actorKind"] as? String == "console" && first.first?["requestId"] as? String != nil)
            let oldest = try #require(first.last?["id"] as? Int)
            let (_, next) = try await s.json(.get, "/api/admin/audit?action=campaign&before=\(oldest)", as: "root")
            #expect((next as? [[String: Any]])?.map { $0["action"] as? String } == ["campaign.create", "campaign.retract", "campaign.cancel", "campaign.change", "campaign.create"])
            let (_, byKey) = try await s.json(.get, "/api/admin/audit?actor=key:ci", as: "root")
            #expect((byKey as? [[String: Any]])?.count == 3)
            let (_, exact) = try await s.json(.get, "/api/admin/audit?action=console.signin&target=user:root", as: "root")
            #expect((exact as? [[String: Any]])?.count == 1)
            let (_, none) = try await s.json(.get, "/api/admin/audit?since=\(Int(Date().timeIntervalSince1970) + 3600)", as: "root")
            #expect((none as? [[String: Any]])?.isEmpty == true)
            #expect(try await s.request(.get, "/api/admin/audit?since=yesterday", as: "root").status == .badRequest)
            // Sixty digits of fraction once killed the server in Foundation's date parser (RFC3339Tests).
            let fraction = String(repeating: "0", count: 60)
            #expect(try await s.request(.get, "/api/admin/audit?since=2026-01-01T00:00:00.\(fraction)Z", as: "root").status == .badRequest)
            #expect(try await s.request(.get, "/api/admin/audit?since=2026-01-01T00:00:00.5Z", as: "root").status == .ok)
            // Admins alone: a user is refused, and so is a send key; the console's admin reads it too.
            #expect(try await s.request(.get, "/api/admin/audit", as: "alice").status == .forbidden)
            #expect(try await s.request(.get, "/api/admin/audit", as: nil, headers: [.authorization: "Bearer \(sendKey)"]).status == .forbidden)
            let panel = try await s.get("/console/api/audit?actor=key:ops", headers: [.cookie: cookie])
            #expect(panel.status == .ok)
            let rows = try JSONSerialization.jsonObject(with: Data(panel.bytes)) as? [[String: Any]]
            #expect(rows?.map { $0["action"] as? String } == ["topic.subscribers", "user.attributes"])
            // A user's own change is not audited.
            #expect(try await s.json(.put, "/api/me/attributes", as: "bob", body: #"{"attributes":{"plan":"free"}}"#).0.status == .ok)
            #expect(try await s.data.audit.list(limit: 1).first?.id == last)
        }
    }

    @Test("no audit row holds a secret: passwords, bcrypt hashes, API keys, webhook secrets and paths, session tokens")
    func noSecrets() async throws {
        try await TestServer.run { s in
            let users = s.data.users(cost: 4)
            let (password, newPassword) = ("Sup3r-Secret-Passw0rd", "An0ther-Secret-Passw0rd")
            _ = try await users.add(name: "dave", password: password, admin: true, audit: AuditActor.cli())
            try await users.setPassword(name: "dave", password: newPassword, audit: AuditActor.cli())
            let hash = "$2b$04$C6UzMDM.H6dfI/f/IKxGhu4XyY9k.tdLxGiHNyXWBMTPvW3YvGqxO"
            _ = try await users.importUsers([UserImport.Entry(name: "erin", secret: .bcrypt(hash), admin: false),
                                             UserImport.Entry(name: "frank", secret: .password("Fr4nk-Secret-Passw0rd"), admin: false)],
                                            audit: AuditActor.cli())
            let token = try await s.data.apiKeys.add(name: "backend", scope: .admin, app: nil, audit: AuditActor.cli())
            let webhookSecret = "whsec-test-0123456789abcdef"
            let hookPath = "T00000/B00000/PathSecret42"
            _ = try await s.data.webhooks.add(url: "https://hooks.example.com/services/\(hookPath)", events: [], secret: webhookSecret,
                                              audit: AuditActor.cli())
            // A console sign-in, and a change made with the key, through the server.
            let signedIn = try await s.client.execute(uri: "/console/session", method: .post,
                                                      headers: [.origin: "http://localhost", .contentType: "application/x-www-form-urlencoded"],
                                                      body: ByteBuffer(string: "name=dave&password=\(newPassword)"))
            #expect(signedIn.status == .seeOther)
            let cookie = try #require(signedIn.headers[.setCookie]?.split(separator: ";").first)
            let session = String(try #require(cookie.split(separator: "=", maxSplits: 1).last))
            #expect(session.hasPrefix("rps_"))
            let saved = try await s.request(.put, "/api/admin/segments/gold", as: nil,
                                            headers: [.authorization: "Bearer \(token)", .contentType: "application/json"],
                                            body: Array(#"{"filter":{"attribute":"plan","op":"eq","value":"gold"}}"#.utf8))
            #expect(saved.status == .ok)

            let rows = try await s.database.read { db in try SQLRow.fetchAll(db, sql: "SELECT * FROM audit_log") }
            #expect(rows.count == 7, "\(rows.count) rows")
            let cells = rows.flatMap(\.values).map { "\($0)" }
            for secret in [password, newPassword, "Fr4nk-Secret-Passw0rd", "rootpw", hash, token, webhookSecret, hookPath, session,
                           String(token.dropFirst(4)), String(session.dropFirst(4)), "bcrypt", "$2"] {
                #expect(!cells.contains { $0.contains(secret) }, "an audit row holds \(secret.prefix(6))…")
            }
            // What is kept instead: who, and the facts that are not secret.
            let actions = try await s.data.audit.list().map(\.entry.action)
            #expect(actions == ["segment.put", "console.signin", "webhook.add", "apikey.add", "user.import", "user.password", "user.add"])
            let webhook = try #require(try await s.data.audit.list(AuditStore.Filter(action: "webhook.add")).first)
            let events = JSONValue.array(DeliveryEventType.allCases.map { JSONValue.string($0.rawValue) })
            let expected: JSONValue = ["receiver": "https://hooks.example.com", "events": events]
            #expect(webhook.entry.detail == expected)
        }
    }

    @Test("entries older than --audit-days go: the server prunes them on its own, and the store's prune drops what a later now makes old")
    func retention() async throws {
        try await TestServer.run({ $0.auditDays = 30; $0.auditPruneInterval = .milliseconds(100) }) { s in
            try await s.data.audit.record(AuditEntry(AuditActor.cli(), "test.old"))
            try await s.data.audit.record(AuditEntry(AuditActor.cli(), "test.new"))
            // The first made 31 days old (nothing in RichPush changes an entry: the test does, as time would).
            let age: Double = 31 * 86_400
            try await s.database.write { db in
                try db.execute(sql: "UPDATE audit_log SET at = at - ? WHERE action = 'test.old'", arguments: [age])
            }
            var left: [String] = []
            for _ in 0..<200 {
                left = try await s.data.audit.list().map(\.entry.action)
                if !left.contains("test.old") { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(left == ["test.new"])
            #expect(try await s.data.audit.prune(olderThanDays: 30, now: Date()) == 0)
            #expect(try await s.data.audit.prune(olderThanDays: 30, now: Date().addingTimeInterval(31 * 86_400)) == 1)
            #expect(try await s.data.audit.list().isEmpty)
        }
    }
}
