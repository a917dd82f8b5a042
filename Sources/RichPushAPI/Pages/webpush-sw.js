"use strict";
// A RichPush Web Push message: {"richId","richMessage","richType","richUrl","title"}, and with
// options (docs/api.md#options-badges-and-paced-sends) "subtitle", "actions" ([{"action","title"}], the buttons) and "badgeCount".
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
