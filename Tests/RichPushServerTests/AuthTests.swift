import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import RichPushTestSupport
import Testing

@Suite("Authentication")
struct AuthTests {
    @Test("wrong password, unknown user, malformed header: 401 with WWW-Authenticate", arguments: StoreEngine.all)
    func rejections(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let headers: [HTTPFields] = [
                TestServer.basic("alice", "wrong"), TestServer.basic("mallory", "x"), TestServer.basic("alice", "alice"),
                [.authorization: "Basic !!notbase64"], [.authorization: "Bearer abc"], [:],
            ]
            for h in headers {
                let response = try await s.get("/api/notifications", headers: h)
                #expect(response.status == .unauthorized, "\(h)")
                #expect(response.headers[.wwwAuthenticate] == "Basic realm=\"RichPush\", charset=\"UTF-8\"")
                #expect(response.headers[.contentType] == "application/problem+json")
            }
            #expect(try await s.request(.get, "/api/notifications", as: "alice").status == .ok)
        }
    }

    @Test("--demo-auth accepts user == password for names with no account, as the tutorial's handler did; off by default", arguments: StoreEngine.all)
    func demoAuth(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let response = try await s.get("/api/notifications", headers: TestServer.basic("carol", "carol"))
            #expect(response.status == .unauthorized)
        }
        try await TestServer.run(engine: engine, { $0.demoAuth = true }) { s in
            let demo = try await s.get("/api/notifications", headers: TestServer.basic("carol", "carol"))
            #expect(demo.status == .ok)
            let wrong = try await s.get("/api/notifications", headers: TestServer.basic("carol", "nope"))
            #expect(wrong.status == .unauthorized)
            let account = try await s.request(.get, "/api/notifications", as: "alice")
            #expect(account.status == .ok)
            // A real account is never opened by the demo rule: alice:alice and root:root are refused.
            for name in ["alice", "root"] {
                #expect(try await s.get("/api/notifications", headers: TestServer.basic(name, name)).status == .unauthorized, "\(name)")
            }
        }
    }

    @Test("removing a user drops their cached credentials", arguments: StoreEngine.all)
    func removalDropsCache(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            #expect(try await s.request(.get, "/api/notifications", as: "bob").status == .ok) // now cached
            try await UserStore(database: s.database).remove(name: "bob")
            var status = HTTPResponse.Status.ok
            for _ in 0..<50 where status == .ok {
                try await Task.sleep(for: .milliseconds(100))
                status = try await s.request(.get, "/api/notifications", as: "bob").status
            }
            #expect(status == .unauthorized)
            #expect(try await s.request(.get, "/api/notifications", as: "alice").status == .ok)
        }
    }
}
