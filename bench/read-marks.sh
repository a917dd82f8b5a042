#!/usr/bin/env bash
# What a first fetch's read mark costs SQLite, by the campaign index it keeps (issue #51,
# core-v29): a data directory made by this checkout's `richpush` (its whole schema), N campaign
# notifications inserted, then every one marked read by the statement `NotificationStore.markRead`
# runs (UPDATE … WHERE read = 0 AND id IN json_each(?) RETURNING …), BATCH ids a transaction
# (about what a storm of 14,000 fetches a second gathers in `ReadMarks`' 10 ms), with
# `synchronous = FULL` in WAL mode as `serve` writes. Two schemas, in turn, ROUNDS times each on a
# fresh copy: the index as it is now (`notifications(campaignId)`), and the one core-v29 dropped
# (`notifications(campaignId, read)`). Marks come in id order (as a broadcast's phones fetch, more
# or less) and, in a second pass, in random order. Prints the CPU (user + system of the Python
# process, SQLite included: the same for both) and the wall time per mark, as medians.
#
# Usage: bench/read-marks.sh [ROUNDS] [N] [BATCH]   (env BENCH_WORK; RICHPUSH_BIN: a richpush
#        to make the schema with instead of this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-4} n=${2:-20000} batch=${3:-140}
work=${BENCH_WORK:-$PWD/bench/work}/read-marks
if [ -n "${RICHPUSH_BIN:-}" ]; then
    rp=$(realpath "$RICHPUSH_BIN")
else
    swift build -c release --product richpush >&2
    rp="$(swift build -c release --show-bin-path)/richpush"
fi
rm -rf "$work" && mkdir -p "$work"
echo pw | "$rp" users add root --admin --password-stdin --data "$work/schema" >/dev/null 2>&1

python3 - "$work" "$rounds" "$n" "$batch" <<'PY'
import json, os, random, shutil, sqlite3, statistics, sys, time
work, rounds, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
schemas = {
    "notifications(campaignId), now": None,
    "notifications(campaignId, read), before core-v29":
        "DROP INDEX notifications_campaign; CREATE INDEX notifications_campaign ON notifications(campaignId, read) WHERE campaignId IS NOT NULL",
}
mark = ("UPDATE notifications SET read = 1, readAt = ? WHERE read = 0 AND id IN (SELECT value FROM json_each(?)) "
        "RETURNING id, campaignId, recipient")

def prepare(change):
    copy = f"{work}/copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(f"{work}/schema", copy)
    db = sqlite3.connect(f"{copy}/richpush.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    if change:
        db.executescript(change)
    # A campaign's rows as serve writes them: a ~300-byte push, a payload link, a recipient each
    # (no campaign row: Python's sqlite3 leaves foreign keys off, and no statement here reads one).
    db.execute("BEGIN")
    push = os.urandom(300)
    db.executemany("INSERT INTO notifications (recipient, message, richType, payload, push, createdAt, campaignId, mode, richUrl) "
                   "VALUES (?, 'A new picture for you', 'image', ?, ?, ?, 1, 'alert', ?)",
                   ((f"user{i:07d}", "ab" * 32, push, time.time(), f"https://rp.example/p/{i:07d}." + "x" * 80) for i in range(n)))
    db.execute("COMMIT")
    return db

def run(db, shuffled):
    db.execute("PRAGMA synchronous = FULL")
    ids = [row[0] for row in db.execute("SELECT id FROM notifications")]
    if shuffled:
        random.Random(1).shuffle(ids)
    cpu, wall = time.process_time(), time.monotonic()
    for start in range(0, len(ids), batch):
        db.execute("BEGIN IMMEDIATE")
        rows = list(db.execute(mark, (time.time(), json.dumps(sorted(ids[start:start + batch])))))
        db.execute("COMMIT")
        assert len(rows) == len(ids[start:start + batch])
    return (time.process_time() - cpu) / len(ids) * 1e6, (time.monotonic() - wall) / len(ids) * 1e6

print(f"{n} read marks, {batch} a transaction, synchronous = FULL; medians of {rounds} rounds in turn")
print(f"{'campaign index':<52} {'order':<8} {'CPU µs a mark':>14} {'wall µs':>8}")
for shuffled in (False, True):
    results = {name: [] for name in schemas}
    for _ in range(rounds):
        for name, change in schemas.items():
            db = prepare(change)
            results[name].append(run(db, shuffled))
            db.close()
    for name, runs in results.items():
        print(f"{name:<52} {'random' if shuffled else 'id':<8} {statistics.median(r[0] for r in runs):>14.1f} {statistics.median(r[1] for r in runs):>8.1f}")
PY
rm -rf "$work"
