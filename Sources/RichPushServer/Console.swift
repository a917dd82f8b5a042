import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import MediaStore
import RichPushCore

/// `/console` (SPEC §15): a page for admins, server-rendered with a little script, no build
/// step and nothing fetched from elsewhere.
///
/// Signing in makes a session (§9) whose token lives only in an `HttpOnly`, `SameSite=Strict`
/// cookie scoped to `/console`; no password is kept. Every state-changing request must carry the
/// session's CSRF token (an HMAC of the session token the page is given, sent back in
/// `X-CSRF-Token` or a form field) and, when the browser names one, an `Origin` of this server.
enum Console {
    static let cookieName = "richpush_console"

    /// The session token in the request's cookie.
    static func sessionToken(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == cookieName, !parts[1].isEmpty { return String(parts[1]) }
            }
        }
        return nil
    }

    /// The CSRF token of a session: only a page this server rendered for the session has it.
    static func csrfToken(for session: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("richpush console csrf".utf8), using: SymmetricKey(data: Data(session.utf8)))
        return Base64URL.encode(Array(mac))
    }

    /// Refuses (403) a request another site made: an `Origin` (or, without one, a `Referer`)
    /// that is not this server's. With `required`, also one that names neither (the sign-in
    /// form: a browser always sends `Origin` with a form's POST).
    static func checkSameOrigin(_ request: Request, required: Bool = false) throws {
        let refused = Problem(.forbidden, "this request did not come from this server's console page; the console only takes its own")
        guard let claimed = request.headers[.origin] ?? request.headers[.referer] else {
            if required { throw refused }
            return
        }
        guard let url = URL(string: claimed), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { throw refused }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        // The Host this request was sent to, with the scheme's port when it names none.
        var authority = (request.head.authority ?? "").lowercased()
        let namesPort = authority.hasPrefix("[") ? authority.contains("]:") : authority.contains(":")
        if !namesPort { authority += ":\(scheme == "https" ? 443 : 80)" }
        let claimedHost = host.hasPrefix("[") || !host.contains(":") ? host : "[\(host)]" // IPv6 as Host writes it
        guard authority == "\(claimedHost):\(port)" else { throw refused }
    }

    /// Compares two tokens in time that does not depend on where they differ.
    static func sameToken(_ a: String?, _ b: String) -> Bool {
        guard let a else { return false }
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<x.count { difference |= x[i] ^ y[i] }
        return difference == 0
    }

    /// Fields of an `application/x-www-form-urlencoded` body.
    static func form(_ body: ByteBuffer) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                .map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    static func html(_ body: String, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
        headers[HTTPField.Name("Content-Security-Policy")!] = "default-src 'self'; img-src 'self' blob:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;").replacingOccurrences(of: "'", with: "&#39;")
    }

    static let style = """
    <style>
      :root { color-scheme: light; }
      body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #f5f5f7; }
      header { display: flex; align-items: center; justify-content: space-between; gap: 1rem; padding: .6rem 1rem; background: #1d1d1f; color: white; }
      header h1 { font-size: 1.1rem; margin: 0; }
      main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
      section { background: white; border-radius: 10px; padding: 1rem; margin-bottom: 1rem; }
      h2 { font-size: 1.1rem; margin: 0 0 .6rem; }
      label { display: block; margin: .6rem 0 .2rem; }
      input, button { font: inherit; padding: .45rem .6rem; border-radius: 6px; border: 1px solid #c7c7cc; box-sizing: border-box; }
      button { background: #0a63c9; color: white; border: 0; cursor: pointer; }
      button.quiet { background: transparent; color: inherit; border: 1px solid #8e8e93; }
      :focus-visible { outline: 3px solid #8ab4f8; outline-offset: 2px; }
      .signin { max-width: 22rem; margin: 4rem auto; }
      .signin input, .signin button { width: 100%; }
      .error { color: #b00020; }
      #drop { border: 2px dashed #8e8e93; border-radius: 10px; padding: 1.2rem; text-align: center; }
      #drop.over { border-color: #0a63c9; background: #eef4fd; }
      #verdicts { list-style: none; padding: 0; margin: .6rem 0 0; }
      #verdicts li { padding: .2rem 0; }
      #verdicts .ok { color: #1b7f3b; }
      #grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(8.5rem, 1fr)); gap: .6rem; margin-top: 1rem; }
      #grid button { background: #f2f2f7; color: inherit; padding: .3rem; display: flex; flex-direction: column; align-items: center; gap: .2rem; font-size: .8rem; }
      #grid img { width: 8rem; height: 8rem; object-fit: contain; background: repeating-conic-gradient(#e5e5ea 0 25%, white 0 50%) 0 0 / 16px 16px; }
      #detail { margin-top: 1rem; }
      #detail dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
      #detail dd { margin: 0; word-break: break-all; }
      fieldset { border: 0; padding: 0; margin: 0; min-width: 0; }
      .row > div { min-width: 0; }
      select, input, textarea { max-width: 100%; }
      .row { display: flex; gap: 1rem; flex-wrap: wrap; align-items: center; }
      #compose input[type=text], #compose textarea, #compose select { width: 100%; font: inherit; padding: .45rem .6rem; border-radius: 6px; border: 1px solid #c7c7cc; box-sizing: border-box; }
      #audience-value.bad { border-color: #b00020; }
      #reach { margin: .4rem 0; }
      #previews { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr)); gap: .8rem; margin-top: .8rem; }
      .phone { background: #e5e5ea; border-radius: 14px; padding: .6rem; }
      .phone h3 { font-size: .8rem; margin: 0 0 .4rem; color: #3a3a3c; font-weight: 600; }
      .note { background: rgba(255,255,255,.92); border-radius: 12px; padding: .55rem .65rem; display: grid; grid-template-columns: 1fr auto; gap: .1rem .5rem; font-size: .85rem; }
      .android .note { border-radius: 8px; }
      .note .app { grid-column: 1 / -1; font-size: .7rem; color: #6e6e73; text-transform: uppercase; }
      .note strong { display: block; }
      .note .body { overflow: hidden; display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical; }
      .note.expanded .body { -webkit-line-clamp: unset; display: block; }
      .note .subtitle { display: block; font-weight: 600; font-size: .8rem; }
      .note .buttons { grid-column: 1 / -1; display: flex; gap: .35rem; margin-top: .3rem; }
      .note .button { flex: 1; text-align: center; background: rgba(120,120,128,.16); border-radius: 8px; padding: .3rem; font-size: .8rem; }
      .note .small { width: 2.6rem; height: 2.6rem; object-fit: cover; border-radius: 6px; grid-row: 2 / span 2; grid-column: 2; }
      .note .large { grid-column: 1 / -1; width: 100%; border-radius: 8px; margin-top: .3rem; }
      .ios .note .large { max-height: 14rem; object-fit: contain; background: #f2f2f7; }
      .android .note .large { aspect-ratio: 2 / 1; object-fit: cover; }
      #user-list { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .4rem; }
      #user-list button { background: #f2f2f7; color: inherit; }
      #user-detail ul { padding-left: 1.2rem; }
      #user-detail li button { margin-left: .5rem; padding: .1rem .5rem; background: #b00020; }
      button.danger { background: #b00020; }
      #funnel .step { display: flex; align-items: center; gap: .5rem; margin: .2rem 0; }
      #funnel .step span:first-child { flex: 0 0 6rem; }
      #funnel .step span:last-child { white-space: nowrap; }
      #funnel .bar { height: 1rem; background: #1a73e8; border-radius: 3px; min-width: 2px; }
      #timeline .sent { stroke: #1a73e8; fill: #1a73e8; } #timeline .displayed { stroke: #188038; fill: #188038; }
      #timeline .opened { stroke: #e37400; fill: #e37400; } #timeline text.axis { fill: #555; stroke: none; }
      #timeline polyline { fill: none; stroke-width: 2; } #timeline text { font-size: 12px; stroke: none; }
      .locale-row label { font-weight: normal; }
      #counts { display: grid; grid-template-columns: repeat(4, 1fr); gap: .5rem; text-align: center; margin-top: .6rem; }
      #counts div { background: #f2f2f7; border-radius: 8px; padding: .4rem; }
      #counts b { display: block; font-size: 1.4rem; }
      .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
    </style>
    """

    static func signInPage(error: String?) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>RichPush console · sign in</title>\(style)</head>
        <body><main><section class="signin">
        <h1>RichPush console</h1>
        <p>Sign in with an admin account.</p>
        \(error.map { "<p class=\"error\" id=\"error\" role=\"alert\">\(escape($0))</p>" } ?? "")
        <form method="post" action="/console/session">
          <label for="name">User name</label><input id="name" name="name" autocomplete="username" required autofocus>
          <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
          <p><button type="submit" id="signin">Sign in</button></p>
        </form>
        </section></main></body></html>
        """
    }

    static func forbiddenPage(user: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>RichPush console · not an admin</title>\(style)</head>
        <body><main><section class="signin">
        <h1>Not an admin</h1>
        <p id="forbidden">\(escape(user)) is not an admin. The console is for admins (<code>richpush users add NAME --admin</code>).</p>
        <p><a href="/console">Sign in as someone else</a></p>
        </section></main></body></html>
        """
    }

    static func appPage(user: String, csrf: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="csrf-token" content="\(csrf)">
        <title>RichPush console</title>\(style)</head>
        <body>
        <header><h1>RichPush console</h1>
          <form method="post" action="/console/session/end"><input type="hidden" name="csrf" value="\(csrf)">
            <span id="user">\(escape(user))</span> <button class="quiet" type="submit" id="signout">Sign out</button></form>
        </header>
        <main>
        <section aria-labelledby="media-title">
          <h2 id="media-title">Media</h2>
          <div id="drop">
            <p>Drop PNG, JPEG or GIF images here, or</p>
            <label for="files" class="visually-hidden">Choose images</label>
            <input type="file" id="files" accept="image/png,image/jpeg,image/gif" multiple>
          </div>
          <ul id="verdicts" aria-live="polite"></ul>
          <div id="grid" aria-label="Stored images"></div>
          <div id="detail" aria-live="polite"></div>
        </section>
        <section id="compose" aria-labelledby="compose-title">
          <h2 id="compose-title">Compose</h2>
          <fieldset><legend>Audience</legend>
            <div class="row">
              <label><input type="radio" name="audience" value="all" checked> Everyone</label>
              <label><input type="radio" name="audience" value="users"> Users</label>
              <label><input type="radio" name="audience" value="tags"> Tag expression</label>
            </div>
            <label for="audience-value" class="visually-hidden">Users (comma-separated) or tag expression</label>
            <input type="text" id="audience-value" placeholder="alice, bob  ·  or  sports &amp;&amp; !lang:fr" disabled>
            <label for="app">App</label><select id="app"><option value="">Every app</option></select>
          </fieldset>
          <p id="reach" aria-live="polite"></p>
          <label for="title">Title</label><input type="text" id="title" maxlength="200" value="">
          <label for="message">Message</label><textarea id="message" rows="2" maxlength="2000">Check this image out!</textarea>
          <div class="row">
            <div style="flex: 2 1 12rem"><label for="image">Image</label><select id="image"></select></div>
            <div style="flex: 1 1 8rem"><label for="mode">Mode</label>
              <select id="mode"><option value="alert">Alert (shown, with the image)</option><option value="silent">Silent (the app fetches)</option></select></div>
          </div>
          <div class="row">
            <div style="flex: 1 1 10rem"><label for="when">When</label>
              <select id="when"><option value="now">Now</option><option value="at">At a time</option><option value="local">At each user's local time</option></select></div>
            <div style="flex: 1 1 12rem" id="when-at" hidden><label for="send-at">Time (yours)</label><input type="datetime-local" id="send-at"></div>
            <div style="flex: 1 1 7rem" id="when-local" hidden><label for="local-time">Local time</label><input type="time" id="local-time" value="09:00"></div>
            <div style="flex: 1 1 10rem" id="when-date" hidden><label for="local-date">On (optional)</label><input type="date" id="local-date"></div>
          </div>
          <details id="languages"><summary>Other languages</summary>
            <p>Each user gets their language's words (fr-CA falls back to fr, then to the default language); the title and message above are the default language's.</p>
            <label for="default-locale">Default language</label><input type="text" id="default-locale" value="en" maxlength="35">
            <div id="locale-rows"></div>
            <p><button type="button" id="add-locale">Add a language</button></p>
          </details>
          <details id="options"><summary>Delivery options</summary>
            <div class="row">
              <div style="flex: 2 1 10rem"><label for="opt-subtitle">Subtitle</label><input type="text" id="opt-subtitle" maxlength="256"></div>
              <div style="flex: 1 1 7rem"><label for="opt-thread">Thread</label><input type="text" id="opt-thread" maxlength="64" placeholder="sales"></div>
              <div style="flex: 1 1 7rem"><label for="opt-category">Category</label><input type="text" id="opt-category" maxlength="64" placeholder="SALE"></div>
            </div>
            <div class="row">
              <div style="flex: 1 1 7rem"><label for="opt-sound">Sound</label><input type="text" id="opt-sound" maxlength="256" placeholder="default"></div>
              <div style="flex: 1 1 9rem"><label for="opt-level">Interruption</label><select id="opt-level"><option value="">Active (default)</option><option value="passive">Passive</option><option value="time-sensitive">Time-sensitive</option><option value="critical">Critical</option></select></div>
              <div style="flex: 1 1 7rem"><label for="opt-priority">Priority</label><select id="opt-priority"><option value="">High (default)</option><option value="normal">Normal</option></select></div>
            </div>
            <div class="row">
              <div style="flex: 1 1 7rem"><label for="opt-expiry">Expires after (hours)</label><input type="number" id="opt-expiry" min="0" max="672" step="any" placeholder="24"></div>
              <div style="flex: 1 1 7rem"><label for="opt-badge">Badge</label><select id="opt-badge"><option value="">None</option><option value="unread">Unread count</option></select></div>
              <div style="flex: 1 1 8rem"><label for="opt-pace">Pace (pushes a minute)</label><input type="number" id="opt-pace" min="1" max="1000000" step="1" placeholder="as fast as they go"></div>
              <div style="flex: 1 1 7rem"><label for="opt-channel">Android channel</label><input type="text" id="opt-channel" maxlength="64"></div>
            </div>
            <label for="opt-buttons">Buttons (up to 4: id:Title, comma-separated)</label><input type="text" id="opt-buttons" placeholder="buy:Buy now, later:Later">
          </details>
          <label for="preview-locale">Preview in</label><select id="preview-locale"><option value="">Default language</option></select>
          <div id="previews" aria-label="How phones will show it">
            <div class="phone ios"><h3>iPhone</h3><div class="note" id="ios-collapsed"></div></div>
            <div class="phone ios"><h3>iPhone, expanded</h3><div class="note expanded" id="ios-expanded"></div></div>
            <div class="phone android"><h3>Android</h3><div class="note" id="android-collapsed"></div></div>
            <div class="phone android"><h3>Android, expanded</h3><div class="note expanded" id="android-expanded"></div></div>
          </div>
          <p><button type="button" id="send">Send</button> <span id="send-result" aria-live="polite"></span></p>
        </section>
        <section id="people" aria-labelledby="people-title">
          <h2 id="people-title">Users and devices</h2>
          <p id="apps-summary" aria-live="polite"></p>
          <label for="user-search">Search users</label><input type="text" id="user-search" placeholder="part of a name" autocomplete="off">
          <ul id="user-list"></ul>
          <div id="user-detail" aria-live="polite"></div>
        </section>
        <section id="watch" aria-labelledby="watch-title" hidden>
          <h2 id="watch-title">Campaign <span id="campaign-id"></span>: <span id="campaign-status"></span></h2>
          <div id="counts" aria-live="polite">
            <div><b id="count-pending">0</b>pending</div><div><b id="count-sent">0</b>sent</div>
            <div><b id="count-failed">0</b>failed</div><div><b id="count-fetched">0</b>fetched</div>
          </div>
          <p><button type="button" id="cancel" class="danger" hidden>Cancel the rest</button> <span id="cancel-result" aria-live="polite"></span></p>
          <h3>Funnel</h3>
          <div id="funnel" aria-label="Queued, sent, displayed and opened"></div>
          <h3>Timeline</h3>
          <svg id="timeline" role="img" aria-label="Sent, displayed and opened per minute" viewBox="0 0 600 160" width="100%" height="160"></svg>
          <details id="failures-box"><summary>Failed devices and why</summary><ul id="failures"></ul></details>
        </section>
        </main>
        <script>
        "use strict";
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        const $ = (id) => document.getElementById(id);
        function text(tag, content, className) { const e = document.createElement(tag); e.textContent = content; if (className) e.className = className; return e; }
        async function call(method, path, body, type) {
          const headers = { "X-CSRF-Token": csrf };
          if (type) headers["Content-Type"] = type;
          try {
            const answer = await fetch(path, { method, headers, body, credentials: "same-origin" });
            const json = await answer.json().catch(() => ({}));
            return { ok: answer.ok, status: answer.status, json };
          } catch (error) {
            return { ok: false, status: 0, json: { detail: "The server did not answer (" + error.message + "); try again." } };
          }
        }
        function size(bytes) { return bytes < 1024 ? bytes + " B" : bytes < 1048576 ? (bytes / 1024).toFixed(1) + " KB" : (bytes / 1048576).toFixed(1) + " MB"; }
        async function loadMedia() {
          const { ok, json } = await call("GET", "/console/api/media");
          if (!ok) return;
          const grid = $("grid");
          grid.replaceChildren();
          for (const item of json) {
            const button = document.createElement("button");
            button.type = "button";
            button.dataset.sha256 = item.sha256;
            const img = document.createElement("img");
            img.src = "/console/media/" + item.sha256 + "?variant=thumb";
            img.alt = item.names.length ? item.names.join(", ") : item.sha256.slice(0, 12);
            img.loading = "lazy";
            button.append(img, text("span", item.names[0] || item.sha256.slice(0, 12)), text("span", item.width + "×" + item.height + " · " + size(item.size)));
            button.addEventListener("click", () => showDetail(item));
            grid.append(button);
          }
          const select = $("image"), chosen = select.value;
          select.replaceChildren(...json.map((item) => { const o = text("option", (item.names[0] || item.sha256.slice(0, 12)) + " (" + item.width + "×" + item.height + ")"); o.value = item.sha256; return o; }));
          if (chosen) select.value = chosen;
          preview();
        }
        function showDetail(item) {
          const detail = $("detail");
          const list = document.createElement("dl");
          const rows = [["SHA-256", item.sha256], ["Type", item.contentType], ["Size", item.width + "×" + item.height + ", " + size(item.size)],
                        ["Names", item.names.join(", ") || "none"], ["Used by", item.usedBy.length ? item.usedBy.join(", ") : "nothing yet"]];
          for (const [k, v] of rows) list.append(text("dt", k), text("dd", v));
          detail.replaceChildren(text("h3", "Image " + item.sha256.slice(0, 12)), list);
        }
        async function upload(files) {
          for (const file of files) {
            const { ok, json } = await call("POST", "/console/api/media", file, "application/octet-stream");
            const line = ok ? text("li", "✓ " + file.name + ": stored as " + json.sha256.slice(0, 12) + " (" + json.contentType + ", " + json.width + "×" + json.height + ")" +
                                         (json.stripped.length ? ", removed " + json.stripped.join(", ") : ""), "ok")
                            : text("li", "✗ " + file.name + ": " + (json.detail || "refused"), "error");
            $("verdicts").prepend(line);
          }
          await loadMedia();
        }
        $("files").addEventListener("change", (e) => upload(e.target.files));
        const drop = $("drop");
        drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
        drop.addEventListener("dragleave", () => drop.classList.remove("over"));
        drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); upload(e.dataTransfer.files); });
        function audience() {
          const kind = document.querySelector('input[name="audience"]:checked').value;
          const value = $("audience-value").value.trim();
          const app = $("app").value ? "&app=" + encodeURIComponent($("app").value) : "";
          if (kind === "users") return { query: "users=" + encodeURIComponent(value) + app, body: { users: value.split(",").map((s) => s.trim()).filter(Boolean) } };
          if (kind === "tags") return { query: "tags=" + encodeURIComponent(value) + app, body: { tags: value } };
          return { query: "all=1" + app, body: { all: true } };
        }
        async function loadApps() {
          const { ok, json } = await call("GET", "/console/api/apps");
          if (!ok) return;
          for (const a of json) {
            const option = document.createElement("option");
            option.value = a.name;
            option.textContent = a.name + " · " + a.devices + " device" + (a.devices === 1 ? "" : "s");
            $("app").append(option);
          }
          $("apps-summary").textContent = "Apps: " + json.map((a) => a.name + " (" + a.devices + " device" + (a.devices === 1 ? "" : "s") + ")").join(", ");
        }
        $("app").addEventListener("change", checkAudience);
        let reachTimer, reachAsked = 0;
        function checkAudience() {
          const kind = document.querySelector('input[name="audience"]:checked').value;
          $("audience-value").disabled = kind === "all";
          $("send").disabled = true; // until this audience is checked
          clearTimeout(reachTimer);
          reachTimer = setTimeout(async () => {
            const asked = ++reachAsked;
            const { ok, json } = await call("GET", "/console/api/audience?" + audience().query);
            if (asked !== reachAsked) return; // a later answer is coming
            $("audience-value").classList.toggle("bad", !ok);
            $("reach").textContent = ok ? "Will reach " + json.users + " user" + (json.users === 1 ? "" : "s") + " on " + json.devices + " device" + (json.devices === 1 ? "" : "s") + "."
                                        : (json.detail || "Not an audience.");
            $("send").disabled = !ok || json.devices === 0;
          }, 250);
        }
        for (const radio of document.querySelectorAll('input[name="audience"]')) radio.addEventListener("change", checkAudience);
        $("audience-value").addEventListener("input", checkAudience);
        function localeRows() {
          return [...document.querySelectorAll("#locale-rows .locale-row")].map((row) => ({
            locale: row.querySelector(".locale-tag").value.trim(), title: row.querySelector(".locale-title").value, message: row.querySelector(".locale-message").value }))
            .filter((r) => r.locale);
        }
        function words() {
          const chosen = $("preview-locale").value;
          const row = localeRows().find((r) => r.locale === chosen);
          return row ? { title: row.title || $("title").value, message: row.message || $("message").value } : { title: $("title").value, message: $("message").value };
        }
        function refreshPreviewLocales() {
          const chosen = $("preview-locale").value;
          const options = [new Option("Default language (" + ($("default-locale").value || "en") + ")", "")];
          for (const r of localeRows()) options.push(new Option(r.locale, r.locale));
          $("preview-locale").replaceChildren(...options);
          $("preview-locale").value = localeRows().some((r) => r.locale === chosen) ? chosen : "";
          preview();
        }
        $("add-locale").addEventListener("click", () => {
          const row = document.createElement("div");
          row.className = "locale-row row";
          const n = document.querySelectorAll("#locale-rows .locale-row").length + 1;
          row.innerHTML = '<div style="flex: 0 1 6rem"><label>Language <input type="text" class="locale-tag" maxlength="35" placeholder="fr-CA"></label></div>'
            + '<div style="flex: 1 1 10rem"><label>Title <input type="text" class="locale-title" maxlength="200"></label></div>'
            + '<div style="flex: 2 1 14rem"><label>Message <input type="text" class="locale-message" maxlength="2000"></label></div>';
          row.querySelector(".locale-tag").id = "locale-tag-" + n;
          for (const input of row.querySelectorAll("input")) input.addEventListener("input", refreshPreviewLocales);
          $("locale-rows").append(row);
          row.querySelector(".locale-tag").focus();
        });
        $("default-locale").addEventListener("input", refreshPreviewLocales);
        $("preview-locale").addEventListener("change", preview);
        $("when").addEventListener("change", () => {
          $("when-at").hidden = $("when").value !== "at";
          $("when-local").hidden = $("when-date").hidden = $("when").value !== "local";
        });
        function note(target, expanded, android) {
          const image = $("image").value, alert = $("mode").value === "alert";
          const parts = [text("span", android ? "My App · now" : "MY APP", "app")];
          const words = document.createElement("div");
          const chosen = window.words();
          if (chosen.title) words.append(text("strong", chosen.title));
          if (alert && $("opt-subtitle").value) words.append(text("span", $("opt-subtitle").value, "subtitle"));
          words.append(text("span", alert ? chosen.message : "(silent: nothing shown until the app fetches and shows it)", "body"));
          parts.push(words);
          if (alert && image) {
            const img = document.createElement("img");
            // What the phone gets: the push variant when expanded, its small crop when not.
            img.src = "/console/media/" + image + (expanded ? "?variant=push" : "?variant=thumb");
            img.alt = "";
            img.className = expanded ? "large" : "small";
            parts.push(img);
          }
          // Buttons show when a notification is expanded (a long press on iOS, the arrow on Android).
          const shown = buttons().slice(0, 4);
          if (alert && expanded && shown.length) {
            const row = document.createElement("div");
            row.className = "buttons";
            row.append(...shown.map((b) => text("span", b.title, "button")));
            parts.push(row);
          }
          target.replaceChildren(...parts);
        }
        // Buttons as the API takes them, from "id:Title, id:Title".
        function buttons() {
          return $("opt-buttons").value.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
            const i = s.indexOf(":");
            return i < 0 ? { id: s, title: s } : { id: s.slice(0, i).trim(), title: s.slice(i + 1).trim() };
          });
        }
        // SPEC §22: what the options section asks for, into the campaign's body.
        function deliveryOptions(body) {
          const o = {};
          const put = (key, value) => { if (value !== "") o[key] = value; };
          put("subtitle", $("opt-subtitle").value); put("threadId", $("opt-thread").value.trim()); put("category", $("opt-category").value.trim());
          put("sound", $("opt-sound").value); put("interruptionLevel", $("opt-level").value); put("priority", $("opt-priority").value);
          put("androidChannelId", $("opt-channel").value.trim());
          if ($("opt-expiry").value !== "") o.expiresIn = Math.round(Number($("opt-expiry").value) * 3600);
          const b = buttons();
          if (b.length) o.actions = b;
          if (Object.keys(o).length) body.options = o;
          if ($("opt-badge").value) body.badge = $("opt-badge").value;
          if ($("opt-pace").value !== "") body.ratePerMinute = Math.round(Number($("opt-pace").value));
        }
        function preview() {
          note($("ios-collapsed"), false, false); note($("ios-expanded"), true, false);
          note($("android-collapsed"), false, true); note($("android-expanded"), true, true);
        }
        for (const id of ["title", "message", "image", "mode", "opt-subtitle", "opt-buttons"]) $(id).addEventListener("input", preview);
        $("send").addEventListener("click", async () => {
          const body = { audience: audience().body, message: $("message").value, mode: $("mode").value, payload: $("image").value || undefined,
                         app: $("app").value || undefined };
          if ($("title").value) body.title = $("title").value;
          if ($("when").value === "at" && $("send-at").value) body.sendAt = new Date($("send-at").value).toISOString().replace(/\\.\\d{3}Z$/, "Z");
          if ($("when").value === "local") { body.localTime = $("local-time").value; if ($("local-date").value) body.localDate = $("local-date").value; }
          deliveryOptions(body);
          const rows = localeRows();
          if (rows.length) {
            body.defaultLocale = $("default-locale").value.trim() || "en";
            body.content = { [body.defaultLocale]: { title: $("title").value || undefined, message: $("message").value } };
            for (const r of rows) body.content[r.locale] = { title: r.title || undefined, message: r.message || undefined };
          }
          $("send").disabled = true; // one click, one campaign
          $("send-result").textContent = "Sending…";
          const { ok, json } = await call("POST", "/console/api/campaigns", JSON.stringify(body), "application/json");
          $("send-result").textContent = ok ? "Sent as campaign " + json.id + "." : (json.detail || "Refused.");
          $("send").disabled = false;
          if (ok) watch(json.id);
        });
        let watching = 0;
        async function watch(id) {
          const generation = ++watching; // a newer campaign's watch replaces this one
          $("watch").hidden = false;
          $("campaign-id").textContent = id;
          // Every half second while it sends, then every few seconds for fetches, for ten minutes at most.
          for (let i = 0; i < 600 && generation === watching; i++) {
            const { ok, status, json } = await call("GET", "/console/api/campaigns/" + id);
            if (generation !== watching) return;
            if (status === 401 || status === 403 || status === 404) { $("campaign-status").textContent = json.detail || "gone"; return; }
            let done = false;
            if (ok) {
              const c = json.campaign;
              $("campaign-status").textContent = c.status + (c.sendAt ? " for " + new Date(c.sendAt).toLocaleString() : c.localTime ? " for " + c.localTime + " local" + (c.localDate ? " on " + c.localDate : "") : "")
                + (c.ratePerMinute ? ", " + c.ratePerMinute + " a minute" + (c.expectedEnd ? ", until about " + new Date(c.expectedEnd).toLocaleTimeString() : "") : "");
              $("cancel").hidden = !(c.status === "scheduled" || c.status === "sending");
              for (const k of ["pending", "sent", "failed", "fetched"]) $("count-" + k).textContent = c[k];
              $("failures").replaceChildren(...json.failures.map((f) => text("li", f.target + "…: " + f.reason)));
              done = (c.status === "done" && c.pending === 0) || c.status === "cancelled";
              const stats = await call("GET", "/console/api/campaigns/" + id + "/stats");
              if (stats.ok && generation === watching) drawStats(stats.json);
            }
            await new Promise((r) => setTimeout(r, done ? 3000 : ok ? 500 : 2000));
          }
        }
        function drawStats(stats) {
          const steps = [["queued", stats.queued], ["sent", stats.sent], ["displayed", stats.displayed], ["opened", stats.opened]];
          const top = Math.max(1, stats.queued, stats.sent);
          $("funnel").replaceChildren(...steps.map(([name, n]) => {
            const row = document.createElement("div");
            row.className = "step";
            const bar = document.createElement("div");
            bar.className = "bar";
            bar.style.width = (100 * n / top) * 0.6 + "%";
            row.append(text("span", name), bar, text("span", String(n) + (name !== "queued" && stats.queued ? " (" + Math.round(100 * n / stats.queued) + "%)" : "")));
            return row;
          }), ...Object.entries(stats.failures).map(([reason, n]) => text("p", "Failed: " + reason + " × " + n, "error")));
          const svg = $("timeline"), ns = "http://www.w3.org/2000/svg", points = stats.timeline;
          const most = Math.max(1, ...points.flatMap((p) => [p.sent, p.displayed, p.opened]));
          const x = (i) => points.length < 2 ? 300 : 30 + i * 560 / (points.length - 1), y = (n) => 140 - n * 120 / most;
          const series = ["sent", "displayed", "opened"];
          const shapes = series.map((name) => {
            const line = document.createElementNS(ns, "polyline");
            line.setAttribute("class", name);
            line.setAttribute("points", points.map((p, i) => x(i) + "," + y(p[name])).join(" "));
            return line;
          });
          // A dot per minute too: one minute is no line.
          const dots = series.flatMap((name) => points.map((p, i) => {
            const dot = document.createElementNS(ns, "circle");
            dot.setAttribute("class", name); dot.setAttribute("cx", x(i)); dot.setAttribute("cy", y(p[name])); dot.setAttribute("r", 3);
            return dot;
          }));
          const label = (content, lx, ly, className) => {
            const t = document.createElementNS(ns, "text"); t.setAttribute("x", lx); t.setAttribute("y", ly); t.setAttribute("class", className); t.textContent = content; return t;
          };
          const legend = [label("● sent", 30, 156, "sent"), label("● displayed", 100, 156, "displayed"), label("● opened", 200, 156, "opened"),
                          label(String(most) + "/min", 0, 12, "axis")];
          if (points.length) {
            const time = (p) => new Date(p.minute).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
            legend.push(label(time(points[0]), 300, 156, "axis"));
            if (points.length > 1) legend.push(label(time(points[points.length - 1]), 540, 156, "axis"));
          }
          svg.replaceChildren(...shapes, ...dots, ...legend);
        }
        $("cancel").addEventListener("click", async () => {
          const id = $("campaign-id").textContent;
          $("cancel").disabled = true;
          const { ok, json } = await call("DELETE", "/console/api/campaigns/" + encodeURIComponent(id));
          $("cancel-result").textContent = ok ? "Cancelled: " + json.sent + " sent before." : (json.detail || "Refused.");
          $("cancel").disabled = false;
          if (ok) $("cancel").hidden = true;
        });
        let searchAsked = 0;
        async function searchUsers() {
          const asked = ++searchAsked;
          const { ok, json } = await call("GET", "/console/api/users?q=" + encodeURIComponent($("user-search").value.trim()));
          if (!ok || asked !== searchAsked) return;
          $("user-list").replaceChildren(...json.map((u) => {
            const li = document.createElement("li"), button = document.createElement("button");
            button.type = "button";
            button.textContent = u.name + (u.admin ? " (admin)" : "") + " · " + u.devices + " device" + (u.devices === 1 ? "" : "s");
            button.addEventListener("click", () => showUser(u.name));
            li.append(button);
            return li;
          }));
        }
        async function showUser(name) {
          const { ok, json } = await call("GET", "/console/api/users/" + encodeURIComponent(name));
          if (!ok) { $("user-detail").replaceChildren(text("p", json.detail || "Not found.", "error")); return; }
          const devices = document.createElement("ul");
          for (const d of json.devices) {
            const li = text("li", d.app + " · " + d.platform + " " + d.handle + "…" + (d.tags.length ? " [" + d.tags.join(", ") + "]" : ""));
            const remove = document.createElement("button");
            remove.type = "button";
            remove.textContent = "Remove";
            remove.setAttribute("aria-label", "Remove device " + d.handle);
            remove.addEventListener("click", async () => {
              const answer = await call("DELETE", "/console/api/registrations/" + encodeURIComponent(d.registrationId) + "?user=" + encodeURIComponent(name));
              if (answer.ok) { await showUser(name); searchUsers(); } else { li.append(text("span", " " + (answer.json.detail || "refused"), "error")); }
            });
            li.append(remove);
            devices.append(li);
          }
          const pushes = document.createElement("ul");
          for (const p of json.pushes) pushes.append(text("li", "#" + p.id + " " + (p.title ? p.title + ": " : "") + p.message + " (" + p.mode + (p.read ? ", fetched" : "") + ")"));
          $("user-detail").replaceChildren(text("h3", json.name), text("h4", json.devices.length + " device" + (json.devices.length === 1 ? "" : "s")), devices,
                                           text("h4", "Last pushes"), json.pushes.length ? pushes : text("p", "none yet"));
        }
        $("user-search").addEventListener("input", () => { clearTimeout(window.searchTimer); window.searchTimer = setTimeout(searchUsers, 200); });
        loadMedia();
        loadApps();
        checkAudience();
        searchUsers();
        </script>
        </body></html>
        """
    }
}

/// What the console lists for an image.
struct ConsoleMediaItem: Codable, Sendable {
    var sha256: String
    var contentType: String
    var width: Int
    var height: Int
    var size: Int64
    var names: [String]
    /// Who references it: `notification:12`, `campaign:3`, …
    var usedBy: [String]
}

/// Who a campaign would reach.
struct ConsoleReach: Codable, Sendable {
    var users: Int
    var devices: Int
}

/// An app and how many devices are registered to it.
struct ConsoleApp: Codable, Sendable {
    var name: String
    var devices: Int
}

/// A user in the console's list.
struct ConsoleUser: Codable, Sendable {
    var name: String
    var admin: Bool
    var devices: Int
    var created: String
}

/// A device in the console.
struct ConsoleDevice: Codable, Sendable {
    var registrationId: String
    var platform: String
    /// The app it belongs to.
    var app: String
    /// The token or handle, cut short.
    var handle: String
    var tags: [String]
    var updated: String
}

/// One of a user's last pushes.
struct ConsolePush: Codable, Sendable {
    var id: Int64
    var title: String?
    var message: String
    var mode: PushMode
    var read: Bool
    var created: String
}

/// A user's devices and last pushes.
struct ConsoleUserDetail: Codable, Sendable {
    var name: String
    var devices: [ConsoleDevice]
    var pushes: [ConsolePush]
}

/// A failed delivery, as the console shows it.
struct ConsoleFailure: Codable, Sendable {
    /// The device (its token or handle, cut short).
    var target: String
    var reason: String
}

/// A campaign's counts and its failures.
struct ConsoleProgress: Codable, Sendable {
    var campaign: CampaignResponse
    var failures: [ConsoleFailure]
}

extension Services {
    /// The principal of the console's session cookie; nil without a live session.
    func consolePrincipal(_ request: Request) async -> Principal? {
        guard let token = Console.sessionToken(request) else { return nil }
        return try? await authenticator.authenticate("Bearer \(token)")
    }

    /// The admin of a console API request: 401 without a session, 403 for a non-admin, and for
    /// anything but GET and HEAD also 403 without the session's CSRF token or from another site.
    func consoleAdmin(_ request: Request) async throws -> Principal {
        guard let principal = await consolePrincipal(request), let token = principal.sessionToken else {
            throw Problem(.unauthorized, "sign in at /console first")
        }
        guard principal.admin else { throw Problem(.forbidden, "\(principal.user) is not an admin") }
        if request.method != .get && request.method != .head {
            try Console.checkSameOrigin(request)
            guard Console.sameToken(request.headers[HTTPField.Name("X-CSRF-Token")!], Console.csrfToken(for: token)) else {
                throw Problem(.forbidden, "the console's CSRF token is missing or wrong: reload /console")
            }
        }
        return principal
    }

    func consolePage(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        guard let principal = await consolePrincipal(request), let token = principal.sessionToken else {
            return Console.html(Console.signInPage(error: nil))
        }
        guard principal.admin else { return Console.html(Console.forbiddenPage(user: principal.user), status: .forbidden) }
        return Console.html(Console.appPage(user: principal.user, csrf: Console.csrfToken(for: token)))
    }

    /// `POST /console/session`: the sign-in form.
    func consoleSignIn(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        do {
            try Console.checkSameOrigin(request, required: true) // no login CSRF
        } catch let problem as Problem {
            return Console.html(Console.signInPage(error: problem.detail), status: .forbidden)
        }
        let fields = Console.form(try await request.body.collect(upTo: 16 * 1024))
        guard let name = fields["name"], let password = fields["password"], !name.isEmpty else {
            return Console.html(Console.signInPage(error: "Give a user name and a password."), status: .badRequest)
        }
        let basic = "Basic " + Data("\(name):\(password)".utf8).base64EncodedString()
        let principal: Principal
        do {
            principal = try await authenticator.authenticate(basic, from: context.clientAddress)
        } catch let problem as Problem {
            let words = problem.status == .unauthorized ? "That user name and password do not match." : problem.detail
            return Console.html(Console.signInPage(error: words), status: problem.status,
                                headers: HTTPFields(problem.headers.filter { $0.name == .retryAfter }))
        }
        guard principal.admin else { return Console.html(Console.forbiddenPage(user: principal.user), status: .forbidden) }
        let session = try await sessions.create(for: principal.user, lifetime: configuration.sessionLifetime)
        authenticator.remember(session: session.token, of: Principal(user: principal.user, admin: true), expires: session.expires)
        // Secure when this server speaks HTTPS, its public URL is https://, or a trusted proxy
        // (`--trusted-proxy`) says the client used HTTPS; anyone else's X-Forwarded-Proto is ignored.
        let httpsURL = configuration.publicURL?.lowercased().hasPrefix("https://") == true
        let secure = configuration.tlsCertificatePath != nil || httpsURL || context.forwardedProto == "https" ? "; Secure" : ""
        let cookie = "\(Console.cookieName)=\(session.token); Path=/console; HttpOnly; SameSite=Strict; Max-Age=\(Int(configuration.sessionLifetime))\(secure)"
        return Response(status: .seeOther, headers: [.location: "/console", .setCookie: cookie, .cacheControl: "no-store"])
    }

    /// `POST /console/session/end`: signs out (the form carries the CSRF token).
    func consoleSignOut(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try Console.checkSameOrigin(request)
        guard let token = Console.sessionToken(request) else {
            return Response(status: .seeOther, headers: [.location: "/console"])
        }
        let fields = Console.form(try await request.body.collect(upTo: 4096))
        guard Console.sameToken(fields["csrf"], Console.csrfToken(for: token)) else {
            throw Problem(.forbidden, "the console's CSRF token is missing or wrong: reload /console")
        }
        _ = try await sessions.revoke(token)
        authenticator.forget("Bearer \(token)")
        return Response(status: .seeOther, headers: [.location: "/console", .setCookie: "\(Console.cookieName)=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0"])
    }

    func consoleMediaList(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let items = try await media.list(variants: false)
        let uses = try await media.references()
        return try encode(items.map { item in
            ConsoleMediaItem(sha256: item.id.hex, contentType: item.info.contentType, width: item.info.width, height: item.info.height,
                             size: Int64(item.size), names: item.names, usedBy: uses[item.id] ?? [])
        })
    }

    func consoleUpload(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request) // an admin may name what it uploads
        return try await uploadMedia(request, context)
    }

    /// `GET /console/api/audience?all=1 | users=a,b | tags=expr`: who a campaign would reach,
    /// or the expression's fault in words (400), as the admin types.
    func consoleAudience(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let admin = try await consoleAdmin(request)
        let query = request.uri.queryParameters
        let audience: Audience
        do {
            if let tags = query.get("tags") {
                audience = .tags(try TagExpression(tags))
            } else if let users = query.get("users") {
                audience = try .listing(users.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            } else {
                audience = .all
            }
        } catch let error as CoreError {
            throw Problem(.badRequest, error.message)
        }
        let app = try knownApp(query.get("app").map { String($0) }, for: admin)
        let (users, devices) = try await campaigns.reach(audience, app: app)
        return try encode(ConsoleReach(users: users, devices: devices))
    }

    /// `GET /console/api/apps`: this server's apps (and any other that devices are registered to), with their devices.
    func consoleApps(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let counts = try await registrations.devicesByApp()
        let names = Set([AppName.default]).union(configuration.apps.keys).union(counts.keys)
        return try encode(names.sorted().map { ConsoleApp(name: $0, devices: counts[$0] ?? 0) })
    }

    /// `POST /console/api/campaigns`: sends a campaign, as `POST /api/admin/campaigns` does.
    func consoleSend(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request)
        return try await createCampaign(request, context)
    }

    /// `GET /console/api/campaigns/{id}/stats`: as `GET /api/admin/campaigns/{id}/stats` answers it.
    func consoleStats(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request)
        return try await campaignStats(request, context)
    }

    /// `DELETE /console/api/campaigns/{id}`: cancels it, as `DELETE /api/admin/campaigns/{id}` does.
    func consoleCancel(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        var context = context
        context.principal = try await consoleAdmin(request)
        return try await cancelCampaign(request, context)
    }

    /// `GET /console/api/campaigns/{id}`: its counts, and the reasons of its failed deliveries.
    func consoleWatch(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let raw = try context.parameters.require("id")
        guard let id = Int64(raw), id > 0, let progress = try await campaigns.progress(id) else {
            throw Problem(.notFound, "no campaign \(raw.prefix(40))")
        }
        let failed = try await deliveries.failed(campaign: id).map { ConsoleFailure(target: String($0.target.prefix(24)), reason: $0.reason ?? "") }
        return try encode(ConsoleProgress(campaign: CampaignResponse(progress), failures: failed))
    }

    /// `GET /console/api/users?q=`: users whose name contains `q`, with their device counts.
    func consoleUsers(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let query: String? = request.uri.queryParameters.get("q").map { String($0) }
        let search = query.flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        return try encode(try await users.overview(matching: search, limit: 200).map {
            ConsoleUser(name: $0.user.name, admin: $0.user.admin, devices: $0.devices, created: $0.user.createdAt.formatted(.iso8601))
        })
    }

    /// `GET /console/api/users/{name}`: a user's devices and last ten pushes.
    func consoleUser(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        let name = try context.parameters.require("name")
        guard try await users.credentials(of: name) != nil else { throw Problem(.notFound, "no user \(name.prefix(80))") }
        let devices = try await registrations.list(for: name).filter { $0.handle != nil }.map {
            ConsoleDevice(registrationId: $0.id, platform: $0.platform ?? "apns", app: $0.app, handle: String(($0.handle ?? "").prefix(24)),
                          tags: $0.tags.filter { !$0.hasPrefix("username:") }, updated: $0.updatedAt.formatted(.iso8601))
        }
        let pushes = try await notifications.list(for: name, limit: 10).map {
            ConsolePush(id: $0.id, title: $0.title, message: $0.message, mode: $0.mode, read: $0.read, created: $0.createdAt.formatted(.iso8601))
        }
        return try encode(ConsoleUserDetail(name: name, devices: devices, pushes: pushes))
    }

    /// `DELETE /console/api/registrations/{id}?user=`: removes a device, as its owner's
    /// `DELETE /api/register/{id}` does.
    func consoleRemoveDevice(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        guard let owner: String = request.uri.queryParameters.get("user").map({ String($0) }) else {
            throw Problem(.badRequest, "name the device's owner: ?user=NAME")
        }
        var context = context
        context.principal = Principal(user: owner, admin: false)
        return try await deleteRegistration(request, context)
    }

    func consoleImage(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        _ = try await consoleAdmin(request)
        return try await serveImage(request, context, cacheControl: "private, max-age=31536000, immutable")
    }
}
