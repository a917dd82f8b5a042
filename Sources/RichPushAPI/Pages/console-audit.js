// The audit log panel (SPEC §29, docs/operations.md#audit-log): the latest changes by admins, API keys, the console and the CLI
// (time, actor, action, target), filtered by actor and action as they are typed; Older pages back through the log.
let auditAsked = 0, auditOldest = null, auditTimer;
function auditQuery(before) {
  const params = new URLSearchParams({ limit: "50" });
  const actor = $("audit-actor").value.trim(), action = $("audit-action").value.trim();
  if (actor) params.set("actor", actor);
  if (action) params.set("action", action);
  if (before) params.set("before", String(before));
  return "/console/api/audit?" + params.toString();
}
function auditRow(entry) {
  const tr = document.createElement("tr"), time = text("td", new Date(entry.at).toLocaleString());
  time.title = entry.at + (entry.requestId ? " · request " + entry.requestId : "");
  const actor = text("td", entry.actor);
  actor.append(text("small", entry.actorKind + (entry.client ? " · " + entry.client : "")));
  tr.append(time, actor, text("td", entry.action), text("td", entry.target || "—"));
  return tr;
}
async function loadAudit(more) {
  const asked = ++auditAsked;
  const { ok, json } = await call("GET", auditQuery(more ? auditOldest : null));
  if (asked !== auditAsked) return; // a later answer is coming
  if (!ok) { $("audit-note").textContent = json.detail || "The audit log did not load; try Refresh."; return; }
  const rows = $("audit-table").tBodies[0];
  if (more) rows.append(...json.map(auditRow)); else rows.replaceChildren(...json.map(auditRow));
  if (json.length) auditOldest = json[json.length - 1].id;
  $("audit-more").hidden = json.length < 50;
  const filtered = $("audit-actor").value.trim() || $("audit-action").value.trim();
  $("audit-note").textContent = !more && json.length === 0 ? (filtered ? "No change matches." : "Nothing recorded yet.") : "";
}
for (const id of ["audit-actor", "audit-action"]) {
  $(id).addEventListener("input", () => { clearTimeout(auditTimer); auditTimer = setTimeout(() => loadAudit(false), 300); });
}
$("audit-refresh").addEventListener("click", () => loadAudit(false));
$("audit-more").addEventListener("click", () => loadAudit(true));
new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) loadAudit(false); }).observe($("audit"));
