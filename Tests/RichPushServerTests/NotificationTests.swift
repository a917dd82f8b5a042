import Foundation
import SQLEngine
import HTTPTypes
import HummingbirdTesting
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
@testable import RichPushAPI
import RichPushServer
import Testing

@Suite("Rich notifications")
struct NotificationTests {
    let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))

    func storedPush(_ s: TestServer, _ id: Int) async throws -> [String: Any] {
        let data = try await s.database.read { db in try Data.fetchOne(db, sql: "SELECT push FROM notifications WHERE id = ?", arguments: [id]) }
        return try JSONSerialization.jsonObject(with: try #require(data)) as! [String: Any]
    }

    @Test("the tutorial's own requests: an empty body, and a JSON string body with pns/to_tag", arguments: StoreEngine.all)
    func tutorialRequests(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            _ = try await s.registerDevice(tokenA)
            let (empty, object) = try await s.json(.post, "/api/notifications")
            #expect(empty.status == .created)
            let n = try #require(object as? [String: Any])
            #expect(n["message"] as? String == "Check this image out!")
            #expect(n["richType"] as? String == "img")
            #expect(n["payload"] as? String == MediaID(hashing: logo).hex)
            #expect(n["read"] as? Bool == false)
            let id = try #require(n["id"] as? Int)
            let push = try await s.database.read { db in try Data.fetchOne(db, sql: "SELECT push FROM notifications WHERE id = ?", arguments: [id]) }
            #expect(String(decoding: try #require(push), as: UTF8.self)
                == "{\"aps\":{\"content-available\":1,\"sound\":\"\"},\"richId\":\"\(id)\",\"richMessage\":\"Check this image out!\",\"richType\":\"img\"}")

            let (string, stringObject) = try await s.json(.post, "/api/notifications?pns=apns&to_tag=alice", body: "\"Hello from the app\"")
            #expect(string.status == .created)
            #expect((stringObject as? [String: Any])?["message"] as? String == "Hello from the app")
            // A new notification, after the first: on PostgreSQL a write retried after losing a
            // serialization race has used an id of the sequence, so ids may skip one.
            #expect(((stringObject as? [String: Any])?["id"] as? Int).map { $0 > id } == true)
            let deliveries = try await DeliveryStore(database: s.database).list(notification: Int64(id))
            #expect(deliveries.map(\.target) == [tokenA])
            #expect(deliveries.map(\.state) == [.pending])
        }
    }

    @Test("quotes, new lines and emoji make valid push JSON that round-trips", arguments: StoreEngine.all)
    func awkwardMessage(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let message = "She said \"hi\"\nthen left 🎉 \\ / </script> \u{0007}"
            let body = String(decoding: try JSONSerialization.data(withJSONObject: ["message": message], options: []), as: UTF8.self)
            let (response, object) = try await s.json(.post, "/api/notifications", body: body)
            #expect(response.status == .created)
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            let push = try await storedPush(s, id)
            #expect(push["richMessage"] as? String == message)
            #expect(push["richId"] as? String == String(id))
            #expect((push["aps"] as? [String: Any])?["content-available"] as? Int == 1)
        }
    }

    @Test("a push over 4096 bytes is refused with 422 and nothing is stored", arguments: StoreEngine.all)
    func pushTooLarge(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            _ = try await s.registerDevice(tokenA)
            let (response, _) = try await s.json(.post, "/api/notifications", body: "{\"message\":\"\(String(repeating: "x", count: 4100))\"}")
            #expect(response.status == .unprocessableContent)
            #expect(response.detail.contains("4096"))
            let counts = try await s.database.read { db in
                (try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications")!, try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries")!,
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM media_refs")!)
            }
            #expect(counts == (0, 0, 0))
            let (fits, _) = try await s.json(.post, "/api/notifications", body: "{\"message\":\"\(String(repeating: "x", count: 3900))\"}")
            #expect(fits.status == .created)
        }
    }

    @Test("payload by name or id; unknown payload 422; malformed bodies 400", arguments: StoreEngine.all)
    func payloads(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let coupon = try Fixtures.bytes(Fixtures.media.appendingPathComponent("coupon.png"))
            // Names are shared by everyone: only an admin names media, and a taken name is 409.
            let refused = try await s.request(.post, "/api/media?name=coupon", body: coupon)
            #expect(refused.status == .forbidden)
            let upload = try await s.request(.post, "/api/media?name=coupon", as: "root", body: coupon)
            #expect(upload.status == .created)
            let again = try await s.request(.post, "/api/media?name=coupon", as: "root", body: coupon)
            #expect(again.status == .ok)
            let other = try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
            let taken = try await s.request(.post, "/api/media?name=coupon", as: "root", body: other)
            #expect(taken.status == .conflict)
            #expect(taken.detail.contains("already names"))
            let (byName, object) = try await s.json(.post, "/api/notifications", body: "{\"message\":\"20% off\",\"richType\":\"coupon\",\"payload\":\"coupon\"}")
            #expect(byName.status == .created)
            #expect((object as? [String: Any])?["richType"] as? String == "coupon")
            let (unknown, _) = try await s.json(.post, "/api/notifications", body: "{\"payload\":\"nope.png\"}")
            #expect(unknown.status == .unprocessableContent)
            for body in ["{", "42", "{\"message\":7}", "[\"a\"]"] {
                let (bad, _) = try await s.json(.post, "/api/notifications", body: body)
                #expect(bad.status == .badRequest, "\(body)")
            }
        }
    }

    @Test("the list is the caller's, newest first, with read flags", arguments: StoreEngine.all)
    func list(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            for message in ["one", "two"] { _ = try await s.json(.post, "/api/notifications", body: "\"\(message)\"") }
            _ = try await s.json(.post, "/api/notifications", as: "bob", body: "\"bob's\"")
            _ = try await s.request(.get, "/api/notifications/1")
            let (_, object) = try await s.json(.get, "/api/notifications")
            let list = try #require(object as? [[String: Any]])
            #expect(list.map { $0["message"] as? String } == ["two", "one"])
            #expect(list.map { $0["read"] as? Bool } == [false, true])
            let (_, bobs) = try await s.json(.get, "/api/notifications", as: "bob")
            #expect((bobs as? [[String: Any]])?.count == 1)
            #expect(try await s.request(.get, "/api/notifications?limit=0").status == .badRequest)
        }
    }

    @Test("only the recipient fetches the payload: exact bytes as image/png, then read; anyone else 404", arguments: StoreEngine.all)
    func fetch(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (_, object) = try await s.json(.post, "/api/notifications")
            let id = try #require((object as? [String: Any])?["id"] as? Int)
            let other = try await s.request(.get, "/api/notifications/\(id)", as: "bob")
            #expect(other.status == .notFound)
            #expect(other.headers[.contentType] == "application/problem+json")
            let head = try await s.request(.head, "/api/notifications/\(id)")
            #expect(head.status == .ok && head.bytes.isEmpty && head.headers[.contentLength] == String(logo.count))
            let before = try await NotificationStore(database: s.database).find(id: Int64(id), for: "alice")
            #expect(before?.read == false) // HEAD does not mark it read
            let fetched = try await s.request(.get, "/api/notifications/\(id)")
            #expect(fetched.status == .ok)
            #expect(fetched.bytes == logo)
            #expect(fetched.headers[.contentType] == "image/png")
            #expect(fetched.headers[.cacheControl] == "private")
            #expect(fetched.headers[.eTag] == "\"\(MediaID(hashing: logo).hex)\"")
            // A payload answered from memory queues its read mark without waiting for the commit.
            #expect(try await eventually(within: 5) { try await NotificationStore(database: s.database).find(id: Int64(id), for: "alice")?.read == true })
            let again = try await s.request(.get, "/api/notifications/\(id)", as: "bob")
            #expect(again.status == .notFound) // also once the read payload is cached
            let conditional = try await s.request(.get, "/api/notifications/\(id)", headers: [.ifNoneMatch: fetched.headers[.eTag]!])
            #expect(conditional.status == .notModified)
            let ranged = try await s.request(.get, "/api/notifications/\(id)", headers: [.range: "bytes=0-7"])
            #expect(ranged.status == .partialContent && ranged.bytes == Array(logo.prefix(8)))
            for bad in ["0", "-1", "abc", "99999", "1.5"] {
                #expect(try await s.request(.get, "/api/notifications/\(bad)").status == .notFound, "\(bad)")
            }
        }
    }

    @Test("without the default image in the store, a default notification is 422 with what to do", arguments: StoreEngine.all)
    func missingDefaultImage(engine: StoreEngine) async throws {
        // A name with no file in the media directory and no sample built into the binary (logo.png has one: SampleImageTests).
        try await TestServer.run(engine: engine, { $0.mediaDirectory = "/nonexistent"; $0.defaultImage = "banner.png" }) { s in
            let (response, _) = try await s.json(.post, "/api/notifications")
            #expect(response.status == .unprocessableContent)
            #expect(response.detail.contains("richpush media add --name banner.png"))
        }
    }
}
