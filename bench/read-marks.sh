#!/usr/bin/env bash
# What a first fetch's read mark costs the database, by the campaign index it keeps (issue #51,
# core-v29), on SQLite and on PostgreSQL. A store made by this checkout's `richpush` (its whole
# schema: `users add`, and on PostgreSQL `media add` for the image the rows name), N campaign
# notifications inserted, then every one marked read by the statement `NotificationStore.markRead`
# runs (UPDATE … WHERE read = 0 AND id IN the batch's list RETURNING …), BATCH ids a transaction
# (about what a storm of 14,000 fetches a second gathers in `ReadMarks`' 10 ms), with durable
# commits (SQLite `synchronous = FULL` in WAL mode, as `serve` writes; PostgreSQL fsync on, as
# bench/lib.sh's start_postgres makes it). Two schemas, in turn, ROUNDS times each on a fresh
# copy: the index as it is now (SQLite `notifications(campaignId)`, PostgreSQL `(campaignId,
# id)`), and the one core-v29 dropped (`notifications(campaignId, read)`). Marks come in id order
# (a batch's rows on the same few pages) and, in a second pass, in random order (spread over the
# table). Prints medians of the CPU per mark (SQLite: the Python process's, SQLite included;
# PostgreSQL: the backend's that ran them) and of the wall time, and on PostgreSQL how many of
# the marks were HOT updates (no index entry written).
#
# Usage: bench/read-marks.sh [ROUNDS] [N] [BATCH]   (env ENGINES, default "sqlite postgres";
#        BENCH_WORK; RICHPUSH_BIN: a richpush to make the schema with instead of this checkout's
#        release build)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
rounds=${1:-4} n=${2:-20000} batch=${3:-140}
engines=${ENGINES:-sqlite postgres}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/read-marks
source bench/lib.sh
richpush_binary
rm -rf "$work" && mkdir -p "$work"
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=""; if [ "$(id -u)" = 0 ]; then as_pg="runuser -u postgres --"; chown postgres "$work"; fi
cleanup() {
    $as_pg "$pg/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
old_index="CREATE INDEX notifications_campaign ON notifications(campaignId, read) WHERE campaignId IS NOT NULL"

echo "$n read marks, $batch a transaction, durable commits; medians of $rounds rounds in turn"
printf '%-10s %-52s %-7s %14s %8s %10s\n' engine "campaign index" order "CPU µs a mark" "wall µs" "HOT"

if [[ " $engines " == *" sqlite "* ]]; then
    echo pw | "$rp" users add root --admin --password-stdin --data "$work/schema" >/dev/null 2>&1
    python3 - "$work" "$rounds" "$n" "$batch" "$old_index" <<'PY'
import json, os, random, shutil, sqlite3, statistics, sys, time
work, rounds, n, batch, old_index = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
schemas = {"notifications(campaignId), now": None,
           "notifications(campaignId, read), before core-v29": "DROP INDEX notifications_campaign; " + old_index}
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
    # (no campaign or image row: Python's sqlite3 leaves foreign keys off, and no statement here reads one).
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

for shuffled in (False, True):
    results = {name: [] for name in schemas}
    for _ in range(rounds):
        for name, change in schemas.items():
            db = prepare(change)
            results[name].append(run(db, shuffled))
            db.close()
    for name, runs in results.items():
        print(f"{'sqlite':<10} {name:<52} {'random' if shuffled else 'id':<7} "
              f"{statistics.median(r[0] for r in runs):>14.1f} {statistics.median(r[1] for r in runs):>8.1f} {'':>10}")
PY
fi

if [[ " $engines " == *" postgres "* ]]; then
    pgport=25821
    start_postgres "$work" $pgport
    psql_() { "$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -qAt "$@"; }
    url="postgres://richpush@127.0.0.1:$pgport/richpush"
    echo pw | "$rp" users add root --admin --password-stdin --data "$work/pgdata" --database "$url" >/dev/null 2>&1
    "$rp" media add "$repo/media/logo.png" --data "$work/pgdata" --database "$url" >/dev/null 2>&1
    payload=$(sha256sum "$repo/media/logo.png" | cut -c1-64)
    hz=$(getconf CLK_TCK)
    for order in id random; do
        python3 - "$n" "$batch" "$order" > "$work/marks-$order.sql" <<'PY'
import random, sys
n, batch, order = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ids = list(range(1, n + 1))
if order == "random":
    random.Random(1).shuffle(ids)
# The backend's own CPU (user + system ticks) before and after, from /proc, into ticks.txt.
ticks = "\\! awk '{print $14 + $15}' /proc/$BACKEND/stat >> \"$WORK/ticks.txt\""
print("SELECT pg_backend_pid() AS backend \\gset")
print("\\setenv BACKEND :backend")
print(ticks)
for start in range(0, n, batch):
    chunk = ",".join(map(str, sorted(ids[start:start + batch])))
    print("BEGIN; UPDATE notifications SET read = 1, readAt = extract(epoch FROM clock_timestamp()) WHERE read = 0 "
          f"AND id = ANY(string_to_array('{chunk}', ',')::bigint[]) RETURNING id, campaignId, recipient; COMMIT;")
print(ticks)
PY
        declare -A cpu=() wall=() hot=()
        for round in $(seq 1 "$rounds"); do
            for schema in now before; do
                psql_ -c "DROP DATABASE IF EXISTS marks" postgres
                psql_ -c "CREATE DATABASE marks TEMPLATE richpush" postgres
                [ $schema = before ] && psql_ -c "DROP INDEX notifications_campaign; $old_index" marks
                # The same rows as on SQLite, ids 1…N (the table is empty).
                psql_ marks <<SQL
INSERT INTO notifications (id, recipient, message, richType, payload, push, createdAt, campaignId, mode, richUrl)
SELECT i, 'user' || lpad(i::text, 7, '0'), 'A new picture for you', 'image', '$payload', decode(repeat('0123456789abcdef', 38), 'hex'),
       extract(epoch FROM now()), 1, 'alert', 'https://rp.example/p/' || lpad(i::text, 7, '0') || '.' || repeat('x', 80)
FROM generate_series(1, $n) i;
VACUUM ANALYZE notifications;
SQL
                rm -f "$work/ticks.txt"
                t0=$(date +%s%N)
                WORK=$work psql_ marks -f "$work/marks-$order.sql" >/dev/null
                t1=$(date +%s%N)
                c0=$(sed -n 1p "$work/ticks.txt") c1=$(sed -n 2p "$work/ticks.txt")
                # The backend reports its counts once it has ended; read until they are all in.
                counts=""
                for _ in $(seq 1 50); do
                    counts=$(psql_ -c "SELECT n_tup_upd || ' ' || n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'notifications'" marks)
                    [ "${counts%% *}" = "$n" ] && break
                    sleep 0.1
                done
                [ "${counts%% *}" = "$n" ] || { echo "PostgreSQL counted ${counts%% *} marks, not $n" >&2; exit 1; }
                cpu[$schema]+=" $(echo "($c1 - $c0) * 1000000 / $hz / $n" | bc -l)"
                wall[$schema]+=" $(echo "($t1 - $t0) / 1000 / $n" | bc -l)"
                hot[$schema]+=" ${counts#* }"
            done
        done
        for schema in now before; do
            name="notifications(campaignId, id), now"
            [ $schema = before ] && name="notifications(campaignId, read), before core-v29"
            # shellcheck disable=SC2086
            printf '%-10s %-52s %-7s %14.1f %8.1f %10s\n' postgres "$name" "$order" "$(median_of ${cpu[$schema]})" \
                "$(median_of ${wall[$schema]})" "$(median_of ${hot[$schema]}) of $n"
        done
        unset cpu wall hot
    done
fi
