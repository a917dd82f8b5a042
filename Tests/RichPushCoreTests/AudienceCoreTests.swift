import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: users' attributes, devices' versions, topics (SPEC §27)")
struct AudienceCoreTests {
    /// A fresh store of `engine` in `dir`, with the users alice and bob.
    static func store(_ engine: StoreEngine, _ dir: URL) async throws -> DataStore {
        let locations = try await engine.locations()
        let store = try await DataStore.open(path: dir.path, database: locations.database, blobs: locations.blobs, environment: locations.environment)
        let users = store.users(cost: 4)
        try await users.add(name: "alice", password: "pw")
        try await users.add(name: "bob", password: "pw")
        return store
    }

    /// The `CoreError` `body` throws; nil when it throws none (or another error).
    static func refusal<T>(_ body: () async throws -> T) async -> CoreError? {
        do {
            _ = try await body()
            return nil
        } catch {
            return error as? CoreError
        }
    }

    static func attributes(_ json: String) throws -> UserAttributes {
        try JSONDecoder().decode(UserAttributes.self, from: Data(json.utf8))
    }

    static func patch(_ json: String) throws -> UserAttributes.Patch {
        try JSONDecoder().decode(UserAttributes.Patch.self, from: Data(json.utf8))
    }

    @Test("attributes' rules: a refusal names the key; 256 bytes fit and 257 do not; 50 keys fit and 51 do not; null only removes in a patch")
    func rules() throws {
        func message(_ body: () throws -> Any) -> String? {
            do { _ = try body(); return nil } catch { return (error as? CoreError)?.message ?? "\(error)" }
        }
        #expect(message { try Self.attributes(#"{"First-Name":"Alice"}"#) }
            == #"attribute "First-Name": a key is a lowercase letter, then up to 63 lowercase letters, digits or _"#)
        for key in ["", "1st", "_x", "a-b", "é", String(repeating: "a", count: 65)] {
            #expect(message { try Self.attributes(#"{"\#(key)":1}"#) }?.hasPrefix("attribute \"\(key.prefix(80))\": a key is") == true, "\(key)")
        }
        #expect(throws: Never.self) { try Self.attributes(#"{"\#(String(repeating: "a", count: 64))":1,"a_1":2}"#) }
        let fits = String(repeating: "é", count: 128), over = String(repeating: "x", count: 257)
        #expect(try Self.attributes(#"{"bio":"\#(fits)"}"#)["bio"] == .string(fits))
        #expect(message { try Self.attributes(#"{"bio":"\#(over)"}"#) } == "attribute \"bio\": a string is at most 256 bytes of UTF-8; this one is 257")
        #expect(message { try Self.attributes(#"{"tags":["a"]}"#) }?.hasPrefix("attribute \"tags\": a value is a string, a number, true or false") == true)
        #expect(message { try Self.attributes(#"{"address":{"city":"Lyon"}}"#) }?.hasPrefix("attribute \"address\":") == true)
        #expect(message { try Self.attributes(#"{"plan":null}"#) }?.hasPrefix("attribute \"plan\": null removes an attribute") == true)
        let fifty = (1...50).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(try Self.attributes("{\(fifty)}").values.count == 50)
        #expect(message { try Self.attributes("{\(fifty),\"k51\":51}") }?.contains("at most 50") == true)
        #expect(message { try Self.attributes("[1]") } != nil)

        // Values keep their kind: a whole number stays whole, a fraction a fraction.
        let mixed = try Self.attributes(#"{"age":34,"score":0.5,"beta":true,"plan":"gold"}"#)
        #expect(mixed.values == ["age": .integer(34), "score": .number(0.5), "beta": .bool(true), "plan": .string("gold")])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(String(decoding: try encoder.encode(mixed), as: UTF8.self) == #"{"age":34,"beta":true,"plan":"gold","score":0.5}"#)

        // A merge patch: values set, nulls removed, the rest kept; the result at most 50.
        let merged = try mixed.merging(try Self.patch(#"{"beta":null,"city":"Lyon","absent":null}"#))
        #expect(merged.values == ["age": .integer(34), "score": .number(0.5), "plan": .string("gold"), "city": .string("Lyon")])
        #expect(message { try Self.patch(#"{"Bad":null}"#) }?.hasPrefix("attribute \"Bad\"") == true)
        let full = try Self.attributes("{\(fifty)}")
        #expect(message { try full.merging(try Self.patch(#"{"k51":1}"#)) }?.contains("at most 50") == true)
        #expect(try full.merging(try Self.patch(#"{"k1":null,"k51":1}"#)).values.count == 50)
    }

    @Test("users import takes \"attributes\", checked as the API checks them, and stores them")
    func importLines() async throws {
        let entry = try UserImport.parse(#"{"name":"dan","password":"pw","attributes":{"plan":"free","age":40}}"#)
        #expect(entry.attributes.values == ["plan": .string("free"), "age": .integer(40)])
        #expect(try UserImport.parse(#"{"name":"eve","password":"pw"}"#).attributes.isEmpty)
        let bad: [(String, String)] = [
            (#"{"name":"dan","password":"pw","attributes":{"Plan":"free"}}"#, "attribute \"Plan\": a key is"),
            (#"{"name":"dan","password":"pw","attributes":{"plan":[1]}}"#, "attribute \"plan\": a value is"),
            (#"{"name":"dan","password":"pw","attributes":"plan"}"#, "\"attributes\" must be an object"),
        ]
        for (line, expected) in bad {
            let refused = await Self.refusal { try UserImport.parse(line) }
            #expect(refused?.message.contains(expected) == true, "\(line): \(refused?.message ?? "accepted")")
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(.embedded, dir)
        defer { store.close() }
        #expect(try await store.users(cost: 4).importUsers([entry]) == UserStore.ImportSummary(imported: 1, skipped: 0))
        #expect(try await store.users.attributes(of: "dan") == entry.attributes)
    }

    @Test("attributes are replaced whole, merged (null removes a key) and read back; a 51st is refused and changes nothing; no such user is 404",
          arguments: StoreEngine.all)
    func attributes(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir)
        defer { store.close() }
        let users = store.users
        #expect(try await users.attributes(of: "alice").isEmpty)
        let set = try UserAttributes(["plan": .string("gold"), "age": .integer(34), "score": .number(0.5), "beta": .bool(true)])
        #expect(try await users.setAttributes(set, for: "alice") == set)
        #expect(try await users.attributes(of: "alice") == set)
        let merged = try await users.mergeAttributes(try UserAttributes.Patch(["beta": nil, "city": .string("Lyon")]), for: "alice")
        let expected = try UserAttributes(["plan": .string("gold"), "age": .integer(34), "score": .number(0.5), "city": .string("Lyon")])
        #expect(merged == expected)
        #expect(try await users.attributes(of: "alice") == expected)
        #expect(try await users.attributes(of: "bob").isEmpty)
        // Replacing is whole: what the new set leaves out goes.
        let smaller = try UserAttributes(["plan": .string("silver")])
        try await users.setAttributes(smaller, for: "alice")
        #expect(try await users.attributes(of: "alice") == smaller)
        try await users.setAttributes(UserAttributes(), for: "alice")
        #expect(try await users.attributes(of: "alice").isEmpty)

        let fifty = try UserAttributes(Dictionary(uniqueKeysWithValues: (1...50).map { ("k\($0)", UserAttributes.Value.integer(Int64($0))) }))
        try await users.setAttributes(fifty, for: "bob")
        let over = await Self.refusal { try await users.mergeAttributes(try UserAttributes.Patch(["extra": .bool(true)]), for: "bob") }
        #expect(over?.kind == .invalid && over?.message.contains("at most 50") == true)
        #expect(try await users.attributes(of: "bob") == fifty)

        #expect(await Self.refusal { try await users.attributes(of: "nobody") }?.kind == .notFound)
        #expect(await Self.refusal { try await users.setAttributes(set, for: "nobody") }?.kind == .notFound)
        #expect(await Self.refusal { try await users.mergeAttributes(UserAttributes.Patch(), for: "nobody") }?.kind == .notFound)
    }

    @Test("topics: following is idempotent, lists are sorted, an admin's change is all or nothing, names follow the rule",
          arguments: StoreEngine.all)
    func topics(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir)
        defer { store.close() }
        let topics = store.topics
        try await topics.subscribe("alice", to: "team-lyon")
        try await topics.subscribe("alice", to: "team-lyon")
        try await topics.subscribe("alice", to: "Breaking.News")
        try await topics.subscribe("alice", to: "caf%C3%A9")
        #expect(try await topics.list(of: "alice") == ["Breaking.News", "caf%C3%A9", "team-lyon"])
        #expect(try await topics.subscribers(of: "team-lyon") == 1)
        try await topics.unsubscribe("alice", from: "Breaking.News")
        try await topics.unsubscribe("alice", from: "Breaking.News")
        try await topics.unsubscribe("bob", from: "never-followed")
        #expect(try await topics.list(of: "alice") == ["caf%C3%A9", "team-lyon"])
        #expect(await Self.refusal { try await topics.subscribe("nobody", to: "team-lyon") }?.kind == .notFound)
        for bad in ["", "a b", "a/b", "é", "a+b", String(repeating: "t", count: 65)] {
            let refused = await Self.refusal { try await topics.subscribe("alice", to: bad) }
            #expect(refused?.kind == .invalid && refused?.message.contains("1 to 64 of A-Z a-z 0-9 _ . ~ % -") == true, "\(bad)")
        }

        // One call adds bob and removes alice.
        let change = try await topics.change(topic: "team-lyon", add: ["bob", "bob"], remove: ["alice"])
        #expect(change == TopicStore.Change(added: 1, removed: 1, subscribers: 1))
        #expect(try await topics.list(of: "alice") == ["caf%C3%A9"])
        #expect(try await topics.list(of: "bob") == ["team-lyon"])
        // Again: nothing new to add or remove.
        #expect(try await topics.change(topic: "team-lyon", add: ["bob"], remove: ["alice"]) == TopicStore.Change(added: 0, removed: 0, subscribers: 1))
        // An unknown name refuses the whole change, naming it.
        let unknown = await Self.refusal { try await topics.change(topic: "team-lyon", add: ["alice", "nobody"], remove: ["bob", "ghost"]) }
        #expect(unknown?.kind == .invalid && unknown?.message.contains("nobody, ghost") == true && unknown?.message.contains("nothing was changed") == true)
        #expect(try await topics.list(of: "alice") == ["caf%C3%A9"])
        #expect(try await topics.list(of: "bob") == ["team-lyon"])
        #expect(await Self.refusal { try await topics.change(topic: "team-lyon", add: ["alice"], remove: ["alice"]) }?.message.contains("in both") == true)
        let tooMany = (0...TopicStore.maxNamesPerChange).map { "user\($0)" }
        #expect(await Self.refusal { try await topics.change(topic: "team-lyon", add: tooMany, remove: []) }?.kind == .invalid)
        #expect(await Self.refusal { try await topics.change(topic: "bad topic", add: ["alice"], remove: []) }?.kind == .invalid)
    }

    @Test("a user follows at most 2,000 topics: the next is 409 saying what to do, one already followed is fine, an admin's change adding them applies nothing",
          arguments: StoreEngine.all)
    func topicCap(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir)
        defer { store.close() }
        let topics = store.topics
        // 1,999 rows in one transaction (as many subscribe calls would leave them), then the store's own path.
        let names = (1..<TopicStore.maxPerUser).map { String(format: "topic-%04d", $0) }
        try await store.database.write { db in
            for chunk in names.sqlBatches() {
                try db.execute(sql: "INSERT INTO topics (username, topic, createdAt) VALUES " + Array(repeating: "(?, ?, 0)", count: chunk.count).joined(separator: ", "),
                               arguments: SQLArguments(chunk.flatMap { ["alice", $0] }))
            }
        }
        try await topics.subscribe("alice", to: "the-last-one")
        #expect(try await topics.list(of: "alice").count == TopicStore.maxPerUser)
        let refused = await Self.refusal { try await topics.subscribe("alice", to: "one-more") }
        #expect(refused?.kind == .conflict && refused?.message.contains("2000") == true && refused?.message.contains("DELETE /api/me/topics/{topic}") == true)
        try await topics.subscribe("alice", to: "topic-0001") // already followed: nothing to add
        let change = await Self.refusal { try await topics.change(topic: "one-more", add: ["bob", "alice"], remove: []) }
        #expect(change?.kind == .conflict && change?.message.hasPrefix("alice follows") == true)
        #expect(try await topics.subscribers(of: "one-more") == 0) // bob was not added either
        try await topics.unsubscribe("alice", from: "topic-0001")
        try await topics.subscribe("alice", to: "one-more")
        #expect(try await topics.list(of: "alice").contains("one-more"))
    }

    @Test("a device's app and OS versions are kept (a body without them keeps the last), lastSeen is the start of the hour; bad versions are refused by name",
          arguments: StoreEngine.all)
    func versions(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir)
        defer { store.close() }
        let registrations = store.registrations
        let created = try await registrations.create(for: "alice")
        let seen = try #require(created.lastSeen)
        #expect(seen.timeIntervalSince1970.truncatingRemainder(dividingBy: 3600) == 0 && seen <= Date())
        let at = ISO8601DateFormatter().date(from: "2026-03-29T10:42:17Z")!
        let token = String(repeating: "ab", count: 32)
        let updated = try await registrations.update(id: created.id, for: "alice",
                                                     with: DeviceRegistration(platform: "apns", handle: token, tags: [], appVersion: "2.4.1", osVersion: "iOS 18.2"),
                                                     now: at)
        #expect(updated.appVersion == "2.4.1" && updated.osVersion == "iOS 18.2")
        #expect(updated.lastSeen == ISO8601DateFormatter().date(from: "2026-03-29T10:00:00Z"))
        let stored = try #require(try await registrations.list(for: "alice").first)
        #expect(stored.appVersion == "2.4.1" && stored.osVersion == "iOS 18.2" && stored.lastSeen == updated.lastSeen)
        // An older app's body, without versions, keeps them; the hour moves on.
        let later = ISO8601DateFormatter().date(from: "2026-03-29T13:05:00Z")!
        _ = try await registrations.update(id: created.id, for: "alice", with: DeviceRegistration(platform: "apns", handle: token, tags: []), now: later)
        let kept = try #require(try await registrations.list(for: "alice").first)
        #expect(kept.appVersion == "2.4.1" && kept.osVersion == "iOS 18.2" && kept.lastSeen == ISO8601DateFormatter().date(from: "2026-03-29T13:00:00Z"))
        let refusals: [(DeviceRegistration, String)] = [
            (DeviceRegistration(platform: "apns", handle: token, tags: [], appVersion: String(repeating: "9", count: 65)), "appVersion"),
            (DeviceRegistration(platform: "apns", handle: token, tags: [], appVersion: ""), "appVersion"),
            (DeviceRegistration(platform: "apns", handle: token, tags: [], osVersion: "iOS\u{7}18"), "osVersion"),
        ]
        for (device, field) in refusals {
            let refused = await Self.refusal { try await registrations.update(id: created.id, for: "alice", with: device) }
            #expect(refused?.kind == .invalid && refused?.message.hasPrefix(field) == true, "\(field)")
        }
        #expect(try await registrations.list(for: "alice").first?.appVersion == "2.4.1")
        #expect(try await registrations.update(id: created.id, for: "alice",
                                               with: DeviceRegistration(platform: "apns", handle: token, tags: [], appVersion: String(repeating: "é", count: 32))).appVersion
                == String(repeating: "é", count: 32))
    }

    @Test("a removed user's attributes and topics go with them; an account made again under the name starts without", arguments: StoreEngine.all)
    func removal(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir)
        defer { store.close() }
        let users = store.users(cost: 4)
        try await users.setAttributes(try UserAttributes(["plan": .string("gold")]), for: "alice")
        try await store.topics.subscribe("alice", to: "team-lyon")
        try await store.topics.subscribe("bob", to: "team-lyon")
        try await users.remove(name: "alice")
        #expect(try await store.topics.list(of: "alice").isEmpty)
        #expect(try await store.topics.subscribers(of: "team-lyon") == 1)
        #expect(await Self.refusal { try await users.attributes(of: "alice") }?.kind == .notFound)
        try await users.add(name: "alice", password: "pw")
        #expect(try await users.attributes(of: "alice").isEmpty)
        #expect(try await store.topics.list(of: "alice").isEmpty)
        #expect(try await store.topics.list(of: "bob") == ["team-lyon"])
    }
}
