"use strict";
// A RichPush Web Push message: {"richId","richMessage","richType","richUrl","title"}, and with
// options (docs/api.md#options-badges-and-paced-sends) "subtitle", "actions" ([{"action","title"}], the buttons) and "badgeCount".
// Each is shown under the tag "richpush-<richId>", so a later message about it replaces it (SPEC §26):
// - a changed notification comes in the same shape with "richUpdate":true, and "silent":true to replace it
//   without sound or vibration; it is shown again without alerting anew (renotify: false);
// - a withdrawn one comes as {"richId","richpushRetract":"rp-<id>","richMessage","title"} (title may be absent,
//   no richUrl): its text is shown quietly in place of the old one, with no image, and a click only closes it.
// A Live Activity (SPEC §25) comes as {"richpushActivity":id,"event":"start|update|end","contentState":{…},"title","body","dismissAt"}:
// one notification per activity, tagged with its id (the push's Topic), that alerts when it starts and is
// replaced quietly on each update; on "end" it shows the final state and, with "dismissAt", goes away then.
// A notification is closed while the worker runs; one whose time passed later is closed at the next push.
const DISMISS_WAIT_MS = 25000; // about as long as a browser keeps the worker alive for a push event
function activityBody(message) {
  if (message.body) return message.body;
  const state = message.contentState && typeof message.contentState === "object" ? message.contentState : {};
  return Object.entries(state).slice(0, 8)
    .map(([key, value]) => key + ": " + (value !== null && typeof value === "object" ? JSON.stringify(value) : String(value))).join("\n");
}
// dismissAt as RFC 3339 or seconds since 1970, in milliseconds; null when absent or unreadable.
function dismissTime(value) {
  if (typeof value === "number" && isFinite(value)) return value * 1000;
  const time = typeof value === "string" && value ? (/^\d+(\.\d+)?$/.test(value) ? Number(value) * 1000 : Date.parse(value)) : NaN;
  return isNaN(time) ? null : time;
}
function closeTagged(tag) {
  return self.registration.getNotifications({ tag }).then((shown) => shown.forEach((n) => n.close()));
}
function closeDismissed() {
  return self.registration.getNotifications().then((shown) => {
    for (const n of shown) if (n.data && typeof n.data.dismissAt === "number" && n.data.dismissAt <= Date.now()) n.close();
  });
}
function showActivity(message) {
  const tag = String(message.richpushActivity);
  const event = ["start", "update", "end"].includes(message.event) ? message.event : "update";
  const dismissAt = event === "end" ? dismissTime(message.dismissAt) : null;
  if (dismissAt !== null && dismissAt <= Date.now()) return closeTagged(tag); // its time has passed: nothing to show
  const shown = self.registration.showNotification(message.title || tag, {
    body: activityBody(message), tag, renotify: event === "start", silent: event !== "start", data: { activity: tag, event, dismissAt } });
  if (dismissAt === null) return shown;
  const delay = dismissAt - Date.now();
  // A timer past 2^31 - 1 ms would fire at once: that far off, only closeDismissed closes it.
  if (delay > 0x7fffffff) return shown;
  const closing = new Promise((resolve) => setTimeout(resolve, delay)).then(() => closeTagged(tag));
  // Soon enough: the push event waits for it. Later: the timer closes it if the worker still runs, closeDismissed if not.
  return delay <= DISMISS_WAIT_MS ? shown.then(() => closing) : shown;
}
self.addEventListener("push", (event) => {
  const message = event.data ? event.data.json() : {};
  const tag = "richpush-" + message.richId;
  const dismissed = closeDismissed().catch(() => {});
  if (message.richpushActivity) {
    event.waitUntil(Promise.all([dismissed, showActivity(message)]));
    return;
  }
  if (message.richpushRetract) {
    event.waitUntil(Promise.all([dismissed, self.registration.showNotification(message.title || "RichPush", {
      body: message.richMessage || "", tag, renotify: false, silent: true, data: {} })]));
    return;
  }
  const body = [message.subtitle, message.richMessage].filter(Boolean).join("\n");
  const options = { body, image: message.richUrl, tag, actions: message.actions || [], data: { url: message.richUrl } };
  if (message.richUpdate) Object.assign(options, { renotify: false, silent: !!message.silent });
  const shown = self.registration.showNotification(message.title || "RichPush", options);
  const badge = typeof message.badgeCount === "number" && navigator.setAppBadge ? navigator.setAppBadge(message.badgeCount) : Promise.resolve();
  event.waitUntil(Promise.all([shown, badge.catch(() => {}), dismissed]));
});
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  // A button's id is event.action; the demo opens the payload for any of them, as for the body. A withdrawn
  // notification and a Live Activity's have no payload: the click only closes it.
  if (event.notification.data && event.notification.data.url) event.waitUntil(clients.openWindow(event.notification.data.url));
});
