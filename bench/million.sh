#!/usr/bin/env bash
# A million on one node (issue #28): alert campaigns from `serve` (release build, one event
# loop per core) through `richpush apns-sandbox`, on SQLite + files and on PostgreSQL (a local
# cluster this script starts), one engine after the other.
#
# The target is a rate that does not depend on the audience: pushes per second at 10k, 100k and
# 1M, flat within 10%. So each engine runs campaigns of each size, each on a node of its own (a
# `serve` with a database holding that many users, a device each; the nodes run side by side),
# and each campaign's rate is its recipients over the time from its POST to the last push
# recorded sent (the outbox's own record: a delivery's updatedAt, or its run's, is written with its batch). The
# smaller sizes (env SIZES, default 10,000 and 100,000) take turns, ROUNDS rounds before N's
# campaign and ROUNDS after (default 2: four campaigns each), and give their median. N (default
# 1,000,000) runs once, and for it also:
#
# - queueing: from the POST until every recipient's push is in the outbox (the POST answers once
#   its first batches are queued; pushes go out from the first batch on);
# - pushes per second within the campaign: over the last tenth before 10k, 100k and N sent
#   (9k→10k is 1,000 pushes, half a second: a sample, not a rate), and over each tenth;
# - peak RSS of `serve` (VmHWM; target < 200 MiB), sampled too while it runs;
# - the database's growth per recipient (SQLite: the file and its WAL after a checkpoint;
#   PostgreSQL: pg_database_size), notification, push and outbox row together;
# - CPU per push of `serve` and of the sandbox (from /proc, over the whole campaign).
#
# Every campaign, of every size, also gives the CPU the machine spent per push while it ran:
# its node's `serve`, the sandbox and the PostgreSQL cluster (from /proc), and on PostgreSQL the
# cluster's CPU in the VACUUM of the campaign's rows run right after it. A campaign's rate moves
# by ±15% from run to run on this shared machine with what else runs on it; what it costs per push
# does not, and is what would grow if anything grew with the audience. So each engine's rates
# are also given with the machine's speed taken out: a campaign's rate times the sandbox's CPU a
# push in it (the same work for every push), and that figure's spread from the smallest to N.
#
# Users and devices are inserted straight into each store's tables (registering a million
# through the API is bench/broadcast.sh's business at 10,000), and vacuumed on PostgreSQL as a
# node's long-registered users would be (else autovacuum's first pass over them would run
# beside the campaign).
#
# Usage: bench/million.sh [N] [ENGINES]   (default 1000000 "sqlite postgres"; env SIZES, ROUNDS,
#        BENCH_WORK, KEEP_WORK=1)
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

sandbox_pid='' sampler_pid=''
declare -A serve_pids=()
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=""; if [ "$(id -u)" = 0 ]; then as_pg="runuser -u postgres --"; chown postgres "$work"; fi
cleanup() {
    local status=$?
    for pid in $sampler_pid ${serve_pids[@]:-} $sandbox_pid; do kill "$pid" 2>/dev/null || true; done
    $as_pg "$pg/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
trap cleanup EXIT

pgport=25433
if [[ " $engines " == *" postgres "* ]]; then start_postgres "$work" $pgport; fi
start_apns_sandbox "$rp" $sandbox_port
mkdir -p media && cp "$repo/media/logo.png" media/
rounds=${ROUNDS:-2}
[ "$rounds" -ge 1 ] || { echo "ROUNDS must be 1 or more" >&2; exit 2; }
sizes=""; for size in ${SIZES-10000 100000}; do [ "$size" -lt "$n" ] && sizes="$sizes $size"; done
sizes="$sizes $n"

# A node of SIZE users: its data directory data-ENGINE-SIZE, and on PostgreSQL its own database.
dbname_of() { echo "richpush_$2"; } # ENGINE SIZE
database_of() { # ENGINE SIZE
    [ "$1" = sqlite ] && echo "sqlite:$work/data-sqlite-$2/richpush.sqlite" || echo "postgres://richpush@127.0.0.1:$pgport/$(dbname_of "$@")"
}
size_of() { # ENGINE SIZE -> bytes
    if [ "$1" = sqlite ]; then
        python3 -c "import sqlite3; c = sqlite3.connect('$work/data-sqlite-$2/richpush.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)')" >/dev/null &&
        stat -c %s "$work/data-sqlite-$2/richpush.sqlite"
    else
        "$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -d "$(dbname_of "$@")" -tAc "CHECKPOINT; SELECT pg_database_size('$(dbname_of "$@")')" | tail -1
    fi
}
hz=$(getconf CLK_TCK)
pg_ticks() { pg_cluster_ticks "$work"; }
# timed_campaign ENGINE SIZE ROUND DETAIL: campaign's rate, and the CPU of the node's serve, the
# sandbox and PostgreSQL while it ran, per push, appended to cpu-ENGINE-SIZE.txt (µs: serve
# sandbox postgres vacuum all). On this shared machine a campaign's rate moves by ±15% from run to
# run with what else runs; the CPU it takes per push does not, and is what would grow with the audience.
#
# On PostgreSQL each campaign is followed by a VACUUM (ANALYZE) of its database's outbox and
# notifications, timed by the cluster's CPU like the campaign (the vacuum column): the dead row
# versions a campaign's records leave are its own cost. Left to autovacuum, that work fell within
# whichever campaign ran next, on any of the cluster's databases: a campaign to 10,000 after the
# million's paid for the million's vacuum. The million's campaign still pays within its run for
# the autovacuum passes that its own growing tables set off.
timed_campaign() {
    local s0 b0 p0 p1 rate
    s0=$(cpu_ticks "${serve_pids[$2]}"); b0=$(cpu_ticks "$sandbox_pid"); p0=$(pg_ticks)
    rate=$(campaign "$@")
    local s1 b1; s1=$(cpu_ticks "${serve_pids[$2]}") b1=$(cpu_ticks "$sandbox_pid") p1=$(pg_ticks)
    if [ "$1" = postgres ]; then
        "$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -d "$(dbname_of "$1" "$2")" -qc "VACUUM (ANALYZE) deliveries, notifications, outbox_runs"
        sleep 0.5  # the vacuum's backend exits, so its time is counted (pg_cluster_ticks)
    fi
    python3 -c 'import sys; t = [(int(b) - int(a)) * 1e6 / int(sys.argv[1]) / int(sys.argv[2]) for a, b in zip(sys.argv[3::2], sys.argv[4::2])]; print("%.0f %.0f %.0f %.0f %.0f" % (*t, sum(t)))' \
        "$hz" "$2" "$s0" "$s1" "$b0" "$b1" "$p0" "$p1" "$p1" "$(pg_ticks)" >> "cpu-$1-$2.txt"
    echo "$rate"
}

# start_node ENGINE SIZE INDEX: a node of SIZE users (a device each) and its `serve` on port+INDEX;
# its pid in serve_pids[SIZE].
declare -A node_ports sizes_before rss_start
start_node() {
    local engine=$1 size=$2 database where t0
    database=$(database_of "$engine" "$size")
    if [ "$engine" = postgres ]; then "$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -qc "CREATE DATABASE $(dbname_of "$engine" "$size")" postgres; fi
    echo admin-password | "$rp" users add admin --admin --password-stdin --data "data-$engine-$size" --database "$database" >/dev/null
    t0=$(now)
    if [ "$engine" = sqlite ]; then where="$work/data-sqlite-$size/richpush.sqlite"; else where=$(dbname_of "$engine" "$size"); fi
    insert_devices "$engine" "$size" "$where"
    echo "$engine: $size users and devices inserted in $(echo "$(now) - $t0" | bc -l | xargs printf %.1f) s" >&2
    sizes_before[$size]=$(size_of "$engine" "$size")
    node_ports[$size]=$((port + $3))
    "$rp" serve --data "data-$engine-$size" --database "$database" --port "${node_ports[$size]}" --log-level warning \
        --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 --apns-topic com.example.app \
        --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem 2>> "serve-$engine-$size.log" &
    serve_pids[$size]=$!
    for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:${node_ports[$size]}/health" >/dev/null && break; sleep 0.1; done
    # The admin's bcrypt (cost 12) once, before anything is timed.
    curl -fs -u admin:admin-password "http://127.0.0.1:${node_ports[$size]}/api/admin/campaigns" >/dev/null
    rss_start[$size]=$(awk '/VmRSS/ {print $2}' "/proc/${serve_pids[$size]}/status")
}

# campaign ENGINE SIZE ROUND DETAIL: an alert campaign to every user of the SIZE node; prints its
# pushes per second (and, with DETAIL 1, the figures within it on stderr).
campaign() {
    python3 - "${node_ports[$2]}" "$2" "$1" "$3" "$4" "$work/data-sqlite-$2/richpush.sqlite" "$pg/psql" $pgport "$(dbname_of "$1" "$2")" <<'PY'
import base64, http.client, json, sqlite3, subprocess, sys, threading, time
port, n, engine, round, detail = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
sqlite_file, psql, pgport, dbname = sys.argv[6:10]
def column(query):  # the first column of a query's rows, from the node's own database
    if engine == "sqlite":
        return [row[0] for row in sqlite3.connect(sqlite_file).execute(query)]
    return [float(line) for line in subprocess.run([psql, "-h", "127.0.0.1", "-p", pgport, "-U", "richpush", "-d", dbname, "-tAc", query],
                                                   check=True, capture_output=True, text=True).stdout.split()]
h = {"Authorization": "Basic " + base64.b64encode(b"admin:admin-password").decode(), "Content-Type": "application/json"}
progress = []  # (t, sent, queued pushes)
created = {}
def post():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/api/admin/campaigns", json.dumps({"audience": {"all": True}, "title": "A million", "message": "m", "mode": "alert"}), h)
    r = c.getresponse(); created.update(json.loads(r.read())); created["status"] = r.status; created["answered"] = time.perf_counter()
posted_at = time.time()
t0 = time.perf_counter()
poster = threading.Thread(target=post); poster.start()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
while "id" not in created:
    time.sleep(0.05)
    if not poster.is_alive(): break
cid = created.get("id")
assert cid, created
queued_at = None
while True:
    c.request("GET", "/api/admin/campaigns/%d" % cid, headers=h); p = json.loads(c.getresponse().read())
    t = time.perf_counter() - t0
    progress.append((t, p["sent"], p["sent"] + p["failed"] + p["pending"]))
    if queued_at is None and p["sent"] + p["failed"] + p["pending"] >= n: queued_at = t
    if p["sent"] + p["failed"] >= n: break
    time.sleep(0.05 if detail and p["sent"] < 12_000 else 0.25)  # finer around the 10k mark
poster.join()
assert created["status"] == 202, created
assert p["failed"] == 0, p
# The campaign's rate: its recipients over the time from the POST to the last push recorded sent.
# A run of pushes (PostgreSQL, docs/design/outbox.md#runs) is written with each batch it records.
last = column("SELECT max(t) FROM (SELECT max(updatedAt) AS t FROM deliveries WHERE campaignId = %d AND state = 'sent' "
              "UNION ALL SELECT max(updatedAt) FROM outbox_runs WHERE campaignId = %d) AS l" % (cid, cid))[0]
rate = n / (last - posted_at)
with open("progress-%s-%d-%d.txt" % (engine, n, round), "w") as f:  # seconds, sent, in the outbox or sent
    f.writelines("%.2f %d %d\n" % row for row in progress)
post_seconds = created["answered"] - t0
print(f"{engine}: campaign {round} to {n:,}: POST answered after {post_seconds:.1f} s; every push queued after {queued_at:.1f} s; "
      f"all sent after {last - posted_at:.1f} s: {rate:.0f} pushes/s", file=sys.stderr)
if detail:
    # Within the campaign, from the outbox's record of each send.
    times = column("SELECT updatedAt FROM deliveries WHERE campaignId = %d AND state = 'sent' ORDER BY updatedAt" % cid)
    if len(times) == n:
        with open("sent-%s.txt" % engine, "w") as f: f.writelines("%r\n" % t for t in times)
        at = lambda k: times[max(int(k), 1) - 1]  # when the k-th push was recorded sent
    else:
        # Pushes sent from runs keep no time of their own: when the k-th was sent, from the
        # progress polls (every 0.05 s to 12,000 sent, then every 0.25 s), between the two around it.
        def at(k):
            k = max(k, 1)
            for (t0_, s0_, _), (t1_, s1_, _) in zip(progress, progress[1:]):
                if s1_ >= k: return t0_ + (t1_ - t0_) * (k - s0_) / (s1_ - s0_) if s1_ > s0_ else t1_
            return progress[-1][0]
        times = [at(1)]
    marks = [(m, m * 0.1 / (at(m) - at(m * 0.9))) for m in sorted({10_000, 100_000, n}) if m <= n]
    queued_index = next(i for i, row in enumerate(progress) if row[0] >= queued_at)
    sent_queued = progress[queued_index][1]
    during = sent_queued / queued_at
    total = progress[-1][0]
    after = (n - sent_queued) / (total - queued_at) if total > queued_at else float("nan")
    print(f"{engine}: {sent_queued} sent when the last push was queued: {during:.0f} pushes/s while queueing, {after:.0f} after", file=sys.stderr)
    print(f"{engine}: within it, pushes/s over the last tenth before " + ", ".join(f"{m:,}: {r:.0f}" for m, r in marks)
          + "; over each tenth: "
          + " ".join(f"{n / 10 / (at(n * (k + 1) / 10) - at(n * k / 10) if k else at(n / 10) - times[0]):.0f}" for k in range(10)),
          file=sys.stderr)
print(f"{rate:.0f}")
PY
}

small_rounds() { # ENGINE: ROUNDS campaigns to each smaller node, taking turns
    local round size
    for round in $(seq 1 "$rounds"); do
        for size in $smaller; do
            turn[$size]=$(( ${turn[$size]:-0} + 1 ))
            rates[$size]="${rates[$size]:-} $(timed_campaign "$1" "$size" "${turn[$size]}" 0)"
        done
    done
}

for engine in $engines; do
    declare -A rates=() turn=()
    smaller=${sizes% *}
    index=0
    for size in $sizes; do start_node "$engine" "$size" $((index++)); done
    # The smaller campaigns take turns, before and after N's, so that what the shared machine does
    # meanwhile falls on every size alike.
    small_rounds "$engine"
    pid=${serve_pids[$n]}
    s0=$(cpu_ticks "$pid"); b0=$(cpu_ticks "$sandbox_pid")
    # RSS every half second while the campaign runs.
    (while kill -0 "$pid" 2>/dev/null; do echo "$(now) $(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)"; sleep 0.5; done) > "rss-$engine.txt" &
    sampler_pid=$!
    rates[$n]=$(timed_campaign "$engine" "$n" 1 1)
    kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=
    serve_cpu=$(( $(cpu_ticks "$pid") - s0 )); sandbox_cpu=$(( $(cpu_ticks "$sandbox_pid") - b0 ))
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    small_rounds "$engine"
    for size in $sizes; do kill "${serve_pids[$size]}"; wait "${serve_pids[$size]}" 2>/dev/null || true; done
    serve_pids=()
    after=$(size_of "$engine" "$n")
    printf '%s: serve RSS %.1f MiB at start, peak %.1f MiB (VmHWM; target < 200); database +%.0f bytes per recipient (%.1f MB → %.1f MB)\n' \
        "$engine" "$(echo "${rss_start[$n]} / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$(echo "($after - ${sizes_before[$n]}) / $n" | bc -l)" \
        "$(echo "${sizes_before[$n]} / 1000000" | bc -l)" "$(echo "$after / 1000000" | bc -l)"
    printf '%s: CPU per push: serve %.0f us, APNs sandbox %.0f us\n' "$engine" \
        "$(echo "$serve_cpu * 1000000 / $hz / $n" | bc -l)" "$(echo "$sandbox_cpu * 1000000 / $hz / $n" | bc -l)"
    # The target: the campaigns' rates flat within 10% from the smallest to N.
    summary=""
    for size in $sizes; do
        [ "$size" = "$n" ] || echo "$engine: campaigns to $size: $(echo ${rates[$size]} | sed 's/ / \/ /g') pushes/s, median $(median_of ${rates[$size]})" >&2
        summary="$summary $size:$(median_of ${rates[$size]})"
    done
    python3 - "$engine" $summary <<'PY'
import sys
engine, rates = sys.argv[1], [(int(a), float(b)) for a, b in (x.split(":") for x in sys.argv[2:])]
low, high = min(r for _, r in rates), max(r for _, r in rates)
print(f"{engine}: pushes/s of a campaign to " + ", ".join(f"{size:,}: {rate:.0f}" for size, rate in rates)
      + f"; spread {(high / low - 1) * 100:.1f}% (target: within 10%)")
PY
    # Then the same rates with the machine's speed taken out: each campaign's pushes/s times the
    # sandbox's CPU seconds a push in it (the sandbox does the same work for every push, so this
    # is the share of the cores the campaign gave it). The sandbox's µs a push moves by a third
    # within an hour on this shared machine, and each campaign's rate with it (BENCHMARKS.md,
    # session 51).
    python3 - "$engine" $(for size in $sizes; do echo "$size:$(echo ${rates[$size]} | tr ' ' ,)"; done) <<'PY'
import statistics, sys
engine, given = sys.argv[1], [x.split(":") for x in sys.argv[2:]]
medians, cores = {}, {}
for size, rates in given:
    size = int(size)
    rows = [[float(x) for x in line.split()] for line in open(f"cpu-{engine}-{size}.txt")]
    medians[size] = [statistics.median(column) for column in zip(*rows)]
    cores[size] = statistics.median(float(r) * row[1] / 1e6 for r, row in zip(rates.split(","), rows))
    print(f"{engine}: CPU per push in the campaigns to {size:,} (µs, serve + sandbox + PostgreSQL + its vacuum after = all): "
          + " / ".join("%.0f + %.0f + %.0f + %.0f = %.0f" % tuple(row) for row in rows)
          + (", median %.0f" % medians[size][4] if len(rows) > 1 else ""), file=sys.stderr)
alls = [m[4] for m in medians.values()]
print(f"{engine}: the machine's CPU per push (serve, sandbox, PostgreSQL and its vacuum) in a campaign to "
      + ", ".join(f"{size:,}: {m[4]:.0f} µs (serve {m[0]:.0f}"
                  + (f", PostgreSQL {m[2]:.0f} + {m[3]:.0f}" if engine == "postgres" else "") + ")" for size, m in medians.items())
      + f"; spread {(max(alls) / min(alls) - 1) * 100:.1f}%")
print(f"{engine}: pushes/s times the sandbox's CPU a push (the cores it was given), campaigns to "
      + ", ".join(f"{size:,}: {c:.3f}" for size, c in cores.items())
      + f"; spread {(max(cores.values()) / min(cores.values()) - 1) * 100:.1f}% (the rate's spread with the machine's speed taken out)")
PY
    if [ "${KEEP_WORK:-0}" != 1 ]; then
        # Not looked at again: the space back before the next engine.
        for size in $sizes; do
            rm -rf "data-$engine-$size"
            if [ "$engine" = postgres ]; then "$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -qc "DROP DATABASE $(dbname_of "$engine" "$size")" postgres; fi
        done
    fi
done
