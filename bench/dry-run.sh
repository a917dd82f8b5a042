#!/usr/bin/env bash
# Dry runs (issue #48, SPEC §29, docs/api.md#dry-runs): POST /api/admin/campaigns with
# "dryRun":true to {"all":true} over N users (default 10,000), each with an APNs device, on
# SQLite + files and on PostgreSQL (a local cluster this script starts, durable commits as
# bench/lib.sh's start_postgres makes it), one engine after the other. Target: the answer within
# a second (issue #48's "done when").
#
# Per engine:
# 1. The schema and the admin (`richpush users add admin --admin`), then N users u1…uN with an
#    APNs device each, inserted straight into the store's tables (bench/lib.sh's insert_devices;
#    vacuumed on PostgreSQL as long-registered users' tables would be).
# 2. `serve` on that store, with no push service (a dry run sends nothing); the admin's bcrypt
#    (cost 12) checked once before anything is timed.
# 3. ROUNDS dry runs (default 5) of a campaign whose title is a template ({{user.name}}: its
#    samples are rendered per recipient), each timed by curl (time_total); the median and each
#    round. Each answer is checked: 200, reach.users N + 1 (the admin, who has no device, is a
#    recipient too), reach.devices and reach.byApp.default.apns N, 3 APNs samples.
# 4. Afterwards, GET /api/admin/campaigns: still none (a dry run records nothing).
#
# Progress goes to stderr; the table to stdout. Exits nonzero when an answer is not as it should be.
#
# Usage: bench/dry-run.sh [N] [ENGINES]   (default 10000 "sqlite postgres"; env ROUNDS, BENCH_WORK, KEEP_WORK=1)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
n=${1:-10000}
engines=${2:-sqlite postgres}
rounds=${ROUNDS:-5}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/dry-run
port=18698
pgport=25437
password=admin-password
target=1
[ "$rounds" -ge 1 ] || { echo "ROUNDS must be 1 or more" >&2; exit 2; }
for engine in $engines; do
    case $engine in sqlite | postgres) ;; *) echo "unknown engine $engine (sqlite, postgres)" >&2; exit 2 ;; esac
done
source bench/lib.sh
install_missing bc:bc
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

use_engines  # bench/lib.sh: PostgreSQL's tools when $engines names it, and the cleanup on exit

# serve looks for its default image in media/ of its working directory.
mkdir -p media && cp "$repo/media/logo.png" media/
sqlite_file="$work/data-sqlite/richpush.sqlite"
database_of() { [ "$1" = sqlite ] && echo "sqlite:$sqlite_file" || echo "postgres://richpush@127.0.0.1:$pgport/richpush"; }
body='{"audience":{"all":true},"title":"Hello {{user.name}}","message":"What a dry run shows","dryRun":true}'


# dry_run -> "status seconds": one dry run, its answer in answer.json.
dry_run() {
    curl -sS -u "admin:$password" -H 'Content-Type: application/json' -d "$body" -o answer.json -w '%{http_code} %{time_total}' \
        "http://127.0.0.1:$port/api/admin/campaigns"
}

# checked_answer -> "ok", or what is wrong with answer.json.
checked_answer() {
    python3 - "$n" <<'PY'
import json, sys
n = int(sys.argv[1])
try:
    answer = json.load(open("answer.json"))
    reach, samples = answer["reach"], answer["samples"]
    ok = (answer.get("dryRun") is True and reach["users"] == n + 1 and reach["devices"] == n
          and reach["byApp"]["default"]["apns"] == n and len(samples["apns"]) == 3
          and samples["apns"][0]["push"]["aps"]["alert"]["title"] == "Hello " + samples["apns"][0]["user"])
    print("ok" if ok else "unexpected: " + json.dumps(reach) + " " + json.dumps([s["user"] for s in samples["apns"]]))
except Exception as error:
    print("unreadable: %r: %s" % (error, open("answer.json").read()[:300]))
PY
}

results="$work/results.txt"
: > "$results"
failed=0
for engine in $engines; do
    if [ "$engine" = postgres ]; then start_postgres "$work" $pgport; fi
    echo "$password" | "$rp" users add admin --admin --password-stdin --data "data-$engine" --database "$(database_of "$engine")" >/dev/null
    t0=$(now)
    if [ "$engine" = sqlite ]; then insert_devices sqlite "$n" "$sqlite_file"; else insert_devices postgres "$n" richpush; fi
    echo "$engine: $n users and devices inserted in $(echo "$(now) - $t0" | bc -l | xargs printf %.1f) s" >&2
    start_serve "$engine" /api/admin/campaigns
    times=""
    for round in $(seq 1 "$rounds"); do
        read -r status seconds <<< "$(dry_run)"
        check=$(checked_answer)
        echo "$engine: round $round: $status in $seconds s, $check" >&2
        if [ "$status" != 200 ] || [ "$check" != ok ]; then failed=1; fi
        times="$times $seconds"
    done
    campaigns=$(curl -fsS -u "admin:$password" "http://127.0.0.1:$port/api/admin/campaigns")
    if [ "$campaigns" != "[]" ]; then
        echo "$engine: a dry run left campaigns behind: ${campaigns:0:300}" >&2
        failed=1
    fi
    stop_serve
    # engine, users, median, each round
    printf '%s\t%s\t%s\t%s\n' "$engine" "$((n + 1))" "$(median_of $times)" "$(echo $times | sed 's/ / \/ /g')" >> "$results"
    [ "$engine" != sqlite ] || [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work/data-sqlite"
done

echo
printf 'a dry run of a campaign to everyone (issue #48): POST /api/admin/campaigns "dryRun":true, median of %d rounds\n' "$rounds"
printf '%-9s %9s %9s %-40s %7s %4s\n' engine users "median s" "rounds (s)" target met
while IFS=$'\t' read -r engine users median each; do
    met=$(echo "$median <= $target" | bc -l | sed 's/1/yes/; s/0/NO/')
    printf '%-9s %9d %9.3f %-40s %5s s %4s\n' "$engine" "$users" "$median" "$each" "$target" "$met"
done < "$results"
exit "$failed"
