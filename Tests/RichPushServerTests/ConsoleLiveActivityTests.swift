import APNsSandbox
import Foundation
import HTTPTypes
import PushDelivery
import PushTestSupport
import RichPushServer
import RichPushTestSupport
import Testing

/// SPEC §25 in a real browser: an admin starts a Live Activity from the console on one user's
/// iPhone, updates it and ends it, and the console shows its state, its device and its updates.
/// Selenium drives Debian's headless Chromium through chromium-driver, as `ConsoleRetractTests`
/// does, against a server sending to the APNs sandbox.
@Suite("The console starts, updates and ends a Live Activity in headless Chromium (SPEC §25)")
struct ConsoleLiveActivityTests {
    static let type = "DeliveryAttributes"
    /// The iPhone's push-to-start token for `type` (its update token is the one the sandbox's phone makes as it starts).
    static let pushToStart = String(repeating: "5a", count: 32)

    /// Signs in as root and, in the Live Activities panel, starts an activity for alice (after a
    /// content state that is not JSON, which is refused before anything is sent, and a start
    /// without an alert title, which the API refuses), reports the phone's update token through the
    /// HTTP API as alice, updates it (after a content state that is not an object), ends it, and
    /// prints one JSON object of what it saw, what the HTTP API answers afterwards among it.
    static let script = #"""
    import base64, json, os, sys, time, urllib.request
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    # waiting(): the panel re-renders as answers arrive, and an element read mid-render is looked up again.
    from console_browser import chromium, waiting, settled
    base, shots, registration, kind, pushToken, tokenFile = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
    seen = {}

    def api(method, path, user, password, body=None):
        # The HTTP API as that account calls it (Basic credentials): the status and the JSON answer.
        token = base64.b64encode((user + ":" + password).encode()).decode()
        headers = {"Authorization": "Basic " + token}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(base + path, data=data, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read()
            return [answer.status, json.loads(raw) if raw else None]

    driver = chromium()
    wait = waiting(driver)

    def text(id):
        return driver.find_element(By.ID, id).text

    def column(n):
        return [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#la-devices tbody td:nth-child(" + str(n) + ")")]

    def typed(id, words):
        field = driver.find_element(By.ID, id)
        field.clear()
        field.send_keys(words)
        return field

    try:
        driver.set_page_load_timeout(30)
        # The phone's push-to-start token for the type, as RichPushClient.registerPushToStartToken sends it.
        seen["pushToStartStatus"] = api("PUT", "/api/register/" + registration + "/live-activities/" + kind, "alice", "wonderland", {"pushToStartToken": pushToken})[0]
        driver.get(base + "/console")
        driver.find_element(By.ID, "name").send_keys("root")
        driver.find_element(By.ID, "password").send_keys("rootpw")
        driver.find_element(By.ID, "signin").click()
        wait.until(lambda d: d.find_elements(By.ID, "user"))
        # The panel loads as it comes into view.
        driver.execute_script("document.getElementById('live-activities').scrollIntoView()")
        wait.until(lambda d: d.find_element(By.ID, "la-note").text)
        seen["emptyNote"] = text("la-note")
        typed("la-type", kind)
        typed("la-audience-value", "alice")
        typed("la-attributes", '{"order":"A-1042"}')
        # A brace short: said here, and nothing is sent.
        state = typed("la-content-state", '{"stage":"packed","eta":25')
        driver.find_element(By.ID, "la-start").click()
        seen["badJSON"] = text("la-start-result")
        seen["badJSONMarked"] = "bad" in (state.get_attribute("class") or "")
        seen["afterBadJSON"] = api("GET", "/api/live-activities", "root", "rootpw")[1]
        state.send_keys("}")
        # No alert title: the API refuses the start (iOS would drop it), and the form shows its words.
        driver.find_element(By.ID, "la-start").click()
        wait.until(lambda d: "error" in (d.find_element(By.ID, "la-start-result").get_attribute("class") or ""))
        seen["noTitle"] = text("la-start-result")
        seen["noTitleMarked"] = "bad" in (state.get_attribute("class") or "")
        typed("la-alert-title", "Your order")
        typed("la-alert-body", "Packed, on its way soon")
        driver.find_element(By.ID, "la-start").click()
        wait.until(lambda d: d.find_element(By.ID, "la-start-result").text.startswith("Started"))
        seen["started"] = text("la-start-result")
        wait.until(lambda d: d.find_element(By.ID, "la-id").text.startswith("la_") and d.find_element(By.ID, "la-state").text == "active")
        activity = text("la-id")
        seen["activity"] = activity
        seen["prefilled"] = settled(lambda: json.loads(driver.find_element(By.ID, "la-update-state").get_attribute("value")))
        seen["tokenBefore"] = column(3)
        # The phone reports its activity's update token, as RichPushClient.reportActivityToken does; the panel shows it.
        # The token is the one the phone made as the start reached it (the test writes it to tokenFile).
        deadline = time.time() + 30
        while not os.path.exists(tokenFile) and time.time() < deadline:
            time.sleep(0.1)
        updateToken = open(tokenFile).read().strip()
        seen["tokenStatus"] = api("PUT", "/api/live-activities/" + activity + "/tokens", "alice", "wonderland", {"registration": registration, "token": updateToken})[0]
        wait.until(lambda d: column(3) == ["yes"])
        # An array is JSON but no content state.
        typed("la-update-state", "[1]")
        driver.find_element(By.ID, "la-update").click()
        seen["notObject"] = text("la-result")
        typed("la-update-state", '{"stage":"out for delivery","eta":10}')
        Select(driver.find_element(By.ID, "la-priority")).select_by_value("10")
        driver.find_element(By.ID, "la-update").click()
        wait.until(lambda d: d.find_element(By.ID, "la-result").text.startswith("Updated"))
        seen["updated"] = text("la-result")
        wait.until(lambda d: int(d.find_element(By.ID, "la-count-updates").text or "0") >= 1)
        # A phone-sized screen: nothing wider than the window.
        seen["overflow"] = driver.execute_script(
            "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(e => e.tagName + '#' + e.id).slice(0, 5)")
        driver.execute_script("document.getElementById('la-detail').scrollIntoView()")
        driver.save_screenshot(shots + "/console-live-activity.png")
        typed("la-end-state", '{"stage":"delivered","eta":0}')
        driver.find_element(By.ID, "la-end").click()
        wait.until(lambda d: d.find_element(By.ID, "la-result").text.startswith("Ended"))
        seen["ended"] = text("la-result")
        wait.until(lambda d: d.find_element(By.ID, "la-state").text == "ended")
        # The panel keeps reading until no device is pending.
        wait.until(lambda d: column(5) and "pending" not in column(5))
        seen["state"] = text("la-state")
        seen["formsShown"] = settled(lambda: [driver.find_element(By.ID, id).is_displayed() for id in ("la-update-form", "la-end-form")])
        seen["counts"] = [text("la-count-" + k) for k in ("devices", "updates", "failures")]
        seen["content"] = json.loads(text("la-content"))
        seen["rows"] = settled(lambda: [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in driver.find_elements(By.CSS_SELECTOR, "#la-devices tbody tr")])
        row = '#la-list li[data-id="' + activity + '"]'
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, row + " .status").text == "ended")
        seen["listRow"] = settled(lambda: driver.find_element(By.CSS_SELECTOR, row).text)
        driver.execute_script("document.getElementById('la-detail').scrollIntoView()")
        driver.save_screenshot(shots + "/console-live-activity-ended.png")
        seen["api"] = api("GET", "/api/live-activities/" + activity, "root", "rootpw")[1]
    finally:
        driver.quit()
        print(json.dumps(seen)) # what it saw, also when a wait gave up
    """#

    /// Runs the script against the server on `port` for alice's `registration`; what it saw.
    static func browse(port: Int, shots: URL, registration: String, tokenFile: URL) async throws -> [String: Any] {
        try await ConsoleBrowser.run(Self.script, arguments: ["http://127.0.0.1:\(port)", shots.path, registration, type, pushToStart, tokenFile.path])
    }

    /// The `aps.event`s of the live-activity pushes the sandbox accepted for `token`, in order.
    static func events(_ apns: RunningSandbox, to token: String) -> [String] {
        ClientLiveActivityTests.events(apns, to: token)
    }

    @Test("an admin starts a Live Activity on alice's iPhone from the console (a content state that is not JSON named before anything is sent, the API's refusal of a start without a title shown), sees the phone's update token arrive, updates it at priority 10 and ends it: the panel shows it ended with its final state, one device whose last event is the end, and its updates, as the API does; the phone got start, update and end")
    func startUpdateEnd() async throws {
        guard try await ConsoleBrowser.isAvailable() else { return }
        try await RunningSandbox.with { apns in
            // The browser's part may outlast the test client's idle connection (60 s by default) on a machine busy with the whole suite.
            try await TestServer.run({ $0.idleTimeout = 900 }, provider: APNsProvider(client: try apns.client())) { s in
                // alice's iPhone; bob's too, which has no push-to-start token and is not in the audience.
                let registration = try await s.registerDevice(tokenA, as: "alice")
                _ = try await s.registerDevice(tokenB, as: "bob")
                // Without the page's CSRF token the console starts nothing, as with its other writes.
                let console = try await ConsoleSegmentTests.signIn(s)
                let forgedBody = #"{"type":"DeliveryAttributes","audience":{"users":["alice"]},"contentState":{"stage":"forged"},"alert":{"title":"Forged"}}"#
                let (forged, _) = try await console.call(.post, "/console/api/live-activities", body: forgedBody, token: false)
                #expect(forged.status == .forbidden)
                let (listed, _) = try await console.call(.get, "/console/api/live-activities", token: false)
                #expect(listed.status == .ok)
                #expect(String(decoding: listed.bytes, as: UTF8.self).filter { !$0.isWhitespace } == "[]")

                let dir = try Fixtures.tempDirectory()
                defer { try? FileManager.default.removeItem(at: dir) }
                let shots = dir.appendingPathComponent("shots")
                try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
                let port = try #require(s.client.port)

                // The phone: once the start reaches it, its update token goes where the script reads it.
                let tokenFile = dir.appendingPathComponent("update-token")
                let phone = Task {
                    guard try await eventually(within: 60, { !apns.sandbox.phoneActivities(pushToStartToken: Self.pushToStart).isEmpty }),
                          let token = apns.sandbox.phoneActivities(pushToStartToken: Self.pushToStart).first?.updateToken else { return "" }
                    try token.write(to: tokenFile, atomically: true, encoding: .utf8)
                    return token
                }
                let seen = try await Self.browse(port: port, shots: shots, registration: registration, tokenFile: tokenFile)
                let updateToken = try await phone.value
                #expect(seen["pushToStartStatus"] as? Int == 204, "\(seen)")
                #expect(seen["emptyNote"] as? String == "None yet.", "\(seen)")
                #expect((seen["badJSON"] as? String)?.hasPrefix("Content state is not JSON: ") == true, "\(seen)")
                #expect(seen["badJSONMarked"] as? Bool == true)
                #expect((seen["afterBadJSON"] as? [Any])?.isEmpty == true, "a content state that is not JSON was sent: \(seen)")
                let refusal = seen["noTitle"] as? String ?? ""
                #expect(refusal.lowercased().contains("title") && !refusal.hasPrefix("Start"), "\(refusal)")
                #expect(seen["noTitleMarked"] as? Bool == false, "the content state, JSON by then, is still marked")
                let activity = try #require(seen["activity"] as? String, "\(seen)")
                #expect(activity.hasPrefix("la_"))
                #expect(seen["started"] as? String == "Started \(activity) on 1 device.", "\(seen)")
                let prefilled = seen["prefilled"] as? [String: Any] ?? [:]
                #expect(prefilled["stage"] as? String == "packed" && prefilled["eta"] as? Int == 25, "\(prefilled)")
                #expect(seen["tokenBefore"] as? [String] == ["not yet"], "\(seen)")
                #expect(seen["tokenStatus"] as? Int == 204, "\(seen)")
                #expect(seen["notObject"] as? String == "Content state must be a JSON object in braces, not an array.", "\(seen)")
                #expect((seen["updated"] as? String)?.hasPrefix("Updated: sent to 1 device") == true, "\(seen)")
                #expect(seen["overflow"] as? [String] == [], "wider than a 412 px window: \(String(describing: seen["overflow"]))")
                #expect((seen["ended"] as? String)?.hasPrefix("Ended: sent to 1 device") == true, "\(seen)")

                // What the panel shows once it has ended is what the API says.
                let api = seen["api"] as? [String: Any] ?? [:]
                #expect(seen["state"] as? String == "ended" && api["state"] as? String == "ended", "\(seen)")
                #expect(seen["formsShown"] as? [Bool] == [false, false], "\(seen)")
                let updates = api["updates"] as? Int ?? 0
                #expect(updates >= 1, "\(api)")
                #expect(seen["counts"] as? [String] == ["1", String(updates), String(api["failures"] as? Int ?? -1)], "\(seen)")
                #expect(api["failures"] as? Int == 0, "\(api)")
                let content = seen["content"] as? [String: Any] ?? [:]
                #expect(content["stage"] as? String == "delivered" && content["eta"] as? Int == 0, "\(content)")
                let rows = seen["rows"] as? [[String]] ?? []
                #expect(rows.count == 1, "\(rows)")
                // Its update token is forgotten with the end: an ended activity needs none.
                #expect(rows.first.map { Array($0.prefix(5)) } == [registration, "apns", "not needed", "end", "sent"], "\(rows)")
                let listRow = seen["listRow"] as? String ?? ""
                #expect(listRow.contains(activity) && listRow.contains("ended") && listRow.contains("1 device") && listRow.contains(Self.type), "\(listRow)")

                // The phone: a start to its push-to-start token; the update (at priority 10, as asked) and the end to its update token.
                #expect(try await eventually { Self.events(apns, to: updateToken) == ["update", "end"] },
                        "\(apns.sandbox.accepted.map { ($0.token, $0.headers["apns-push-type"] ?? "") })")
                #expect(Self.events(apns, to: Self.pushToStart) == ["start"])
                // …and the phone showed each of them.
                #expect(apns.sandbox.phoneEvents.map { "\($0.event) \($0.shown)" } == ["start true", "update true", "end true"], "\(apns.sandbox.phoneEvents)")
                let update = apns.sandbox.accepted.first { $0.token == updateToken && ClientLiveActivityTests.aps($0)["event"] as? String == "update" }
                #expect(update?.headers["apns-priority"] == "10", "\(String(describing: update?.headers))")
                #expect(apns.sandbox.accepted.allSatisfy { $0.token != tokenB }, "bob's phone got a push")

                // Kept for a person to look at.
                let kept = Fixtures.packageRoot.appendingPathComponent(".build/test-output")
                try? FileManager.default.createDirectory(at: kept, withIntermediateDirectories: true)
                for name in ["console-live-activity.png", "console-live-activity-ended.png"] {
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
