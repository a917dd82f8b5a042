import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: silent push, users, registrations, notifications")
struct CoreTests {
    func open() throws -> (URL, SQLDatabase) {
        let dir = try Fixtures.tempDirectory()
        return (dir, try CoreDatabase.open(DataDirectory(path: dir.path)))
    }

    @Test("the silent push is the tutorial's shape byte for byte, and what JSONEncoder writes for it with any message")
    func silentPush() throws {
        let push = SilentPush(id: 42, message: "Check this image out!", richType: "img").encoded()
        #expect(String(decoding: push, as: UTF8.self)
            == #"{"aps":{"content-available":1,"sound":""},"richId":"42","richMessage":"Check this image out!","richType":"img"}"#)
        let tricky = SilentPush(id: 7, message: "a \"quote\"\n/ 🎉", richType: "img").encoded()
        let object = try JSONSerialization.jsonObject(with: tricky) as? [String: Any]
        #expect(object?["richMessage"] as? String == "a \"quote\"\n/ 🎉")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for message in ["", "a \"quote\"\n/ 🎉", "tab\t\u{1}\u{1F}\\ é \u{2028}", "</script>", String(repeating: "ü", count: 300)] {
            for type in ["img", "coupon\"x"] {
                let silent = SilentPush(id: 9_007_199_254_740_993, message: message, richType: type)
                #expect(silent.encoded() == (try encoder.encode(silent)), "\(message) \(type)")
            }
        }
    }

    @Test("users: bcrypt verification, duplicate names refused, removal bumps the epoch")
    func users() async throws {
        let (dir, db) = try open()
        defer { try? FileManager.default.removeItem(at: dir) }
        let users = UserStore(database: db, cost: 4)
        _ = try await users.add(name: "alice", password: "pw")
        #expect(try await users.verify(name: "alice", password: "pw"))
        #expect(!(try await users.verify(name: "alice", password: "nope")))
        await #expect(throws: CoreError.self) { try await users.add(name: "alice", password: "x") }
        await #expect(throws: CoreError.self) { try await users.add(name: "bad name", password: "x") }
        let epoch = try await users.epochs().users
        try await users.remove(name: "alice")
        #expect(try await users.epochs().users == epoch + 1)
        #expect(!(try await users.verify(name: "alice", password: "pw")))
    }

    @Test("device tokens are normalised hex; anything else is refused")
    func handles() throws {
        #expect(try RegistrationStore.normalizeHandle("<ABCD EF01 2345 6789>") == "abcdef0123456789")
        for bad in ["xyz", "abc", "", String(repeating: "a", count: 402)] {
            #expect(throws: CoreError.self) { try RegistrationStore.normalizeHandle(bad) }
        }
    }

    @Test("a notification, its media reference and one delivery per device commit together")
    func create() async throws {
        let (dir, db) = try open()
        defer { try? FileManager.default.removeItem(at: dir) }
        let media = MediaStore(directory: DataDirectory(path: dir.path), database: db)
        _ = try await media.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8), name: "logo.png")
        let registrations = RegistrationStore(database: db)
        for token in ["aa", "bb"] {
            let r = try await registrations.create(for: "alice")
            _ = try await registrations.update(id: r.id, for: "alice", with: DeviceRegistration(platform: "apns", handle: String(repeating: token, count: 32), tags: []))
        }
        let store = NotificationStore(database: db)
        let created = try await store.create(for: "alice", draft: NotificationDraft(), defaultImage: "logo.png")
        #expect(created.deliveries == 2)
        let tagged = try await store.create(for: "alice", draft: NotificationDraft(message: "x"), defaultImage: "logo.png", addressing: .perUserTag)
        #expect(try await DeliveryStore(database: db).list(notification: tagged.notification.id).map(\.target) == ["username:alice"])
        await #expect(throws: CoreError.self) {
            try await store.create(for: "alice", draft: NotificationDraft(message: String(repeating: "é", count: 2100)), defaultImage: "logo.png")
        }
        let counts = try await db.read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications")!, try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries")!)
        }
        #expect(counts == (2, 3))
        // The media is referenced, so neither rm nor gc can take it away.
        await #expect(throws: MediaStoreError.self) { try await media.remove(created.notification.payload.hex) }
    }
}

@Suite("base64url")
struct Base64URLTests {
    @Test("encoding is Foundation's base64 in the URL alphabet without padding, for every length, and decodes back")
    func matchesFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            let encoded = Base64URL.encode(bytes)
            #expect(encoded == expected, "length \(length)")
            #expect(Base64URL.decodeBytes(encoded) == bytes, "length \(length)")
        }
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
    }
}
