#!/usr/bin/env bash
# Where a campaign's push costs `serve` its CPU (issue #51): one node on ENGINE (sqlite, or
# postgres on a cluster this script starts) with N users, a device each, sending to the APNs
# sandbox; one campaign to warm up, then one under `perf record` (call graphs by frame pointer)
# of `serve`. Prints `serve`'s CPU per push for both campaigns, and perf's top functions (self
# time, then with children) for the second; the raw profile stays in $work/perf.data. On
# postgres, PostgreSQL's processes are profiled too (self time only: Debian builds it without
# frame pointers), with their CPU per push, into $work/perf-pg.data; PG_STATEMENTS=1 adds
# pg_stat_statements' table of statements (with NO_PERF, one for each campaign; PG_STATEMENTS_ROWS
# of them, default 25). SYSCALLS=1 counts `serve`'s system calls in the
# second campaign instead of profiling it.
#
# Every campaign's line gives the APNs sandbox's CPU per push too, a reference measured in the
# same campaign (this machine is shared: a slow minute slows every process alike), and `serve`'s
# and PostgreSQL's per µs of it. A/B: RICHPUSH_BIN names a `richpush` binary to run instead of
# this checkout's release build for `serve`, SANDBOX_BIN one for the sandbox (by default the same:
# give both sides of an A/B the same sandbox, since a change to `serve`'s requests changes the
# sandbox's work too), and NO_PERF=1 runs ROUNDS (1) campaigns after the warm-up without perf
# (figures perf's sampling does not touch), e.g. two binaries in turn:
#   for b in /tmp/rp-old /tmp/rp-new /tmp/rp-old /tmp/rp-new; do
#       RICHPUSH_BIN=$b SANDBOX_BIN=/tmp/rp-old ROUNDS=2 NO_PERF=1 bench/profile-push.sh 20000 postgres; done
#
# OUTBOX_RUNS=off queues the campaigns a row a push on PostgreSQL (the database's setting
# `outboxRuns`), for an A/B of the two layouts in one binary:
#   for r in off on off on; do OUTBOX_RUNS=$r ROUNDS=2 NO_PERF=1 bench/profile-push.sh 20000 postgres; done
#
# Usage: bench/profile-push.sh [N] [ENGINE]   (default 50000 sqlite; env BENCH_WORK, PG_STATEMENTS, SYSCALLS, RICHPUSH_BIN, SANDBOX_BIN, ROUNDS, NO_PERF, OUTBOX_RUNS)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
n=${1:-50000}
engines=${2:-sqlite}
engine=$engines
work=$(realpath -m "${BENCH_WORK:-bench/work}")/profile
port=18770
sandbox_port=22770
pgport=25770
password=admin-password
source bench/lib.sh
python3 -c 'import cryptography' 2>/dev/null || pip install --quiet cryptography
command -v perf >/dev/null || install_missing perf:linux-perf
richpush_binary
sandbox_rp=$(realpath "${SANDBOX_BIN:-$rp}")
rm -rf "$work" && mkdir -p "$work" && cd "$work"
KEEP_WORK=1
use_engines
trap 'kill ${sandbox_pid:-} 2>/dev/null || true; engines_cleanup' EXIT
database_of() { [ "$1" = postgres ] && echo "postgres://richpush@127.0.0.1:$pgport/richpush" || echo ""; }
if [ "$engine" = postgres ]; then
    # PG_STATEMENTS=1: pg_stat_statements counts each statement's calls, rows and time (it costs a little CPU itself).
    [ "${PG_STATEMENTS:-}" = 1 ] && PG_OPTIONS="${PG_OPTIONS:-} -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on"
    start_postgres "$work" "$pgport"
    [ "${PG_STATEMENTS:-}" = 1 ] && "$pg/psql" -h 127.0.0.1 -p "$pgport" -U richpush -d richpush -qc "CREATE EXTENSION pg_stat_statements"
fi
start_apns_sandbox "$sandbox_rp" $sandbox_port
echo "$password" | "$rp" users add admin --admin --password-stdin --data "data-$engine" ${pg:+--database "$(database_of "$engine")"} >/dev/null
if [ "$engine" = postgres ]; then insert_devices postgres "$n"; else insert_devices sqlite "$n" "$work/data-sqlite/richpush.sqlite"; fi
# OUTBOX_RUNS=off: campaigns a row a push on PostgreSQL (the database's setting, docs/design/outbox.md#runs), for an A/B in one binary.
if [ "$engine" = postgres ] && [ "${OUTBOX_RUNS:-on}" = off ]; then
    "$pg/psql" -h 127.0.0.1 -p "$pgport" -U richpush -d richpush -qc "INSERT INTO settings (key, value) VALUES ('outboxRuns', 'off')"
fi
"$rp" serve --data "data-$engine" ${pg:+--database "$(database_of "$engine")"} --port "$port" --log-level warning \
    --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 --apns-topic com.example.app \
    --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem 2>> serve.log &
serve_pid=$!
for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
curl -fs -u "admin:$password" "http://127.0.0.1:$port/api/admin/campaigns" >/dev/null
hz=$(getconf CLK_TCK)
per_push() { python3 -c 'import sys; print("%.1f" % ((int(sys.argv[2]) - int(sys.argv[1])) * 1e6 / int(sys.argv[3]) / int(sys.argv[4])))' "$1" "$2" "$hz" "$n"; }
pg_ticks() { echo 0; }
if [ "$engine" = postgres ]; then
    # PostgreSQL's processes, listed again for every campaign (serve's pool opens connections as it goes).
    list_pg() { pg_pids="$(head -1 "$work/pg/postmaster.pid"),$(pgrep -d, -P "$(head -1 "$work/pg/postmaster.pid")")"; }
    pg_ticks() {
        local t=0 p c
        for p in ${pg_pids//,/ }; do c=$(cpu_ticks "$p" 2>/dev/null) && [ -n "$c" ] && t=$((t + c)); done
        echo $t
    }
fi
campaign() { # one alert campaign to all N, waited for; prints the µs of CPU per push of serve, the sandbox and PostgreSQL, and the ratios
    [ "$engine" = postgres ] && list_pg
    local c0 b0 p0; c0=$(cpu_ticks "$serve_pid") b0=$(cpu_ticks "$sandbox_pid") p0=$(pg_ticks)
    python3 - "$port" "$n" "$password" <<'PY'
import base64, http.client, json, sys, time
port, n, password = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
h = {"Authorization": "Basic " + base64.b64encode(("admin:" + password).encode()).decode(), "Content-Type": "application/json"}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
c.request("POST", "/api/admin/campaigns", json.dumps({"audience": {"all": True}, "title": "Profiled", "message": "m"}), h)
r = c.getresponse(); created = json.loads(r.read()); assert r.status == 202, created
while True:
    c.request("GET", "/api/admin/campaigns/%d" % created["id"], headers=h); p = json.loads(c.getresponse().read())
    if p["sent"] + p["failed"] >= n: break
    time.sleep(0.2)
assert p["failed"] == 0, p
PY
    local serve sandbox postgres
    serve=$(per_push "$c0" "$(cpu_ticks "$serve_pid")") sandbox=$(per_push "$b0" "$(cpu_ticks "$sandbox_pid")") postgres=$(per_push "$p0" "$(pg_ticks)")
    python3 -c '
import sys
s, b, p = map(float, sys.argv[1:4])
pg = sys.argv[4] == "postgres"
print("serve %.1f µs a push, sandbox %.1f%s; per µs of the sandbox: serve %.3f%s"
      % (s, b, ", PostgreSQL %.1f" % p if pg else "", s / b, ", PostgreSQL %.3f" % (p / b) if pg else ""))' "$serve" "$sandbox" "$postgres" "$engine"
}
statements() { # PG_STATEMENTS=1: pg_stat_statements' table of the statements since the last (TITLE), then reset
    [ "$engine" = postgres ] && [ "${PG_STATEMENTS:-}" = 1 ] || return 0
    echo "--- PostgreSQL, statements ($1)"
    "$pg/psql" -h 127.0.0.1 -p "$pgport" -U richpush -d richpush -P pager=off -c "
        SELECT calls, rows, round(total_plan_time::numeric, 0) AS plan_ms, round(total_exec_time::numeric, 0) AS exec_ms,
               wal_records, shared_blks_hit AS hit, left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS query
        FROM pg_stat_statements ORDER BY total_plan_time + total_exec_time DESC LIMIT ${PG_STATEMENTS_ROWS:-25}" -c "SELECT pg_stat_statements_reset()" |
        grep -v -e pg_stat_statements_reset -e '^-*$' -e '^(1 row)$' -e '^ *$'
}
echo "warm-up campaign ($(basename "$rp")): $(campaign)" >&2
if [ "${NO_PERF:-}" = 1 ]; then
    statements "the users' and devices' inserts and the warm-up campaign"
    for k in $(seq 1 "${ROUNDS:-1}"); do echo "campaign $k ($rp): $(campaign)"; statements "campaign $k"; done
    exit 0
fi
if [ "${SYSCALLS:-}" = 1 ]; then
    # SYSCALLS=1: the system calls `serve` makes in the second campaign, counted (perf stat), per push.
    perf stat -e 'syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_pwrite64,syscalls:sys_enter_read,syscalls:sys_enter_pread64,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync' \
        -p "$serve_pid" -o perf-stat.txt 2>/dev/null &
    perf_pid=$!
    sleep 1
    echo "counted campaign (perf stat running): $(campaign)" >&2
    kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true
    awk -v n="$n" '/syscalls:/ { gsub(",", "", $1); printf "%-40s %10d  %.3f a push\n", $2, $1, $1 / n }' perf-stat.txt
    exit 0
fi
perf record -F 1999 -g -p "$serve_pid" -o perf.data 2>/dev/null &
perf_pid=$!
if [ "$engine" = postgres ]; then
    list_pg
    perf record -F 1999 -p "$pg_pids" -o perf-pg.data 2>/dev/null &
    perf_pg_pid=$!
fi
sleep 1
echo "profiled campaign (perf running): $(campaign)" >&2
kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true
if [ "$engine" = postgres ]; then
    kill -INT "$perf_pg_pid"; wait "$perf_pg_pid" 2>/dev/null || true
    echo "--- PostgreSQL, self time"
    perf report -i perf-pg.data --no-children --sort symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -60 || true
    statements "every campaign"
    echo "--- PostgreSQL, by process"
    perf report -i perf-pg.data --no-children --sort comm,pid --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -20 || true
fi
perf report -i perf.data --no-children --sort symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -50 || true
echo "--- with children"
perf report -i perf.data --children --sort symbol --stdio -g none 2>/dev/null | grep -v '^#' | grep '%' | head -60 || true
