#!/usr/bin/env bash
# A million on one node (issue #28): one alert campaign to N users with a device each (default
# 1,000,000) from one `serve` (release build, one event loop per core) through `richpush
# apns-sandbox`, on SQLite + files and on PostgreSQL (a local cluster this script starts), one
# after the other. For each engine:
#
# - queueing: from the POST until every recipient's push is in the outbox (the POST answers once
#   the campaign is queued; pushes go out from the first batch on);
# - pushes per second around 10k, 100k and 1M sent: over the last tenth before each mark
#   (9k→10k, 90k→100k, 900k→1M), which should be flat within 10%: from progress polled every
#   0.25 s, and again from the outbox's record of when each push was recorded sent;
# - peak RSS of `serve` (VmHWM; target < 200 MiB), sampled too while it runs;
# - the database's growth per recipient (SQLite: the file and its WAL after a checkpoint;
#   PostgreSQL: pg_database_size), notification, push and outbox row together;
# - CPU per push of `serve` and of the sandbox (from /proc, over the whole campaign).
#
# Users and devices are inserted straight into each store's tables (registering a million
# through the API is bench/broadcast.sh's business at 10,000).
#
# Usage: bench/million.sh [N] [ENGINES]   (default 1000000 "sqlite postgres"; env BENCH_WORK,
#        KEEP_WORK=1)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
n=${1:-1000000}
engines=${2:-sqlite postgres}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/million
sandbox_port=22399
port=18398
source bench/lib.sh
python3 -c 'import cryptography' 2>/dev/null || pip install --quiet cryptography
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

serve_pid='' sandbox_pid='' sampler_pid=''
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=""; if [ "$(id -u)" = 0 ]; then as_pg="runuser -u postgres --"; chown postgres "$work"; fi
cleanup() {
    local status=$?
    for pid in $sampler_pid $serve_pid $sandbox_pid; do kill "$pid" 2>/dev/null || true; done
    $as_pg "$pg/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
trap cleanup EXIT

pgport=25433
postgres_url="postgres://richpush@127.0.0.1:$pgport/richpush"
if [[ " $engines " == *" postgres "* ]]; then start_postgres "$work" $pgport; fi
start_apns_sandbox "$rp" $sandbox_port
mkdir -p media && cp "$repo/media/logo.png" media/

database_of() { [ "$1" = sqlite ] && echo "sqlite:$work/data-sqlite/richpush.sqlite" || echo "$postgres_url"; }
size_of() { # ENGINE -> bytes
    if [ "$1" = sqlite ]; then
        python3 -c "import sqlite3; c = sqlite3.connect('$work/data-sqlite/richpush.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)')" >/dev/null
        stat -c %s "$work/data-sqlite/richpush.sqlite"
    else
        "$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -d richpush -tAc "CHECKPOINT; SELECT pg_database_size('richpush')" | tail -1
    fi
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

for engine in $engines; do
    database=$(database_of "$engine")
    echo admin-password | "$rp" users add admin --admin --password-stdin --data "data-$engine" --database "$database" >/dev/null
    t0=$(now)
    insert_devices "$engine" "$n"
    echo "$engine: $n users and devices inserted in $(echo "$(now) - $t0" | bc -l | xargs printf %.1f) s" >&2
    before=$(size_of "$engine")

    "$rp" serve --data "data-$engine" --database "$database" --port $port --log-level warning \
        --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 --apns-topic com.example.app \
        --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem 2>> "serve-$engine.log" &
    serve_pid=$!
    for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
    # The admin's bcrypt (cost 12) once, before anything is timed.
    curl -fs -u admin:admin-password "http://127.0.0.1:$port/api/admin/campaigns" >/dev/null
    rss_start=$(awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status")
    s0=$(cpu_ticks "$serve_pid"); b0=$(cpu_ticks "$sandbox_pid")
    # RSS every half second while the campaign runs.
    (while kill -0 "$serve_pid" 2>/dev/null; do echo "$(now) $(awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status" 2>/dev/null)"; sleep 0.5; done) > "rss-$engine.txt" &
    sampler_pid=$!

    python3 - "$port" "$n" "$engine" <<'PY'
import base64, http.client, json, sys, threading, time
port, n, engine = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
h = {"Authorization": "Basic " + base64.b64encode(b"admin:admin-password").decode(), "Content-Type": "application/json"}
progress = []  # (t, sent, queued pushes)
created = {}
def post():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/api/admin/campaigns", json.dumps({"audience": {"all": True}, "title": "A million", "message": "m", "mode": "alert"}), h)
    r = c.getresponse(); created.update(json.loads(r.read())); created["status"] = r.status; created["answered"] = time.perf_counter()
t0 = time.perf_counter()
poster = threading.Thread(target=post); poster.start()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
cid = None
while cid is None:
    time.sleep(0.2)
    c.request("GET", "/api/admin/campaigns", headers=h); listed = json.loads(c.getresponse().read())
    if listed: cid = listed[0]["id"] if isinstance(listed, list) else None
queued_at = None
while True:
    c.request("GET", "/api/admin/campaigns/%d" % cid, headers=h); p = json.loads(c.getresponse().read())
    t = time.perf_counter() - t0
    progress.append((t, p["sent"], p["sent"] + p["failed"] + p["pending"]))
    if queued_at is None and p["sent"] + p["failed"] + p["pending"] >= n: queued_at = t
    if p["sent"] + p["failed"] >= n: break
    time.sleep(0.25)
poster.join()
assert created["status"] == 202, created
assert p["failed"] == 0, p
def when(mark):  # the first time `sent` reached mark, interpolated between samples
    for (ta, sa, _), (tb, sb, _) in zip(progress, progress[1:]):
        if sb >= mark > sa: return ta + (tb - ta) * (mark - sa) / (sb - sa)
    return progress[0][0]
rates = []
for mark in (10_000, 100_000, n):
    if mark > n: continue
    a, b = when(mark * 0.9), when(mark)
    rates.append((mark, mark * 0.1 / (b - a)))
total = progress[-1][0]
post_seconds = created["answered"] - t0
with open("progress-%s.txt" % engine, "w") as f:  # seconds, sent, in the outbox or sent
    f.writelines("%.2f %d %d\n" % row for row in progress)
sent_queued = next(s for t, s, _ in progress if t >= queued_at)
during = sent_queued / queued_at
after = (n - sent_queued) / (total - queued_at) if total > queued_at else float("nan")
print(f"{engine}: POST answered after {post_seconds:.1f} s; every push queued after {queued_at:.1f} s; all {n} sent after {total:.1f} s "
      f"({n / total:.0f} pushes/s overall)")
print(f"{engine}: pushes/s over the last tenth before " + ", ".join(f"{m:,}: {r:.0f}" for m, r in rates)
      + f"; spread {(max(r for _, r in rates) / min(r for _, r in rates) - 1) * 100:.1f}%")
print(f"{engine}: {sent_queued} sent when the last push was queued: {during:.0f} pushes/s while queueing, {after:.0f} after")
tenths = [when(n * k / 10) for k in range(11)]
print(f"{engine}: pushes/s in each tenth of the campaign: " + " ".join(f"{n / 10 / (b - a):.0f}" for a, b in zip(tenths, tenths[1:])))
PY
    # The same marks from the outbox's own record of each send (a delivery's updatedAt is when its
    # batch was recorded sent): a 9k→10k window is half a second, two of the polls above.
    if [ "$engine" = sqlite ]; then
        python3 -c "import sqlite3, sys; c = sqlite3.connect('$work/data-sqlite/richpush.sqlite'); sys.stdout.writelines('%r\n' % r[0] for r in c.execute(\"SELECT updatedAt FROM deliveries WHERE state = 'sent' ORDER BY updatedAt\"))" > "sent-$engine.txt"
    else
        "$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -d richpush -tAc "COPY (SELECT updatedAt FROM deliveries WHERE state = 'sent' ORDER BY updatedAt) TO STDOUT" > "sent-$engine.txt"
    fi
    python3 - "$n" "$engine" "sent-$engine.txt" <<'PY'
import sys
n, engine = int(sys.argv[1]), sys.argv[2]
times = [float(line) for line in open(sys.argv[3])]
assert len(times) == n, (len(times), n)
at = lambda k: times[max(int(k), 1) - 1]  # when the k-th push was recorded sent
rates = [(m, m * 0.1 / (at(m) - at(m * 0.9))) for m in (10_000, 100_000, n) if m <= n]
print(f"{engine}: the same from the outbox's record times: " + ", ".join(f"{m:,}: {r:.0f}" for m, r in rates)
      + f"; spread {(max(r for _, r in rates) / min(r for _, r in rates) - 1) * 100:.1f}%; each tenth: "
      + " ".join(f"{n / 10 / (at(n * (k + 1) / 10) - at(n * k / 10) if k else at(n / 10) - times[0]):.0f}" for k in range(10)))
PY
    kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=
    serve_cpu=$(( $(cpu_ticks "$serve_pid") - s0 )); sandbox_cpu=$(( $(cpu_ticks "$sandbox_pid") - b0 ))
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status")
    kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=
    after=$(size_of "$engine")
    printf '%s: serve RSS %.1f MiB at start, peak %.1f MiB (VmHWM; target < 200); database +%.0f bytes per recipient (%.1f MB → %.1f MB)\n' \
        "$engine" "$(echo "$rss_start / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$(echo "($after - $before) / $n" | bc -l)" \
        "$(echo "$before / 1000000" | bc -l)" "$(echo "$after / 1000000" | bc -l)"
    printf '%s: CPU per push: serve %.0f us, APNs sandbox %.0f us\n' "$engine" \
        "$(echo "$serve_cpu * 1000000 / $hz / $n" | bc -l)" "$(echo "$sandbox_cpu * 1000000 / $hz / $n" | bc -l)"
done
