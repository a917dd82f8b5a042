import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: segments, filters over attributes, topics, locale and devices (SPEC §27)")
struct SegmentCoreTests {
    /// The `CoreError` message `body` throws; nil when it throws none.
    static func refusal(_ body: () async throws -> Any) async -> String? {
        do {
            _ = try await body()
            return nil
        } catch {
            return (error as? CoreError)?.message ?? "\(error)"
        }
    }

    static func filter(_ text: String) throws -> SegmentFilter { try SegmentFilter(jsonText: text) }

    @Test("every refusal starts with the JSON path of what is wrong, and says what is expected")
    func refusals() async throws {
        let many = (0...SegmentFilter.maxListed).map(String.init).joined(separator: ",")
        let deep = String(repeating: #"{"not":"#, count: 16) + #"{"topic":"a"}"# + String(repeating: "}", count: 16)
        let fine = String(repeating: #"{"not":"#, count: 15) + #"{"topic":"a"}"# + String(repeating: "}", count: 15)
        let wide = #"{"any":["# + Array(repeating: #"{"topic":"a"}"#, count: 501).joined(separator: ",") + "]}"
        let cases: [(String, String)] = [
            (#"{"all":[{"topic":"a"},{"attribute":"x","op":"eqq","value":1}]}"#,
             #"filter.all[1].op: unknown operator "eqq"; one of eq, ne, lt, lte, gt, gte, in, exists, missing, contains"#),
            (#"{"any":[]}"#, "filter.any: an empty list; give at least one filter"),
            (#"{"all":{}}"#, "filter.all: must be an array of filters, not an object"),
            (#"{"not":[1]}"#, "filter.not: a filter is an object with one of all, any, not, attribute,"),
            (#"[1]"#, "filter: a filter is an object"),
            (#"{}"#, "filter: an empty object; a filter has one of all, any"),
            (#"{"topic":"a","app":"b"}"#, #"filter: has both "topic" and "app"; a filter has one of them"#),
            (#"{"topik":"a"}"#, #"filter.topik: unknown key (did you mean "topic"?); a filter has one of all, any,"#),
            (#"{"attribute":"plan","op":"eq","value":1,"extra":true}"#, "filter.extra: unknown key; an attribute condition has attribute, op, value"),
            (#"{"attribute":"First-Name","op":"exists"}"#, #"filter.attribute: "First-Name" is not an attribute key"#),
            (#"{"attribute":5,"op":"exists"}"#, "filter.attribute: must be a string, not a number"),
            (#"{"attribute":"plan"}"#, "filter.op: missing; one of eq, ne,"),
            (#"{"attribute":"plan","op":5}"#, "filter.op: must be a string, one of eq,"),
            (#"{"attribute":"age","op":"lt","value":"5"}"#, "filter.value: lt needs a number, not a string"),
            (#"{"attribute":"age","op":"gte"}"#, "filter.value: gte needs a number, not nothing"),
            (#"{"attribute":"age","op":"gt","value":true}"#, "filter.value: gt needs a number, not a boolean"),
            (#"{"attribute":"plan","op":"eq","value":[1]}"#, "filter.value: eq compares with a string, a number or a boolean, not an array"),
            (#"{"attribute":"plan","op":"ne","value":null}"#, "filter.value: ne compares with a string, a number or a boolean, not null"),
            (#"{"attribute":"plan","op":"eq","value":"\#(String(repeating: "x", count: 257))"}"#, "filter.value: a string is at most 256 bytes"),
            (#"{"attribute":"bio","op":"contains","value":5}"#, "filter.value: contains needs a string, not a number"),
            (#"{"attribute":"bio","op":"contains","value":""}"#, "filter.value: contains needs a non-empty string"),
            (#"{"attribute":"plan","op":"in","value":[]}"#, "filter.value: in needs an array of 1 to 100 strings, numbers or booleans; this one has 0"),
            (#"{"attribute":"plan","op":"in","value":[\#(many)]}"#, "filter.value: in needs an array of 1 to 100 strings, numbers or booleans; this one has 101"),
            (#"{"attribute":"plan","op":"in","value":"gold"}"#, "filter.value: in needs an array of 1 to 100 strings, numbers or booleans, not a string"),
            (#"{"attribute":"plan","op":"in","value":["gold",{"b":1}]}"#, "filter.value[1]: in lists strings, numbers or booleans, not an object"),
            (#"{"attribute":"plan","op":"exists","value":1}"#, "filter.value: exists takes no value"),
            (#"{"any":[{"not":{"attribute":"x","op":"lte","value":false}}]}"#, "filter.any[0].not.value: lte needs a number, not a boolean"),
            (#"{"topic":"a b"}"#, "filter.topic: invalid topic 'a b': a topic is 1 to 64 of"),
            (#"{"topic":7}"#, "filter.topic: must be a string, not a number"),
            (#"{"platform":"ios"}"#, #"filter.platform: "ios" is not a platform; one of apns, fcm, web"#),
            (#"{"app":"Shop App"}"#, "filter.app: invalid app name 'Shop App'"),
            (#"{"locale":"français"}"#, "filter.locale: malformed locale"),
            (#"{"appVersion":"2.1"}"#, "filter.appVersion: must be {\"op\""),
            (#"{"appVersion":{"op":"lt","value":"2.x"}}"#, #"filter.appVersion.value: "2.x" is not a version"#),
            (#"{"appVersion":{"op":"lt","value":2}}"#, "filter.appVersion.value: must be a version as a string"),
            (#"{"appVersion":{"op":"before","value":"2"}}"#, #"filter.appVersion.op: unknown operator "before"; one of eq, ne, lt, lte, gt, gte"#),
            (#"{"appVersion":{"op":"lt","value":"2","x":1}}"#, "filter.appVersion.x: unknown key; appVersion has op, value"),
            (#"{"lastSeen":{"withinDays":-1}}"#, "filter.lastSeen.withinDays: -1 is negative"),
            (#"{"lastSeen":{"olderThanDays":1.5}}"#, "filter.lastSeen.olderThanDays: must be a whole number of days, not a fraction"),
            (#"{"lastSeen":{"withinDays":"7"}}"#, "filter.lastSeen.withinDays: must be a whole number of days, not a string"),
            (#"{"lastSeen":{"withinDays":36501}}"#, "filter.lastSeen.withinDays: 36501 days is more than 36500"),
            (#"{"lastSeen":{"days":3}}"#, "filter.lastSeen.days: unknown key; lastSeen has one of withinDays, olderThanDays"),
            (#"{"lastSeen":{"withinDays":1,"olderThanDays":2}}"#, "filter.lastSeen: must be {\"withinDays\":N} or {\"olderThanDays\":N}"),
            (#"{"segment":"a b"}"#, "filter.segment: invalid segment name 'a b'"),
            (deep, "filter" + String(repeating: ".not", count: 16) + ": filters nest at most 16 levels deep"),
            (wide, "filter: the filter has 501 conditions, at most 500"),
        ]
        for (text, expected) in cases {
            let message = await Self.refusal { try Self.filter(text) }
            #expect(message?.hasPrefix(expected) == true, "\(text.prefix(80)) → \(message ?? "accepted")")
        }
        #expect(throws: Never.self) { try Self.filter(fine) }

        // The path is where the filter stands: a campaign's audience, a decoded body.
        let audience = await Self.refusal { try Audience(json: ["filter": ["all": [] as [Any]]]) }
        #expect(audience == "audience.filter.all: an empty list; give at least one filter")
        #expect(await Self.refusal { try Audience(json: ["segment": "a/b"]) }?.hasPrefix("audience.segment: invalid segment name") == true)
        struct Body: Decodable { var filter: SegmentFilter }
        let decoded = await Self.refusal { try JSONDecoder().decode(Body.self, from: Data(#"{"filter":{"any":[{"platform":"ios"}]}}"#.utf8)) }
        #expect(decoded?.hasPrefix("filter.any[0].platform: \"ios\" is not a platform") == true, "\(decoded ?? "accepted")")
    }

    @Test("the JSON form reads back as the same filter, and a campaign's stored audience too; values keep their type; locales are canonical")
    func jsonForm() throws {
        let text = #"""
            {"all":[{"any":[{"attribute":"plan","op":"in","value":["gold",5,true,2.5]},{"not":{"topic":"news"}}]},
                    {"attribute":"age","op":"gte","value":18.0},{"attribute":"city","op":"contains","value":"Ly"},
                    {"attribute":"vip","op":"exists"},{"platform":"fcm"},{"app":"shop"},{"locale":"fr-ca"},
                    {"appVersion":{"op":"lt","value":"2.10"}},{"lastSeen":{"olderThanDays":30}},{"segment":"vip"}]}
            """#
        let filter = try Self.filter(text)
        guard case .all(let parts) = filter else { Issue.record("not all: \(filter)"); return }
        #expect(parts[1] == .attribute("age", .compare(.gte, .integer(18))))
        #expect(parts[6] == .locale("fr-CA"))
        #expect(try SegmentFilter(json: filter.json) == filter)
        #expect(try Self.filter(filter.text) == filter)
        #expect(try Audience(stored: Audience.filter(filter).stored) == .filter(filter))
        #expect(try Audience(stored: Audience.segment("vip").stored) == .segment("vip"))
        #expect(filter.conditionCount == 14)
        #expect(filter.segments == ["vip"])
        #expect(Audience.segment("vip").summary == "segment: vip")
    }

    @Test("app versions compare as versions: numbers dot by dot, missing ones 0, a leading v and a suffix aside")
    func versionKeys() {
        let ordered = ["0", "1", "1.0.1", "2", "2.1", "2.9", "2.10", "10.0.1", "999999999"]
        let keys = ordered.map { AppVersionKey.of($0) }
        #expect(keys.allSatisfy { $0 != nil })
        #expect(zip(keys, keys.dropFirst()).allSatisfy { $0! < $1! }, "\(keys)")
        #expect(AppVersionKey.of("2.1") == AppVersionKey.of("2.1.0.0") && AppVersionKey.of("2.1") == AppVersionKey.of("v2.1-beta"))
        #expect(AppVersionKey.of("1.0 (45)") == AppVersionKey.of("1"))
        #expect(AppVersionKey.of("beta") == nil && AppVersionKey.of("1234567890") == nil)
        #expect(AppVersionKey.ofFilterValue("2.10") != nil && AppVersionKey.ofFilterValue("2.1-beta") == nil && AppVersionKey.ofFilterValue("2..1") == nil)
    }

    @Test("segments name segments: inlined each time they are used, a change shows; unknown names, circles and more than 8 deep are refused by path; one named elsewhere is not removed",
          arguments: StoreEngine.all)
    func references(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await ScheduleCoreTests.store(dir, users: [("ann", nil, nil), ("bea", nil, nil), ("cid", nil, nil)], on: try await engine.locations())
        defer { store.close() }
        let users = store.users, segments = store.segments
        try await users.setAttributes(try UserAttributes(["city": .string("Lyon"), "plan": .string("gold")]), for: "ann")
        try await users.setAttributes(try UserAttributes(["city": .string("Lyon"), "plan": .string("free")]), for: "bea")
        try await users.setAttributes(try UserAttributes(["city": .string("Paris"), "plan": .string("gold")]), for: "cid")

        let saved = try await segments.save(name: "lyon", filter: try Self.filter(#"{"attribute":"city","op":"eq","value":"Lyon"}"#), by: "root")
        #expect(saved.createdBy == "root")
        try await segments.save(name: "gold-lyon", filter: try Self.filter(#"{"all":[{"segment":"lyon"},{"attribute":"plan","op":"eq","value":"gold"}]}"#), by: "root")
        #expect(try await segments.list().map(\.name) == ["gold-lyon", "lyon"])
        #expect(try await segments.users(matching: .segment("gold-lyon")) == ["ann"])
        #expect(try await segments.users(matching: .segment("lyon")) == ["ann", "bea"])
        // Saved again by another: the filter changes, the creator stays; the segment naming it follows.
        let again = try await segments.save(name: "lyon", filter: try Self.filter(#"{"attribute":"city","op":"eq","value":"Paris"}"#), by: "key-ops")
        #expect(again.createdBy == "root")
        #expect(try await segments.find("lyon")?.filter == .attribute("city", .compare(.eq, .string("Paris"))))
        #expect(try await segments.users(matching: .segment("gold-lyon")) == ["cid"])

        let unknown = await Self.refusal { try await segments.save(name: "x", filter: try Self.filter(#"{"any":[{"topic":"a"},{"segment":"nope"}]}"#), by: "root") }
        #expect(unknown == #"filter.any[1].segment: no segment named "nope""#)
        let circle = await Self.refusal { try await segments.save(name: "lyon", filter: .segment("gold-lyon"), by: "root") }
        #expect(circle == #"filter.segment: segments name each other in a circle: "lyon" → "gold-lyon" → "lyon""#)
        #expect(await Self.refusal { try await segments.save(name: "me", filter: .not(.segment("me")), by: "root") }?.contains("circle") == true)
        #expect(await Self.refusal { try await segments.save(name: "a b", filter: .topic("a"), by: "root") }?.hasPrefix("invalid segment name") == true)
        #expect(try await segments.find("x") == nil)
        #expect(try await segments.find("me") == nil)

        // s1 … s8 chain: eight segments are fine, a ninth is refused, for saving and for using.
        try await segments.save(name: "s1", filter: .topic("news"), by: "root")
        for level in 2...8 { try await segments.save(name: "s\(level)", filter: .segment("s\(level - 1)"), by: "root") }
        #expect(try await Self.pair(segments.count(.segment("s8"))) == [0, 0])
        let tooDeep = await Self.refusal { try await segments.save(name: "s9", filter: .segment("s8"), by: "root") }
        #expect(tooDeep?.hasPrefix("filter.segment: segments name segments more than 8 deep") == true, "\(tooDeep ?? "saved")")
        #expect(await Self.refusal { try await segments.count(.any([.topic("a"), .not(.segment("gone"))])) } == #"filter.any[1].not.segment: no segment named "gone""#)

        // Named by another: 409 naming it; free once that one goes; none: 404.
        let named = await Self.refusal { try await segments.remove("s7") }
        #expect(named?.hasPrefix("segment s7 is named by s8") == true, "\(named ?? "removed")")
        try await segments.remove("s8")
        try await segments.remove("s7")
        #expect(try await segments.find("s7") == nil)
        do {
            try await segments.remove("s7")
            Issue.record("removed twice")
        } catch let error as CoreError {
            #expect(error.kind == .notFound)
        }

        // A campaign keeps the segment as it was when made: its filter, inlined.
        let campaigns = store.campaigns(links: nil, defaultImage: "logo.png")
        let campaign = try await campaigns.create(CampaignDraft(audience: .segment("gold-lyon"), content: NotificationDraft(message: "Hi")), by: "root")
        #expect(campaign.audience == .filter(.all([.attribute("city", .compare(.eq, .string("Paris"))), .attribute("plan", .compare(.eq, .string("gold")))])))
        try await segments.save(name: "lyon", filter: try Self.filter(#"{"attribute":"city","op":"eq","value":"Lyon"}"#), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        #expect(try await ScheduleCoreTests.recipients(store, campaign: campaign.id) == ["cid"])
        #expect(try await campaigns.progress(campaign.id)?.campaign.audience == campaign.audience)
        #expect(try await Self.pair(campaigns.reach(.segment("gold-lyon"))) == [1, 1]) // ann, now
        let missing = await Self.refusal { try await campaigns.create(CampaignDraft(audience: .segment("nope"), content: NotificationDraft(message: "Hi")), by: "root") }
        #expect(missing == #"audience.segment: no segment named "nope""#)
        let nested = await Self.refusal {
            try await campaigns.create(CampaignDraft(audience: .filter(.all([.topic("a"), .segment("nope")])), content: NotificationDraft(message: "Hi")), by: "root")
        }
        #expect(nested == #"audience.filter.all[1].segment: no segment named "nope""#)
    }

    @Test("count: the users selected, and their devices a push reaches (every app; not one never PUT); versions written by PUT are keyed, and older ones keyed at start",
          arguments: StoreEngine.all)
    func counts(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await ScheduleCoreTests.store(dir, users: [("ann", nil, "fr-CA"), ("bea", nil, "fr"), ("cid", nil, "en")], on: try await engine.locations())
        defer { store.close() }
        let registrations = store.registrations, segments = store.segments
        // Each has an apns device already (token index+1); ann adds an FCM one of app shop at 2.10, bea an apns one at 2.9.
        let annFCM = try await registrations.create(for: "ann")
        _ = try await registrations.update(id: annFCM.id, for: "ann",
                                           with: DeviceRegistration(platform: "fcm", handle: "fcm-token-ann-0123456789", tags: [], app: "shop", appVersion: "2.10"))
        let beaOld = try await registrations.create(for: "bea")
        _ = try await registrations.update(id: beaOld.id, for: "bea",
                                           with: DeviceRegistration(platform: "apns", handle: String(repeating: "e", count: 64), tags: [], appVersion: "2.9"))
        _ = try await registrations.create(for: "cid") // never PUT: no platform, no handle, not a device a push reaches
        #expect(try await Self.pair(segments.count(.platform("fcm"))) == [1, 2])
        #expect(try await Self.pair(segments.count(.platform("apns"))) == [3, 5])
        #expect(try await Self.pair(segments.count(.app("shop"))) == [1, 2])
        #expect(try await Self.pair(segments.count(.locale("fr"))) == [2, 4])
        #expect(try await Self.pair(segments.count(.locale("fr-CA"))) == [1, 2])
        #expect(try await Self.pair(segments.count(.not(.locale("fr")))) == [1, 1]) // cid; a user without a locale would be here too
        #expect(try await Self.pair(segments.count(.appVersion(.gte, "2.10"))) == [1, 2])
        #expect(try await Self.pair(segments.count(.appVersion(.gt, "2.9.0"))) == [1, 2])
        #expect(try await Self.pair(segments.count(.appVersion(.lt, "10"))) == [2, 4])
        #expect(try await Self.pair(segments.count(.lastSeen(.withinDays(1)))) == [3, 5])
        #expect(try await Self.pair(segments.count(.lastSeen(.olderThanDays(1)))) == [0, 0])
        #expect(try await Self.pair(segments.count(.lastSeen(.olderThanDays(0)), now: Date().addingTimeInterval(7200))) == [3, 5])
        #expect(try await segments.users(matching: .appVersion(.eq, "2.10.0")) == ["ann"])
        #expect(try await Self.pair(Self.campaigns(store).reach(.filter(.platform("fcm")), app: "shop")) == [1, 1])

        // A version reported before versions were keyed is keyed when a server starts.
        try await store.database.write { db in try db.execute(sql: "UPDATE registrations SET appVersionKey = NULL") }
        #expect(try await Self.pair(segments.count(.appVersion(.gte, "2"))) == [0, 0])
        #expect(try await registrations.fillAppVersionKeys() == 2)
        #expect(try await registrations.fillAppVersionKeys() == 0)
        #expect(try await Self.pair(segments.count(.appVersion(.gte, "2"))) == [2, 4])
    }

    static func campaigns(_ store: DataStore) -> CampaignStore { store.campaigns(links: nil, defaultImage: "logo.png") }

    /// A count as `[users, devices]`, to compare.
    static func pair(_ count: (users: Int, devices: Int)) -> [Int] { [count.users, count.devices] }
}

// MARK: the SQL against a reference

/// What the reference evaluator knows of a user: written from the documented semantics, not
/// from the SQL.
struct ReferenceUser {
    struct Device {
        var platform: String?
        var reachable: Bool
        var app: String
        var appVersion: String?
        var lastSeen: Double
    }

    var name: String
    var attributes: [String: UserAttributes.Value]
    var locale: String?
    var topics: Set<String>
    var devices: [Device]

    /// Devices a push reaches (those with a handle).
    var reachable: [Device] { devices.filter(\.reachable) }

    func matches(_ filter: SegmentFilter, now: Double) -> Bool {
        switch filter {
        case .all(let parts): return parts.allSatisfy { matches($0, now: now) }
        case .any(let parts): return parts.contains { matches($0, now: now) }
        case .not(let inner): return !matches(inner, now: now)
        case .attribute(let key, let test):
            let value = attributes[key]
            switch test {
            case .compare(.eq, let wanted): return value.map { Self.equal($0, wanted) } ?? false
            case .compare(.ne, let wanted): return !(value.map { Self.equal($0, wanted) } ?? false)
            case .compare(let comparison, let wanted):
                guard let have = value.flatMap(Self.number), let bound = Self.number(wanted) else { return false }
                return Self.holds(comparison, have < bound ? -1 : have > bound ? 1 : 0)
            case .oneOf(let values): return value.map { have in values.contains { Self.equal(have, $0) } } ?? false
            case .exists: return value != nil
            case .missing: return value == nil
            case .contains(let fragment):
                guard case .string(let text)? = value else { return false }
                return text.utf8.count >= fragment.utf8.count && (0...(text.utf8.count - fragment.utf8.count)).contains { start in
                    Array(text.utf8)[start..<(start + fragment.utf8.count)].elementsEqual(fragment.utf8)
                }
            }
        case .topic(let topic): return topics.contains(topic)
        case .platform(let platform): return reachable.contains { $0.platform == platform }
        case .app(let app): return reachable.contains { $0.app == app }
        case .locale(let wanted): return locale == wanted || locale?.hasPrefix(wanted + "-") == true
        case .appVersion(let comparison, let wanted):
            guard let bound = Self.version(wanted) else { return false }
            return reachable.contains { device in
                guard let have = device.appVersion.flatMap(Self.version) else { return false }
                return Self.holds(comparison, Self.compare(have, bound))
            }
        case .lastSeen(.withinDays(let days)): return reachable.contains { $0.lastSeen >= now - Double(days) * 86_400 }
        case .lastSeen(.olderThanDays(let days)):
            return !reachable.isEmpty && !reachable.contains { $0.lastSeen >= now - Double(days) * 86_400 }
        case .segment: return false
        }
    }

    static func number(_ value: UserAttributes.Value) -> Double? {
        switch value {
        case .integer(let whole): Double(whole)
        case .number(let number): number
        case .string, .bool: nil
        }
    }

    static func equal(_ a: UserAttributes.Value, _ b: UserAttributes.Value) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): return Array(x.utf8) == Array(y.utf8)
        case (.bool(let x), .bool(let y)): return x == y
        default:
            guard let x = number(a), let y = number(b) else { return false }
            return x == y
        }
    }

    static func holds(_ comparison: SegmentFilter.Comparison, _ order: Int) -> Bool {
        switch comparison {
        case .eq: order == 0
        case .ne: order != 0
        case .lt: order < 0
        case .lte: order <= 0
        case .gt: order > 0
        case .gte: order >= 0
        }
    }

    /// The numbers at the start of a version, after an optional v: "v3.0-beta" is [3, 0]; nil without.
    static func version(_ text: String) -> [Int]? {
        var rest = Substring(text)
        if rest.hasPrefix("v") || rest.hasPrefix("V") { rest = rest.dropFirst() }
        let run = rest.prefix { ($0.isASCII && $0.isNumber) || $0 == "." }
        let numbers = run.split(separator: ".", omittingEmptySubsequences: false).prefix { !$0.isEmpty }.map { Int($0)! }
        return numbers.isEmpty ? nil : numbers
    }

    static func compare(_ a: [Int], _ b: [Int]) -> Int {
        for index in 0..<max(a.count, b.count) {
            let (x, y) = (index < a.count ? a[index] : 0, index < b.count ? b[index] : 0)
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }
}

extension SegmentCoreTests {
    static let versions = ["2.9", "2.10", "10.0.1", "2.9.0", "1", "v3.0-beta", "beta", "2.10.1"]
    static let topics = ["news", "sports", "team-lyon", "deals"]
    static let strings: [UserAttributes.Value] = [.string("gold"), .string("5"), .string("Lyon"), .string("lyon"), .string("Lyonnais"), .string("true")]
    static let numbers: [UserAttributes.Value] = [.integer(0), .integer(5), .integer(30), .number(30.5), .number(2.5), .integer(-3)]

    /// 300 users with random attributes (strings, numbers, booleans, some missing; types mixed
    /// on one key), locales, topics and devices (platform, app, version, hour last seen, some
    /// never PUT), written straight into the tables.
    static func population(_ store: DataStore, now: Double, using random: inout SeededGenerator) async throws -> [ReferenceUser] {
        var people: [ReferenceUser] = []
        for index in 0..<300 {
            var attributes: [String: UserAttributes.Value] = [:]
            let pools: [(String, [UserAttributes.Value])] = [
                ("plan", strings + [.integer(5)]), ("age", numbers + [.string("30")]), ("score", numbers),
                ("beta", [.bool(true), .bool(false), .string("true")]), ("city", strings),
            ]
            for (key, pool) in pools where Int.random(in: 0..<4, using: &random) != 0 {
                attributes[key] = pool.randomElement(using: &random)!
            }
            var devices: [ReferenceUser.Device] = []
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                let reachable = Int.random(in: 0..<8, using: &random) != 0
                devices.append(ReferenceUser.Device(
                    platform: reachable ? ["apns", "fcm", "web"].randomElement(using: &random)! : nil, reachable: reachable,
                    app: ["default", "shop"].randomElement(using: &random)!,
                    appVersion: Bool.random(using: &random) || !reachable ? versions.randomElement(using: &random)! : nil,
                    lastSeen: RegistrationStore.hour(Date(timeIntervalSince1970: now - Double.random(in: 0...(60 * 86_400), using: &random)))))
            }
            people.append(ReferenceUser(name: String(format: "u%03d", index), attributes: attributes,
                                        locale: [nil, "fr", "fr-CA", "fro", "en", "en-GB", "zh-Hant-TW"].randomElement(using: &random)!,
                                        topics: Set(topics.filter { _ in Bool.random(using: &random) }), devices: devices))
        }
        let everyone = people
        try await store.database.write { db in
            var deviceNumber = 0
            for person in everyone {
                try db.execute(sql: "INSERT INTO users (name, passwordHash, admin, createdAt, attributes, locale) VALUES (?, 'x', 0, 0, ?, ?)",
                               arguments: [person.name, UserAttributes(person.attributes).stored, person.locale])
                for topic in person.topics {
                    try db.execute(sql: "INSERT INTO topics (username, topic, createdAt) VALUES (?, ?, 0)", arguments: [person.name, topic])
                }
                for device in person.devices {
                    deviceNumber += 1
                    try db.execute(sql: """
                        INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt, app, appVersion, appVersionKey, lastSeen)
                        VALUES (?, ?, ?, ?, '[]', 0, 0, ?, ?, ?, ?)
                        """, arguments: ["d\(deviceNumber)", person.name, device.platform, device.reachable ? String(format: "%064x", deviceNumber) : nil,
                                         device.app, device.appVersion, device.appVersion.map(RegistrationStore.versionKey), device.lastSeen])
                }
            }
        }
        return people
    }

    /// A filter of up to 3 levels of all/any/not over every kind of condition, as JSON.
    static func randomFilter(depth: Int = 1, using random: inout SeededGenerator) -> JSONValue {
        if depth < 3, Int.random(in: 0..<3, using: &random) == 0 {
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return ["not": randomFilter(depth: depth + 1, using: &random)]
            default:
                let parts = (0..<Int.random(in: 1...3, using: &random)).map { _ in randomFilter(depth: depth + 1, using: &random) }
                let kind = Bool.random(using: &random) ? "all" : "any"
                return .object([kind: .array(parts)])
            }
        }
        func json(_ value: UserAttributes.Value) -> JSONValue {
            switch value {
            case .string(let text): .string(text)
            case .integer(let whole): .integer(whole)
            case .number(let number): .number(number)
            case .bool(let flag): .bool(flag)
            }
        }
        let key = JSONValue.string(["plan", "age", "score", "beta", "city", "nokey"].randomElement(using: &random)!)
        let scalars = strings + numbers + [.bool(true), .bool(false)]
        switch Int.random(in: 0..<13, using: &random) {
        case 0, 1:
            return ["attribute": key, "op": .string(["eq", "ne"].randomElement(using: &random)!), "value": json(scalars.randomElement(using: &random)!)]
        case 2, 3:
            return ["attribute": key, "op": .string(["lt", "lte", "gt", "gte"].randomElement(using: &random)!), "value": json(numbers.randomElement(using: &random)!)]
        case 4:
            let values = (0..<Int.random(in: 1...4, using: &random)).map { _ in json(scalars.randomElement(using: &random)!) }
            return ["attribute": key, "op": "in", "value": .array(values)]
        case 5:
            return ["attribute": key, "op": .string(["exists", "missing"].randomElement(using: &random)!)]
        case 6:
            return ["attribute": key, "op": "contains", "value": .string(["Ly", "yon", "ol", "x", "5"].randomElement(using: &random)!)]
        case 7: return ["topic": .string(topics.randomElement(using: &random)!)]
        case 8: return ["platform": .string(["apns", "fcm", "web"].randomElement(using: &random)!)]
        case 9: return ["app": .string(["default", "shop", "other"].randomElement(using: &random)!)]
        case 10: return ["locale": .string(["fr", "fr-CA", "en", "zh-Hant", "zh", "de"].randomElement(using: &random)!)]
        case 11:
            return ["appVersion": ["op": .string(SegmentFilter.Comparison.allCases.randomElement(using: &random)!.rawValue),
                                   "value": .string(["2.9", "2.10", "10", "2.9.0", "1", "3"].randomElement(using: &random)!)]]
        default:
            let days = JSONValue.integer([0, 1, 7, 30, 90].randomElement(using: &random)!)
            let seen: JSONValue = Bool.random(using: &random) ? ["withinDays": days] : ["olderThanDays": days]
            return ["lastSeen": seen]
        }
    }

    @Test("40 random filters over 300 random users: the users the SQL selects, paged, are those a reference evaluator in Swift selects, and count says as many and their devices",
          arguments: StoreEngine.all)
    func matchesReference(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let locations = try await engine.locations()
        let store = try await DataStore.open(path: dir.path, database: locations.database, blobs: locations.blobs, environment: locations.environment)
        defer { store.close() }
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        var random = SeededGenerator(state: 27)
        let people = try await Self.population(store, now: now.timeIntervalSince1970, using: &random)
        var nonTrivial = 0
        for _ in 0..<40 {
            let filter = try SegmentFilter(json: Self.randomFilter(using: &random))
            let expected = people.filter { $0.matches(filter, now: now.timeIntervalSince1970) }
            var selected: [String] = []
            while true {
                let page = try await store.segments.users(matching: filter, after: selected.last ?? "", limit: 100, now: now)
                selected += page
                if page.count < 100 { break }
            }
            #expect(selected == expected.map(\.name), "\(filter.text)")
            let count = try await store.segments.count(filter, now: now)
            #expect(count.users == expected.count && count.devices == expected.reduce(0) { $0 + $1.reachable.count }, "\(filter.text)")
            if !expected.isEmpty && expected.count < people.count { nonTrivial += 1 }
        }
        #expect(nonTrivial >= 15) // the filters select something and not everything, mostly
    }
}
