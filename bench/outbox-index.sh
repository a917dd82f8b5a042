#!/usr/bin/env bash
# What a campaign's outbox indexes cost SQLite per push (issue #51, core-v30). A store made by
# `richpush` (its whole schema: `users add`), then, for each layout in turn, ROUNDS times each on
# a fresh copy, N pushes of one campaign through the outbox's statements as `serve` runs them:
# queued 500 rows to an INSERT (`NotificationWriter`), claimed 100 at a time (the claim's SELECT
# over the due index, then its lease UPDATE by id list) and recorded sent (`OutboxStore.record`'s
# UPDATE), each in its own durable transaction (WAL, `synchronous = FULL`, as `serve` writes).
# The layouts of a campaign's pushes:
#
#   now     deliveries(campaignId), with partial indexes on campaignId for the pending and the
#           failed pushes (core-v30): recording a push sent deletes its pending entry;
#   before  deliveries(campaignId, state) (core-v3 to core-v29): recording a push sent deletes
#           its entry and writes another, and every key holds the state's text.
#
# Prints, per layout, the medians of the Python process's CPU per push (SQLite included; the
# Python around the statements is the same for both layouts) for each step and in all.
#
# Usage: bench/outbox-index.sh [ROUNDS] [N]   (env BENCH_WORK; RICHPUSH_BIN: a richpush to make
#        the schema with instead of this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
n=${2:-50000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/outbox-index
source bench/lib.sh
richpush_binary
rm -rf "$work" && mkdir -p "$work"
echo admin-password | "$rp" users add admin --admin --password-stdin --data "$work/data" >/dev/null

python3 - "$work" "$rounds" "$n" <<'EOF'
import os, random, shutil, sqlite3, statistics, sys, time, uuid
work, rounds, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
layouts = {
    "now": ["CREATE INDEX deliveries_campaign ON deliveries(campaignId) WHERE campaignId IS NOT NULL",
            "CREATE INDEX deliveries_campaign_pending ON deliveries(campaignId) WHERE campaignId IS NOT NULL AND state = 'pending'",
            "CREATE INDEX deliveries_campaign_failed ON deliveries(campaignId) WHERE campaignId IS NOT NULL AND state = 'failed'"],
    "before": ["CREATE INDEX deliveries_campaign ON deliveries(campaignId, state) WHERE campaignId IS NOT NULL"],
}
columns = ("(notificationId, campaignId, registrationId, target, platform, app, state, pushId, nextAttemptAt, dueAt, "
           "createdAt, updatedAt)")
insert = f"INSERT INTO deliveries {columns} VALUES " + ",".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * 500)

def run(layout):
    path = f"{work}/{layout}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix): os.remove(path + suffix)
    shutil.copy(f"{work}/data/richpush.sqlite", path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'deliveries_campaign%'").fetchall():
        db.execute(f"DROP INDEX {name}")
    for statement in layouts[layout]:
        db.execute(statement)
    # The pushes name no notification row: `deliveries` has no foreign key checked here (SQLite's are off unless asked).
    spent = {"queue": 0.0, "claim": 0.0, "record": 0.0}
    now, notification = time.time(), 0
    for _ in range(n // 500):
        rows = []
        for _ in range(500):
            notification += 1
            rows += [notification, 1, f"reg-{notification}", "%064x" % random.getrandbits(256), "apns", "default", "pending",
                     str(uuid.uuid4()), now, now, now, now]
        start = time.process_time()
        db.execute("BEGIN IMMEDIATE"); db.execute(insert, rows); db.execute("COMMIT")
        spent["queue"] += time.process_time() - start
        for _ in range(5):
            start = time.process_time()
            db.execute("BEGIN IMMEDIATE")
            ids = [row[0] for row in db.execute("""
                SELECT id FROM deliveries WHERE state = 'pending' AND nextAttemptAt <= ? AND (leaseTag IS NULL OR leaseUntil IS NULL OR leaseUntil <= ?)
                ORDER BY nextAttemptAt, id LIMIT 100""", (now + 1, now))]
            marks = ",".join("?" * len(ids))
            db.execute(f"UPDATE deliveries SET leaseUntil = ?, leasedBy = 1, leaseTag = 2, leaseOwner = 2 WHERE id IN ({marks})", [now + 60] + ids)
            db.execute("COMMIT")
            spent["claim"] += time.process_time() - start
            start = time.process_time()
            db.execute("BEGIN IMMEDIATE")
            db.execute(f"""UPDATE deliveries SET state = 'sent', attempts = attempts + 1, reason = NULL, leaseUntil = NULL, leasedBy = NULL,
                           leaseTag = NULL, updatedAt = ? WHERE id IN ({marks}) AND leaseTag = 2 AND state = 'pending' RETURNING id""",
                       [now] + ids).fetchall()
            db.execute("COMMIT")
            spent["record"] += time.process_time() - start
    db.close()
    return {step: seconds * 1e6 / n for step, seconds in spent.items()}

results = {layout: [] for layout in layouts}
for round in range(rounds):
    for layout in (layouts if round % 2 == 0 else reversed(list(layouts))):
        figures = run(layout)
        results[layout].append(figures)
        print(f"round {round + 1} {layout}: " + ", ".join(f"{step} {value:.1f}" for step, value in figures.items())
              + f", all {sum(figures.values()):.1f} µs a push", file=sys.stderr)
print(f"{n} pushes of one campaign, {rounds} rounds in turn; CPU µs a push (medians)")
print(f"{'layout':<8} {'queue':>7} {'claim':>7} {'record':>7} {'all':>7}")
for layout, runs in results.items():
    median = lambda key: statistics.median(r[key] if key != "all" else sum(r.values()) for r in runs)
    print(f"{layout:<8} {median('queue'):7.1f} {median('claim'):7.1f} {median('record'):7.1f} {median('all'):7.1f}")
EOF
