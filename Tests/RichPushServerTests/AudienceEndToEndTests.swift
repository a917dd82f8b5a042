import APNsSandbox
import Foundation
import HTTPTypes
import PushDelivery
import PushSandboxes
@testable import RichPushCore
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import SQLEngine
import Testing

/// The audiences issue's acceptance test (SPEC §27): ten thousand users with attributes, topics
/// and devices; segments counted by the server agree with a count made here from the generated
/// data, and a templated campaign to one of them reaches exactly its devices, each with its
/// user's own words.
@Suite("Audiences end to end: 10,000 users, segments, a personalized campaign (SPEC §27)")
struct AudienceEndToEndTests {
    /// A segment saved through `PUT /api/admin/segments/{name}`: its name, its filter's JSON, and
    /// what the filter means, written here from docs/api.md#segments (not from the SQL).
    struct SegmentCase {
        var name: String
        var filter: String
        var selects: (Person) -> Bool
    }

    static var segments: [SegmentCase] {
        [
            SegmentCase(name: "gold-on-iphone", filter: #"{"all":[{"attribute":"plan","op":"eq","value":"gold"},{"platform":"apns"}]}"#,
                        selects: goldOnIPhone),
            SegmentCase(name: "deals-or-minors", filter: #"{"any":[{"topic":"deals"},{"attribute":"age","op":"lt","value":18}]}"#,
                        selects: dealsOrMinors),
            SegmentCase(name: "current-not-beta",
                        filter: #"{"all":[{"appVersion":{"op":"gte","value":"2.10"}},{"lastSeen":{"withinDays":30}},{"not":{"attribute":"beta","op":"eq","value":true}}]}"#,
                        selects: currentNotBeta),
        ]
    }

    /// Plan gold (a string), and an iPhone.
    static func goldOnIPhone(_ person: Person) -> Bool {
        person.attributes["plan"] == .string("gold") && person.devices.contains { $0.platform == "apns" }
    }

    /// Follows deals, or an age (a number) under 18: a missing age is not under 18.
    static func dealsOrMinors(_ person: Person) -> Bool {
        if person.topics.contains("deals") { return true }
        if case .integer(let age)? = person.attributes["age"] { return age < 18 }
        return false
    }

    /// A device at 2.10 or later, a device seen in the last 30 days (each a device of the user's,
    /// not necessarily the same one), and beta not true (missing or false).
    static func currentNotBeta(_ person: Person) -> Bool {
        person.devices.contains { version($0.appVersion, atLeast: "2.10") } && person.devices.contains { $0.seenRecently }
            && person.attributes["beta"] != .bool(true)
    }

    static let title = "Hi {{attributes.first_name}}{{^attributes.first_name}}there{{/attributes.first_name}}"

    @Test("from a clean start: 10,000 imported users; three saved segments count the users and devices a reference count finds; a templated campaign to one reaches each of its devices once, with its user's own title, and no other device",
          arguments: StoreEngine.all)
    func tenThousandUsers(engine: StoreEngine) async throws {
        let fcm = FCMFixtures.sandbox()
        try await serving([(fcm, "fcm")]) { origin in
            try await RunningSandbox.with { apns in
                let account = try FCMServiceAccount(json: FCMFixtures.accountJSON(tokenURI: fcm.tokenURI))
                let platforms = PlatformRouter([
                    "apns": APNsProvider(client: try apns.client()),
                    "fcm": FCMProvider(client: try FCMClient(account: account, endpoint: "\(origin)/fcm")),
                ])
                // The test's client keeps one connection, idle while ten thousand users are
                // stored: on a loaded machine that took longer than the server's 60 s idle timeout
                // on PostgreSQL, and the server rightly closed it ("I/O on closed channel").
                try await TestServer.run(engine: engine, { $0.idleTimeout = 900 }, provider: platforms) { s in
                    let generated = Person.generate(count: 10_000, seed: 46, fcmToken: { fcm.register() })
                    try await Self.store(generated, in: s)
                    // alice, bob and root are users too, with nothing set: no segment here selects them.
                    let everyone = generated + TestServer.passwords.keys.map { Person(name: $0) }

                    // Each segment, saved over HTTP, counts what the reference counts.
                    for segment in Self.segments {
                        let (saved, _) = try await s.json(.put, "/api/admin/segments/\(segment.name)", as: "root", body: #"{"filter":\#(segment.filter)}"#)
                        #expect(saved.status == .ok, "\(segment.name): \(saved.detail)")
                        let selected = everyone.filter(segment.selects)
                        let devices = selected.reduce(0) { $0 + $1.devices.count }
                        #expect(!selected.isEmpty && selected.count < everyone.count, "\(segment.name) selects some, not all")
                        let (count, _) = try await s.json(.get, "/api/admin/segments/\(segment.name)/count", as: "root")
                        #expect(count.status == .ok)
                        #expect(String(decoding: count.bytes, as: UTF8.self) == #"{"devices":\#(devices),"users":\#(selected.count)}"#, "\(segment.name)")
                    }

                    // A campaign to the first, its words rendered per recipient.
                    let gold = everyone.filter(Self.segments[0].selects)
                    let expected = Dictionary(uniqueKeysWithValues: gold.flatMap { person in
                        person.devices.map { ($0.token, "Hi \(person.attributes["first_name"].flatMap(Self.text) ?? "there")") }
                    })
                    let body = #"{"audience":{"segment":"gold-on-iphone"},"mode":"alert","title":"\#(Self.title)","message":"{{attributes.plan}} deal"}"#
                    let (made, campaign) = try await s.campaign(body)
                    #expect(made.status == .accepted, "\(made.detail)")
                    let id = try #require(campaign["id"] as? Int)
                    let finished = try await eventually(within: 120) {
                        let status = try await s.campaignStatus(id)
                        return status["status"] as? String == "done" && status["pending"] as? Int == 0
                    }
                    let status = try await s.campaignStatus(id)
                    #expect(finished, "campaign \(id): \(status)")
                    // Done: every recipient queued (the answer to the POST counted only the first batches).
                    #expect(status["recipients"] as? Int == gold.count && status["devices"] as? Int == expected.count, "\(status)")
                    #expect(status["sent"] as? Int == expected.count && status["failed"] as? Int == 0, "\(status)")

                    // What the phones got: iPhones from the APNs sandbox, Android phones from FCM's.
                    var received: [(token: String, title: String?, body: String?)] = []
                    for push in apns.sandbox.accepted {
                        let alert = ((try? JSONSerialization.jsonObject(with: push.payload) as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? [String: Any]
                        received.append((push.token.lowercased(), alert?["title"] as? String, alert?["body"] as? String))
                    }
                    for message in fcm.delivered {
                        received.append((message.token, message.notification?["title"], message.notification?["body"]))
                    }
                    let tokens = received.map(\.token)
                    let missing = Set(expected.keys).subtracting(tokens)
                    let others = Set(tokens).subtracting(expected.keys)
                    let twice = Dictionary(grouping: tokens, by: { $0 }).filter { $0.value.count > 1 }.keys
                    #expect(missing.isEmpty, "\(missing.count) of the segment's devices got nothing, e.g. \(missing.sorted().prefix(3))")
                    #expect(others.isEmpty, "\(others.count) devices outside the segment got a push, e.g. \(others.sorted().prefix(3))")
                    #expect(twice.isEmpty, "\(twice.count) devices got more than one push, e.g. \(twice.sorted().prefix(3))")
                    let wrong = received.filter { push in
                        guard let title = expected[push.token] else { return false }
                        return push.title != title || push.body != "gold deal"
                    }
                    let examples = wrong.prefix(3).map { push in
                        "\(push.token.prefix(12))…: \(String(describing: push.title)) / \(String(describing: push.body)), not \(expected[push.token] ?? "")"
                    }
                    #expect(wrong.isEmpty, "\(wrong.count) pushes with another user's words or unrendered ones, e.g. \(examples)")
                    // Templates render without HTML escaping, accents as they are.
                    #expect(expected.values.contains("Hi D'Arcy") && expected.values.contains("Hi Zoë") && expected.values.contains("Hi there"))
                }
            }
        }
    }

    // MARK: the data

    /// Imports `people` as `users import` would, their topics as an admin's topic changes do,
    /// and their devices in bulk, then reports their versions and last-seen hours as the
    /// devices' own `PUT /api/register/{id}` would have (the store keys the versions).
    static func store(_ people: [Person], in s: TestServer) async throws {
        // Hashes as an imported user base brings them: no bcrypt runs.
        let hash = "$2b$12$EFUhwlCOe7oxDdC3KXaUqeT3XZuYoPbXVVAJctA1FDgJcGXAbiZiq"
        let entries = try people.map { UserImport.Entry(name: $0.name, secret: .bcrypt(hash), admin: false, attributes: try UserAttributes($0.attributes)) }
        // A thousand a transaction, as a large import file is best fed: on PostgreSQL each row is
        // a round trip, and one transaction of ten thousand held a connection for a long while
        // on a loaded machine (the suite once lost it mid-import).
        var imported = UserStore.ImportSummary()
        for chunk in entries.sqlBatches(of: 1_000) {
            let part = try await s.data.users.importUsers(Array(chunk))
            imported.imported += part.imported
            imported.skipped += part.skipped
        }
        #expect(imported == UserStore.ImportSummary(imported: people.count, skipped: 0))

        for topic in Person.topicNames {
            let followers = people.filter { $0.topics.contains(topic) }.map(\.name)
            for chunk in followers.sqlBatches(of: TopicStore.maxNamesPerChange) {
                _ = try await s.data.topics.change(topic: topic, add: Array(chunk), remove: [])
            }
        }

        let devices = people.flatMap { person in person.devices.map { (person: person.name, device: $0) } }
        try await s.data.registrations.importDevices(devices.map { (user: $0.person, platform: $0.device.platform, handle: $0.device.token) })
        let now = Date()
        let groups = Dictionary(grouping: devices.map(\.device)) { VersionReport(platform: $0.platform, appVersion: $0.appVersion, seenRecently: $0.seenRecently) }
            .mapValues { $0.map(\.token) }
        try await s.database.write { db in
            for (report, tokens) in groups {
                let lastSeen = RegistrationStore.hour(report.seenRecently ? now : now.addingTimeInterval(-40 * 86_400))
                for chunk in tokens.sqlBatches() {
                    let arguments: [SQLValue] = [.text(report.appVersion), .real(lastSeen), .text(report.platform)] + chunk.map { SQLValue.text($0) }
                    try db.execute(sql: "UPDATE registrations SET appVersion = ?, lastSeen = ? WHERE platform = ? AND handle IN (\(sqlPlaceholders(chunk.count)))",
                                   arguments: SQLArguments(values: arguments))
                }
            }
        }
        #expect(try await s.data.registrations.fillAppVersionKeys() == devices.count)
    }

    /// What a group of devices reported.
    struct VersionReport: Hashable {
        var platform: String
        var appVersion: String
        var seenRecently: Bool
    }

    /// `version` compared with `floor` as numbers separated by dots (missing ones are 0).
    static func version(_ version: String, atLeast floor: String) -> Bool {
        let a = version.split(separator: ".").map { Int($0) ?? 0 }, b = floor.split(separator: ".").map { Int($0) ?? 0 }
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0, y = index < b.count ? b[index] : 0
            if x != y { return x > y }
        }
        return true
    }

    /// A string attribute's text.
    static func text(_ value: UserAttributes.Value) -> String? {
        if case .string(let text) = value { return text }
        return nil
    }

    /// One generated user: what the reference counts from, and what is stored.
    struct Person: Sendable {
        /// One device: an iPhone or an Android phone.
        struct Device: Sendable {
            var platform: String
            var token: String
            var appVersion: String
            /// Seen this hour; otherwise 40 days ago.
            var seenRecently: Bool
        }

        var name: String
        var attributes: [String: UserAttributes.Value] = [:]
        var topics: Set<String> = []
        var devices: [Device] = []

        static let topicNames = ["news", "sports", "deals", "tech"]
        static let plans = ["gold", "silver", "free"]
        static let firstNames = ["Alice", "Bruno", "Chloé", "D'Arcy", "Émile", "Zoë"]
        static let appVersions = ["2.9", "2.10", "3.0.1"]

        /// `count` users, the same on every run and engine for one `seed`: each attribute there or
        /// not, 0 to 3 topics, 0 to 2 devices. FCM tokens come from `fcmToken` (the FCM sandbox
        /// issues them); APNs tokens from the seed.
        static func generate(count: Int, seed: UInt64, fcmToken: () -> String) -> [Person] {
            var random = SeededGenerator(state: seed)
            func hex(_ value: UInt64) -> String {
                let digits = String(value, radix: 16)
                return String(repeating: "0", count: 16 - digits.count) + digits
            }
            return (0..<count).map { index in
                var person = Person(name: "user\(10_000 + index)")
                // Each attribute is missing a quarter of the time or so.
                let plan = Int.random(in: 0...plans.count, using: &random)
                if plan < plans.count { person.attributes["plan"] = .string(plans[plan]) }
                if Int.random(in: 0..<4, using: &random) > 0 { person.attributes["age"] = .integer(Int64.random(in: 13...90, using: &random)) }
                let beta = Int.random(in: 0..<3, using: &random)
                if beta < 2 { person.attributes["beta"] = .bool(beta == 0) }
                if Int.random(in: 0..<10, using: &random) >= 3 { person.attributes["first_name"] = .string(firstNames[Int.random(in: 0..<firstNames.count, using: &random)]) }
                let shuffled = topicNames.shuffled(using: &random)
                person.topics = Set(shuffled.prefix(Int.random(in: 0...3, using: &random)))
                for _ in 0..<Int.random(in: 0...2, using: &random) {
                    let apple = Bool.random(using: &random)
                    let token = apple ? (0..<4).map { _ in hex(random.next()) }.joined() : fcmToken()
                    let version = appVersions[Int.random(in: 0..<appVersions.count, using: &random)]
                    person.devices.append(Device(platform: apple ? "apns" : "fcm", token: token, appVersion: version, seenRecently: Bool.random(using: &random)))
                }
                return person
            }
        }
    }
}
