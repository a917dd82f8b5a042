import APNsSandbox
import Foundation
import HTTPTypes
import PushDelivery
import PushTestSupport
import RichPushServer
import RichPushTestSupport
import Testing

/// SPEC §26 in a real browser: an admin changes a sent campaign's words from the console, then
/// withdraws it. Selenium drives Debian's headless Chromium through chromium-driver, as
/// `ConsoleCLITests` does, against a server sending to the APNs sandbox.
@Suite("The console edits and withdraws a sent campaign in headless Chromium (SPEC §26)")
struct ConsoleRetractTests {
    /// Signs in as root and, by `phase`, edits the campaign's message from its row in the
    /// campaigns panel (`edit`) or withdraws it from the results panel (`withdraw`); prints one
    /// JSON object of what it saw, what the HTTP API answers afterwards among it.
    static let script = #"""
    import json, sys
    from selenium.webdriver.common.by import By
    # waiting(): the page re-renders the campaigns list as answers arrive, and an element read mid-render is looked up again.
    from console_browser import chromium, waiting, api_reader, settled
    base, shots, campaign, phase = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    seen = {}

    api = api_reader(base)  # the HTTP API as an account reads it (Basic credentials)

    driver = chromium()
    wait = waiting(driver)

    def click(selector):
        def clicked(d):
            d.find_element(By.CSS_SELECTOR, selector).click() # looked up again if the list was redrawn meanwhile
            return True
        wait.until(clicked)

    def value(id):
        return driver.find_element(By.ID, id).get_attribute("value")

    try:
        driver.set_page_load_timeout(30)
        driver.get(base + "/console")
        driver.find_element(By.ID, "name").send_keys("root")
        driver.find_element(By.ID, "password").send_keys("rootpw")
        driver.find_element(By.ID, "signin").click()
        wait.until(lambda d: d.find_elements(By.ID, "user"))
        # The campaigns panel loads as it comes into view.
        driver.execute_script("document.getElementById('campaigns').scrollIntoView()")
        row = '#campaign-list li[data-id="' + campaign + '"]'
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, row + " button.withdraw"))
        seen["rowButtons"] = settled(lambda: [b.text for b in driver.find_elements(By.CSS_SELECTOR, row + " button")])
        if phase == "edit":
            # Edit from the campaign's row: the form opens in the results panel, prefilled, Alert again unticked.
            click(row + " button.edit")
            wait.until(lambda d: d.find_element(By.ID, "edit-form").is_displayed())
            seen["prefilled"] = [value("edit-title"), value("edit-message")]
            seen["alertAgain"] = settled(lambda: driver.find_element(By.ID, "edit-alert").is_selected())
            seen["quietly"] = settled(lambda: driver.find_element(By.ID, "edit-explain").text)
            driver.find_element(By.ID, "edit-alert").click()
            wait.until(lambda d: "with sound" in d.find_element(By.ID, "edit-explain").text)
            seen["withSound"] = settled(lambda: driver.find_element(By.ID, "edit-explain").text)
            driver.find_element(By.ID, "edit-alert").click()
            wait.until(lambda d: "no sound" in d.find_element(By.ID, "edit-explain").text)
            message = driver.find_element(By.ID, "edit-message")
            message.clear()
            message.send_keys("Now 60% off")
            # A phone-sized screen: nothing wider than the window.
            seen["overflow"] = driver.execute_script(
                "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(e => e.tagName + '#' + e.id).slice(0, 5)")
            driver.execute_script("document.getElementById('watch').scrollIntoView()")
            driver.save_screenshot(shots + "/console-edit.png")
            driver.find_element(By.ID, "edit-save").click()
            wait.until(lambda d: d.find_element(By.ID, "change-result").text)
            seen["answer"] = settled(lambda: driver.find_element(By.ID, "change-result").text)
            seen["formShown"] = settled(lambda: driver.find_element(By.ID, "edit-form").is_displayed())
            seen["campaign"] = api("/api/admin/campaigns/" + campaign, "root", "rootpw")
            seen["aliceInbox"] = api("/api/notifications", "alice", "wonderland")
        else:
            # Withdraw from the results panel, the campaign opened by its id in the list.
            click(row + " button.open")
            wait.until(lambda d: d.find_element(By.ID, "withdraw").is_displayed())
            driver.find_element(By.ID, "withdraw").click()
            wait.until(lambda d: d.find_element(By.ID, "withdraw-form").is_displayed())
            seen["explain"] = settled(lambda: driver.find_element(By.ID, "withdraw-explain").text)
            seen["defaultText"] = value("withdraw-text")
            instead = driver.find_element(By.ID, "withdraw-text")
            instead.clear()
            instead.send_keys("The sale was called off")
            driver.execute_script("document.getElementById('watch').scrollIntoView()")
            driver.save_screenshot(shots + "/console-withdraw.png")
            driver.find_element(By.ID, "withdraw-confirm").click()
            wait.until(lambda d: d.find_element(By.ID, "change-result").text)
            seen["answer"] = settled(lambda: driver.find_element(By.ID, "change-result").text)
            wait.until(lambda d: d.find_element(By.ID, "campaign-status").text.startswith("retracted"))
            seen["status"] = settled(lambda: driver.find_element(By.ID, "campaign-status").text)
            seen["panelShown"] = settled(lambda: [driver.find_element(By.ID, id).is_displayed() for id in ("edit", "withdraw", "edit-form", "withdraw-form")])
            driver.execute_script("document.getElementById('campaigns').scrollIntoView()")
            wait.until(lambda d: d.find_element(By.CSS_SELECTOR, row + " .status").text == "retracted")
            seen["rowButtonsAfter"] = settled(lambda: [b.text for b in driver.find_elements(By.CSS_SELECTOR, row + " button")])
            seen["campaign"] = api("/api/admin/campaigns/" + campaign, "root", "rootpw")
            seen["aliceInbox"] = api("/api/notifications", "alice", "wonderland")
            seen["bobInbox"] = api("/api/notifications", "bob", "builder")
    finally:
        driver.quit()
        print(json.dumps(seen)) # what it saw, also when a wait gave up
    """#

    /// Runs the script's `phase` against the server on `port`; what it saw.
    static func browse(_ phase: String, port: Int, shots: URL, campaign: Int) async throws -> [String: Any] {
        try await ConsoleBrowser.run(Self.script, arguments: ["http://127.0.0.1:\(port)", shots.path, String(campaign), phase])
    }

    @Test("an admin edits a sent campaign's message from the console (prefilled, quiet unless Alert again, the answer's counts shown) and the API, the inbox and the phones show the new words; then withdraws it (the text browsers show instead editable): status retracted, no Edit or Withdraw left, inboxes empty, its payload link 410, a background push to every phone")
    func editThenWithdraw() async throws {
        guard try await ConsoleBrowser.isAvailable() else { return }
        try await RunningSandbox.with { apns in
            // The browser's part may outlast the test client's idle connection (60 s by default) on a machine busy with the whole suite.
            try await TestServer.run({ $0.idleTimeout = 900 }, provider: APNsProvider(client: try apns.client())) { s in
                // Two iPhones of alice's and one of bob's get the campaign.
                _ = try await s.registerDevice(tokenA, as: "alice")
                _ = try await s.registerDevice(tokenB, as: "alice")
                _ = try await s.registerDevice(String(repeating: "c", count: 64), as: "bob")
                let (created, body) = try await s.campaign(#"{"audience":{"users":["alice","bob"]},"title":"Weekend sale","message":"Half price"}"#)
                #expect(created.status == .accepted)
                let id = try #require(body["id"] as? Int)
                #expect(try await eventually { apns.sandbox.acceptedCount == 3 })
                #expect(try await eventually { try await s.campaignStatus(id)["status"] as? String == "done" })
                let original = try #require(apns.sandbox.accepted.first { $0.token == tokenA })
                let richURL = try #require((try JSONSerialization.jsonObject(with: original.payload) as? [String: Any])?["richUrl"] as? String)
                // Without the page's CSRF token the console changes nothing, as with its other writes.
                let console = try await ConsoleSegmentTests.signIn(s)
                let (forgedChange, _) = try await console.call(.patch, "/console/api/campaigns/\(id)", body: #"{"message":"forged"}"#, token: false)
                let (forgedRetract, _) = try await console.call(.post, "/console/api/campaigns/\(id)/retract", body: "{}", token: false)
                #expect(forgedChange.status == .forbidden && forgedRetract.status == .forbidden)
                #expect(try await s.campaignStatus(id)["message"] as? String == "Half price")

                let dir = try Fixtures.tempDirectory()
                defer { try? FileManager.default.removeItem(at: dir) }
                let shots = dir.appendingPathComponent("shots")
                try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
                let port = try #require(s.client.port)

                let edited = try await Self.browse("edit", port: port, shots: shots, campaign: id)
                #expect(edited["rowButtons"] as? [String] == ["#\(id)", "Edit", "Withdraw"], "\(edited)")
                #expect(edited["prefilled"] as? [String] == ["Weekend sale", "Half price"], "\(edited)")
                #expect(edited["alertAgain"] as? Bool == false)
                #expect(edited["quietly"] as? String == "Devices that already got it: iPhones replace it quietly under the same notification (no sound), Android replaces it by its tag, "
                        + "browsers replace it by its Topic; pushes not yet sent carry the new words; inboxes and payload links show them at once.", "\(edited)")
                let withSound = edited["withSound"] as? String ?? ""
                #expect(withSound.contains("(with sound)") && !withSound.contains("quietly"), "\(withSound)")
                #expect(edited["overflow"] as? [String] == [], "wider than a 412 px window: \(String(describing: edited["overflow"]))")
                #expect(edited["answer"] as? String == "Changed: 2 inboxes, 0 pending, replacements: 3 iPhone, 0 Android, 0 browser.", "\(edited)")
                #expect(edited["formShown"] as? Bool == false)
                let changed = edited["campaign"] as? [String: Any] ?? [:]
                #expect(changed["message"] as? String == "Now 60% off" && changed["title"] as? String == "Weekend sale" && changed["changed"] is String, "\(changed)")
                let inbox = edited["aliceInbox"] as? [[String: Any]] ?? []
                #expect(inbox.count == 1 && inbox.first?["message"] as? String == "Now 60% off", "\(inbox)")
                // The phones that had it got a replacement under its collapse id, quietly (passive, no sound).
                #expect(try await eventually { apns.sandbox.acceptedCount >= 6 }, "\(apns.sandbox.acceptedCount) pushes")
                let replacements = apns.sandbox.accepted.dropFirst(3).filter { $0.headers["apns-push-type"] == "alert" }
                #expect(replacements.count == 3)
                for push in replacements {
                    let words = String(decoding: push.payload, as: UTF8.self)
                    let aps = (try? JSONSerialization.jsonObject(with: push.payload) as? [String: Any])?["aps"] as? [String: Any] ?? [:]
                    #expect(words.contains("Now 60% off") && aps["interruption-level"] as? String == "passive" && (aps["sound"] as? String ?? "") == "", "\(words)")
                }
                #expect(original.headers["apns-collapse-id"] != nil, "the first push had no collapse id to replace it under")
                #expect(replacements.first { $0.token == tokenA }?.headers["apns-collapse-id"] == original.headers["apns-collapse-id"])

                let withdrawn = try await Self.browse("withdraw", port: port, shots: shots, campaign: id)
                #expect(withdrawn["explain"] as? String == "Pushes not yet sent are cancelled; it leaves every inbox; its payload links answer 410 Gone; iPhones and Android phones "
                        + "that showed it get a background push that removes it; browsers show the text below in its place.", "\(withdrawn)")
                #expect(withdrawn["defaultText"] as? String == "This message was withdrawn")
                #expect(withdrawn["answer"] as? String == "Withdrawn: 2 inboxes, 0 cancelled, background pushes: 3 iPhone, 0 Android, 0 browser.", "\(withdrawn)")
                #expect((withdrawn["status"] as? String)?.hasPrefix("retracted") == true, "\(withdrawn)")
                #expect(withdrawn["panelShown"] as? [Bool] == [false, false, false, false], "\(withdrawn)")
                #expect(withdrawn["rowButtonsAfter"] as? [String] == ["#\(id)"], "\(withdrawn)")
                let retracted = withdrawn["campaign"] as? [String: Any] ?? [:]
                #expect(retracted["status"] as? String == "retracted" && retracted["retracted"] is String, "\(retracted)")
                #expect((withdrawn["aliceInbox"] as? [Any])?.isEmpty == true && (withdrawn["bobInbox"] as? [Any])?.isEmpty == true, "\(withdrawn)")
                #expect(try await eventually(within: 3) { try await s.request(.get, TestServer.path(of: richURL), as: nil).status == .gone })
                // Each phone that showed it got a background push to remove it.
                #expect(try await eventually { apns.sandbox.accepted.filter { $0.headers["apns-push-type"] == "background" }.count == 3 },
                        "\(apns.sandbox.accepted.map { $0.headers["apns-push-type"] ?? "" })")

                // Kept for a person to look at.
                let kept = Fixtures.packageRoot.appendingPathComponent(".build/test-output")
                try? FileManager.default.createDirectory(at: kept, withIntermediateDirectories: true)
                for name in ["console-edit.png", "console-withdraw.png"] {
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
