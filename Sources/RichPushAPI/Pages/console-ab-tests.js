// A/B tests (SPEC §28) in the console: the compose form's test section, and a campaign's variants, holdout and decision.
// SPEC §28: the A/B test section, into the campaign's body (nothing when no variants are given); a problem in words, the field marked.
// A test's words are its variants': the title and message above are not sent with it.
function abTest(body) {
  const field = $("variants"), raw = field.value.trim();
  field.classList.remove("bad");
  if (!raw) return null;
  let variants;
  try { variants = JSON.parse(raw); } catch (error) { field.classList.add("bad"); field.focus(); return "Variants is not JSON: " + error.message + "."; }
  if (!Array.isArray(variants) || !variants.every((v) => v !== null && typeof v === "object" && !Array.isArray(v))) {
    field.classList.add("bad"); field.focus();
    return "Variants must be a JSON array of objects, e.g. [{\"name\":\"A\",\"message\":\"Half price\"},{\"name\":\"B\",\"message\":\"50% off\"}].";
  }
  delete body.title;
  delete body.message;
  body.variants = variants;
  if ($("test-share").value !== "") body.testShare = Number($("test-share").value);
  if ($("holdout").value !== "") body.holdout = Number($("holdout").value);
  body.winner = { metric: $("winner-metric").value, after: $("winner-after").value.trim() || undefined, fallback: $("winner-fallback").value.trim() || null };
  return null;
}
// SPEC §28: an A/B test's variants side by side, each count also as a rate of the variant's users, then the holdout;
// the chi-squared test and its winner; the conversion rate of the users who got a variant beside the holdout's, and the lift.
function rate(n, of) { return of ? (100 * n / of).toFixed(1) + "%" : "—"; }
function signed(x, digits) { return (x >= 0 ? "+" : "") + x.toFixed(digits); }
function drawExperiment(stats) {
  $("experiment").hidden = !stats.variants;
  if (!stats.variants) return;
  const test = stats.test || {}, holdout = stats.holdout;
  const count = (n, users) => { const td = text("td", String(n)); td.append(text("small", rate(n, users))); return td; };
  const row = (name, className, cells) => {
    const tr = document.createElement("tr"), th = text("th", name);
    th.scope = "row";
    tr.className = className;
    tr.append(th, ...cells);
    return tr;
  };
  const rows = stats.variants.map((v) => row(v.name, v.name === test.winner ? "winner" : "",
                                             [text("td", String(v.users)), ...["sent", "displayed", "opened", "converted"].map((k) => count(v[k], v.users))]));
  if (holdout) rows.push(row("Holdout", "holdout", [text("td", String(holdout.users)), text("td", "—"), text("td", "—"), text("td", "—"), count(holdout.converted, holdout.users)]));
  $("variants-table").tBodies[0].replaceChildren(...rows);
  // Not decided: no statistic yet. Decided: the winner (the fallback when the difference was not significant), or none.
  const decided = test.statistic !== null && test.statistic !== undefined;
  $("test-statistic").textContent = decided ? test.statistic.toFixed(2) : "—";
  $("test-p").textContent = test.pValue !== null && test.pValue !== undefined ? test.pValue.toPrecision(2) : "—";
  $("test-winner").textContent = test.winner ? test.winner + (test.pValue >= 0.05 ? " (the fallback: no significant difference)" : "")
                                             : decided ? "no winner" : "not decided yet";
  const users = stats.variants.reduce((n, v) => n + v.users, 0), converted = stats.variants.reduce((n, v) => n + v.converted, 0);
  $("test-conversion").textContent = rate(converted, users) + " (" + converted + " of " + plural(users, "user") + ")";
  $("holdout-conversion").textContent = holdout ? rate(holdout.converted, holdout.users) + " (" + holdout.converted + " of " + plural(holdout.users, "user") + ")" : "no holdout";
  const ours = users ? converted / users : null, theirs = holdout && holdout.users ? holdout.converted / holdout.users : null;
  $("test-lift").textContent = ours === null || theirs === null ? "—"
    : signed(100 * (ours - theirs), 1) + " points" + (theirs ? ", " + signed(100 * (ours / theirs - 1), 0) + "% relative" : "");
}
