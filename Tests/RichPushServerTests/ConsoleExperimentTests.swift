import APNsSandbox
import Foundation
import HTTPTypes
import PushDelivery
import PushTestSupport
@testable import RichPushCore
import RichPushServer
import RichPushTestSupport
import SQLEngine
import Testing

/// SPEC §28 in a real browser: the console's campaign view shows an A/B test's variants side by
/// side with their rates, its holdout, its chi-squared test and winner, and every campaign's
/// `capped` and `delayed`; its campaign form sends `"limits":false` when the box is unticked, and
/// an A/B test's variants, shares and winner. Selenium drives Debian's headless Chromium through
/// chromium-driver, as `ConsoleRetractTests` does, against a server sending to the APNs sandbox.
@Suite("The console shows an A/B test's variants, holdout and winner, and a campaign's capped and delayed, in headless Chromium (SPEC §28)")
struct ConsoleExperimentTests {
    /// Signs in as root, opens the A/B campaign from the campaigns panel and reads its test, then
    /// the plain campaign's counts; then, in the compose form, tries variants that are not JSON
    /// (named, nothing sent), and sends an A/B test with the limits box unticked, reading the body
    /// the page sent. Prints one JSON object of what it saw, the API's stats among it.
    static let script = #"""
    import json, sys, time
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    from selenium.common.exceptions import TimeoutException
    # waiting(): the page re-renders the campaigns list and the stats as answers arrive, and an element read mid-render is looked up again.
    from console_browser import chromium, waiting, api_reader, settled
    base, shots, tested, plain = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    seen = {}

    api = api_reader(base)  # the HTTP API as an account reads it (Basic credentials)

    driver = chromium()
    wait = waiting(driver)

    def text(id):
        return driver.find_element(By.ID, id).text

    def typed(id, words):
        field = driver.find_element(By.ID, id)
        field.clear()
        field.send_keys(words)
        return field

    def click(selector):
        def clicked(d):
            d.find_element(By.CSS_SELECTOR, selector).click() # looked up again if the list was redrawn meanwhile
            return True
        wait.until(clicked)

    def table():
        # The rows at one moment (the panel redraws them each time it reads the stats): each row's header and its scope,
        # each cell's count, the rate under it ("" for none), and the row's class.
        return driver.execute_script("""
            return [...document.querySelectorAll('#variants-table tbody tr')].map(tr => ({
              cells: [tr.querySelector('th').textContent, ...[...tr.querySelectorAll('td')].map(td => td.firstChild.textContent)],
              rates: [...tr.querySelectorAll('td')].map(td => td.querySelector('small') ? td.querySelector('small').textContent : ''),
              scope: tr.querySelector('th').scope, class: tr.className }))""")

    def agreed(campaign):
        # The table and the API's stats read together, once the table shows what the API says (the page reads the stats
        # every half second while pushes go out and phones report): as last read when that never comes, for the test to say what differs.
        found = {}
        def same(d):
            stats = found["stats"] = api("/api/admin/campaigns/" + campaign + "/stats", "root", "rootpw")
            rows = found["rows"] = table()
            variants, holdout = stats.get("variants") or [], stats.get("holdout")
            expected = [[v["name"]] + [str(v[k]) for k in ("users", "sent", "displayed", "opened", "converted")] for v in variants]
            if holdout:
                expected.append(["Holdout", str(holdout["users"]), "\u2014", "\u2014", "\u2014", str(holdout["converted"])])
            return len(variants) > 0 and [r["cells"] for r in rows] == expected
        try:
            wait.until(same)
        except TimeoutException:
            pass
        return found.get("stats"), found.get("rows")

    def facts():
        return {id: text(id) for id in ("test-statistic", "test-p", "test-winner", "test-conversion", "holdout-conversion", "test-lift")}

    def watching(id):
        # The results panel shows campaign `id`, its stats read (capped is empty until they are).
        return lambda d: d.find_element(By.ID, "campaign-id").text == id and d.find_element(By.ID, "count-capped").text != ""

    try:
        driver.set_page_load_timeout(30)
        driver.get(base + "/console")
        driver.find_element(By.ID, "name").send_keys("root")
        driver.find_element(By.ID, "password").send_keys("rootpw")
        driver.find_element(By.ID, "signin").click()
        wait.until(lambda d: d.find_elements(By.ID, "user"))
        # The campaigns panel loads as it comes into view; the A/B campaign opens from its row.
        driver.execute_script("document.getElementById('campaigns').scrollIntoView()")
        click('#campaign-list li[data-id="' + tested + '"] button.open')
        wait.until(watching(tested))
        wait.until(lambda d: d.find_element(By.ID, "experiment").is_displayed() and len(d.find_elements(By.CSS_SELECTOR, "#variants-table tbody tr")) >= 3)
        seen["headers"] = settled(lambda: [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#variants-table thead th")])
        seen["stats"], seen["rows"] = agreed(tested)
        seen["facts"] = facts()
        seen["counts"] = {k: text("count-" + k) for k in ("capped", "delayed")}
        seen["trace"] = settled(lambda: driver.find_element(By.ID, "trace-view").get_attribute("href") if driver.find_element(By.ID, "trace-link").is_displayed() else None)
        seen["funnel"] = text("funnel")
        # A phone-sized screen: nothing wider than the window.
        seen["overflow"] = driver.execute_script(
            "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(e => e.tagName + '#' + e.id).slice(0, 5)")
        driver.execute_script("document.getElementById('experiment').scrollIntoView({block: 'start'})")
        time.sleep(0.3)
        driver.execute_script("document.getElementById('experiment').scrollIntoView({block: 'start'})")
        driver.save_screenshot(shots + "/console-experiment.png")

        # A campaign that is no test: its capped and delayed, and no A/B table.
        driver.execute_script("document.getElementById('campaigns').scrollIntoView()")
        click('#campaign-list li[data-id="' + plain + '"] button.open')
        wait.until(watching(plain))
        seen["plainCounts"] = {k: text("count-" + k) for k in ("capped", "delayed")}
        seen["plainExperimentShown"] = settled(lambda: driver.find_element(By.ID, "experiment").is_displayed())
        seen["plainStats"] = api("/api/admin/campaigns/" + plain + "/stats", "root", "rootpw")

        # The form: every body the page posts to /console/api/campaigns is kept to be read.
        driver.execute_script("""
            window.sentCampaigns = [];
            const fetched = window.fetch;
            window.fetch = (path, init) => {
              if (path === '/console/api/campaigns' && init && init.method === 'POST') window.sentCampaigns.push(JSON.parse(init.body));
              return fetched(path, init);
            };""")
        driver.execute_script("document.getElementById('compose').scrollIntoView()")
        seen["limitsDefault"] = settled(lambda: driver.find_element(By.ID, "limits").is_selected())
        seen["limitsLabel"] = settled(lambda: driver.find_element(By.CSS_SELECTOR, "label:has(#limits)").text)
        driver.find_element(By.CSS_SELECTOR, "#ab-test summary").click()
        wait.until(lambda d: d.find_element(By.ID, "send").is_enabled()) # the audience (everyone) checked
        # A bracket short: said under the form, and nothing is sent.
        variants = typed("variants", '[{"name":"A","title":"Sale","message":"Half price"},{"name":"B","title":"Sale","message":"50% off today"}')
        driver.find_element(By.ID, "send").click()
        seen["badJSON"] = text("send-result")
        seen["badJSONMarked"] = "bad" in (variants.get_attribute("class") or "")
        seen["sentAfterBadJSON"] = driver.execute_script("return window.sentCampaigns.length")
        variants.send_keys("]")
        typed("test-share", "0.5")
        typed("holdout", "0.1")
        Select(driver.find_element(By.ID, "winner-metric")).select_by_value("converted")
        typed("winner-after", "2h")
        typed("winner-fallback", "A")
        driver.find_element(By.ID, "limits").click()
        before = text("campaign-id")
        driver.find_element(By.ID, "send").click()
        wait.until(lambda d: d.find_element(By.ID, "send-result").text.startswith("Sent as campaign ") or "error" in (d.find_element(By.ID, "send-result").get_attribute("class") or ""))
        seen["sendResult"] = text("send-result")
        seen["sent"] = driver.execute_script("return window.sentCampaigns")
        seen["badJSONMarkedAfter"] = "bad" in (variants.get_attribute("class") or "")
        if seen["sendResult"].startswith("Sent as campaign "):
            formed = seen["sendResult"][len("Sent as campaign "):].rstrip(".")
            seen["formed"] = formed
            wait.until(lambda d: watching(formed)(d) and d.find_element(By.ID, "campaign-id").text != before)
            wait.until(lambda d: d.find_element(By.ID, "experiment").is_displayed() and len(d.find_elements(By.CSS_SELECTOR, "#variants-table tbody tr")) >= 3)
            seen["formedStats"], seen["formedRows"] = agreed(formed)
            driver.execute_script("document.getElementById('experiment').scrollIntoView()")
            driver.save_screenshot(shots + "/console-experiment-form.png")
    finally:
        driver.quit()
        print(json.dumps(seen)) # what it saw, also when a wait gave up
    """#

    /// Runs the script against the server on `port`; what it saw.
    static func browse(port: Int, shots: URL, tested: Int, plain: Int) async throws -> [String: Any] {
        try await ConsoleBrowser.run(Self.script, arguments: ["http://127.0.0.1:\(port)", shots.path, String(tested), String(plain)])
    }

    /// A count as the page writes it.
    static func shown(_ value: Any?) -> String? {
        (value as? Int).map(String.init)
    }

    /// A rate of `of` as the page writes it: one decimal, a half rounded up as JavaScript's toFixed does (1 of 16 is
    /// 6.3%, where printf would say 6.2%); "—" of nobody.
    static func rate(_ n: Int, of: Int) -> String {
        of == 0 ? "—" : String(format: "%.1f%%", (1000 * Double(n) / Double(of)).rounded(.toNearestOrAwayFromZero) / 10)
    }

    /// The winner line the page shows for the API's `test`.
    static func winnerLine(_ test: [String: Any]) -> String {
        if let winner = test["winner"] as? String {
            let p = test["pValue"] as? Double
            return winner + (p.map { $0 >= 0.05 } == true ? " (the fallback: no significant difference)" : "")
        }
        return test["statistic"] is Double || test["statistic"] is Int ? "no winner" : "not decided yet"
    }

    /// The table's rows are the API's variants, in its order, with their users and counts, then the holdout.
    static func checkRows(_ rows: [[String: Any]], _ stats: [String: Any]) {
        let variants = stats["variants"] as? [[String: Any]] ?? []
        let holdout = stats["holdout"] as? [String: Any]
        #expect(!variants.isEmpty && holdout != nil, "the API's stats have no variants or holdout: \(stats)")
        #expect(rows.count == variants.count + (holdout == nil ? 0 : 1), "\(rows)")
        let cells = rows.map { $0["cells"] as? [String] ?? [] }
        let steps = ["sent", "displayed", "opened", "converted"]
        for (row, variant) in zip(rows, variants) {
            let users = variant["users"] as? Int ?? 0
            let name = variant["name"] as? String ?? "?"
            let counts: [String] = [name, String(users)] + steps.map { shown(variant[$0]) ?? "?" }
            #expect(row["cells"] as? [String] == counts, "\(row) is not \(variant)")
            // Each count's rate of the variant's users, under it; users has none.
            let rates: [String] = [""] + steps.map { rate(variant[$0] as? Int ?? 0, of: users) }
            #expect(row["rates"] as? [String] == rates, "\(row) is not \(variant)")
        }
        if let holdout, let last = cells.last {
            #expect(last == ["Holdout", shown(holdout["users"]) ?? "?", "—", "—", "—", shown(holdout["converted"]) ?? "?"], "\(last) is not \(holdout)")
            #expect((rows.last?["class"] as? String)?.contains("holdout") == true)
        }
    }

    @Test("the console's campaign view shows an A/B test made through the API: its variants A and B side by side with the API's users and counts, each as a rate of its users, the holdout's row, the chi-squared test, the winner (not decided yet, an hour before its time), the test group's conversion beside the holdout's and the lift; every campaign's capped and delayed as the API counts them; the form names variants that are not JSON before sending, and sends an A/B test with \"limits\":false when its box is unticked")
    func experiment() async throws {
        guard try await ConsoleBrowser.isAvailable() else { return }
        try await RunningSandbox.with { apns in
            // docs/operations.md#traces: with --trace-url, a campaign made while tracing was on links to its trace.
            // The browser's part may outlast the test client's idle connection (60 s by default) on a machine busy with the whole suite.
            try await TestServer.run({ $0.traceURL = "http://traces.example/trace/{traceId}"; $0.idleTimeout = 900 }, provider: APNsProvider(client: try apns.client())) { s in
                // 40 users, each with an iPhone (the password is the name, as TestServer.basic takes it).
                let users = s.data.users(cost: 4)
                let names = (0..<40).map { "tester\($0)" }
                for (n, name) in names.enumerated() {
                    _ = try await users.add(name: name, password: name)
                    _ = try await s.registerDevice(String(format: "%064x", n + 1), as: name)
                }
                let audience = names.map { "\"\($0)\"" }.joined(separator: ",")
                let (created, body) = try await s.campaign("""
                    {"audience":{"users":[\(audience)]},
                     "variants":[{"name":"A","title":"Weekend sale","message":"Half price"},{"name":"B","title":"Weekend sale","message":"50% off, today only"}],
                     "testShare":0.5,"holdout":0.1,"winner":{"metric":"opened","after":"1h","fallback":null}}
                    """)
                #expect(created.status == .accepted, "\(body)")
                let tested = try #require(body["id"] as? Int, "\(body)")
                // The test group's pushes go out now; the rest wait for the winner, an hour away.
                let statsPath = "/api/admin/campaigns/\(tested)/stats"
                let testSent = try await eventually(within: 30) {
                    let variants = (try await s.json(.get, statsPath, as: "root").1 as? [String: Any])?["variants"] as? [[String: Any]] ?? []
                    let assigned = variants.reduce(0) { $0 + ($1["users"] as? Int ?? 0) }, sent = variants.reduce(0) { $0 + ($1["sent"] as? Int ?? 0) }
                    return assigned > 0 && sent == assigned
                }
                let statsThen = try await s.json(.get, statsPath, as: "root").1
                #expect(testSent, "the test group's pushes did not all go: \(String(describing: statsThen))")

                let (plainMade, plainBody) = try await s.campaign(#"{"audience":{"users":["tester0","tester1","tester2"]},"title":"Opening hours","message":"Open till 8 tonight"}"#)
                #expect(plainMade.status == .accepted, "\(plainBody)")
                let plain = try #require(plainBody["id"] as? Int)
                #expect(try await eventually { try await s.campaignStatus(plain)["status"] as? String == "done" })

                // As the request that made it would have left it, had tracing been on (the test process keeps it off).
                try await s.database.write { db in
                    try db.execute(sql: "UPDATE campaigns SET traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' WHERE id = ?",
                                   arguments: [tested])
                }
                let dir = try Fixtures.tempDirectory()
                defer { try? FileManager.default.removeItem(at: dir) }
                let shots = dir.appendingPathComponent("shots")
                try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
                let port = try #require(s.client.port)
                let seen = try await Self.browse(port: port, shots: shots, tested: tested, plain: plain)

                // The A/B test, as the API's stats say it.
                let stats = seen["stats"] as? [String: Any] ?? [:]
                #expect(seen["headers"] as? [String] == ["Variant", "Users", "Sent", "Displayed", "Opened", "Converted"], "\(seen)")
                let rows = seen["rows"] as? [[String: Any]] ?? []
                #expect(!rows.isEmpty && rows.allSatisfy { $0["scope"] as? String == "row" }, "each row's name is its header: \(rows)")
                let rowNames = rows.compactMap { ($0["cells"] as? [String])?.first }
                #expect(rowNames == ["A", "B", "Holdout"], "\(rows)")
                Self.checkRows(rows, stats)
                let variants = stats["variants"] as? [[String: Any]] ?? []
                #expect(variants.count == 2 && variants.allSatisfy { ($0["users"] as? Int ?? 0) > 0 }, "\(variants)")
                let test = stats["test"] as? [String: Any] ?? [:]
                let facts = seen["facts"] as? [String: String] ?? [:]
                #expect(facts["test-winner"] == Self.winnerLine(test), "\(facts) for \(test)")
                #expect(test["winner"] is NSNull || test["winner"] == nil, "a winner an hour early: \(test)")
                #expect(facts["test-winner"] == "not decided yet" || facts["test-winner"] == "no winner", "\(facts)")
                if let statistic = test["statistic"] as? Double {
                    #expect(abs((Double(facts["test-statistic"] ?? "") ?? .nan) - statistic) <= 0.006, "\(facts) for \(test)")
                } else {
                    #expect(facts["test-statistic"] == "—", "\(facts)")
                }
                // Nobody converted: the test group's rate and the holdout's are 0.0%, the lift none.
                let testUsers = variants.reduce(0) { $0 + ($1["users"] as? Int ?? 0) }
                let holdout = stats["holdout"] as? [String: Any] ?? [:]
                let holdoutUsers = holdout["users"] as? Int ?? 0
                #expect(facts["test-conversion"] == "0.0% (0 of \(testUsers) user\(testUsers == 1 ? "" : "s"))", "\(facts)")
                #expect(facts["holdout-conversion"] == "\(Self.rate(0, of: holdoutUsers)) (0 of \(holdoutUsers) user\(holdoutUsers == 1 ? "" : "s"))", "\(facts)")
                #expect(facts["test-lift"] == (holdoutUsers > 0 ? "+0.0 points" : "—"), "\(facts)")
                #expect(testUsers + holdoutUsers <= 40, "\(stats)")
                // capped and delayed, here and for the campaign that is no test, as the API counts them.
                #expect(seen["trace"] as? String == "http://traces.example/trace/0af7651916cd43dd8448eb211c80319c", "\(String(describing: seen["trace"]))")
                let counts = seen["counts"] as? [String: String] ?? [:]
                #expect(stats["capped"] is Int && stats["delayed"] is Int, "\(stats)")
                #expect(counts["capped"] == Self.shown(stats["capped"]) && counts["delayed"] == Self.shown(stats["delayed"]), "\(counts) for \(stats)")
                #expect((seen["funnel"] as? String)?.contains("converted\n\(Self.shown(stats["converted"]) ?? "?")") == true, "\(String(describing: seen["funnel"]))")
                #expect(seen["overflow"] as? [String] == [], "wider than a 412 px window: \(String(describing: seen["overflow"]))")
                let plainStats = seen["plainStats"] as? [String: Any] ?? [:]
                let plainCounts = seen["plainCounts"] as? [String: String] ?? [:]
                #expect(plainStats["capped"] is Int && plainStats["delayed"] is Int && plainStats["variants"] == nil, "\(plainStats)")
                #expect(plainCounts["capped"] == Self.shown(plainStats["capped"]) && plainCounts["delayed"] == Self.shown(plainStats["delayed"]), "\(plainCounts) for \(plainStats)")
                #expect(seen["plainExperimentShown"] as? Bool == false, "\(seen)")

                // The form: limits on unless unticked; variants that are not JSON named before anything is sent.
                #expect(seen["limitsDefault"] as? Bool == true)
                #expect(seen["limitsLabel"] as? String == "Apply frequency caps and quiet hours", "\(seen)")
                #expect((seen["badJSON"] as? String)?.hasPrefix("Variants is not JSON: ") == true, "\(seen)")
                #expect(seen["badJSONMarked"] as? Bool == true && seen["badJSONMarkedAfter"] as? Bool == false, "\(seen)")
                #expect(seen["sentAfterBadJSON"] as? Int == 0, "variants that are not JSON were sent: \(seen)")
                let sent = seen["sent"] as? [[String: Any]] ?? []
                #expect(sent.count == 1, "\(sent)")
                let form = sent.first ?? [:]
                #expect(form["limits"] as? Bool == false, "\(form)")
                #expect((form["variants"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["A", "B"], "\(form)")
                #expect(form["message"] == nil && form["title"] == nil && form["content"] == nil, "a test's words are its variants': \(form)")
                #expect(form["testShare"] as? Double == 0.5 && form["holdout"] as? Double == 0.1, "\(form)")
                let winner = form["winner"] as? [String: Any] ?? [:]
                #expect(winner["metric"] as? String == "converted" && winner["after"] as? String == "2h" && winner["fallback"] as? String == "A", "\(form)")
                #expect((seen["sendResult"] as? String)?.hasPrefix("Sent as campaign ") == true, "\(seen)")
                // …and the campaign it made is shown as a test too.
                Self.checkRows(seen["formedRows"] as? [[String: Any]] ?? [], seen["formedStats"] as? [String: Any] ?? [:])

                // Kept for a person to look at.
                let kept = Fixtures.packageRoot.appendingPathComponent(".build/test-output")
                try? FileManager.default.createDirectory(at: kept, withIntermediateDirectories: true)
                for name in ["console-experiment.png", "console-experiment-form.png"] {
                    let shot = shots.appendingPathComponent(name)
                    let png = try Data(contentsOf: shot)
                    #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 5_000, "\(name)")
                    try? FileManager.default.removeItem(at: kept.appendingPathComponent(name))
                    try? FileManager.default.copyItem(at: shot, to: kept.appendingPathComponent(name))
                }
            }
        }
    }
}
