import Foundation
import HTTPEdge
import HTTPTypes
import MediaStore
import NIOCore
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import SQLEngine
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// docs/security.md: the holes a second read of part three found, each shown through real sockets.
@Suite("Corrections to part three (SPEC §24)")
struct CorrectionsTests {
    let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
    var logoID: String { MediaID(hashing: logo).hex }

    static var tomorrow: String { Date().addingTimeInterval(86_400).formatted(.iso8601) }

    func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)", .contentType: "application/json"] }

    func post(_ s: TestServer, _ uri: String, key: String, _ body: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        var all = bearer(key)
        all.append(contentsOf: headers)
        return try await s.request(.post, uri, as: nil, headers: all, body: Array(body.utf8))
    }

    // MARK: cancel and limits

    @Test("a send key cancels only the campaigns it created; an admin key or account cancels any", arguments: StoreEngine.all)
    func cancelScope(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let keys = APIKeyStore(database: s.database)
            let mine = try await keys.add(name: "mine", scope: .send, app: nil)
            let other = try await keys.add(name: "other", scope: .send, app: nil)
            let admin = try await keys.add(name: "ops", scope: .admin, app: nil)
            func schedule(_ key: String) async throws -> Int {
                let made = try await post(s, "/api/admin/campaigns", key: key, #"{"audience":{"all":true},"message":"later","sendAt":"\#(Self.tomorrow)"}"#)
                #expect(made.status == .accepted)
                return try #require((try JSONSerialization.jsonObject(with: Data(made.bytes)) as? [String: Any])?["id"] as? Int)
            }
            let first = try await schedule(mine)
            let refused = try await s.request(.delete, "/api/admin/campaigns/\(first)", as: nil, headers: bearer(other))
            #expect(refused.status == .forbidden)
            #expect(refused.detail.contains("did not create campaign \(first)"), "\(refused.detail)")
            // Nothing was cancelled by the refusal.
            let (_, still) = try await s.json(.get, "/api/admin/campaigns/\(first)", as: "root")
            #expect((still as? [String: Any])?["status"] as? String == "scheduled")
            let own = try await s.request(.delete, "/api/admin/campaigns/\(first)", as: nil, headers: bearer(mine))
            #expect(own.status == .ok)
            let second = try await schedule(mine)
            #expect(try await s.request(.delete, "/api/admin/campaigns/\(second)", as: nil, headers: bearer(admin)).status == .ok)
            let third = try await schedule(other)
            #expect(try await s.request(.delete, "/api/admin/campaigns/\(third)", as: "root").status == .ok)
        }
    }

    @Test("content has at most 50 locales and a campaign body at most 256 KiB: past either, 413 naming the limit, and nothing is made")
    func campaignLimits() async throws {
        try await TestServer.run { s in
            // 51 distinct BCP 47 tags (numeric regions, as es-419).
            let tags = (0..<51).map { i in "en-\(100 + i)" }
            let content = tags.map { #""\#($0)":{"message":"hello"}"# }.joined(separator: ",")
            let many = try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"m","content":{\#(content)}}"#).0
            #expect(many.status == .contentTooLarge)
            #expect(many.detail.contains("at most 50"), "\(many.detail)")
            let padding = String(repeating: "a", count: 300 << 10)
            let large = try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"\#(padding)"}"#).0
            #expect(large.status == .contentTooLarge)
            #expect(large.detail.contains("256 KiB"), "\(large.detail)")
            let (_, list) = try await s.json(.get, "/api/admin/campaigns", as: "root")
            #expect((list as? [Any])?.isEmpty == true)
            // 50 is taken.
            let fifty = tags.prefix(50).map { #""\#($0)":{"message":"hello"}"# }.joined(separator: ",")
            #expect(try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"m","content":{\#(fifty)}}"#).0.status == .accepted)
        }
    }

    @Test("one creator may have at most 1,000 campaigns scheduled: the next is 409 naming the limit and the fix")
    func scheduledPerCreator() async throws {
        try await TestServer.run { s in
            let (made, object) = try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"later","sendAt":"\#(Self.tomorrow)"}"#)
            #expect(made.status == .accepted)
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            // 999 more, copied in the database (as many POSTs would make them).
            try await s.database.write { db in
                for _ in 0..<(Campaign.maxScheduledPerCreator - 1) {
                    try db.execute(sql: """
                        INSERT INTO campaigns (audience, message, title, richType, payload, mode, createdBy, createdAt, sendAt, queued, defaultLocale)
                        SELECT audience, message, title, richType, payload, mode, createdBy, createdAt, sendAt, 0, defaultLocale FROM campaigns WHERE id = ?
                        """, arguments: [id])
                }
            }
            let refused = try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"one more","sendAt":"\#(Self.tomorrow)"}"#).0
            #expect(refused.status == .conflict)
            #expect(refused.detail.contains("1000") && refused.detail.contains("cancel one"), "\(refused.detail)")
            // Another creator is not held by root's; and a campaign sent now is never refused.
            #expect(try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"now"}"#).0.status == .accepted)
            #expect(try await s.request(.delete, "/api/admin/campaigns/\(id)", as: "root").status == .ok)
            #expect(try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"all":true},"message":"fits again","sendAt":"\#(Self.tomorrow)"}"#).0.status == .accepted)
        }
    }

    @Test("listing and polling campaigns never decode their content: a far-future campaign's content is read only when it is due", arguments: StoreEngine.all)
    func contentReadWhenDue(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let body = #"{"audience":{"all":true},"message":"m","sendAt":"\#(Self.tomorrow)","content":{"fr":{"message":"bonjour"},"de":{"message":"hallo"}}}"#
            let (made, object) = try await s.json(.post, "/api/admin/campaigns", as: "root", body: body)
            #expect(made.status == .accepted)
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            // Unreadable from here on: any read of it would fail the request.
            try await s.database.write { db in
                try db.execute(sql: "UPDATE campaigns SET content = 'not json' WHERE id = ?", arguments: [id])
            }
            let (listed, list) = try await s.json(.get, "/api/admin/campaigns", as: "root")
            #expect(listed.status == .ok)
            #expect(((list as? [[String: Any]])?.first?["locales"] as? [String]) == ["de", "fr"])
            let (shown, one) = try await s.json(.get, "/api/admin/campaigns/\(id)", as: "root")
            #expect(shown.status == .ok && (one as? [String: Any])?["status"] as? String == "scheduled")
            // runDue looks at it every second without reading its content: nothing is due, nothing fails.
            let due = try await s.data.campaigns(links: nil, defaultImage: "logo.png").runDue(addressing: .perDevice)
            #expect(due.isEmpty)
        }
    }

    // MARK: opens

    func links(_ s: TestServer) async throws -> PayloadLinks {
        PayloadLinks(key: try await s.data.payloadKey(), baseURL: "http://127.0.0.1:\(s.client.port ?? 0)", lifetime: 3600)
    }

    @Test("a repeated open writes nothing: it is answered while another transaction holds the database's write lock")
    func repeatedOpenWritesNothing() async throws {
        try await TestServer.run { s in
            let (_, object) = try await s.json(.post, "/api/notifications", body: "\"hi\"")
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            #expect(try await s.request(.post, "/api/notifications/\(id)/opened").status == .noContent)
            let token = try await links(s).token(notification: Int64(id), payload: try #require(MediaID(logoID)), expires: Int64(Date().timeIntervalSince1970) + 600)
            let released = ManagedAtomicFlag()
            let holder = Task {
                try await s.database.write { _ in
                    usleep(3_000_000)
                    released.set()
                }
            }
            try await Task.sleep(for: .milliseconds(300)) // the writer has the lock
            let repeatByLink = try await s.request(.post, "/p/\(token)/opened", as: nil)
            let repeatByAPI = try await s.request(.post, "/api/notifications/\(id)/opened")
            let answeredFirst = !released.isSet
            try await holder.value
            #expect(repeatByLink.status == .noContent && repeatByAPI.status == .noContent)
            #expect(answeredFirst, "the repeats waited for the database's writer")
        }
    }

    @Test("the token route is 410 once its URL expired or its notification is gone; opens are limited per client address")
    func openedByLinkGone() async throws {
        try await TestServer.run({ $0.opensPerMinute = 3 }) { s in
            let (_, object) = try await s.json(.post, "/api/notifications", body: "\"hi\"")
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            let payload = try #require(MediaID(logoID))
            let links = try await links(s)
            let now = Int64(Date().timeIntervalSince1970)
            let expired = links.token(notification: Int64(id), payload: payload, expires: now - 10)
            let stale = try await s.request(.post, "/p/\(expired)/opened", as: nil)
            #expect(stale.status == .gone && stale.detail.contains("/api/notifications/\(id)/opened"), "\(stale.detail)")
            let withdrawn = links.token(notification: 999_999, payload: payload, expires: now + 600)
            #expect(try await s.request(.post, "/p/\(withdrawn)/opened", as: nil).status == .gone)
            let fine = links.token(notification: Int64(id), payload: payload, expires: now + 600)
            #expect(try await s.request(.post, "/p/\(fine)/opened", as: nil).status == .noContent)
            // The fourth from this address in a minute (the limit here is 3).
            let limited = try await s.request(.post, "/p/\(fine)/opened", as: nil)
            #expect(limited.status == .tooManyRequests && Int(limited.headers[.retryAfter] ?? "") ?? 0 >= 1)
        }
    }

    // MARK: the fast path decides as the router

    /// The status of `request` sent twice on one keep-alive connection over HTTP/1.1 (the first
    /// caches the credentials, the second may be answered from memory), and over HTTP/1.0
    /// (always the router).
    func statuses(_ port: Int, path: String, authorization: String?) async throws -> (fast: String, router: String) {
        let auth = authorization.map { "Authorization: \($0)\r\n" } ?? ""
        return try await onOwnThread {
            let fd = try connectTo(port: port)
            defer { close(fd) }
            _ = exchange(fd, "GET \(path) HTTP/1.1\r\nHost: x\r\n\(auth)\r\n")
            let fast = exchange(fd, "GET \(path) HTTP/1.1\r\nHost: x\r\n\(auth)\r\n").head
            let old = try connectTo(port: port)
            defer { close(old) }
            let router = exchange(old, "GET \(path) HTTP/1.0\r\nHost: x\r\n\(auth)\r\n").head
            func status(_ head: String) -> String { String(head.split(separator: "\r\n").first?.split(separator: " ").dropFirst().first ?? "") }
            return (status(fast), status(router))
        }
    }

    @Test("the fast path answers only what the router would: Basic, a session, each key scope and none, on every hot route", arguments: StoreEngine.all)
    func fastPathParity(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let port = try #require(s.client.port)
            _ = try await s.request(.get, "/media/\(logoID)") // cached
            let (_, object) = try await s.json(.post, "/api/notifications", body: "\"hi\"")
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            let keys = APIKeyStore(database: s.database)
            let (_, session) = try await s.json(.post, "/api/sessions")
            let sessionToken = try #require((session as? [String: Any])?["token"] as? String)
            var credentials: [(String, String?)] = [
                ("alice Basic", TestServer.basic("alice")[.authorization]),
                ("bob Basic", TestServer.basic("bob")[.authorization]),
                ("alice session", "Bearer \(sessionToken)"),
                ("none", nil),
            ]
            for scope in [APIKeyScope.send, .read, .admin] {
                credentials.append(("\(scope.rawValue) key", "Bearer \(try await keys.add(name: "k-\(scope.rawValue)", scope: scope, app: nil))"))
            }
            let token = try await links(s).token(notification: Int64(id), payload: try #require(MediaID(logoID)),
                                                 expires: Int64(Date().timeIntervalSince1970) + 600)
            for path in ["/media/\(logoID)", "/api/notifications/\(id)", "/p/\(token)"] {
                for (name, authorization) in credentials {
                    let (fast, router) = try await statuses(port, path: path, authorization: authorization)
                    #expect(fast == router, "\(path) with \(name): fast path \(fast), router \(router)")
                }
            }
            // The send key in particular: the router refuses it media, and so does the fast path.
            let send = try #require(credentials.first { $0.0 == "send key" }?.1)
            #expect(try await statuses(port, path: "/media/\(logoID)", authorization: send).fast == "403")
        }
    }

    @Test("a cancelled campaign's unsent notifications leave every node's index: neither path serves their payload", arguments: StoreEngine.all)
    func cancelledLeavesIndex(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            _ = try await s.request(.get, "/media/\(logoID)") // cached
            _ = try await s.registerDevice(tokenA, as: "alice")
            // No push provider here: the push stays pending, so cancelling withdraws it.
            let (made, object) = try await s.json(.post, "/api/admin/campaigns", as: "root", body: #"{"audience":{"users":["alice"]},"message":"oops"}"#)
            #expect(made.status == .accepted)
            let campaign = try #require((object as? [String: Any])?["id"] as? Int)
            let (_, inbox) = try await s.json(.get, "/api/notifications")
            let id = try #require((inbox as? [[String: Any]])?.first?["id"] as? Int)
            let (_, session) = try await s.json(.post, "/api/sessions")
            let bearer: HTTPFields = [.authorization: "Bearer \(try #require((session as? [String: Any])?["token"] as? String))"]
            let token = try await links(s).token(notification: Int64(id), payload: try #require(MediaID(logoID)),
                                                 expires: Int64(Date().timeIntervalSince1970) + 600)
            #expect(s.fastPath.routes.payloads.get(Int64(id)) != nil) // known here, as made
            // Cancelled by another node: this one learns it from the database alone.
            let other = try await s.openStoreAgain()
            defer { other.close() }
            _ = try await other.campaigns(links: nil, defaultImage: "logo.png").cancel(Int64(campaign))
            #expect(try await eventually { s.fastPath.routes.payloads.get(Int64(id)) == nil })
            #expect(try await s.get("/api/notifications/\(id)", headers: bearer).status == .notFound)
            #expect(try await s.request(.get, "/p/\(token)", as: nil).status == .gone)
            let port = try #require(s.client.port)
            let (fast, router) = try await statuses(port, path: "/p/\(token)", authorization: nil)
            #expect(fast == "410" && router == "410")
        }
    }

    // MARK: idempotency and public routes

    @Test("Idempotency-Key records end with their key or user: one re-made under the same name is not answered with the old request's notification", arguments: StoreEngine.all)
    func idempotencyEndsWithOwner(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let keys = APIKeyStore(database: s.database)
            let body = #"{"to":"alice","message":"once"}"#
            let retry: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "order-1"]
            let first = try await post(s, "/api/notifications", key: try await keys.add(name: "backend", scope: .send, app: nil), body, headers: retry)
            #expect(first.status == .created)
            try await keys.remove(name: "backend")
            let again = try await post(s, "/api/notifications", key: try await keys.add(name: "backend", scope: .send, app: nil), body, headers: retry)
            #expect(again.status == .created && again.headers[HTTPField.Name("Idempotent-Replayed")!] == nil)
            #expect(again.bytes != first.bytes)

            var headers = TestServer.basic("bob")
            headers.append(contentsOf: retry)
            headers[.contentType] = "application/json"
            let bobs = try await s.client.execute(uri: "/api/notifications", method: .post, headers: headers, body: ByteBuffer(string: "\"mine\""))
            #expect(bobs.status == .created)
            let users = UserStore(database: s.database, cost: 4)
            try await users.remove(name: "bob")
            _ = try await users.add(name: "bob", password: "builder")
            let newBob = try await s.client.execute(uri: "/api/notifications", method: .post, headers: headers, body: ByteBuffer(string: "\"mine\""))
            #expect(newBob.status == .created && newBob.headers[HTTPField.Name("Idempotent-Replayed")!] == nil)
        }
    }

    @Test("a public route answers an unknown app with 404 and lists no app; only an admin is told the apps' names")
    func publicRoutesListNothing() async throws {
        try await TestServer.run { s in
            let unknown = try await s.request(.get, "/api/webpush/key?app=secret-app-probe", as: nil)
            #expect(unknown.status == .notFound)
            #expect(!unknown.detail.contains("default") && !unknown.detail.contains("apps are"), "\(unknown.detail)")
            let (_, created) = try await s.json(.post, "/api/register")
            let registration = try #require((created as? [String: Any])?["registrationId"] as? String)
            let user = try await s.json(.put, "/api/register/\(registration)", body: #"{"platform":"apns","handle":"\#(tokenA)","app":"nope"}"#).0
            #expect(user.status == .unprocessableContent && !user.detail.contains("apps are"), "\(user.detail)")
            let admin = try await s.json(.post, "/api/notifications", as: "root", body: #"{"to":"alice","app":"nope"}"#).0
            #expect(admin.status == .unprocessableContent && admin.detail.contains("apps are default"), "\(admin.detail)")
        }
    }
}

/// A flag set once, read from another thread.
final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
