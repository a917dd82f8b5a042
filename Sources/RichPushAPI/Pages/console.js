"use strict";
const csrf = document.querySelector('meta[name="csrf-token"]').content;
// The server's default image, by name (--default-image): the image picker starts on it.
const defaultImage = document.querySelector('meta[name="default-image"]').content;
// A trace viewer's URL with {traceId} (serve --trace-url), empty without: a campaign made while tracing was on links to its trace.
const traceURL = document.querySelector('meta[name="trace-url"]').content;
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
  select.value = chosen; // what was chosen, while it is still stored
  if (!select.value) {
    const fallback = json.find((item) => item.names.includes(defaultImage)) || json[0];
    select.value = fallback ? fallback.sha256 : "";
  }
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
  if (kind === "segment") return { query: "segment=" + encodeURIComponent($("segment").value) + app, body: { segment: $("segment").value } };
  if (kind === "filter") {
    // The server says what is wrong with it (by JSON path); the body carries it parsed.
    const textValue = $("filter").value;
    return { query: "filter=" + encodeURIComponent(textValue) + app, body: { filter: parsedFilter() } };
  }
  return { query: "all=1" + app, body: { all: true } };
}
function parsedFilter() { try { return JSON.parse($("filter").value); } catch (error) { return undefined; } }
// The saved segments, in the audience's select (what was chosen stays chosen while it exists).
async function loadSegments(choose) {
  const { ok, json } = await call("GET", "/console/api/segments");
  if (!ok) return;
  const select = $("segment"), chosen = choose || select.value;
  select.replaceChildren(...json.segments.map((g) => { const o = text("option", g.name); o.value = g.name; return o; }));
  if (json.segments.some((g) => g.name === chosen)) select.value = chosen;
  if (!json.segments.length) select.append(new Option("(no segments saved yet)", ""));
  checkAudience();
}
$("segment").addEventListener("change", checkAudience);
$("filter").addEventListener("input", checkAudience);
$("save-segment").addEventListener("click", async () => {
  const name = $("segment-name").value.trim(), filter = parsedFilter(), result = $("segment-result");
  result.className = "error";
  if (!name) { result.textContent = "Name the segment."; return; }
  if (filter === undefined) { result.textContent = "The filter is not JSON."; return; }
  $("save-segment").disabled = true;
  const { ok, json } = await call("PUT", "/console/api/segments/" + encodeURIComponent(name), JSON.stringify({ filter }), "application/json");
  $("save-segment").disabled = false;
  result.className = ok ? "ok" : "error";
  result.textContent = ok ? "Saved as segment " + json.name + "." : (json.detail || "Refused.");
  if (ok) await loadSegments();
});
async function loadApps() {
  const { ok, json } = await call("GET", "/console/api/apps");
  if (!ok) return;
  for (const a of json) {
    const option = document.createElement("option");
    option.value = a.name;
    option.textContent = a.name + " · " + a.devices + " device" + (a.devices === 1 ? "" : "s");
    $("app").append(option);
    $("la-app").append(new Option(a.name, a.name));
  }
  $("apps-summary").textContent = "Apps: " + json.map((a) => a.name + " (" + a.devices + " device" + (a.devices === 1 ? "" : "s") + ")").join(", ");
}
$("app").addEventListener("change", checkAudience);
let reachTimer, reachAsked = 0;
function checkAudience() {
  const kind = document.querySelector('input[name="audience"]:checked').value;
  $("audience-value").disabled = kind === "all";
  $("audience-value").hidden = kind === "segment" || kind === "filter";
  $("segment-box").hidden = kind !== "segment";
  $("filter-box").hidden = kind !== "filter";
  const field = kind === "segment" ? $("segment") : kind === "filter" ? $("filter") : $("audience-value");
  $("send").disabled = true; // until this audience is checked
  clearTimeout(reachTimer);
  reachTimer = setTimeout(async () => {
    const asked = ++reachAsked;
    const { ok, json } = await call("GET", "/console/api/audience?" + audience().query);
    if (asked !== reachAsked) return; // a later answer is coming
    // Listed names that are no user: said by name (a campaign naming them is refused), with no full stop, which a name may hold.
    const unknown = ok ? json.unknown || [] : [];
    for (const f of [$("audience-value"), $("segment"), $("filter")]) f.classList.remove("bad");
    field.classList.toggle("bad", !ok || unknown.length > 0);
    $("reach").textContent = ok ? "Will reach " + json.users + " user" + (json.users === 1 ? "" : "s") + " on " + json.devices + " device" + (json.devices === 1 ? "" : "s")
                                  + (unknown.length ? "; unknown: " + unknown.slice(0, 10).join(", ") + (unknown.length > 10 ? " and " + (unknown.length - 10) + " more" : "") : ".")
                                : (json.detail || "Not an audience.");
    $("send").disabled = !ok || json.devices === 0 || unknown.length > 0;
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
// docs/api.md#options-badges-and-paced-sends: what the options section asks for, into the campaign's body.
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
// The words as this user will get them: their name and attributes filled into the templates, by the server.
$("preview-for-user").addEventListener("click", async () => {
  const user = $("preview-user").value.trim(), shown = words();
  if (!user) { $("user-preview").replaceChildren(text("p", "Name a user.", "error")); return; }
  const body = { user, message: shown.message };
  if (shown.title) body.title = shown.title;
  if ($("opt-subtitle").value) body.options = { subtitle: $("opt-subtitle").value };
  const { ok, json } = await call("POST", "/console/api/preview", JSON.stringify(body), "application/json");
  if (!ok) { $("user-preview").replaceChildren(text("p", json.detail || "Refused.", "error")); return; }
  const card = document.createElement("div");
  card.className = "note";
  card.append(text("span", "For " + user, "app"));
  if (json.title) card.append(text("strong", json.title));
  if (json.subtitle) card.append(text("span", json.subtitle, "subtitle"));
  card.append(text("span", json.message || "", "body"));
  $("user-preview").replaceChildren(card);
});
$("send").addEventListener("click", async () => {
  const body = { audience: audience().body, message: $("message").value, mode: $("mode").value, payload: $("image").value || undefined,
                 app: $("app").value || undefined };
  if ($("title").value) body.title = $("title").value;
  if ($("when").value === "at" && $("send-at").value) body.sendAt = new Date($("send-at").value).toISOString().replace(/\.\d{3}Z$/, "Z");
  if ($("when").value === "local") { body.localTime = $("local-time").value; if ($("local-date").value) body.localDate = $("local-date").value; }
  deliveryOptions(body);
  if (!$("limits").checked) body.limits = false; // caps and quiet hours do not apply to it
  const problem = abTest(body);
  if (problem) { answer("send-result", false, problem); return; }
  const rows = body.variants ? [] : localeRows(); // a test's words, in every language, are its variants'
  if (rows.length) {
    body.defaultLocale = $("default-locale").value.trim() || "en";
    body.content = { [body.defaultLocale]: { title: $("title").value || undefined, message: $("message").value } };
    for (const r of rows) body.content[r.locale] = { title: r.title || undefined, message: r.message || undefined };
  }
  $("send").disabled = true; // one click, one campaign
  answer("send-result", true, "Sending…");
  const { ok, json } = await call("POST", "/console/api/campaigns", JSON.stringify(body), "application/json");
  answer("send-result", ok, ok ? "Sent as campaign " + json.id + "." : (json.detail || "Refused."));
  $("send").disabled = false;
  if (ok) {
    watch(json.id);
    $("watch").scrollIntoView({ block: "start" }); // the results, not below the fold
    loadCampaigns();
  }
});
let watching = 0, watchedId = "", watched = null; // the campaign the results panel shows, as last read
async function watch(id) {
  const generation = ++watching; // a newer campaign's watch replaces this one
  if (String(id) !== watchedId) { // another campaign's forms, buttons and answers are not this one's
    closeChanges(true);
    watched = null;
    $("edit").hidden = $("withdraw").hidden = true;
    $("experiment").hidden = true; // until its stats say it is a test
    $("count-capped").textContent = $("count-delayed").textContent = "";
  }
  watchedId = String(id);
  $("watch").hidden = false;
  $("campaign-id").textContent = id;
  let shownStatus = "";
  // Every half second while it sends, then every few seconds for fetches, for ten minutes at most.
  for (let i = 0; i < 600 && generation === watching; i++) {
    const { ok, status, json } = await call("GET", "/console/api/campaigns/" + id);
    if (generation !== watching) return;
    if (status === 401 || status === 403 || status === 404) { $("campaign-status").textContent = json.detail || "gone"; return; }
    let done = false;
    if (ok) {
      const c = json.campaign;
      $("campaign-status").textContent = c.status + (c.sendAt ? " for " + new Date(c.sendAt).toLocaleString() : c.localTime ? " for " + c.localTime + " local" + (c.localDate ? " on " + c.localDate : "") : "")
        + (c.ratePerMinute ? ", " + c.ratePerMinute + " a minute" + (c.expectedEnd ? ", until about " + new Date(c.expectedEnd).toLocaleTimeString() : "") : "")
        + (c.changed && c.status !== "retracted" ? ", changed " + new Date(c.changed).toLocaleString() : "");
      $("cancel").hidden = !(c.status === "scheduled" || c.status === "sending");
      $("trace-link").hidden = !(traceURL && c.traceId);
      if (traceURL && c.traceId) $("trace-view").href = traceURL.replace("{traceId}", encodeURIComponent(c.traceId));
      watched = c;
      $("edit").hidden = $("withdraw").hidden = !changeable(c);
      if (!changeable(c)) closeChanges(false);
      if (c.status !== shownStatus) { if (shownStatus) loadCampaigns(); shownStatus = c.status; } // the list says what this panel says
      for (const k of ["pending", "sent", "failed", "fetched"]) $("count-" + k).textContent = c[k];
      $("failures").replaceChildren(...json.failures.map((f) => text("li", f.target + "…: " + f.reason)));
      done = (c.status === "done" && c.pending === 0) || c.status === "cancelled" || c.status === "retracted";
      const stats = await call("GET", "/console/api/campaigns/" + id + "/stats");
      if (stats.ok && generation === watching) drawStats(stats.json);
    }
    await new Promise((r) => setTimeout(r, done ? 3000 : ok ? 500 : 2000));
  }
}
function drawStats(stats) {
  $("count-capped").textContent = stats.capped ?? "—";
  $("count-delayed").textContent = stats.delayed ?? "—";
  drawExperiment(stats);
  const steps = [["queued", stats.queued], ["sent", stats.sent], ["displayed", stats.displayed], ["opened", stats.opened]];
  if (stats.converted !== undefined) steps.push(["converted", stats.converted]);
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
  if (ok) { $("cancel").hidden = true; loadCampaigns(); }
});
// A campaign that has gone out can be changed or withdrawn, each confirmed in a panel
// that says what every platform will do.
function changeable(c) { return c.status === "sending" || c.status === "done"; }
function closeChanges(clearAnswer) {
  $("edit-form").hidden = $("withdraw-form").hidden = true;
  if (clearAnswer) { $("change-result").textContent = ""; $("change-result").className = ""; }
}
// An answer shown in element `id`: in words, marked ok or error.
function answer(id, ok, words) { $(id).className = ok ? "ok" : "error"; $(id).textContent = words; }
function changeAnswer(ok, words) { answer("change-result", ok, words); }
function inboxes(n) { return n + (n === 1 ? " inbox" : " inboxes"); }
function platforms(p) { return (p.apns || 0) + " iPhone, " + (p.fcm || 0) + " Android, " + (p.web || 0) + " browser"; }
function editExplanation() {
  const iPhones = $("edit-alert").checked ? "iPhones replace it under the same notification and alert again (with sound)"
                                          : "iPhones replace it quietly under the same notification (no sound)";
  $("edit-explain").textContent = "Devices that already got it: " + iPhones + ", Android replaces it by its tag, browsers replace it by its Topic; "
    + "pushes not yet sent carry the new words; inboxes and payload links show them at once.";
}
let editing = null, withdrawing = null; // the campaign each panel was opened for
function openEdit(c) {
  editing = c;
  $("withdraw-form").hidden = true;
  $("edit-title").value = c.title || "";
  $("edit-message").value = c.message || "";
  $("edit-alert").checked = false;
  editExplanation();
  $("edit-form").hidden = false;
  $("edit-message").focus();
}
function openWithdraw(c) {
  withdrawing = c;
  $("edit-form").hidden = true;
  $("withdraw-text").value = $("withdraw-text").defaultValue;
  $("withdraw-form").hidden = false;
  $("withdraw-text").focus();
}
$("edit").addEventListener("click", () => openEdit(watched));
$("withdraw").addEventListener("click", () => openWithdraw(watched));
$("edit-alert").addEventListener("change", editExplanation);
$("edit-close").addEventListener("click", () => { $("edit-form").hidden = true; $("edit").focus(); });
$("withdraw-close").addEventListener("click", () => { $("withdraw-form").hidden = true; $("withdraw").focus(); });
// Only what changed goes, with alertAgain.
$("edit-save").addEventListener("click", async () => {
  const c = editing, body = {};
  if ($("edit-title").value !== (c.title || "")) body.title = $("edit-title").value;
  if ($("edit-message").value !== (c.message || "")) body.message = $("edit-message").value;
  if (!Object.keys(body).length) { changeAnswer(false, "Nothing changed: change the title or the message first."); return; }
  body.alertAgain = $("edit-alert").checked;
  $("edit-save").disabled = true; // one click, one change
  const { ok, json } = await call("PATCH", "/console/api/campaigns/" + encodeURIComponent(c.id), JSON.stringify(body), "application/json");
  $("edit-save").disabled = false;
  if (!ok) { changeAnswer(false, json.detail || "Refused."); return; }
  changeAnswer(true, "Changed: " + inboxes(json.notifications) + ", " + json.pending + " pending, replacements: " + platforms(json.replacements || {}) + ".");
  $("edit-form").hidden = true;
  $("edit").focus();
  if (String(c.id) === watchedId) watch(c.id); // its words and counts as they are now
  loadCampaigns();
});
$("withdraw-confirm").addEventListener("click", async () => {
  const c = withdrawing, shown = $("withdraw-text").value.trim();
  $("withdraw-confirm").disabled = true;
  const { ok, json } = await call("POST", "/console/api/campaigns/" + encodeURIComponent(c.id) + "/retract",
                                  JSON.stringify(shown ? { retractedText: shown } : {}), "application/json");
  $("withdraw-confirm").disabled = false;
  if (!ok) { changeAnswer(false, json.detail || "Refused."); return; }
  changeAnswer(true, "Withdrawn: " + inboxes(json.inboxes) + ", " + json.cancelled + " cancelled, background pushes: " + platforms(json.retractPushes || {}) + ".");
  closeChanges(false);
  $("edit").hidden = $("withdraw").hidden = true; // nothing more to change; the panel reads its new status next
  if (String(c.id) === watchedId) watch(c.id);
  loadCampaigns();
});
// The campaigns panel: newest first, refreshed when it comes into view, when the page is shown
// again, after a send, a cancel, a change and a withdrawal; a scheduled or sending campaign has a
// Cancel button, a sending or done one Edit and Withdraw.
const campaignNotes = new Map(); // id → the answer to its Cancel, kept across refreshes
let campaignsAsked = 0;
function campaignSchedule(c) {
  const pace = c.ratePerMinute ? ", " + c.ratePerMinute + " a minute" : "";
  if (c.sendAt) return "for " + new Date(c.sendAt).toLocaleString() + pace;
  if (c.localTime) return "for " + c.localTime + " local" + (c.localDate ? " on " + c.localDate : "") + pace;
  return "at once, " + new Date(c.created).toLocaleString() + pace;
}
function campaignProgress(c) {
  if (c.devices === 0 && c.status === "scheduled") return "not queued yet";
  if (c.devices === 0 && c.status === "cancelled") return "nothing sent";
  return c.sent + "/" + c.devices + " sent" + (c.failed ? ", " + c.failed + " failed" : "");
}
function campaignRow(c) {
  const li = document.createElement("li");
  li.dataset.id = c.id;
  const open = text("button", "#" + c.id, "open");
  open.type = "button";
  open.setAttribute("aria-label", "Watch campaign " + c.id);
  open.addEventListener("click", () => { watch(c.id); $("watch").scrollIntoView({ block: "start" }); });
  const words = c.title || c.message;
  const facts = [campaignProgress(c), campaignSchedule(c), c.app ? "app " + c.app : "every app", "by " + c.createdBy,
                 "“" + (words.length > 40 ? words.slice(0, 40) + "…" : words) + "”"];
  if (c.changed) facts.push("changed " + new Date(c.changed).toLocaleString());
  if (c.retracted) facts.push("withdrawn " + new Date(c.retracted).toLocaleString());
  li.append(open, text("span", c.status, "status " + c.status), text("span", facts.join(" · "), "facts"));
  if (c.status === "scheduled" || c.status === "sending") {
    const cancel = text("button", "Cancel", "danger cancel");
    cancel.type = "button";
    cancel.setAttribute("aria-label", "Cancel campaign " + c.id);
    cancel.addEventListener("click", () => cancelFromList(c.id, cancel));
    li.append(cancel);
  }
  if (changeable(c)) {
    // Each opens its panel in the results panel, where the campaign's counts are.
    for (const [label, kind, show] of [["Edit", "edit", openEdit], ["Withdraw", "withdraw", openWithdraw]]) {
      const button = text("button", label, kind === "withdraw" ? "danger withdraw" : "edit");
      button.type = "button";
      button.setAttribute("aria-label", label + " campaign " + c.id);
      button.addEventListener("click", () => { watch(c.id); show(c); $("watch").scrollIntoView({ block: "start" }); });
      li.append(button);
    }
  }
  const note = campaignNotes.get(c.id);
  if (note) li.append(text("span", note.text, note.ok ? "result ok" : "result error"));
  return li;
}
async function loadCampaigns() {
  const asked = ++campaignsAsked;
  const { ok, json } = await call("GET", "/console/api/campaigns?limit=50");
  if (asked !== campaignsAsked) return; // a later answer is coming
  if (!ok) { $("campaigns-note").textContent = json.detail || "The campaigns did not load; try Refresh."; return; }
  replaceRows($("campaign-list"), json.map(campaignRow), ["cancel", "edit", "withdraw"]);
  $("campaigns-note").textContent = json.length === 0 ? "No campaigns yet." : json.length === 50 ? "The 50 newest." : "";
}
// A list's rows replaced by `rows`; keyboard focus stays on the row it was on (on its button of a class in `kinds`, else its .open).
function replaceRows(list, rows, kinds) {
  const active = document.activeElement;
  const focused = list.contains(active) && active.closest("li")
    ? { id: active.closest("li").dataset.id, kind: kinds.find((k) => active.classList.contains(k)) } : null;
  list.replaceChildren(...rows);
  if (focused) {
    const row = list.querySelector('li[data-id="' + focused.id + '"]');
    const again = row && ((focused.kind && row.querySelector("." + focused.kind)) || row.querySelector(".open"));
    if (again) again.focus();
  }
}
async function cancelFromList(id, button) {
  button.disabled = true;
  const { ok, json } = await call("DELETE", "/console/api/campaigns/" + encodeURIComponent(id));
  campaignNotes.set(id, ok ? { ok: true, text: "Cancelled: " + json.sent + " sent before." } : { ok: false, text: json.detail || "Refused." });
  const row = $("campaign-list").querySelector('li[data-id="' + id + '"]');
  if (ok && row) {
    const fresh = campaignRow(json); // its new status at once
    row.replaceWith(fresh);
    fresh.querySelector(".open").focus();
  } else {
    button.disabled = false; // the refresh below shows why, on its row
  }
  await loadCampaigns(); // then the list as it is now, past any answer already under way
}
$("campaigns-refresh").addEventListener("click", loadCampaigns);
new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) loadCampaigns(); }).observe($("campaigns"));
document.addEventListener("visibilitychange", () => { if (!document.hidden) loadCampaigns(); });
let searchAsked = 0; // before the first search below runs (the scripts after this one are read after it)
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
loadSegments();
checkAudience();
searchUsers();
