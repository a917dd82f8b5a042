import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The console (docs/api.md#console) in a real browser: Selenium drives Debian's headless Chromium through
/// chromium-driver against a live `serve`.
@Suite("The console in headless Chromium (SPEC §15)")
struct ConsoleCLITests {
    /// Signs in, uploads a good and a bad file, opens an image's detail, and tries what an
    /// attacker and a non-admin would; prints one JSON object of what it saw.
    static let script = #"""
    import json, sys, time, urllib.request, urllib.error
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    # The page re-renders lists as answers arrive: an element read mid-render is looked up again.
    from selenium.common.exceptions import StaleElementReferenceException
    from console_browser import chromium, settled
    base, shots, photo, bad = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    seen = {}

    def browser():
        return chromium()

    def sign_in(driver, name, password):
        driver.get(base + "/console")
        driver.find_element(By.ID, "name").send_keys(name)
        driver.find_element(By.ID, "password").send_keys(password)
        driver.find_element(By.ID, "signin").click()

    driver = browser()
    try:
        driver.set_page_load_timeout(30)
        driver.get(base + "/console")
        seen["signInForm"] = settled(lambda: len(driver.find_elements(By.ID, "password")) == 1)
        driver.save_screenshot(shots + "/console-sign-in.png")
        sign_in(driver, "root", "wrong password")
        seen["wrongPassword"] = WebDriverWait(driver, 20).until(lambda d: d.find_element(By.ID, "error")).text
        sign_in(driver, "root", "root-password")
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: d.find_elements(By.ID, "user"))
        seen["user"] = settled(lambda: driver.find_element(By.ID, "user").text)
        seen["cookie"] = {c["name"]: {"httpOnly": c.get("httpOnly"), "sameSite": c.get("sameSite")} for c in driver.get_cookies()}
        # Upload through the file picker: one photo and one file that is not an image.
        driver.find_element(By.ID, "files").send_keys(photo + "\n" + bad)
        WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#verdicts li")) == 2)
        seen["verdicts"] = settled(lambda: sorted(li.text for li in driver.find_elements(By.CSS_SELECTOR, "#verdicts li")))
        WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: d.execute_script(
            "const i = document.querySelectorAll('#grid img'); return i.length >= 2 && [...i].every(x => x.complete && x.naturalWidth > 0)"))
        seen["thumbnails"] = driver.execute_script("return [...document.querySelectorAll('#grid img')].map(i => [i.naturalWidth, i.naturalHeight])")
        # The image picker starts on the default image, logo.png, not on the newest upload (an unnamed JPEG): the page as it loads next.
        driver.refresh()
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#image option")) >= 2)
        seen["preselected"] = driver.execute_script("const s = document.getElementById('image'); return s.selectedIndex < 0 ? '' : s.options[s.selectedIndex].textContent")
        driver.find_element(By.CSS_SELECTOR, "#grid button").click()
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: "SHA-256" in d.find_element(By.ID, "detail").text)
        seen["detail"] = settled(lambda: driver.find_element(By.ID, "detail").text)
        driver.save_screenshot(shots + "/console-media.png")
        # Compose: a tag expression is checked as it is typed; two of alice's devices are reached.
        driver.find_element(By.CSS_SELECTOR, 'input[name="audience"][value="tags"]').click()
        field = driver.find_element(By.ID, "audience-value")
        field.send_keys("sports &&")
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: "expected" in d.find_element(By.ID, "reach").text)
        seen["badExpression"] = settled(lambda: driver.find_element(By.ID, "reach").text)
        seen["sendDisabled"] = settled(lambda: not driver.find_element(By.ID, "send").is_enabled())
        driver.find_element(By.CSS_SELECTOR, 'input[name="audience"][value="users"]').click()
        # A listed name that is no user is named in the estimate, and Send waits (the server would refuse it).
        field.clear()
        field.send_keys("alice, nobody")
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: "unknown" in d.find_element(By.ID, "reach").text)
        seen["reachUnknown"] = settled(lambda: driver.find_element(By.ID, "reach").text)
        seen["sendDisabledUnknown"] = settled(lambda: not driver.find_element(By.ID, "send").is_enabled())
        field.clear()
        field.send_keys("alice")
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: d.find_element(By.ID, "reach").text.startswith("Will reach") and "unknown" not in d.find_element(By.ID, "reach").text)
        seen["reach"] = settled(lambda: driver.find_element(By.ID, "reach").text)
        # docs/api.md#apps-and-api-keys: the apps, with their devices, and the picker that narrows a campaign to one.
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: d.find_element(By.ID, "apps-summary").text)
        seen["apps"] = settled(lambda: driver.find_element(By.ID, "apps-summary").text)
        seen["appOptions"] = settled(lambda: [o.text for o in driver.find_elements(By.CSS_SELECTOR, "#app option")])
        driver.find_element(By.ID, "title").send_keys("Weekend sale")
        landscape = driver.execute_script("return [...document.querySelectorAll('#image option')].find(o => o.textContent.includes('1280×853')).value")
        driver.execute_script("document.getElementById('image').value = arguments[0]; document.getElementById('image').dispatchEvent(new Event('input'))", landscape)
        WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: d.execute_script(
            "const i = document.querySelectorAll('#previews img'); return i.length == 4 && [...i].every(x => x.complete && x.naturalWidth > 0)"))
        seen["previews"] = settled(lambda: [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#previews .note")])
        seen["previewImages"] = driver.execute_script("return [...document.querySelectorAll('#previews img')].map(i => i.className)")
        # The README's picture: the compose screen at a desktop's width, the previews in view.
        driver.set_window_size(1100, 1250)
        driver.execute_script("document.getElementById('compose').scrollIntoView()")
        time.sleep(0.3)
        driver.save_screenshot(shots + "/console-compose.png")
        driver.set_window_size(412, 900)
        driver.find_element(By.ID, "send").click()
        WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: d.find_element(By.ID, "count-sent").text == "2")
        seen["sendResult"] = settled(lambda: driver.find_element(By.ID, "send-result").text)
        seen["counts"] = settled(lambda: {k: driver.find_element(By.ID, "count-" + k).text for k in ("pending", "sent", "failed", "fetched")})
        # The results were scrolled into view when the campaign was sent, not left below the fold.
        seen["watchInView"] = driver.execute_script("const r = document.getElementById('watch').getBoundingClientRect(); return r.top >= -1 && r.top < innerHeight - 50")
        # docs/api.md (stats): the funnel and the timeline, drawn by the page from the campaign's stats.
        WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: "sent" in d.find_element(By.ID, "funnel").text)
        seen["funnel"] = settled(lambda: driver.find_element(By.ID, "funnel").text)
        seen["timeline"] = driver.execute_script("return [...document.querySelectorAll('#timeline polyline')].map(p => p.getAttribute('class') + ':' + p.getAttribute('points').split(' ').length)")
        driver.execute_script("document.getElementById('watch').scrollIntoView()")
        driver.save_screenshot(shots + "/console-watch.png")
        # docs/api.md (scheduling, locales): another language, previewed in it; a campaign scheduled for tomorrow, then cancelled.
        wait = WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,))
        driver.find_element(By.CSS_SELECTOR, "#languages summary").click()
        driver.find_element(By.ID, "add-locale").click()
        driver.find_element(By.CSS_SELECTOR, "#locale-rows .locale-tag").send_keys("fr")
        driver.find_element(By.CSS_SELECTOR, "#locale-rows .locale-title").send_keys("Soldes")
        driver.find_element(By.CSS_SELECTOR, "#locale-rows .locale-message").send_keys("Moitié prix")
        seen["previewLocales"] = settled(lambda: [o.text for o in driver.find_elements(By.CSS_SELECTOR, "#preview-locale option")])
        driver.execute_script("const s = document.getElementById('preview-locale'); s.value = 'fr'; s.dispatchEvent(new Event('change'))")
        seen["frenchPreview"] = settled(lambda: driver.find_element(By.ID, "ios-expanded").text)
        driver.execute_script("const s = document.getElementById('when'); s.value = 'at'; s.dispatchEvent(new Event('change'))")
        tomorrow = driver.execute_script("const d = new Date(Date.now() + 86400000); d.setSeconds(0, 0); return new Date(d - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16)")
        driver.execute_script("document.getElementById('send-at').value = arguments[0]", tomorrow)
        # docs/api.md#options-badges-and-paced-sends: delivery options, previewed (subtitle, buttons) and sent with the campaign.
        driver.execute_script("const s = document.getElementById('preview-locale'); s.value = ''; s.dispatchEvent(new Event('change'))")
        driver.find_element(By.CSS_SELECTOR, "#options summary").click()
        driver.find_element(By.ID, "opt-subtitle").send_keys("Today only")
        driver.find_element(By.ID, "opt-thread").send_keys("sales")
        driver.find_element(By.ID, "opt-buttons").send_keys("buy:Buy now, later:Later")
        driver.execute_script("for (const [id, v] of [['opt-level', 'time-sensitive'], ['opt-priority', 'normal'], ['opt-badge', 'unread']]) document.getElementById(id).value = v")
        driver.find_element(By.ID, "opt-expiry").send_keys("3")
        driver.find_element(By.ID, "opt-pace").send_keys("600")
        seen["optionsPreview"] = settled(lambda: driver.find_element(By.ID, "ios-expanded").text)
        seen["optionsButtons"] = settled(lambda: [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#ios-expanded .button")])
        driver.find_element(By.ID, "send").click()
        wait.until(lambda d: d.find_element(By.ID, "campaign-status").text.startswith("scheduled"))
        seen["scheduledStatus"] = settled(lambda: driver.find_element(By.ID, "campaign-status").text)
        seen["optionsSent"] = driver.execute_async_script(
            "const done = arguments[0]; fetch('/console/api/campaigns/' + document.getElementById('campaign-id').textContent).then(r => r.json()).then(j => done(j.campaign))")
        seen["cancelShown"] = settled(lambda: driver.find_element(By.ID, "cancel").is_displayed())
        driver.find_element(By.ID, "cancel").click()
        wait.until(lambda d: d.find_element(By.ID, "cancel-result").text.startswith("Cancelled"))
        wait.until(lambda d: d.find_element(By.ID, "campaign-status").text.startswith("cancelled"))
        seen["cancelledStatus"] = settled(lambda: driver.find_element(By.ID, "campaign-status").text)
        # The campaigns panel: another campaign scheduled for tomorrow is found in the list, newest first, and cancelled from there.
        before = driver.find_element(By.ID, "campaign-id").text
        driver.find_element(By.ID, "send").click()
        wait.until(lambda d: d.find_element(By.ID, "campaign-id").text not in ("", before) and d.find_element(By.ID, "campaign-status").text.startswith("scheduled"))
        listed = driver.find_element(By.ID, "campaign-id").text
        seen["listedId"] = int(listed)
        driver.execute_script("document.getElementById('campaigns').scrollIntoView()")
        row = '#campaign-list li[data-id="' + listed + '"]'
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, row + " .status").text == "scheduled")
        seen["listedScheduled"] = settled(lambda: driver.find_element(By.CSS_SELECTOR, row).text)
        seen["listedIds"] = driver.execute_script("return [...document.querySelectorAll('#campaign-list li')].map(li => Number(li.dataset.id))")
        seen["listedStatuses"] = settled(lambda: [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#campaign-list .status")])
        def cancel_listed(d):
            d.find_element(By.CSS_SELECTOR, row + " button.cancel").click() # looked up again if the list was redrawn meanwhile
            return True
        wait.until(cancel_listed)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, row + " .status").text == "cancelled" and "Cancelled" in d.find_element(By.CSS_SELECTOR, row).text)
        seen["listedCancelled"] = settled(lambda: driver.find_element(By.CSS_SELECTOR, row).text)
        seen["listedCancelButtons"] = settled(lambda: len(driver.find_elements(By.CSS_SELECTOR, row + " button.cancel")))
        wait.until(lambda d: d.find_element(By.ID, "campaign-status").text.startswith("cancelled")) # the watched campaign says so too
        seen["watchAfterListCancel"] = settled(lambda: driver.find_element(By.ID, "campaign-status").text)
        driver.execute_script("document.getElementById('campaigns').scrollIntoView()")
        time.sleep(0.3)
        driver.save_screenshot(shots + "/console-campaigns.png")
        driver.execute_script("const s = document.getElementById('when'); s.value = 'now'; s.dispatchEvent(new Event('change'))")
        # Users and devices: search, open alice, see her devices and the push, remove a device.
        driver.find_element(By.ID, "user-search").send_keys("ALI")
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: [b.text for b in d.find_elements(By.CSS_SELECTOR, "#user-list button")] == ["alice · 2 devices"])
        driver.find_element(By.CSS_SELECTOR, "#user-list button").click()
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: "2 devices" in d.find_element(By.ID, "user-detail").text)
        seen["userDetail"] = settled(lambda: driver.find_element(By.ID, "user-detail").text)
        driver.find_element(By.CSS_SELECTOR, "#user-detail li button").click()
        WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: "1 device" in d.find_element(By.ID, "user-detail").text)
        seen["afterRemove"] = settled(lambda: driver.find_element(By.ID, "user-detail").text)
        driver.save_screenshot(shots + "/console-users.png")
        # A phone-sized screen: nothing wider than the window.
        seen["overflow"] = driver.execute_script(
            "return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(e => e.tagName + '#' + e.id).slice(0, 5)")
        # Keyboard alone: from the top, Tab reaches the file picker, an image, the audience, Send and the user search.
        from selenium.webdriver.common.keys import Keys
        driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
        reached = []
        for _ in range(90):
            webdriver.ActionChains(driver).send_keys(Keys.TAB).perform() # as a person presses Tab, whatever has focus
            for _ in range(5): # a list re-rendered as an answer arrives can replace the element just read
                try:
                    active = driver.switch_to.active_element
                    reached.append(active.get_attribute("id") or active.get_attribute("name") or active.tag_name)
                    break
                except StaleElementReferenceException:
                    time.sleep(0.1)
        seen["tabbed"] = reached
        seen["focusable"] = len(set(reached))
        token = next(c["value"] for c in driver.get_cookies() if c["name"] == "richpush_console")
        csrf = driver.find_element(By.CSS_SELECTOR, 'meta[name="csrf-token"]').get_attribute("content")
    finally:
        driver.quit()

    def post(headers):
        request = urllib.request.Request(base + "/console/api/media", data=open(photo, "rb").read(), method="POST",
                                         headers={"Cookie": "richpush_console=" + token, **headers})
        try:
            return urllib.request.urlopen(request, timeout=10).status
        except urllib.error.HTTPError as e:
            return e.code
    # What a forged cross-site request can send: the cookie, but not the page's token; or the token from another site.
    seen["forgedNoToken"] = post({"Origin": "http://evil.example"})
    seen["forgedWrongToken"] = post({"X-CSRF-Token": "x" * 43})
    seen["forgedOtherOrigin"] = post({"X-CSRF-Token": csrf, "Origin": "http://evil.example"})
    seen["sameSite"] = post({"X-CSRF-Token": csrf, "Origin": base})

    def status(method, path, headers, body=None):
        request = urllib.request.Request(base + path, data=body, method=method, headers=headers)
        try:
            return urllib.request.urlopen(request, timeout=10).status
        except urllib.error.HTTPError as e:
            return e.code
    cookie = {"Cookie": "richpush_console=" + token}
    # A sign-in that names no origin (login CSRF), a campaign without the token, a call without the cookie.
    seen["signInNoOrigin"] = status("POST", "/console/session", {"Content-Type": "application/x-www-form-urlencoded"}, b"name=root&password=root-password")
    seen["campaignNoToken"] = status("POST", "/console/api/campaigns", {**cookie, "Content-Type": "application/json"}, b'{"audience":{"all":true}}')
    seen["noCookie"] = status("GET", "/console/api/media", {})
    seen["signOutNoToken"] = status("POST", "/console/session/end", {**cookie, "Content-Type": "application/x-www-form-urlencoded"}, b"csrf=nope")

    other = browser()
    try:
        sign_in(other, "alice", "alice-password")
        # The click's page load may still be under way: wait for it, as for the admin's.
        WebDriverWait(other, 20, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: d.find_elements(By.ID, "forbidden"))
        seen["nonAdmin"] = other.find_element(By.ID, "forbidden").text
    finally:
        other.quit()
    print(json.dumps(seen))
    """#

    @Test("an admin signs in, uploads by the file picker (a refused file's reason in words), sees thumbnails and an image's detail, composes with a checked audience (unknown users named) and a preview, sends to APNs sandbox devices and watches the counts reach sent, cancels a scheduled campaign from the campaigns list, finds a user and removes a device; a forged cross-site POST and a non-admin are refused")
    func media() async throws {
        guard try await ConsoleBrowser.isAvailable() else { return }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        #expect(try await CLI.run(["users", "add", "root", "--admin", "--password-stdin"], cwd: dir, stdin: "root-password\n").status == 0)
        #expect(try await CLI.run(["users", "add", "alice", "--password-stdin"], cwd: dir, stdin: "alice-password\n").status == 0)
        // The APNs sandbox, and serve sending to it.
        let (sandbox, apnsPort) = try await startListening({ ["apns-sandbox", "--port", String($0), "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                                                              "--public-key", "AuthKey.p8", "--tls-cert", "cert.pem", "--tls-key", "cert.key"] },
                                                           cwd: dir, log: dir.appendingPathComponent("sandbox.log"))
        defer { if sandbox.isRunning { kill(sandbox.processIdentifier, SIGKILL) } }
        let (server, port) = try await CLI.startServe(sandboxAPNs(apnsPort), cwd: dir)
        defer { kill(server.processIdentifier, SIGKILL) }
        // Two iPhones of alice's, tagged sports.
        let auth = Data("alice:alice-password".utf8).base64EncodedString()
        for token in [String(repeating: "ab", count: 32), String(repeating: "cd", count: 32)] {
            let registered = try await http(port, "POST", "/api/register", auth: auth)
            let id = try #require(registered.split(separator: "\"").dropFirst(3).first.map(String.init))
            let put = try await http(port, "PUT", "/api/register/\(id)", auth: auth, body: #"{"platform":"apns","handle":"\#(token)","tags":["sports"]}"#)
            #expect(put.hasPrefix("HTTP/1.1 200"), "\(put)")
        }
        let shots = dir.appendingPathComponent("shots")
        try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
        let photo = Fixtures.media.appendingPathComponent("landscape.jpg").path
        let bad = dir.appendingPathComponent("notes.png")
        try Data("these are notes, not a picture".utf8).write(to: bad)
        let seen = try await ConsoleBrowser.run(Self.script, arguments: ["http://127.0.0.1:\(port)", shots.path, photo, bad.path])

        #expect(seen["signInForm"] as? Bool == true)
        #expect(seen["wrongPassword"] as? String == "That user name and password do not match.")
        #expect(seen["user"] as? String == "root")
        let cookie = (seen["cookie"] as? [String: [String: Any]])?["richpush_console"]
        #expect(cookie?["httpOnly"] as? Bool == true && cookie?["sameSite"] as? String == "Strict", "\(String(describing: seen["cookie"]))")
        let verdicts = seen["verdicts"] as? [String] ?? []
        #expect(verdicts.contains { $0.hasPrefix("✓ landscape.jpg: stored as ") && $0.contains("image/jpeg, 1280×853") }, "\(verdicts)")
        #expect(verdicts.contains("✗ notes.png: not a PNG or JPEG file") || verdicts.contains { $0.hasPrefix("✗ notes.png: ") && $0.count > 16 }, "\(verdicts)")
        // Thumbnails: the thumb variant, the logo the server started with and the photo. The photo's
        // fits 320 px; the logo's made thumb would be larger in bytes than the 400 px logo itself,
        // so the logo is its own thumb (issue #49: a thumb is never larger than its source).
        let thumbnails = seen["thumbnails"] as? [[Int]] ?? []
        #expect(thumbnails.count == 2 && thumbnails.allSatisfy { $0.count == 2 && $0[0] > 0 && (($0[0] <= 320 && $0[1] <= 320) || ($0[0] == 400 && $0[1] == 400)) }, "\(thumbnails)")
        #expect(thumbnails.contains { $0[0] <= 320 && $0[1] <= 320 }, "\(thumbnails)")
        #expect((seen["detail"] as? String)?.contains("SHA-256") == true && (seen["detail"] as? String)?.contains("Used by") == true)
        let tabbed = Set(seen["tabbed"] as? [String] ?? [])
        #expect(["files", "audience", "title", "send", "user-search", "signout"].allSatisfy(tabbed.contains) && tabbed.contains("button"), "\(tabbed)")
        #expect(seen["forgedNoToken"] as? Int == 403 && seen["forgedWrongToken"] as? Int == 403 && seen["forgedOtherOrigin"] as? Int == 403, "\(seen)")
        #expect(seen["sameSite"] as? Int == 200, "the page's own request with its token is taken: \(seen)")
        #expect(seen["signInNoOrigin"] as? Int == 403 && seen["campaignNoToken"] as? Int == 403 && seen["signOutNoToken"] as? Int == 403, "\(seen)")
        #expect(seen["noCookie"] as? Int == 401)
        #expect((seen["nonAdmin"] as? String)?.contains("alice is not an admin") == true)
        // Compose, preview, send and watch.
        #expect((seen["badExpression"] as? String)?.contains("expected a tag after '&&'") == true, "\(String(describing: seen["badExpression"]))")
        #expect(seen["sendDisabled"] as? Bool == true)
        #expect(seen["reach"] as? String == "Will reach 1 user on 2 devices.")
        // Issue #49: unknown users named, logo.png preselected, the results scrolled to, campaigns listed and cancelled from the list.
        #expect(seen["reachUnknown"] as? String == "Will reach 1 user on 2 devices; unknown: nobody", "\(String(describing: seen["reachUnknown"]))")
        #expect(seen["sendDisabledUnknown"] as? Bool == true)
        #expect((seen["preselected"] as? String)?.hasPrefix("logo.png (") == true, "\(String(describing: seen["preselected"]))")
        #expect(seen["watchInView"] as? Bool == true, "the results panel is not in view after sending")
        let listedID = seen["listedId"] as? Int ?? 0
        let listedIDs = seen["listedIds"] as? [Int] ?? []
        #expect(listedIDs.count == 3 && listedIDs.first == listedID && listedIDs == listedIDs.sorted(by: >), "newest first: \(listedIDs)")
        #expect(seen["listedStatuses"] as? [String] == ["scheduled", "cancelled", "done"], "\(String(describing: seen["listedStatuses"]))")
        let listedRow = seen["listedScheduled"] as? String ?? ""
        #expect(listedRow.contains("#\(listedID)") && listedRow.contains("scheduled") && listedRow.contains("not queued yet") && listedRow.contains("for ")
                && listedRow.contains("600 a minute") && listedRow.contains("every app") && listedRow.contains("by root") && listedRow.contains("Cancel"), "\(listedRow)")
        let cancelledRow = seen["listedCancelled"] as? String ?? ""
        #expect(cancelledRow.contains("cancelled") && cancelledRow.contains("Cancelled: 0 sent before.") && seen["listedCancelButtons"] as? Int == 0, "\(cancelledRow)")
        #expect((seen["watchAfterListCancel"] as? String)?.hasPrefix("cancelled") == true, "\(String(describing: seen["watchAfterListCancel"]))")
        #expect(seen["apps"] as? String == "Apps: default (2 devices)", "\(String(describing: seen["apps"]))")
        let funnel = seen["funnel"] as? String ?? ""
        #expect(funnel.contains("queued\n2") && funnel.contains("sent\n2 (100%)"), "\(funnel)")
        #expect((seen["timeline"] as? [String])?.map { $0.split(separator: ":").first.map(String.init) ?? "" } == ["sent", "displayed", "opened"],
                "\(String(describing: seen["timeline"]))")
        #expect(seen["previewLocales"] as? [String] == ["Default language (en)", "fr"], "\(String(describing: seen["previewLocales"]))")
        #expect((seen["frenchPreview"] as? String)?.contains("Soldes") == true && (seen["frenchPreview"] as? String)?.contains("Moitié prix") == true,
                "\(String(describing: seen["frenchPreview"]))")
        #expect((seen["scheduledStatus"] as? String)?.hasPrefix("scheduled for ") == true && seen["cancelShown"] as? Bool == true, "\(seen)")
        #expect((seen["cancelledStatus"] as? String)?.hasPrefix("cancelled") == true, "\(String(describing: seen["cancelledStatus"]))")
        #expect((seen["optionsPreview"] as? String)?.contains("Today only") == true, "\(String(describing: seen["optionsPreview"]))")
        #expect(seen["optionsButtons"] as? [String] == ["Buy now", "Later"], "\(String(describing: seen["optionsButtons"]))")
        #expect((seen["scheduledStatus"] as? String)?.contains("600 a minute") == true, "\(String(describing: seen["scheduledStatus"]))")
        let sent = seen["optionsSent"] as? [String: Any] ?? [:]
        let options = sent["options"] as? [String: Any] ?? [:]
        #expect(options["subtitle"] as? String == "Today only" && options["threadId"] as? String == "sales" && options["interruptionLevel"] as? String == "time-sensitive"
                && options["priority"] as? String == "normal" && options["expiresIn"] as? Int == 10_800, "\(sent)")
        #expect((options["actions"] as? [[String: String]]) == [["id": "buy", "title": "Buy now"], ["id": "later", "title": "Later"]], "\(sent)")
        #expect(sent["badge"] as? String == "unread" && sent["ratePerMinute"] as? Int == 600, "\(sent)")
        #expect(seen["appOptions"] as? [String] == ["Every app", "default · 2 devices"], "\(String(describing: seen["appOptions"]))")
        let previews = seen["previews"] as? [String] ?? []
        #expect(previews.count == 4 && previews.allSatisfy { $0.contains("Weekend sale") && $0.contains("Check this image out!") }, "\(previews)")
        #expect(seen["previewImages"] as? [String] == ["small", "large", "small", "large"])
        #expect((seen["sendResult"] as? String)?.hasPrefix("Sent as campaign ") == true)
        let counts = seen["counts"] as? [String: String]
        #expect(counts?["sent"] == "2" && counts?["failed"] == "0" && counts?["pending"] == "0", "\(String(describing: counts))")
        let detail = seen["userDetail"] as? String ?? ""
        #expect(detail.contains("default · apns abababab") && detail.contains("[sports]") && detail.contains("Weekend sale: Check this image out! (alert)"), "\(detail)")
        #expect((seen["afterRemove"] as? String)?.contains("1 device") == true)
        #expect(seen["overflow"] as? [String] == [], "wider than a 412 px window: \(String(describing: seen["overflow"]))")

        // Kept for a person to look at (the README shows the media screen).
        let kept = Fixtures.packageRoot.appendingPathComponent(".build/test-output")
        try? FileManager.default.createDirectory(at: kept, withIntermediateDirectories: true)
        for name in ["console-sign-in.png", "console-media.png", "console-compose.png", "console-watch.png", "console-campaigns.png", "console-users.png"] {
            let shot = shots.appendingPathComponent(name)
            let png = try Data(contentsOf: shot)
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 5_000, "\(name)")
            try? FileManager.default.removeItem(at: kept.appendingPathComponent(name))
            try? FileManager.default.copyItem(at: shot, to: kept.appendingPathComponent(name))
        }
    }
}
