#!/usr/bin/env bash
# Traces off and on (issue #48, docs/operations.md#traces): what a campaign costs `serve` with
# tracing off, next to the same campaign with tracing on (every push a span, exported over
# OTLP/HTTP to scripts/otlp-receiver.py), and, given BEFORE_BIN, next to a build from before
# tracing existed, all in one run on SQLite, campaigns taking turns.
#
# Per variant: a data directory of N users with an APNs device each (bench/lib.sh's
# insert_devices), its own `serve` (quiet logs) sending to one APNs sandbox. Each round, one
# alert campaign to all N per variant, in turn; its pushes/s (POST to the last push recorded
# sent) and `serve`'s CPU per push (from /proc, over the campaign). The table: the median of
# each, and each variant's ratio to "off".
#
# Usage: bench/traces.sh [N] [ROUNDS]   (default 10000 3; env BEFORE_BIN=path/to/an/older/richpush, BENCH_WORK)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
n=${1:-10000}
rounds=${2:-3}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/traces
port=18760
sandbox_port=22760
otlp_port=24318
source bench/lib.sh
python3 -c 'import cryptography' 2>/dev/null || pip install --quiet cryptography
python3 -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null || pip install --quiet opentelemetry-proto
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
hz=$(getconf CLK_TCK)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_apns_sandbox "$rp" $sandbox_port
pids+=("$sandbox_pid")
python3 "$repo/scripts/otlp-receiver.py" $otlp_port spans.jsonl &
pids+=($!)

variants="off on"
declare -A bin=([off]=$rp [on]=$rp) node_port=() node_pid=()
if [ -n "${BEFORE_BIN:-}" ]; then variants="before off on"; bin[before]=$BEFORE_BIN; fi
index=0
for v in $variants; do
    echo admin-password | "${bin[$v]}" users add admin --admin --password-stdin --data "data-$v" >/dev/null
    insert_devices sqlite "$n" "$work/data-$v/richpush.sqlite"
    node_port[$v]=$((port + index++))
    env=()
    [ "$v" = on ] && env=(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$otlp_port OTEL_SERVICE_NAME=richpush-bench)
    env "${env[@]}" "${bin[$v]}" serve --data "data-$v" --port "${node_port[$v]}" --log-level warning \
        --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 --apns-topic com.example.app \
        --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem 2>> "serve-$v.log" &
    node_pid[$v]=$!
    pids+=($!)
    for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:${node_port[$v]}/health" >/dev/null && break; sleep 0.1; done
    curl -fs -u admin:admin-password "http://127.0.0.1:${node_port[$v]}/api/admin/campaigns" >/dev/null  # bcrypt once, before timing
done

# campaign VARIANT: one alert campaign to all N; prints "pushes/s µs-per-push".
campaign() {
    local v=$1 c0 out
    c0=$(cpu_ticks "${node_pid[$v]}")
    out=$(python3 - "${node_port[$v]}" "$n" "$work/data-$v/richpush.sqlite" <<'PY'
import base64, http.client, json, sqlite3, sys, time
port, n, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
h = {"Authorization": "Basic " + base64.b64encode(b"admin:admin-password").decode(), "Content-Type": "application/json"}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
posted = time.time()
c.request("POST", "/api/admin/campaigns", json.dumps({"audience": {"all": True}, "title": "Traced?", "message": "m"}), h)
r = c.getresponse(); created = json.loads(r.read()); assert r.status == 202, created
while True:
    c.request("GET", "/api/admin/campaigns/%d" % created["id"], headers=h); p = json.loads(c.getresponse().read())
    if p["sent"] + p["failed"] >= n: break
    time.sleep(0.2)
assert p["failed"] == 0, p
last = sqlite3.connect(db).execute("SELECT max(updatedAt) FROM deliveries WHERE campaignId = ? AND state = 'sent'", (created["id"],)).fetchone()[0]
print("%.0f" % (n / (last - posted)))
PY
)
    echo "$out $(python3 -c 'import sys; print("%.1f" % ((int(sys.argv[2]) - int(sys.argv[1])) * 1e6 / int(sys.argv[3]) / int(sys.argv[4])))' "$c0" "$(cpu_ticks "${node_pid[$v]}")" "$hz" "$n")"
}

declare -A rates=() cpus=()
for round in $(seq 1 "$rounds"); do
    for v in $variants; do
        read -r rate cpu < <(campaign "$v")
        echo "round $round, $v: $rate pushes/s, serve $cpu µs a push" >&2
        rates[$v]="${rates[$v]:-} $rate"; cpus[$v]="${cpus[$v]:-} $cpu"
    done
done
spans=$(wc -l < spans.jsonl)
echo "| tracing ($n-device campaign, SQLite, $rounds rounds, medians) | pushes/s | ratio | serve µs/push | ratio |"
echo "|---|---:|---:|---:|---:|"
off_rate=$(median_of ${rates[off]}); off_cpu=$(median_of ${cpus[off]})
for v in $variants; do
    r=$(median_of ${rates[$v]}); c=$(median_of ${cpus[$v]})
    printf '| %s | %.0f | %.2f | %.1f | %.2f |\n' "$v" "$r" "$(echo "$r / $off_rate" | bc -l)" "$c" "$(echo "$c / $off_cpu" | bc -l)"
done
echo "spans received with tracing on: $spans" >&2
