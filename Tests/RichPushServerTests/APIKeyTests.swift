import Foundation
import HTTPTypes
import NIOCore
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

@Suite("API keys at the routes (SPEC §18)")
struct APIKeyTests {
    func send(_ s: TestServer, key: String, _ body: String) async throws -> TestResponse {
        try await s.request(.post, "/api/notifications", as: nil, headers: [.authorization: "Bearer \(key)", .contentType: "application/json"],
                            body: Array(body.utf8))
    }

    @Test("a backend's key is limited per recipient, not per key: it notifies many users, but floods none; a person stays limited by what they send")
    func ratePerRecipient() async throws {
        try await TestServer.run({ $0.notificationsPerMinute = 2 }) { s in
            let key = try await APIKeyStore(database: s.database).add(name: "backend", scope: .send, app: nil)
            for _ in 0..<2 { #expect(try await send(s, key: key, #"{"to":"alice"}"#).status == .created) }
            let flooded = try await send(s, key: key, #"{"to":"alice"}"#)
            #expect(flooded.status == .tooManyRequests && Int(flooded.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(String(buffer: flooded.body).contains("alice has been sent 2 notifications by API keys"))
            for _ in 0..<2 { #expect(try await send(s, key: key, #"{"to":"bob"}"#).status == .created) }
            // A person sending to themselves has a limit of their own.
            for _ in 0..<2 { #expect(try await s.json(.post, "/api/notifications", as: "bob").0.status == .created) }
            #expect(try await s.json(.post, "/api/notifications", as: "bob").0.status == .tooManyRequests)
        }
    }

    @Test("to: an admin or a key may name another recipient, a user may not; a key must name one; an unknown user is 422")
    func recipients() async throws {
        try await TestServer.run { s in
            let key = try await APIKeyStore(database: s.database).add(name: "backend", scope: .admin, app: nil)
            #expect(try await s.json(.post, "/api/notifications", as: "alice", body: #"{"to":"bob"}"#).0.status == .forbidden)
            #expect(try await s.json(.post, "/api/notifications", as: "alice", body: #"{"to":"alice"}"#).0.status == .created)
            let (made, object) = try await s.json(.post, "/api/notifications", as: "root", body: #"{"to":"bob","message":"from root"}"#)
            #expect(made.status == .created)
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            // The notification is bob's: he may fetch its payload, root may not.
            #expect(try await s.request(.get, "/api/notifications/\(id)", as: "bob").status == .ok)
            #expect(try await s.request(.get, "/api/notifications/\(id)", as: "root").status == .notFound)
            #expect(try await send(s, key: key, #"{"message":"to nobody"}"#).status == .unprocessableContent)
            #expect(try await send(s, key: key, #"{"to":"nobody"}"#).status == .unprocessableContent)
            #expect(try await send(s, key: key, #"{"to":"bob","app":"nope"}"#).status == .unprocessableContent)
            // An admin key is an admin on admin routes, but still no device.
            #expect(try await s.request(.get, "/api/admin/campaigns", as: nil, headers: [.authorization: "Bearer \(key)"]).status == .ok)
            #expect(try await s.request(.get, "/api/notifications", as: nil, headers: [.authorization: "Bearer \(key)"]).status == .forbidden)
            #expect(try await s.request(.post, "/api/sessions", as: nil, headers: [.authorization: "Bearer \(key)"]).status == .forbidden)
        }
    }
}
