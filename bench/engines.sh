#!/usr/bin/env bash
# The PostgreSQL outbox against the embedded one (issue #11): one silent campaign to N devices
# (default 5,000) through the APNs sandbox, from a `serve` on SQLite + files and from a `serve`
# on PostgreSQL (a local cluster this script starts), in alternating rounds. The figure is
# pushes/s on PostgreSQL over pushes/s on SQLite in the same run. Target >= 0.8.
#
# Then where one push's cost goes on PostgreSQL: CPU time per push of `serve`, of the
# PostgreSQL backends and of the sandbox (from /proc during the PostgreSQL rounds), and a
# `perf` profile of `serve` in one more PostgreSQL round, its samples grouped by what they do
# (database: PostgresNIO and the SQL layer; network: NIO, HTTP/2, TLS and the kernel's socket
# work; signing: swift-crypto; the rest).
#
# Users and devices are inserted straight into each store's tables (the same rows in both);
# registering them through the API is bench/broadcast.sh's business.
#
# Usage: bench/engines.sh [ROUNDS] [N]   (env BENCH_WORK, KEEP_WORK=1)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-3}
n=${2:-5000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/engines
sandbox_port=22299
port=18198
source bench/lib.sh
python3 -c 'import cryptography' 2>/dev/null || pip install --quiet cryptography
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

serve_pid='' sandbox_pid=''
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=""; if [ "$(id -u)" = 0 ]; then as_pg="runuser -u postgres --"; chown postgres "$work"; fi
cleanup() {
    local status=$?
    for pid in $serve_pid $sandbox_pid; do kill "$pid" 2>/dev/null || true; done
    $as_pg "$pg/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
trap cleanup EXIT

pgport=25432
start_postgres "$work" $pgport
postgres_url="postgres://richpush@127.0.0.1:$pgport/richpush"
start_apns_sandbox "$rp" $sandbox_port
mkdir -p media && cp "$repo/media/logo.png" media/

# Both stores: the schema (a command migrates it), an admin, then N users with a device each.
for engine in sqlite postgres; do
    database=$([ $engine = sqlite ] && echo "sqlite:$work/data-sqlite/richpush.sqlite" || echo "$postgres_url")
    echo admin-password | "$rp" users add admin --admin --password-stdin --data "data-$engine" --database "$database" >/dev/null
done
for engine in sqlite postgres; do insert_devices "$engine" "$n"; done

start_serve() { # ENGINE
    local database
    database=$([ "$1" = sqlite ] && echo "sqlite:$work/data-sqlite/richpush.sqlite" || echo "$postgres_url")
    "$rp" serve --data "data-$1" --database "$database" --port $port --log-level warning \
        --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 --apns-topic com.example.app \
        --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem 2>> "serve-$1.log" &
    serve_pid=$!
    for _ in $(seq 1 300); do
        if curl -fs "http://127.0.0.1:$port/health" >/dev/null; then
            # The admin's bcrypt (cost 12) once, before anything is timed: later polls hit the cache.
            curl -fs -u admin:admin-password "http://127.0.0.1:$port/api/admin/campaigns" >/dev/null
            return 0
        fi
        sleep 0.1
    done
    echo "serve ($1) did not start" >&2; return 1
}
stop_serve() { kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=; }
postgres_ticks() { local t=0 p; for p in $(pgrep -u postgres -f "postgres: richpush richpush" || true); do t=$((t + $(cpu_ticks "$p" 2>/dev/null || echo 0))); done; echo $t; }

# campaign: posts a silent campaign to everyone and prints the seconds until all N are sent.
campaign() {
    python3 - "$port" "$n" <<'PY'
import base64, http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
h = {"Authorization": "Basic " + base64.b64encode(b"admin:admin-password").decode(), "Content-Type": "application/json"}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
t0 = time.perf_counter()
c.request("POST", "/api/admin/campaigns", json.dumps({"audience": {"all": True}, "message": "m", "mode": "silent"}), h)
r = c.getresponse(); created = json.loads(r.read())
assert r.status == 202 and created["devices"] == n, created
while True:
    c.request("GET", "/api/admin/campaigns/%d" % created["id"], headers=h); p = json.loads(c.getresponse().read())
    if p["sent"] + p["failed"] >= n: break
    time.sleep(0.05)
assert p["failed"] == 0, p
print("%.4f" % (time.perf_counter() - t0))
PY
}

hz=$(getconf CLK_TCK)
declare -A total_seconds=([sqlite]=0 [postgres]=0)
serve_ticks=0 pg_ticks=0 sandbox_ticks=0 pg_pushes=0
echo "round engine seconds pushes/s" >&2
for round in $(seq 1 "$rounds"); do
    order=$([ $((round % 2)) = 1 ] && echo "sqlite postgres" || echo "postgres sqlite")
    for engine in $order; do
        start_serve "$engine"
        s0=$(cpu_ticks "$serve_pid"); p0=$(postgres_ticks); b0=$(cpu_ticks "$sandbox_pid")
        seconds=$(campaign)
        if [ "$engine" = postgres ]; then
            serve_ticks=$((serve_ticks + $(cpu_ticks "$serve_pid") - s0)); pg_ticks=$((pg_ticks + $(postgres_ticks) - p0))
            sandbox_ticks=$((sandbox_ticks + $(cpu_ticks "$sandbox_pid") - b0)); pg_pushes=$((pg_pushes + n))
        fi
        stop_serve
        total_seconds[$engine]=$(echo "${total_seconds[$engine]} + $seconds" | bc -l)
        printf '%s %s %s %.0f\n' "$round" "$engine" "$seconds" "$(echo "$n / $seconds" | bc -l)" >&2
    done
done
sqlite_rate=$(echo "$n * $rounds / ${total_seconds[sqlite]}" | bc -l)
pg_rate=$(echo "$n * $rounds / ${total_seconds[postgres]}" | bc -l)
printf 'fan-out: SQLite %.0f pushes/s, PostgreSQL %.0f pushes/s, ratio %.2f (target >= 0.8)\n' "$sqlite_rate" "$pg_rate" "$(echo "$pg_rate / $sqlite_rate" | bc -l)"
us() { echo "$1 * 1000000 / $hz / $pg_pushes" | bc -l; }
printf 'CPU per push on PostgreSQL: serve %.0f us, PostgreSQL backends %.0f us, APNs sandbox %.0f us\n' "$(us $serve_ticks)" "$(us $pg_ticks)" "$(us $sandbox_ticks)"

# One more PostgreSQL round under perf: serve's own time, grouped by what it does.
if command -v perf >/dev/null; then
    start_serve postgres
    perf record -F 999 -g -p "$serve_pid" -o perf.data 2>/dev/null >/dev/null &
    perf_pid=$!
    sleep 0.5
    campaign >/dev/null
    kill -INT $perf_pid; wait $perf_pid 2>/dev/null || true
    stop_serve
    perf report -i perf.data --no-children --sort dso,sym --stdio 2>/dev/null > perf.txt
    echo "serve's top symbols in that round:" >&2
    grep -E '^ +[0-9.]+%' perf.txt | awk 'NR <= 15' >&2
    awk '
        /^ +[0-9.]+%/ {
            pct = $1; sub("%", "", pct); line = $0
            if (line ~ /PostgresNIO|SQLEngine|PostgresPool|PostgresSession|OutboxStore|NotificationWriter|CampaignStore/) g = "database (PostgresNIO, SQL layer)"
            else if (line ~ /Crypto|P256|ecdsa|EC_|ec_GFp|bn_|BN_|sha256_block|SHA256/) g = "signing and hashing"
            else if (line ~ /NIOHTTP2|HPACK|NIOSSL|ssl|SSL|aes|gcm|chacha|tcp_|ip_|skb|sock|__sys_send|__sys_recv|epoll|NIOPosix|NIOCore|HTTP2PushClient|netif|__dev_queue|loopback/) g = "network (NIO, HTTP/2, TLS, kernel sockets)"
            else if (line ~ /futex|schedule|task_switch|_raw_spin_unlock_irq|__switch_to|pthread_cond|NIOThreadPool|try_to_wake|ConditionLock|swift_task|dispatch/) g = "threads and waking"
            else if (line ~ /swift_retain|swift_release|swift_alloc|malloc|free|_int_|memcpy|memmove|swift_bridge|swift_dynamicCast|libswiftCore|Foundation|JSON/) g = "Swift runtime, allocation, Foundation"
            else g = "other"
            share[g] += pct
        }
        END { for (g in share) printf "serve under perf: %-45s %5.1f%%\n", g, share[g] }' perf.txt | sort -t% -k1 -r
fi
