#!/usr/bin/env bash
# docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks (issue #27): what webhooks cost the pushes, and how fast a campaign's stats answer.
#
# 1. A silent campaign to N devices (default 10,000: 100 users x 100 devices) through the APNs
#    sandbox, timed from POST /api/admin/campaigns until the sandbox has accepted every push, in
#    alternating rounds: with a webhook subscribed to every event (a Python receiver on loopback
#    answering 204 and counting the events it takes) and without one. Target: with >= 0.9x
#    without. Also how long after the last push the receiver had every `sent` event (they are
#    read once 2 s old, then go 100 to a POST).
# 2. GET /api/admin/campaigns/{id}/stats, 50 times with curl, for a campaign to BIG recipients
#    (default 100,000, each with a device, inserted with Python's sqlite3 while serve is stopped).
#    Target: under 50 ms. The answer reads counters (a row per minute and platform), not the outbox.
#
# Usage: bench/webhooks.sh [ROUNDS] [N]   (env BIG, OUTAGE, BENCH_WORK, KEEP_WORK=1)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
n=${2:-10000}
big=${BIG:-100000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/webhooks
sandbox_port=22196 port=18094 hook_port=18093
python3 -c 'import cryptography' 2>/dev/null || pip install --quiet cryptography
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
repo=$(pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work"
serve_pid='' sandbox_pid='' receiver_pid=''
cleanup() {
    local status=$?
    for pid in $serve_pid $sandbox_pid $receiver_pid; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
trap cleanup EXIT

python3 - <<'PY'
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
key = ec.generate_private_key(ec.SECP256R1())
open("AuthKey.p8", "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
PY
cat > receiver.py <<'PY'
import http.server, json, os, sys, threading
count, lock = [0], threading.Lock()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            count[0] += len(body["events"]) if "events" in body else 1
            open("received.tmp", "w").write(str(count[0])); os.replace("received.tmp", "received.txt")
        self.send_response(204); self.end_headers()
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
python3 receiver.py $hook_port & receiver_pid=$!
"$rp" apns-sandbox --port $sandbox_port --team-id TEAM123456 --key-id KEY1234567 --public-key AuthKey.p8 --token-update-interval 0 \
    --log pushes.jsonl 2> sandbox.log & sandbox_pid=$!
sleep 1
mkdir -p media && cp "$repo/media/logo.png" media/
echo admin-password | "$rp" users add admin --admin --password-stdin --data data >/dev/null
users=$(( (n + 99) / 100 ))
insert() { # insert DATA FIRST COUNT: COUNT users from number FIRST, 100 devices each (or 1 each with ONE=1)
    python3 - "$1/richpush.sqlite" "$2" "$3" "${ONE:-0}" <<'PY'
import json, os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30)
first, count, one, now = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", time.time()
hashed = "$2b$04$" + "a" * 53
with db:
    db.executemany("INSERT INTO users (name, passwordHash, admin, createdAt) VALUES (?, ?, 0, ?)",
                   (("u%06d" % i, hashed, now) for i in range(first, first + count)))
    per = 1 if one else 100
    db.executemany("INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES (?, ?, 'apns', ?, ?, ?, ?)",
                   ((os.urandom(16).hex(), "u%06d" % i, "%064x" % (i * 1000 + d), json.dumps(["username:u%06d" % i], separators=(",", ":")), now, now)
                    for i in range(first, first + count) for d in range(per)))
PY
}
insert data 1 "$users"
start_serve() {
    "$rp" serve --data data --port $port --log-level warning --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 \
        --apns-topic com.example.richpush --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem --allow-private-webhooks 2>> serve.log &
    serve_pid=$!
    for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && return; sleep 0.1; done
    echo "serve did not start" >&2; exit 1
}
start_serve
accepted() { [ -f pushes.jsonl ] && wc -l < pushes.jsonl || echo 0; }
received() { local c; c=$(cat received.txt 2>/dev/null | tr -dc 0-9); echo "${c:-0}"; }
campaign() { # prints the campaign id; waits until the sandbox accepted N more
    local before id
    before=$(accepted)
    id=$(curl -fs -u admin:admin-password -H 'Content-Type: application/json' "http://127.0.0.1:$port/api/admin/campaigns" \
        -d '{"audience":{"all":true},"mode":"silent"}' | python3 -c 'import sys,json; print(json.load(sys.stdin)["id"])')
    while [ $(( $(accepted) - before )) -lt "$1" ]; do sleep 0.01; done
    echo "$id"
}
with=() without=() lags=()
for round in $(seq 1 "$rounds"); do
    for mode in with without; do
        hook=''
        if [ $mode = with ]; then
            hook=$("$rp" webhooks add "http://127.0.0.1:$hook_port/hook" --allow-private-webhooks --data data 2>/dev/null)
        fi
        base=$(received) # the receiver counts every event it ever took
        t0=$(date +%s.%N)
        campaign "$n" >/dev/null
        t1=$(date +%s.%N)
        rate=$(echo "$n / ($t1 - $t0)" | bc -l)
        if [ $mode = with ]; then
            with+=("$rate")
            while [ $(( $(received) - base )) -lt "$n" ]; do sleep 0.05; done
            t2=$(date +%s.%N)
            lags+=("$(echo "$t2 - $t1" | bc -l)")
            "$rp" webhooks rm "$hook" --data data >/dev/null
            printf 'round %d with a webhook: %.0f pushes/s; every sent event received %.1f s after the last push\n' "$round" "$rate" "${lags[-1]}" >&2
        else
            without+=("$rate")
            printf 'round %d without: %.0f pushes/s\n' "$round" "$rate" >&2
        fi
    done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
w=$(printf '%s\n' "${with[@]}" | median); wo=$(printf '%s\n' "${without[@]}" | median); lag=$(printf '%s\n' "${lags[@]}" | median)

# 3 (first, while the store is small). A receiver down for OUTAGE seconds (default 60) in the middle
#    of a campaign: stopped, the campaign sent, restarted after the outage; every event arrives.
outage=${OUTAGE:-60}
hook=$("$rp" webhooks add "http://127.0.0.1:$hook_port/hook" --allow-private-webhooks --data data 2>/dev/null)
kill "$receiver_pid"; wait "$receiver_pid" 2>/dev/null || true
rm -f received.txt
campaign "$n" >/dev/null
t_down=$(date +%s.%N)
sleep "$outage"
python3 receiver.py $hook_port & receiver_pid=$!
t_up=$(date +%s.%N)
while [ "$(received)" -lt "$(( n + 1 ))" ]; do sleep 0.1; done # every sent event and campaign.done
t_all=$(date +%s.%N)
outage_events=$(received)
"$rp" webhooks list --data data | grep -q "$(( n + 1 )) delivered, 0 dropped" || { "$rp" webhooks list --data data >&2; echo "the webhook's counts are off" >&2; exit 1; }
"$rp" webhooks rm "$hook" --data data >/dev/null
printf 'receiver down %.0f s during a %d-device campaign: all %d events received %.1f s after it came back\n' \
    "$(echo "$t_up - $t_down" | bc -l)" "$n" "$outage_events" "$(echo "$t_all - $t_up" | bc -l)" >&2

# 2. Stats at BIG recipients.
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
ONE=1 insert data 200000 "$big"
start_serve
cid=$(campaign "$(( big + users * 100 ))")
times=()
for _ in $(seq 1 50); do
    times+=("$(curl -fs -o /dev/null -w '%{time_total}' -u admin:admin-password "http://127.0.0.1:$port/api/admin/campaigns/$cid/stats")")
done
stats_ms=$(printf '%s\n' "${times[@]}" | median | awk '{printf "%.1f", $1 * 1000}')
stats_max=$(printf '%s\n' "${times[@]}" | sort -g | tail -1 | awk '{printf "%.1f", $1 * 1000}')
curl -fs -u admin:admin-password "http://127.0.0.1:$port/api/admin/campaigns/$cid/stats" | python3 -c '
import sys, json; s = json.load(sys.stdin); print("stats of campaign %s: queued %d, sent %d, failed %d, %d timeline minutes" % (sys.argv[1], s["queued"], s["sent"], s["failed"], len(s["timeline"])), file=sys.stderr)' "$cid"

printf '%-58s %10s\n' "campaign to $n devices via the APNs sandbox (median of $rounds)" "pushes/s"
printf '%-58s %10.0f\n' "without a webhook" "$wo"
printf '%-58s %10.0f\n' "with a webhook on every event" "$w"
printf 'ratio with/without: %.2f (target >= 0.9); every sent event at the receiver %.1f s after the last push\n' "$(echo "$w / $wo" | bc -l)" "$lag"
printf 'GET …/stats at %d recipients: median %s ms, max %s ms of 50 (target < 50 ms)\n' "$(( big + users ))" "$stats_ms" "$stats_max"
printf 'receiver down %.0f s mid-campaign: all %d events arrived %.1f s after it was back, none dropped\n' \
    "$(echo "$t_up - $t_down" | bc -l)" "$outage_events" "$(echo "$t_all - $t_up" | bc -l)"
