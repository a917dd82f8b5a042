// Live Activities (SPEC §25): the list, a start form, and the activity chosen, with its devices, an
// update form and an End button. The JSON fields are checked here first, so a typo is named before
// anything is sent; the server's refusals show as its detail, as the campaign forms show them.
function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
// A textarea's JSON object: { value } (undefined when empty and not required), or { problem } in words, the field marked.
function jsonObject(id, label, required) {
  const field = $(id), raw = field.value.trim();
  field.classList.remove("bad");
  let problem = null, value;
  if (!raw) {
    if (!required) return { value: undefined };
    problem = label + " is empty: give a JSON object, e.g. {\"stage\":\"packed\"}.";
  } else {
    try { value = JSON.parse(raw); } catch (error) { problem = label + " is not JSON: " + error.message + "."; }
    if (!problem && (value === null || typeof value !== "object" || Array.isArray(value))) {
      problem = label + " must be a JSON object in braces, not " + (Array.isArray(value) ? "an array" : JSON.stringify(value)) + ".";
    }
  }
  if (problem) { field.classList.add("bad"); field.focus(); return { problem }; }
  return { value };
}
// A datetime-local field as RFC 3339 (UTC, whole seconds), or undefined when empty.
function isoTime(id) { const v = $(id).value; return v ? new Date(v).toISOString().replace(/\.\d{3}Z$/, "Z") : undefined; }
function when(t) { return t ? new Date(t).toLocaleString() : ""; }
function stamp(json) { return json.timestamp !== undefined && json.timestamp !== null ? " (timestamp " + json.timestamp + ")" : ""; }
function alertFields(titleId, bodyId) {
  const alert = {}, title = $(titleId).value.trim(), body = $(bodyId).value.trim();
  if (title) alert.title = title;
  if (body) alert.body = body;
  return Object.keys(alert).length ? alert : undefined;
}
// The audience as campaigns take it: listed users, a tag expression, or everyone; null when nothing is named.
function activityAudience() {
  const kind = $("la-audience-kind").value, value = $("la-audience-value").value.trim();
  if (kind === "all") return { all: true };
  if (kind === "tags") return value ? { tags: value } : null;
  const users = value.split(",").map((s) => s.trim()).filter(Boolean);
  return users.length ? { users } : null;
}
$("la-audience-kind").addEventListener("change", () => {
  $("la-audience-value").disabled = $("la-audience-kind").value === "all";
  $("la-audience-value").placeholder = $("la-audience-kind").value === "tags" ? "sports && !lang:fr" : "alice, bob";
});
$("la-start").addEventListener("click", async () => {
  const type = $("la-type").value.trim();
  if (!type) { answer("la-start-result", false, "Name the attributes type as the app's Swift type is named, e.g. DeliveryAttributes."); $("la-type").focus(); return; }
  const audience = activityAudience();
  if (!audience) { answer("la-start-result", false, "Name the users (comma-separated) or a tag expression."); $("la-audience-value").focus(); return; }
  const attributes = jsonObject("la-attributes", "Attributes", false);
  if (attributes.problem) { answer("la-start-result", false, attributes.problem); return; }
  const state = jsonObject("la-content-state", "Content state", true);
  if (state.problem) { answer("la-start-result", false, state.problem); return; }
  const body = { type, audience, attributes: attributes.value || {}, contentState: state.value, broadcast: $("la-broadcast").checked };
  const alert = alertFields("la-alert-title", "la-alert-body");
  if (alert) body.alert = alert;
  if ($("la-app").value) body.app = $("la-app").value;
  const stale = isoTime("la-stale");
  if (stale) body.staleDate = stale;
  if ($("la-relevance").value !== "") body.relevanceScore = Number($("la-relevance").value);
  $("la-start").disabled = true; // one click, one activity
  answer("la-start-result", true, "Starting…");
  const { ok, json } = await call("POST", "/console/api/live-activities", JSON.stringify(body), "application/json");
  $("la-start").disabled = false;
  if (!ok) { answer("la-start-result", false, json.detail || "Refused."); return; }
  answer("la-start-result", true, "Started " + json.id + " on " + plural(json.devices, "device") + (json.channelId ? ", broadcast channel " + json.channelId : "") + ".");
  openActivity(json.id);
  loadActivities();
});
// The list: newest first, refreshed when it comes into view, when the page is shown again, and after a start, an update and an end.
let activitiesAsked = 0;
function activityRow(a) {
  const li = document.createElement("li");
  li.dataset.id = a.id;
  const open = text("button", a.id, "open");
  open.type = "button";
  open.setAttribute("aria-label", "Show Live Activity " + a.id);
  open.addEventListener("click", () => { openActivity(a.id); $("la-detail").scrollIntoView({ block: "start" }); });
  const facts = [a.type, a.app ? "app " + a.app : "", plural(a.devices, "device"), plural(a.updates, "update"),
                 a.failures ? plural(a.failures, "failure") : "", a.broadcast ? "broadcast" : "", a.createdAt ? "started " + when(a.createdAt) : ""];
  li.append(open, text("span", a.state, "status " + a.state), text("span", facts.filter(Boolean).join(" · "), "facts"));
  return li;
}
async function loadActivities() {
  const asked = ++activitiesAsked;
  const { ok, json } = await call("GET", "/console/api/live-activities?limit=50");
  if (asked !== activitiesAsked) return; // a later answer is coming
  if (!ok) { $("la-note").textContent = json.detail || "The Live Activities did not load; try Refresh."; return; }
  replaceRows($("la-list"), json.map(activityRow), []);
  $("la-note").textContent = json.length === 0 ? "None yet." : json.length === 50 ? "The 50 newest." : "";
}
// The activity shown: its facts, counts, content state and devices; the update and end forms while it is active.
let activityWatch = 0, shownActivity = "";
function renderActivity(a, fresh) {
  $("la-id").textContent = a.id;
  $("la-state").textContent = a.state;
  $("la-state").className = "status " + a.state;
  const facts = [["Type", a.type], ["App", a.app || "default"], ["Broadcast", a.broadcast ? "yes" + (a.channelId ? ", channel " + a.channelId : "") : "no"],
                 ["Started", when(a.createdAt)], ["Last update", a.lastUpdate ? when(a.lastUpdate) : "none yet"]];
  if (a.endedAt) facts.push(["Ended", when(a.endedAt)]);
  $("la-facts").replaceChildren(...facts.flatMap(([k, v]) => [text("dt", k), text("dd", v || "—")]));
  $("la-count-devices").textContent = a.devices;
  $("la-count-updates").textContent = a.updates;
  $("la-count-failures").textContent = a.failures;
  $("la-content").textContent = JSON.stringify(a.contentState || {}, null, 2);
  // An iPhone needs its activity's update token for updates, unless they are broadcast; other platforms need none,
  // and neither does an activity that has ended (its tokens are forgotten).
  const rows = (a.perDevice || []).map((d) => {
    const tr = document.createElement("tr");
    const token = d.hasUpdateToken ? "yes" : d.platform === "apns" && !a.broadcast && a.state === "active" ? "not yet" : "not needed";
    const cells = [d.registration, d.platform, token, d.lastEvent || "—", d.lastState, d.reason || ""];
    tr.append(...cells.map((c, i) => text("td", c === undefined || c === null ? "" : String(c), i === 4 && d.lastState === "failed" ? "failed" : "")));
    return tr;
  });
  if (!rows.length) {
    const cell = text("td", "No devices.");
    cell.colSpan = 6;
    const tr = document.createElement("tr");
    tr.append(cell);
    rows.push(tr);
  }
  $("la-devices").tBodies[0].replaceChildren(...rows);
  $("la-update-form").hidden = $("la-end-form").hidden = a.state !== "active";
  if (fresh) { // another activity's forms are not this one's: the update starts from its state
    $("la-update-state").value = JSON.stringify(a.contentState || {});
    for (const id of ["la-update-alert-title", "la-update-alert-body", "la-update-stale", "la-end-state", "la-dismiss-at"]) $(id).value = "";
    $("la-priority").value = "";
    for (const id of ["la-update-state", "la-end-state"]) $(id).classList.remove("bad");
  }
}
// Read every second while it is active; once it has ended, until no device is pending; ten minutes at most.
async function openActivity(id) {
  const generation = ++activityWatch; // a newer watch replaces this one
  const fresh = id !== shownActivity;
  if (fresh) { $("la-result").textContent = ""; $("la-result").className = ""; }
  shownActivity = id;
  $("la-detail").hidden = false;
  let first = fresh, shownState = "";
  for (let i = 0; i < 600 && generation === activityWatch; i++) {
    const { ok, status, json } = await call("GET", "/console/api/live-activities/" + encodeURIComponent(id));
    if (generation !== activityWatch) return;
    if (status === 401 || status === 403 || status === 404) {
      $("la-state").textContent = json.detail || "gone";
      $("la-state").className = "status";
      $("la-update-form").hidden = $("la-end-form").hidden = true;
      return;
    }
    if (ok) {
      renderActivity(json, first);
      first = false;
      if (json.state !== shownState) { if (shownState) loadActivities(); shownState = json.state; } // the list says what this panel says
      if (json.state !== "active" && !(json.perDevice || []).some((d) => d.lastState === "pending")) return;
    }
    await new Promise((r) => setTimeout(r, ok ? 1000 : 2000));
  }
}
$("la-update").addEventListener("click", async () => {
  const id = shownActivity;
  const state = jsonObject("la-update-state", "Content state", true);
  if (state.problem) { answer("la-result", false, state.problem); return; }
  const body = { contentState: state.value };
  const alert = alertFields("la-update-alert-title", "la-update-alert-body");
  if (alert) body.alert = alert;
  if ($("la-priority").value) body.priority = Number($("la-priority").value);
  const stale = isoTime("la-update-stale");
  if (stale) body.staleDate = stale;
  $("la-update").disabled = true; // one click, one update
  const { ok, json } = await call("PATCH", "/console/api/live-activities/" + encodeURIComponent(id), JSON.stringify(body), "application/json");
  $("la-update").disabled = false;
  if (!ok) { answer("la-result", false, json.detail || "Refused."); return; }
  answer("la-result", true, "Updated: sent to " + plural(json.devices, "device") + stamp(json) + ".");
  openActivity(id);
  loadActivities();
});
$("la-end").addEventListener("click", async () => {
  const id = shownActivity;
  const state = jsonObject("la-end-state", "Final content state", false);
  if (state.problem) { answer("la-result", false, state.problem); return; }
  const body = {};
  if (state.value) body.contentState = state.value;
  const dismissAt = isoTime("la-dismiss-at");
  if (dismissAt) body.dismissAt = dismissAt;
  const path = "/console/api/live-activities/" + encodeURIComponent(id);
  $("la-end").disabled = true;
  const { ok, json } = Object.keys(body).length ? await call("DELETE", path, JSON.stringify(body), "application/json") : await call("DELETE", path);
  $("la-end").disabled = false;
  if (!ok) { answer("la-result", false, json.detail || "Refused."); return; }
  answer("la-result", true, "Ended: sent to " + plural(json.devices, "device") + stamp(json) + ".");
  openActivity(id);
  loadActivities();
});
$("la-refresh").addEventListener("click", loadActivities);
new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) loadActivities(); }).observe($("live-activities"));
document.addEventListener("visibilitychange", () => { if (!document.hidden) loadActivities(); });
