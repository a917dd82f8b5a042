"use strict";
// A RichPush Web Push message: {"richId","richMessage","richType","richUrl","title"}, and with
// options (docs/api.md#options-badges-and-paced-sends) "subtitle", "actions" ([{"action","title"}], the buttons) and "badgeCount".
// Each is shown under the tag "richpush-<richId>", so a later message about it replaces it (SPEC §26):
// - a changed notification comes in the same shape with "richUpdate":true, and "silent":true to replace it
//   without sound or vibration; it is shown again without alerting anew (renotify: false);
// - a withdrawn one comes as {"richId","richpushRetract":"rp-<id>","richMessage","title"} (title may be absent,
//   no richUrl): its text is shown quietly in place of the old one, with no image, and a click only closes it.
self.addEventListener("push", (event) => {
  const message = event.data ? event.data.json() : {};
  const tag = "richpush-" + message.richId;
  if (message.richpushRetract) {
    event.waitUntil(self.registration.showNotification(message.title || "RichPush", {
      body: message.richMessage || "", tag, renotify: false, silent: true, data: {} }));
    return;
  }
  const body = [message.subtitle, message.richMessage].filter(Boolean).join("\n");
  const options = { body, image: message.richUrl, tag, actions: message.actions || [], data: { url: message.richUrl } };
  if (message.richUpdate) Object.assign(options, { renotify: false, silent: !!message.silent });
  const shown = self.registration.showNotification(message.title || "RichPush", options);
  const badge = typeof message.badgeCount === "number" && navigator.setAppBadge ? navigator.setAppBadge(message.badgeCount) : Promise.resolve();
  event.waitUntil(Promise.all([shown, badge.catch(() => {})]));
});
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  // A button's id is event.action; the demo opens the payload for any of them, as for the body. A withdrawn
  // notification has no payload: the click only closes it.
  if (event.notification.data && event.notification.data.url) event.waitUntil(clients.openWindow(event.notification.data.url));
});
