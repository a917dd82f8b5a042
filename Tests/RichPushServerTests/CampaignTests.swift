import APNsSandbox
import Crypto
import Foundation
import SQLEngine
import HTTPTypes
import HummingbirdTesting
import Logging
import MediaStore
import PushDelivery
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import PushTestSupport
import RichPushTestSupport
import Testing

extension TestServer {
    func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

    /// A session token of `user`.
    func session(_ user: String = "alice") async throws -> String {
        let (response, object) = try await json(.post, "/api/sessions", as: user)
        #expect(response.status == .created)
        return try #require((object as? [String: Any])?["token"] as? String)
    }

    /// `POST /api/admin/campaigns` as root; the response and its JSON.
    func campaign(_ body: String, as user: String = "root") async throws -> (TestResponse, [String: Any]) {
        let (response, object) = try await json(.post, "/api/admin/campaigns", as: user, body: body)
        return (response, object as? [String: Any] ?? [:])
    }

    func campaignStatus(_ id: Int) async throws -> [String: Any] {
        let (_, object) = try await json(.get, "/api/admin/campaigns/\(id)", as: "root")
        return object as? [String: Any] ?? [:]
    }

    /// The path of a payload URL on this server.
    static func path(of url: String) -> String {
        URL(string: url).map { $0.path } ?? url
    }
}

@Suite("Sessions and roles (SPEC §9)")
struct SessionRouteTests {
    @Test("POST /api/sessions gives a bearer token accepted wherever Basic is; DELETE /api/sessions/current revokes it", arguments: StoreEngine.all)
    func bearer(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (created, object) = try await s.json(.post, "/api/sessions")
            #expect(created.status == .created)
            let body = try #require(object as? [String: Any])
            let token = try #require(body["token"] as? String)
            let expires = try #require(ISO8601DateFormatter().date(from: body["expires"] as? String ?? ""))
            #expect(abs(expires.timeIntervalSinceNow - 90 * 86_400) < 120)
            let (made, made_) = try await s.json(.post, "/api/notifications", body: #"{"message":"for the bearer"}"#)
            #expect(made.status == .created)
            let id = try #require((made_ as? [String: Any])?["id"] as? Int)
            let list = try await s.request(.get, "/api/notifications", as: nil, headers: s.bearer(token))
            #expect(list.status == .ok)
            #expect(String(decoding: list.bytes, as: UTF8.self).contains("for the bearer"))
            // The payload by bearer, twice: the second answer comes from the event-loop fast path.
            for _ in 0..<2 {
                let image = try await s.request(.get, "/api/notifications/\(id)", as: nil, headers: s.bearer(token))
                #expect(image.status == .ok && image.headers[.contentType] == "image/png")
            }
            // bob's token does not open alice's notification.
            let bobs = try await s.session("bob")
            #expect(try await s.request(.get, "/api/notifications/\(id)", as: nil, headers: s.bearer(bobs)).status == .notFound)
            // A session is made from a password, not from another session.
            #expect(try await s.request(.post, "/api/sessions", as: nil, headers: s.bearer(token)).status == .forbidden)
            // Revoking needs the token itself.
            #expect(try await s.request(.delete, "/api/sessions/current").status == .unauthorized) // Basic: there is no session to revoke
            #expect(try await s.request(.delete, "/api/sessions/current", as: nil, headers: s.bearer(token)).status == .noContent)
            for path in ["/api/notifications", "/api/notifications/\(id)"] {
                let refused = try await s.request(.get, path, as: nil, headers: s.bearer(token))
                #expect(refused.status == .unauthorized, "\(path)")
                #expect(refused.headers[.wwwAuthenticate]?.hasPrefix("Basic") == true)
            }
            #expect(try await s.request(.get, "/api/notifications", as: nil, headers: s.bearer("rps_unknown")).status == .unauthorized)
            #expect(try await s.request(.post, "/api/sessions", as: nil).status == .unauthorized)
            #expect(try await s.request(.post, "/api/sessions", as: nil, headers: TestServer.basic("alice", "wrong")).status == .unauthorized)
            // Only a hash of the token is stored.
            let stored = try await s.database.read { db in try Data.fetchAll(db, sql: "SELECT tokenHash FROM sessions") }
            #expect(!stored.contains { $0.contains(Data(token.utf8)) })
        }
    }

    @Test("users rm and users passwd (from another process) revoke the user's tokens in every server within a second", arguments: StoreEngine.all)
    func revokedElsewhere(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let token = try await s.session("bob")
            #expect(try await s.request(.get, "/api/notifications", as: nil, headers: s.bearer(token)).status == .ok)
            try await UserStore(database: s.database, cost: 4).setPassword(name: "bob", password: "changed")
            #expect(try await eventually(within: 3) {
                try await s.request(.get, "/api/notifications", as: nil, headers: s.bearer(token)).status == .unauthorized
            })
            let token2 = try await s.session("alice")
            #expect(try await s.request(.get, "/api/notifications", as: nil, headers: s.bearer(token2)).status == .ok)
            try await UserStore(database: s.database).remove(name: "alice")
            #expect(try await eventually(within: 3) {
                try await s.request(.get, "/api/notifications", as: nil, headers: s.bearer(token2)).status == .unauthorized
            })
        }
    }

    @Test("admin routes: 401 without credentials, 403 for a user who is not an admin", arguments: StoreEngine.all)
    func adminOnly(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            for (method, path) in [(HTTPRequest.Method.get, "/api/admin/campaigns"), (.post, "/api/admin/campaigns"), (.get, "/api/admin/campaigns/1")] {
                #expect(try await s.request(method, path, as: nil).status == .unauthorized)
                let forbidden = try await s.request(method, path, as: "alice")
                #expect(forbidden.status == .forbidden)
                #expect(forbidden.detail.contains("not an admin"))
            }
            #expect(try await s.request(.get, "/api/admin/campaigns", as: "root").status == .ok)
            #expect(try await s.request(.get, "/api/admin/campaigns/999", as: "root").status == .notFound)
            // An admin's session is an admin too.
            let token = try await s.session("root")
            #expect(try await s.request(.get, "/api/admin/campaigns", as: nil, headers: s.bearer(token)).status == .ok)
        }
    }
}

@Suite("Campaigns and payload URLs through the APNs sandbox (SPEC §10, §11)")
struct CampaignTests {
    let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))

    @Test("an alert campaign to everyone: one push per device with Apple's alert headers, an inbox entry per user, progress to done and fetched", arguments: StoreEngine.all)
    func alertToEveryone(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client())) { s in
                _ = try await s.registerDevice(tokenA, as: "alice")
                _ = try await s.registerDevice(tokenB, as: "alice")
                _ = try await s.registerDevice(String(repeating: "c", count: 64), as: "bob")
                let (response, body) = try await s.campaign(#"{"audience":{"all":true},"title":"Flash sale","message":"20% off \"today\""}"#)
                #expect(response.status == .accepted)
                #expect(body["recipients"] as? Int == 3) // alice, bob and root (who has no device)
                #expect(body["devices"] as? Int == 3)
                #expect(body["status"] as? String == "sending" || body["status"] as? String == "done")
                let id = try #require(body["id"] as? Int)
                #expect(response.headers[.location] == "/api/admin/campaigns/\(id)")
                #expect(try await eventually { apns.sandbox.acceptedCount == 3 })
                #expect(try await eventually { try await s.campaignStatus(id)["status"] as? String == "done" })
                let status = try await s.campaignStatus(id)
                #expect(status["sent"] as? Int == 3 && status["pending"] as? Int == 0 && status["failed"] as? Int == 0 && status["fetched"] as? Int == 0)
                for push in apns.sandbox.accepted {
                    #expect(push.headers["apns-push-type"] == "alert")
                    #expect(push.headers["apns-priority"] == "10")
                }
                // alice's push, byte for byte docs/api.md#alert-pushes-and-payload-urls's shape.
                let push = try #require(apns.sandbox.accepted.first { $0.token == tokenA })
                let object = try #require(try JSONSerialization.jsonObject(with: push.payload) as? [String: Any])
                let richId = try #require(object["richId"] as? String)
                let richUrl = try #require(object["richUrl"] as? String)
                #expect(String(decoding: push.payload, as: UTF8.self) == #"{"aps":{"alert":{"title":"Flash sale","body":"20% off \"today\""},"mutable-content":1,"sound":"default"},"richId":"\#(richId)","richMessage":"20% off \"today\"","richType":"img","richUrl":"\#(richUrl)"}"#)
                #expect(richUrl.hasPrefix("http://127.0.0.1:\(s.client.port ?? 0)/p/"))
                // Both of alice's devices carry the same notification; bob's is another.
                #expect(apns.sandbox.accepted.filter { ($0.token == tokenA || $0.token == tokenB) }.count == 2)
                let bobs = try #require(apns.sandbox.accepted.first { $0.token.hasPrefix("ccc") })
                let bobId = try #require((try JSONSerialization.jsonObject(with: bobs.payload) as? [String: Any])?["richId"] as? String)
                #expect(bobId != richId)
                // Each recipient has it in their inbox; only they may fetch it.
                let (_, inbox) = try await s.json(.get, "/api/notifications")
                #expect((inbox as? [[String: Any]])?.first?["id"] as? Int == Int(richId))
                #expect((inbox as? [[String: Any]])?.first?["read"] as? Bool == false)
                #expect(try await s.request(.get, "/api/notifications/\(richId)", as: "bob").status == .notFound)
                // The Notification Service Extension: the URL, no credentials; same headers as the API's answer.
                let head = try await s.request(.head, TestServer.path(of: richUrl), as: nil)
                #expect(head.status == .ok && head.headers[.contentLength] == String(logo.count))
                #expect(try await s.campaignStatus(id)["fetched"] as? Int == 0) // HEAD reads nothing
                let image = try await s.request(.get, TestServer.path(of: richUrl), as: nil)
                #expect(image.status == .ok)
                #expect(image.bytes == logo)
                let api = try await s.request(.get, "/api/notifications/\(richId)")
                for name in [HTTPField.Name.contentType, .contentLength, .eTag, .cacheControl, .acceptRanges, HTTPField.Name("X-Content-Type-Options")!] {
                    #expect(image.headers[name] == api.headers[name], "\(name)")
                }
                #expect(image.headers[.cacheControl] == "private")
                #expect(try await eventually { try await s.campaignStatus(id)["fetched"] as? Int == 1 })
                #expect(try await eventually {
                    let (_, after) = try await s.json(.get, "/api/notifications")
                    return (after as? [[String: Any]])?.first?["read"] as? Bool == true
                })
                let (_, list) = try await s.json(.get, "/api/admin/campaigns", as: "root")
                #expect((list as? [[String: Any]])?.first?["id"] as? Int == id)
            }
        }
    }

    @Test("a campaign past what is queued ahead: the POST answers after its first batches, the rest is queued as the sends go out; every device once, then done", arguments: StoreEngine.all)
    func queuedInTheBackground(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, { $0.campaignBatchSize = 1; $0.campaignQueueAhead = 2 },
                                     provider: APNsProvider(client: try apns.client())) { s in
                let tokens = (1...6).map { String(format: "%064x", $0) }
                for (index, token) in tokens.enumerated() {
                    _ = try await s.registerDevice(token, as: index < 3 ? "alice" : index < 5 ? "bob" : "root")
                }
                let (response, body) = try await s.campaign(#"{"audience":{"all":true},"message":"m"}"#)
                #expect(response.status == .accepted)
                // Two batches of one user each (alice's 3 devices, bob's 2) before the answer, which
                // counts them; root's after.
                #expect(body["recipients"] as? Int == 2 && body["devices"] as? Int == 5 && body["status"] as? String == "sending")
                let id = try #require(body["id"] as? Int)
                #expect(try await eventually { try await s.campaignStatus(id)["status"] as? String == "done" })
                let status = try await s.campaignStatus(id)
                #expect(status["recipients"] as? Int == 3 && status["devices"] as? Int == 6 && status["sent"] as? Int == 6)
                #expect(apns.sandbox.accepted.map(\.token).sorted() == tokens)
                // The queuer refreshed the outbox's planner statistics (PostgreSQL).
                if engine == .shared {
                    #expect(try await s.database.read { db in
                        try Double.fetchOne(db, sql: "SELECT extract(epoch FROM last_analyze)::float8 FROM pg_stat_user_tables WHERE relname = 'deliveries'")
                    } != nil)
                }
            }
        }
    }

    @Test("a campaign queued in the background and stopped half-way (a shutdown) ends its lease at once: the next start resumes it without waiting for the lease to lapse")
    func queuerStopped() async throws {
        try await TestServer.run { s in
            for (index, user) in ["alice", "bob", "root"].enumerated() { _ = try await s.registerDevice(String(format: "%064x", index + 1), as: user) }
            var batchesOfOne = s.data.campaigns(links: nil, defaultImage: "logo.png")
            batchesOfOne.batchSize = 1
            let store = batchesOfOne
            let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "m", mode: .silent)), by: "root")
            // No push service here: nothing is sent, so queueing waits after the first batch.
            let queuer = CampaignQueuer(campaigns: store, dispatcher: NoPushProvider(), ahead: 1, logger: Logger(label: "test"))
            let running = Task { try await queuer.run() }
            queuer.finish(campaign.id)
            #expect(try await eventually { try await store.progress(campaign.id)?.campaign.devices == 1 })
            func lease() async throws -> Double? {
                try await s.database.read { db in try Double.fetchOne(db, sql: "SELECT leaseUntil FROM campaigns WHERE id = ?", arguments: [campaign.id]) }
            }
            #expect(try await lease() ?? 0 > Date().timeIntervalSince1970)
            running.cancel()
            _ = try? await running.value
            #expect(try await lease() == 0)
            // Whoever resumes it first (this call, or the server's own resumer) queues the rest.
            _ = try await store.resumeUnfinished(addressing: .perDevice)
            #expect(try await eventually { try await store.progress(campaign.id).map { $0.campaign.queued && $0.campaign.devices == 3 } ?? false })
        }
    }

    @Test("on PostgreSQL the outbox's planner statistics are refreshed on demand (ANALYZE deliveries, a small sample); on SQLite nothing is run",
          arguments: StoreEngine.all)
    func outboxStatistics(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let store = s.data.campaigns(links: nil, defaultImage: "logo.png")
            if engine == .shared {
                // 300 sent rows, each due at its own time: a default ANALYZE would keep 101 bounds of their histogram.
                try await s.database.write { db in
                    try db.execute(sql: """
                        INSERT INTO deliveries (notificationId, target, state, pushId, nextAttemptAt, createdAt, updatedAt)
                        SELECT 1, 'token-' || i, 'sent', 'push-' || i, i, 0, 0 FROM generate_series(1, 300) AS i
                        """)
                }
            }
            try await store.refreshOutboxStatistics()
            guard engine == .shared else { return }
            #expect(try await eventually {
                try await s.database.read { db in
                    try Double.fetchOne(db, sql: "SELECT extract(epoch FROM last_analyze)::float8 FROM pg_stat_user_tables WHERE relname = 'deliveries'")
                } != nil
            })
            let (bounds, rows) = try await s.database.read { db in
                (try Int.fetchOne(db, sql: """
                    SELECT array_length(histogram_bounds::text::float8[], 1) FROM pg_stats
                    WHERE tablename = 'deliveries' AND attname = 'nextattemptat'
                    """),
                 try Double.fetchOne(db, sql: "SELECT reltuples::float8 FROM pg_class WHERE relname = 'deliveries'"))
            }
            #expect(bounds == CampaignStore.outboxStatisticsTarget + 1 && rows == 300)
        }
    }

    @Test("a silent campaign sends the tutorial's push byte for byte, as a background push", arguments: StoreEngine.all)
    func silent(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client())) { s in
                _ = try await s.registerDevice(tokenA, as: "bob")
                let (response, body) = try await s.campaign(#"{"audience":{"users":["bob"]},"mode":"silent"}"#)
                #expect(response.status == .accepted && body["recipients"] as? Int == 1)
                #expect(try await eventually { apns.sandbox.acceptedCount == 1 })
                let push = try #require(apns.sandbox.accepted.first)
                let richId = try #require((try JSONSerialization.jsonObject(with: push.payload) as? [String: Any])?["richId"] as? String)
                #expect(String(decoding: push.payload, as: UTF8.self)
                    == #"{"aps":{"content-available":1,"sound":""},"richId":"\#(richId)","richMessage":"Check this image out!","richType":"img"}"#)
                #expect(push.headers["apns-push-type"] == "background" && push.headers["apns-priority"] == "5")
            }
        }
    }

    @Test("a tag campaign reaches only the devices whose tags match; bad expressions and bodies are 400 naming the fault", arguments: StoreEngine.all)
    func tags(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            // Private endpoints allowed: push.example.net does not resolve here, and is never sent to.
            try await TestServer.run(engine: engine, { $0.allowPrivatePushEndpoints = true }, provider: APNsProvider(client: try apns.client())) { s in
                _ = try await s.registerDevice(tokenA, as: "alice", tags: ["sports", "lang:en"])
                _ = try await s.registerDevice(tokenB, as: "alice", tags: ["news"])
                _ = try await s.registerDevice(String(repeating: "c", count: 64), as: "bob", tags: ["sports"])
                let (response, body) = try await s.campaign(#"{"audience":{"tags":"sports && !username:bob"}}"#)
                #expect(response.status == .accepted && body["recipients"] as? Int == 1 && body["devices"] as? Int == 1)
                #expect(try await eventually { apns.sandbox.acceptedCount == 1 })
                #expect(apns.sandbox.accepted.map(\.token) == [tokenA])
                let bad: [(String, String)] = [
                    (#"{"audience":{"tags":"sports &&"}}"#, "expected a tag after '&&'"),
                    (#"{"audience":{"tags":"(a || b"}}"#, "unclosed '('"),
                    (#"{"audience":{"tags":"a && b && c && d && e && f && g"}}"#, "at most 6"),
                    (#"{"audience":{"all":true,"users":["alice"]}}"#, "exactly one"),
                    (#"{"message":"no audience"}"#, "\"audience\" is missing"),
                    (#"{"audience":{"all":true},"mode":"loud"}"#, "\"mode\" must be"),
                    ("[1]", "JSON object"),
                ]
                for (body, words) in bad {
                    let (refused, _) = try await s.campaign(body)
                    #expect(refused.status == .badRequest, "\(body)")
                    #expect(refused.detail.contains(words), "\(body): \(refused.detail)")
                }
                // Well-formed, but naming what does not exist: 422.
                let (unknownImage, _) = try await s.campaign(#"{"audience":{"all":true},"payload":"nope.png"}"#)
                #expect(unknownImage.status == .unprocessableContent)
                let (unknownUser, _) = try await s.campaign(#"{"audience":{"users":["alice","ghost"]}}"#)
                #expect(unknownUser.status == .unprocessableContent && unknownUser.detail.contains("ghost"), "\(unknownUser.detail)")
                // Content that fits APNs but not a browser's push is refused, once a browser is
                // registered, before anyone is queued, not by the first batch that meets a browser.
                let long = #"{"audience":{"users":["alice"]},"mode":"silent","message":"\#(String(repeating: "x", count: 3950))"}"#
                let (fitsAPNs, _) = try await s.campaign(long)
                #expect(fitsAPNs.status == .accepted)
                let point = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
                let browser = #"{"endpoint":"https://push.example.net/p/1","keys":{"p256dh":"\#(Base64URL.encode(point))","auth":"\#(Base64URL.encode([UInt8](repeating: 1, count: 16)))"}}"#
                let (_, created) = try await s.json(.post, "/api/register", as: "bob")
                let registration = try #require((created as? [String: Any])?["registrationId"] as? String)
                let (put, _) = try await s.json(.put, "/api/register/\(registration)", as: "bob", body: #"{"platform":"web","handle":\#(browser)}"#)
                #expect(put.status == .ok)
                let (tooLong, _) = try await s.campaign(#"{"audience":{"all":true},"mode":"silent","message":"\#(String(repeating: "x", count: 3950))"}"#)
                #expect(tooLong.status == .unprocessableContent && tooLong.detail.contains("Web Push"), "\(tooLong.detail)")
                let (_, list) = try await s.json(.get, "/api/admin/campaigns", as: "root")
                #expect((list as? [[String: Any]])?.count == 2) // refused campaigns leave nothing behind
            }
        }
    }

    @Test("payload URLs: a changed token is 404, an expired one 410, and keys rotate stops every earlier URL", arguments: StoreEngine.all)
    func payloadURLs(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (created, object) = try await s.json(.post, "/api/notifications", body: #"{"mode":"alert","title":"Hi"}"#)
            #expect(created.status == .created)
            let body = try #require(object as? [String: Any])
            #expect(body["mode"] as? String == "alert" && body["title"] as? String == "Hi")
            let id = try #require(body["id"] as? Int)
            let path = TestServer.path(of: try #require(body["richUrl"] as? String))
            #expect(try await s.request(.get, path, as: nil).status == .ok)
            // The same URL gives the push variant: the PNG payload as a JPEG (docs/configuration.md#the-media-store).
            let pushVariant = try await s.request(.get, path + "?variant=push", as: nil)
            #expect(pushVariant.status == .ok && pushVariant.headers[.contentType] == "image/jpeg")
            #expect(try await s.request(.get, path + "?variant=huge", as: nil).status == .badRequest)
            // The stored push is the alert shape with the same URL.
            let push = try await s.database.read { db in try Data.fetchOne(db, sql: "SELECT push FROM notifications WHERE id = ?", arguments: [id]) }
            #expect((try JSONSerialization.jsonObject(with: try #require(push)) as? [String: Any])?["richUrl"] as? String == body["richUrl"] as? String)
            // Changed: 404, whatever byte changed.
            let token = String(path.dropFirst(3))
            for index in [0, 10, 20, 42, 70, 85] {
                var chars = Array(token)
                chars[index] = chars[index] == "A" ? "B" : "A"
                #expect(try await s.request(.get, "/p/" + String(chars), as: nil).status == .notFound, "\(index)")
            }
            for junk in ["x", String(repeating: "A", count: 86), token + "A", "%00"] {
                #expect(try await s.request(.get, "/p/" + junk, as: nil).status == .notFound)
            }
            // Expired: signed with the server's own key, an hour ago.
            let other = try await s.openStoreAgain()
            defer { other.close() }
            let links = PayloadLinks(key: try await other.payloadKey(), baseURL: "http://x", lifetime: 60)
            let payload = try #require(MediaID(body["payload"] as? String ?? ""))
            let expired = links.token(notification: Int64(id), payload: payload, expires: Int64(Date().timeIntervalSince1970) - 3600)
            for _ in 0..<2 { // the router, then (with the image cached) the fast path's turn: both refuse it
                let gone = try await s.request(.get, "/p/\(expired)", as: nil)
                #expect(gone.status == .gone)
                #expect(gone.detail.contains("expired"))
            }
            // A forged token naming another notification, under a key that is not the server's.
            let stranger = PayloadLinks(key: try PayloadKey(secret: String(repeating: "k", count: 32)), baseURL: "http://x", lifetime: 60)
            let forged = stranger.token(notification: Int64(id), payload: payload, expires: Int64(Date().timeIntervalSince1970) + 3600)
            #expect(try await s.request(.get, "/p/\(forged)", as: nil).status == .notFound)
            // keys rotate (another process): the running server stops accepting earlier URLs within a second.
            try await other.rotatePayloadKey()
            #expect(try await eventually(within: 3) { try await s.request(.get, path, as: nil).status == .notFound })
            let (fresh, freshObject) = try await s.json(.post, "/api/notifications", body: #"{"mode":"alert"}"#)
            #expect(fresh.status == .created)
            let freshPath = TestServer.path(of: try #require((freshObject as? [String: Any])?["richUrl"] as? String))
            #expect(try await s.request(.get, freshPath, as: nil).status == .ok)
            // A message too long for APNs once the URL is in: 422, nothing stored.
            let long = String(repeating: "x", count: 2_100) // fits a silent push, not an alert (the message is in it twice)
            let (tooBig, _) = try await s.json(.post, "/api/notifications", body: #"{"mode":"alert","message":"\#(long)"}"#)
            #expect(tooBig.status == .unprocessableContent)
        }
    }
}
