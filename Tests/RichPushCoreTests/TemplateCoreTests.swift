import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: campaigns' words as templates, personalized per recipient (SPEC §27)")
struct TemplateCoreTests {
    /// One recipient of the tests: their name, locale and attributes.
    struct Person: Sendable {
        var name: String
        var locale: String? = nil
        var attributes: [String: UserAttributes.Value] = [:]
    }

    /// What a recipient's notification holds.
    struct Stored: Sendable {
        var title: String?
        var message: String
        var options: PushOptions
        /// The APNs push, as stored.
        var push: Data
    }

    /// A fresh store of `engine` in `dir` with the default image and `people`, each with one APNs device.
    static func store(_ engine: StoreEngine, _ dir: URL, _ people: [Person]) async throws -> DataStore {
        let locations = try await engine.locations()
        let store = try await DataStore.open(path: dir.path, database: locations.database, blobs: locations.blobs, environment: locations.environment)
        _ = try await store.media.ingest(file: Fixtures.media.appendingPathComponent("logo.png").path, name: "logo.png")
        _ = try await store.users(cost: 4).importUsers(try people.map {
            UserImport.Entry(name: $0.name, secret: .password("pw"), admin: false, locale: $0.locale, attributes: try UserAttributes($0.attributes))
        })
        for (index, person) in people.enumerated() {
            let registration = try await store.registrations.create(for: person.name)
            _ = try await store.registrations.update(id: registration.id, for: person.name,
                                                     with: DeviceRegistration(platform: "apns", handle: String(format: "%064x", index + 1), tags: []))
        }
        return store
    }

    /// Campaigns of alert pushes, with payload URLs.
    static func campaigns(_ store: DataStore) throws -> CampaignStore {
        store.campaigns(links: PayloadLinks(key: try PayloadKey(secret: String(repeating: "k", count: 32)), baseURL: "https://push.example.com",
                                            lifetime: 3600),
                        defaultImage: "logo.png")
    }

    /// Campaign `campaign`'s notifications, by recipient.
    static func notifications(_ store: DataStore, campaign: Int64) async throws -> [String: Stored] {
        let rows = try await store.database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT recipient, title, message, options, push FROM notifications WHERE campaignId = ?", arguments: [campaign])
                .map { row in
                    (row["recipient"] as String,
                     Stored(title: row["title"], message: row["message"], options: PushOptions(stored: row["options"]), push: row["push"]))
                }
        }
        return Dictionary(uniqueKeysWithValues: rows)
    }

    /// The JSON object of a stored push.
    static func object(_ push: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: push) as? [String: Any])
    }

    /// `aps.alert` of a stored push.
    static func alert(_ push: Data) throws -> [String: Any] {
        try #require((try object(push)["aps"] as? [String: Any])?["alert"] as? [String: Any])
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

    @Test("each recipient's push has their own words: their first name, or \"there\" without one; a name with <b> and & is not escaped; numbers, booleans and the campaign's id render as they are",
          arguments: StoreEngine.all)
    func personalized(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir, [
            Person(name: "ann", attributes: ["first_name": .string("Ann"), "age": .integer(34), "vip": .bool(true)]),
            Person(name: "bob"),
            Person(name: "eve", attributes: ["first_name": .string(#"<b>Eve</b> & "co""#), "vip": .bool(false)]),
        ])
        defer { store.close() }
        let campaigns = try Self.campaigns(store)
        let content = NotificationDraft(
            message: "{{#attributes.vip}}VIP {{/attributes.vip}}{{user.name}}, {{attributes.age}} — campaign {{campaign.id}}",
            title: "Hi {{attributes.first_name}}{{^attributes.first_name}}there{{/attributes.first_name}}", mode: .alert,
            options: PushOptions(subtitle: "For {{attributes.first_name}}", actions: [.init(id: "buy", title: "Buy, {{attributes.first_name}}!")]))
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: content), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)

        let stored = try await Self.notifications(store, campaign: campaign.id)
        #expect(stored.count == 3)
        let ann = try #require(stored["ann"]), bob = try #require(stored["bob"]), eve = try #require(stored["eve"])
        #expect(ann.title == "Hi Ann" && ann.message == "VIP ann, 34 — campaign \(campaign.id)")
        #expect(bob.title == "Hi there" && bob.message == "bob,  — campaign \(campaign.id)")
        #expect(eve.title == #"Hi <b>Eve</b> & "co""# && eve.message == "eve,  — campaign \(campaign.id)")
        #expect(ann.options.subtitle == "For Ann" && ann.options.actions?.map(\.title) == ["Buy, Ann!"])
        #expect(bob.options.subtitle == "For " && bob.options.actions == [PushOptions.Action(id: "buy", title: "Buy, !")])

        // The push each device is sent says the same, in the user's own words.
        let annAlert = try Self.alert(ann.push)
        #expect(annAlert["title"] as? String == "Hi Ann" && annAlert["subtitle"] as? String == "For Ann")
        #expect(annAlert["body"] as? String == "VIP ann, 34 — campaign \(campaign.id)")
        #expect(try Self.object(ann.push)["richMessage"] as? String == "VIP ann, 34 — campaign \(campaign.id)")
        #expect((try Self.object(ann.push)["richActions"] as? [[String: Any]])?.first?["title"] as? String == "Buy, Ann!")
        #expect(try Self.alert(bob.push)["title"] as? String == "Hi there")
        #expect(try Self.alert(eve.push)["title"] as? String == #"Hi <b>Eve</b> & "co""#)
        #expect(!String(decoding: eve.push, as: UTF8.self).contains("&lt;") && !String(decoding: eve.push, as: UTF8.self).contains("&amp;"))

        let progress = try #require(try await campaigns.progress(campaign.id))
        #expect(progress.campaign.recipients == 3 && progress.pending == 3 && progress.failed == 0)
    }

    @Test("a locale's content is a template too: each recipient gets their locale's words, rendered with their attributes", arguments: StoreEngine.all)
    func localized(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir, [
            Person(name: "lyon", locale: "fr", attributes: ["first_name": .string("Léa")]),
            Person(name: "quebec", locale: "fr-CA"),
            Person(name: "plain", attributes: ["first_name": .string("Sam")]),
        ])
        defer { store.close() }
        let campaigns = try Self.campaigns(store)
        let content = NotificationDraft(message: "Sale for {{user.name}}", title: "Hello {{attributes.first_name}}", mode: .alert)
        let french = LocalizedContent(title: "Bonjour {{attributes.first_name}}{{^attributes.first_name}}à vous{{/attributes.first_name}}",
                                      message: "Soldes pour {{user.name}} ({{user.locale}})")
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: content, locales: ["fr": french]), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let words = try await Self.notifications(store, campaign: campaign.id).mapValues { "\($0.title ?? ""): \($0.message)" }
        #expect(words == ["lyon": "Bonjour Léa: Soldes pour lyon (fr)", "quebec": "Bonjour à vous: Soldes pour quebec (fr-CA)",
                          "plain": "Hello Sam: Sale for plain"])
        let lyon = try #require(try await Self.notifications(store, campaign: campaign.id)["lyon"])
        #expect(try Self.alert(lyon.push)["title"] as? String == "Bonjour Léa")
    }

    @Test("a campaign with no template queues as before: its words as written, the push byte for byte as an unpersonalized one", arguments: StoreEngine.all)
    func untemplated(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir, [Person(name: "ann", attributes: ["first_name": .string("Ann")]), Person(name: "bob")])
        defer { store.close() }
        let campaigns = try Self.campaigns(store)
        // One brace is not a tag.
        let options = PushOptions(subtitle: "Today {only}", titleLocKey: "SALE_TITLE", locKey: "SALE_BODY", locArgs: ["50%"])
        let content = NotificationDraft(message: "Half price {first_name}", title: "Sale", mode: .alert, options: options)
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: content), by: "root")
        #expect(!CampaignTemplates.isTemplated(campaign))
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let rows = try await store.database.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT id, recipient, title, message, richUrl, push FROM notifications WHERE campaignId = ? ORDER BY id",
                                arguments: [campaign.id])
                .map { ($0["id"] as Int64, $0["recipient"] as String, $0["title"] as String?, $0["message"] as String, $0["richUrl"] as String, $0["push"] as Data) }
        }
        #expect(rows.map { $0.1 }.sorted() == ["ann", "bob"])
        for (id, _, title, message, richUrl, push) in rows {
            #expect(title == "Sale" && message == "Half price {first_name}")
            let expected = AlertPush(id: id, title: "Sale", message: "Half price {first_name}", richType: "img", richUrl: richUrl, options: options)
            #expect(push == expected.encoded())
            // The localization keys travel in the alert.
            let alert = try Self.alert(push)
            #expect(alert["title-loc-key"] as? String == "SALE_TITLE" && alert["loc-key"] as? String == "SALE_BODY" && alert["loc-args"] as? [String] == ["50%"])
        }
    }

    @Test("a template that does not parse is refused when the campaign is made (422), naming the field and where; nothing is made", arguments: StoreEngine.all)
    func parseErrors(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir, [Person(name: "ann")])
        defer { store.close() }
        let campaigns = try Self.campaigns(store)
        func refused(_ content: NotificationDraft, locales: [String: LocalizedContent] = [:]) async -> CoreError? {
            await Self.refusal { try await campaigns.create(CampaignDraft(audience: .all, content: content, locales: locales), by: "root") }
        }
        let open = await refused(NotificationDraft(message: "x", title: "Hi {{#attributes.first_name}}there", mode: .alert))
        #expect(open?.kind == .unprocessable)
        #expect(open?.message == #"title: the template does not parse at line 1, column 4: unfinished section "attributes.first_name""#)
        let stray = await refused(NotificationDraft(message: "Line one\n{{/oops}}", mode: .alert))
        #expect(stray?.message == "message: the template does not parse at line 2, column 1: {{/oops}} closes no section")
        let crossed = await refused(NotificationDraft(message: "{{#a}}{{#b}}x{{/a}}{{/b}}", mode: .alert))
        #expect(crossed?.message == #"message: the template does not parse at line 1, column 14: {{/a}} closes section "b", opened at line 1, column 7"#)
        let button = await refused(NotificationDraft(message: "x", mode: .alert,
                                                     options: PushOptions(actions: [.init(id: "buy", title: "Buy {{attributes.x")])))
        #expect(button?.kind == .unprocessable && button?.message.hasPrefix("options.actions[0].title: the template does not parse at line 1, column ") == true,
                "\(String(describing: button))")
        let french = await refused(NotificationDraft(message: "x", mode: .alert), locales: ["fr": .init(title: "Salut {{name")])
        #expect(french?.message.hasPrefix("content.fr.title: the template does not parse at line 1, column ") == true, "\(String(describing: french))")
        #expect(french?.message.contains("a tag is not finished") == true)
        #expect(try await campaigns.list().isEmpty)
    }

    @Test("a recipient whose push no longer fits once personalized fails as too-large-after-personalization, counted failed; the others are queued",
          arguments: StoreEngine.all)
    func tooLarge(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, dir, [
            Person(name: "big", attributes: ["long": .string(String(repeating: "x", count: UserAttributes.maxStringBytes))]),
            Person(name: "small", attributes: ["long": .string("y")]),
        ])
        defer { store.close() }
        let campaigns = try Self.campaigns(store)
        // 380 characters as written: it fits; 5,120 bytes for big.
        let content = NotificationDraft(message: "Sale", title: String(repeating: "{{attributes.long}}", count: 20), mode: .alert)

        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: content), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let progress = try #require(try await campaigns.progress(campaign.id))
        #expect(progress.campaign.recipients == 2 && progress.campaign.pushes == 2)
        #expect(progress.failed == 1 && progress.pending == 1 && progress.sent == 0)
        let stats = try #require(try await campaigns.stats(campaign.id))
        #expect(stats.totals.failed == 1 && stats.byPlatform["apns"]?.failed == 1)
        #expect(stats.failures == [CampaignTemplates.tooLargeReason: 1])
        // The campaign's pushes, rows or runs as the engine queued them.
        let listed = try await store.deliveries.list(campaign: campaign.id)
        let deliveries = try await store.database.read { db in
            try listed.map { (try String.fetchOne(db, sql: "SELECT recipient FROM notifications WHERE id = ?", arguments: [$0.notificationId]) ?? "",
                              $0.state.rawValue, $0.reason) }
        }
        let big = try #require(deliveries.first { $0.0 == "big" }), small = try #require(deliveries.first { $0.0 == "small" })
        #expect(big.1 == "failed" && big.2?.hasPrefix("too-large-after-personalization: the push would be ") == true, "\(big)")
        #expect(small.1 == "pending" && small.2 == nil)
        #expect(try await Self.notifications(store, campaign: campaign.id)["small"]?.title == String(repeating: "y", count: 20))

        // Alone in a batch (another way in): the same.
        let alone = try await campaigns.create(CampaignDraft(audience: .users(["big"]), content: content), by: "root")
        let done = try await campaigns.queue(alone.id, addressing: .perDevice)
        #expect(done.queued)
        let aloneProgress = try #require(try await campaigns.progress(alone.id))
        #expect(aloneProgress.failed == 1 && aloneProgress.pending == 0 && aloneProgress.status == .done)
        #expect(try await campaigns.stats(alone.id)?.failures == [CampaignTemplates.tooLargeReason: 1])
    }

    @Test("the parser's positions and the sections' words: a template's own lines and columns, whatever the preamble that turns escaping off")
    func positions() throws {
        // The preamble's line renders nothing: a leading newline and indentation stay, and nothing is escaped.
        let templates = CampaignTemplates(campaignId: 7)
        let person = CampaignTemplates.Recipient(name: "ann", attributes: try UserAttributes(["x": .string("<&>")]))
        #expect(templates.render("\n  <i>{{attributes.x}}</i> {{campaign.id}}\n", for: person) == "\n  <i><&></i> 7\n")
        #expect(templates.render("{{=<% %>=}}<% attributes.x %>, <% user.name %>", for: person) == "<&>, ann")
        #expect(templates.render("{{#user.locale}}{{user.locale}}{{/user.locale}}{{^user.timezone}}no zone{{/user.timezone}}", for: person) == "no zone")
        do {
            _ = try CampaignTemplates.parse("a\nb\n  {{#s}}")
            Issue.record("an open section was taken")
        } catch let error as CoreError {
            #expect(error.message == #"the template does not parse at line 3, column 3: unfinished section "s""#)
        }
        #expect(CampaignTemplates.sectionProblem("{{#a}}{{{b}}}{{/a}}{{! c }}").map { $0.words } == nil)
    }

    @Test("the parser is given only what it can take: at most 100 of #^$< (4,000 nested sections overflowed its stack), 100 brackets (20,000 took 12 s), 8 KiB, no list transforms (nested ones multiply); counted in the whole text, so no tag can hide")
    func bounds() throws {
        func refusal(_ text: String) -> String? {
            do { _ = try CampaignTemplates.parse(text); return nil } catch let error as CoreError { return error.message } catch { return "\(error)" }
        }
        func nested(_ count: Int) -> String { String(repeating: "{{#a}}", count: count) + "x" + String(repeating: "{{/a}}", count: count) }
        #expect(refusal(nested(100)) == nil)
        #expect(refusal(nested(101))?.hasPrefix("the template has 101 section marks") == true, "\(refusal(nested(101)) ?? "taken")")
        #expect(refusal(nested(4000))?.contains("bytes; at most 8192") == true) // longer than 8 KiB first
        #expect(refusal(String(repeating: "{{^b}}{{/b}}{{$c}}{{/c}}", count: 51))?.hasPrefix("the template has 102 section marks") == true)
        // The words' own marks count too, and the rule is that simple: 100 is plenty for a push.
        #expect(refusal(String(repeating: "#1 $5 <b> ^ ", count: 25) + "{{user.name}}") == nil)
        #expect(refusal(String(repeating: "#1 $5 <b> ^ ", count: 26) + "{{user.name}}")?.hasPrefix("the template has 104 section marks") == true)
        // No scanner of tags can be misled: a combining mark after { makes the parser see no tag
        // where bytes show one, and the delimiters then change unseen by a tag scanner.
        #expect(refusal("{{\u{301}{{=< >=}}" + String(repeating: "<#>", count: 200))?.hasPrefix("the template has 401 section marks") == true)
        #expect(refusal("{{=<% %>=}}<% attributes.x %>, <% user.name %>") == nil)
        let brackets = "{{" + String(repeating: "a(", count: 101) + "x" + String(repeating: ")", count: 101) + "}}"
        #expect(refusal(brackets)?.hasPrefix("the template has 101 opening brackets") == true, "\(refusal(brackets) ?? "taken")")
        #expect(refusal(String(repeating: "(", count: 100) + "{{uppercased(user.name)}}")?.hasPrefix("the template has 101 opening brackets") == true)
        #expect(refusal("{{user.name}}" + String(repeating: "x", count: 8192))?.hasPrefix("the template is 8205 bytes") == true)
        // A section over a list of the user's fields renders once per field; thirty nested, 3^30 times.
        let listed = String(repeating: "{{#enumerated(user)}}", count: 30) + "x" + String(repeating: "{{/enumerated(user)}}", count: 30)
        #expect(refusal(listed)?.hasPrefix("the template uses enumerated(…)") == true, "\(refusal(listed) ?? "taken")")
        #expect(refusal("{{#sorted(attributes)}}x{{/sorted(attributes)}}")?.hasPrefix("the template uses sorted(…)") == true)
        #expect(refusal("We sorted it out, {{uppercased(user.name)}}") == nil)
        let templates = CampaignTemplates(campaignId: 7)
        #expect(templates.render("Hi {{uppercased(user.name)}}", for: CampaignTemplates.Recipient(name: "ann")) == "Hi ANN")
    }
}
