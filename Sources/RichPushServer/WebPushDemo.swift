import Foundation
import HTTPTypes
import Hummingbird

/// `/webpush-demo` and its service worker (SPEC §12): a page where a browser subscribes with the
/// server's VAPID key and registers the subscription for an account, then shows what arrives.
/// No build step and no CDN: the page and the worker are these two strings.
enum WebPushDemo {
    static let page = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>RichPush · Web Push</title>
    <style>
      body { font: 16px/1.5 system-ui, sans-serif; max-width: 34rem; margin: 2rem auto; padding: 0 1rem; color: #1d1d1f; }
      h1 { font-size: 1.4rem; }
      label { display: block; margin: .6rem 0 .2rem; }
      input, button { font: inherit; padding: .45rem .6rem; width: 100%; box-sizing: border-box; }
      button { margin-top: 1rem; background: #0a63c9; color: white; border: 0; border-radius: 6px; cursor: pointer; }
      button:focus { outline: 3px solid #8ab4f8; }
      #status { margin-top: 1rem; padding: .6rem; background: #f2f2f7; border-radius: 6px; min-height: 1.5em; }
      code { word-break: break-all; font-size: .85em; }
    </style>
    </head>
    <body>
    <h1>Web Push for RichPush</h1>
    <p>Subscribe this browser for an account: rich notifications sent to the account (one by one or in a
    campaign) then appear here, with their image.</p>
    <p>Server key: <code id="key">loading…</code></p>
    <form id="form">
      <label for="user">User</label><input id="user" autocomplete="username" required>
      <label for="password">Password</label><input id="password" type="password" autocomplete="current-password" required>
      <button id="subscribe" type="submit">Subscribe this browser</button>
    </form>
    <div id="status" role="status" aria-live="polite">Loading…</div>
    <script>
    "use strict";
    const status = (text) => { document.getElementById("status").textContent = text; };
    const bytes = (base64url) => {
      const text = atob(base64url.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - base64url.length % 4) % 4));
      return Uint8Array.from(text, (c) => c.charCodeAt(0));
    };
    let serverKey = null, worker = null;
    async function start() {
      const answer = await fetch("/api/webpush/key");
      if (!answer.ok) { document.getElementById("key").textContent = "none"; status("This server sends no Web Push: start serve with --vapid-key and --vapid-subject."); return; }
      serverKey = (await answer.json()).publicKey;
      document.getElementById("key").textContent = serverKey;
      if (!("serviceWorker" in navigator) || !("PushManager" in window)) { status("This browser has no Web Push."); return; }
      worker = await navigator.serviceWorker.register("/webpush-sw.js");
      status("Ready: sign in and subscribe.");
    }
    async function subscribe(event) {
      event.preventDefault();
      if (!worker) return;
      try {
        status("Asking the browser's push service for a subscription…");
        const subscription = await worker.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes(serverKey) });
        const basic = "Basic " + btoa(unescape(encodeURIComponent(document.getElementById("user").value + ":" + document.getElementById("password").value)));
        const created = await fetch("/api/register", { method: "POST", headers: { Authorization: basic } });
        if (!created.ok) throw new Error("POST /api/register: " + ((await created.json()).detail || created.status));
        const id = (await created.json()).registrationId;
        const saved = await fetch("/api/register/" + encodeURIComponent(id), {
          method: "PUT", headers: { Authorization: basic, "Content-Type": "application/json" },
          body: JSON.stringify({ platform: "web", handle: subscription.toJSON() }) });
        if (!saved.ok) throw new Error("PUT /api/register: " + ((await saved.json()).detail || saved.status));
        status("Subscribed as registration " + id + ". Notifications for this account will appear here.");
      } catch (error) {
        status("Not subscribed: " + error.message);
      }
    }
    document.getElementById("form").addEventListener("submit", subscribe);
    start().catch((error) => status("Cannot start: " + error.message));
    </script>
    </body>
    </html>
    """#

    static let serviceWorker = #"""
    "use strict";
    // A RichPush Web Push message: {"richId","richMessage","richType","richUrl","title"}, and with
    // options (SPEC §22) "subtitle", "actions" ([{"action","title"}], the buttons) and "badgeCount".
    self.addEventListener("push", (event) => {
      const message = event.data ? event.data.json() : {};
      const body = [message.subtitle, message.richMessage].filter(Boolean).join("\n");
      const shown = self.registration.showNotification(message.title || "RichPush", {
        body, image: message.richUrl, tag: "richpush-" + message.richId, actions: message.actions || [],
        data: { url: message.richUrl } });
      const badge = typeof message.badgeCount === "number" && navigator.setAppBadge ? navigator.setAppBadge(message.badgeCount) : Promise.resolve();
      event.waitUntil(Promise.all([shown, badge.catch(() => {})]));
    });
    self.addEventListener("notificationclick", (event) => {
      event.notification.close();
      // A button's id is event.action; the demo opens the payload for any of them, as for the body.
      if (event.notification.data && event.notification.data.url) event.waitUntil(clients.openWindow(event.notification.data.url));
    });
    """#

    static func response(_ text: String, contentType: String) -> Response {
        let buffer = ByteBuffer(string: text)
        return Response(status: .ok, headers: [.contentType: contentType, .contentLength: String(buffer.readableBytes),
                                              .cacheControl: "no-cache", HTTPField.Name("Content-Security-Policy")!: "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'"],
                        body: .init(byteBuffer: buffer))
    }
}
