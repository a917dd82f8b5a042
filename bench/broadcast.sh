#!/usr/bin/env bash
# Broadcast benchmark (issue #9): one alert campaign to every user, N devices (default 10,000),
# through the APNs sandbox, and what follows it. Each figure sits next to a reference measured
# in the same run:
#
# 1. Fan-out: POST /api/admin/campaigns {"audience":{"all":true},"mode":"alert"} until its
#    last push is recorded sent (the outbox's own record, each delivery's updatedAt, read once
#    the campaign's progress, polled every 0.25 s, says all are sent), next to h2load sending N pushes to the same sandbox
#    with a signed provider token, the alert headers and the campaign's own payload bytes
#    (-c 1 -m 100, as bench/fanout.sh). 2 x ROUNDS alternating rounds. Target >= 0.8.
#    Beside h2load, richpush-bench sends the same N pushes the same way (--http2 --connections 1
#    --streams 100 --urls --requests N --method POST --body-file), its req/s a row of its own.
# 2. First fetches: N payload fetches, each path once and each over a new connection
#    (wrk -t1 with bench/paths.lua): (a) the campaign's richUrls, no credentials; (b)
#    GET /api/notifications/<richId> with the recipient's Bearer session (sessions made before,
#    not timed). Each round uses two campaigns of step 1 that nobody has fetched yet, one for (a)
#    and one for (b), so every fetch is a first fetch. Reference: nginx (one worker, sendfile,
#    bench/lib.sh's setup) serving the same image bytes for the same N /p/<token> paths in the
#    same way. The order rotates each round. Target >= 0.8x nginx (issue #28; it was 0.5x before).
#    Beside each rate, the server's CPU per fetch during its run (nginx's worker; all of serve's
#    threads, so the read marks' commits too).
# 3. Peak RSS (VmHWM) of `serve`: the process that ran step 1's campaigns to N devices, and a
#    fresh one on a fresh data directory after one campaign to 100,000 devices (SKIP_100K=1
#    leaves this out). Target < 200 MiB at both.
#
# Devices for step 1 are registered through the API (POST + PUT /api/register, 4 keep-alive
# clients, users imported with a cost-4 bcrypt hash so that signing in is cheap). The 100,000
# of step 3 are inserted straight into the registrations table with Python's sqlite3 while no
# server runs: registering them through the API would take longer than the campaign.
#
# `serve` runs with one event loop per core for the campaigns (as bench/fanout.sh) and with
# RICHPUSH_THREADS (default 1, as bench/http.sh) for the first fetches, matching nginx's single
# worker: on 2 cores the load generator needs the other one.
#
# Usage: bench/broadcast.sh [ROUNDS] [N]   (or env ROUNDS, N; also SKIP_100K=1, RICHPUSH_THREADS,
#        FETCH_CONNECTIONS (default 32), BENCH_WORK, KEEP_WORK=1 to keep the work directory,
#        RICHPUSH_BIN: a richpush to serve with instead of this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-${ROUNDS:-3}}
n=${2:-${N:-10000}}
big=100000
conns=${FETCH_CONNECTIONS:-32}
fetch_threads=${RICHPUSH_THREADS:-1}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/broadcast
sandbox_port=22199
port=18098
nginx_port=18099
password=pw
admin_password=admin-password
h2_id=B0ADCA57-0000-4000-8000-000000000009   # apns-id of h2load's pushes, to tell them apart in the log
source bench/lib.sh
install_missing h2load:nghttp2-client wrk:wrk nginx:nginx-light bc:bc
python3 -c 'import cryptography' 2>/dev/null || pip install --quiet cryptography
python3 -c 'import bcrypt' 2>/dev/null || pip install --quiet bcrypt
swift build -c release --product richpush >&2
swift build -c release --product richpush-bench >&2
bench="$(swift build -c release --show-bin-path)/richpush-bench"
rp="$(swift build -c release --show-bin-path)/richpush"
# The sandbox is always this checkout's; RICHPUSH_BIN swaps the richpush that serves and owns the data.
sandbox_rp="$rp"
if [ -n "${RICHPUSH_BIN:-}" ]; then rp=$(realpath "$RICHPUSH_BIN"); fi
rm -rf "$work" && mkdir -p "$work" && cd "$work"

serve_pid='' sandbox_pid='' nginx_pid=''
cleanup() {
    local status=$?
    for pid in $serve_pid $nginx_pid $sandbox_pid; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
trap cleanup EXIT

# start_serve DATA THREADS: richpush serve on $port, pushing through the sandbox; sets serve_pid.
start_serve() {
    "$rp" serve --data "$1" --port $port --threads "$2" --log-level warning \
        --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 --apns-topic com.example.app \
        --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem \
        --public-url "http://127.0.0.1:$port" 2>> serve.log &
    serve_pid=$!
    for _ in $(seq 1 300); do
        curl -fs "http://127.0.0.1:$port/health" >/dev/null && return 0
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "richpush serve did not start (see $work/serve.log)" >&2
    return 1
}
stop_serve() {
    kill "$serve_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=
}
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$serve_pid/status"; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# --- Provider key, a signed token for h2load, one cost-4 bcrypt hash for every user, N users.
python3 - "$n" "$password" "$sandbox_port" <<'PY'
import base64, json, sys, time
import bcrypt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
n, password, sandbox_port = int(sys.argv[1]), sys.argv[2], sys.argv[3]
key = ec.generate_private_key(ec.SECP256R1())
open("AuthKey.p8", "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
signing_input = b64(b'{"alg":"ES256","kid":"KEY1234567"}') + "." + b64(json.dumps({"iss": "TEAM123456", "iat": int(time.time())}).encode())
r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
open("jwt.txt", "w").write(signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()
open("bcrypt.txt", "w").write(hashed)
with open("users.jsonl", "w") as f:
    for i in range(1, n + 1):
        f.write(json.dumps({"name": "u%05d" % i, "bcrypt": hashed}) + "\n")
# Device i has token %064x of i and belongs to user u%05d of i.
open("uris.txt", "w").write("".join("https://127.0.0.1:%s/3/device/%064x\n" % (sandbox_port, i) for i in range(1, n + 1)))
PY

"$sandbox_rp" apns-sandbox --port $sandbox_port --team-id TEAM123456 --key-id KEY1234567 --public-key AuthKey.p8 --token-update-interval 0 --log pushes.jsonl 2> sandbox.log &
sandbox_pid=$!
for _ in $(seq 1 100); do
    [ -f apns-sandbox-cert.pem ] && curl -sk -o /dev/null "https://127.0.0.1:$sandbox_port/3/device" && break
    sleep 0.1
done
[ -f apns-sandbox-cert.pem ] || { echo "the APNs sandbox did not start (see $work/sandbox.log)" >&2; exit 1; }
mkdir -p media && cp "$repo/media/logo.png" media/   # serve ingests its default image from ./media

"$rp" users import users.jsonl --data data >&2
echo "$admin_password" | "$rp" users add admin --admin --password-stdin --data data >/dev/null

# --- Register every device through the API and open a session per user (not timed).
echo "registering $n devices and opening $n sessions through the API..." >&2
start_serve data 0
python3 - "$port" "$n" "$password" <<'PY'
import base64, http.client, json, sys, threading
port, n, password = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
clients = 4  # one address gets at most 4 password checks at once (429 past that: docs/security.md)
tokens, failures = [None] * (n + 1), []
def client(k):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        def call(method, path, headers, body=None):
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            return r.status, data
        for i in range(k + 1, n + 1, clients):
            name = "u%05d" % i
            auth = {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (name, password)).encode()).decode(),
                    "Content-Type": "application/json"}
            status, data = call("POST", "/api/register", auth)
            if status not in (200, 201): raise RuntimeError("POST /api/register for %s: %d %s" % (name, status, data[:200]))
            rid = json.loads(data)["registrationId"]
            status, data = call("PUT", "/api/register/" + rid, auth, json.dumps({"platform": "apns", "handle": "%064x" % i, "tags": []}))
            if status != 200: raise RuntimeError("PUT /api/register for %s: %d %s" % (name, status, data[:200]))
            status, data = call("POST", "/api/sessions", auth)
            if status != 201: raise RuntimeError("POST /api/sessions for %s: %d %s" % (name, status, data[:200]))
            tokens[i] = json.loads(data)["token"]
    except Exception as error:
        failures.append(error)
threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
if failures: sys.exit("registration failed: %s" % failures[0])
with open("sessions.tsv", "w") as f:
    for i in range(1, n + 1):
        f.write("u%05d\t%s\n" % (i, tokens[i]))
PY
admin_token=$(curl -fs -X POST -u "admin:$admin_password" "http://127.0.0.1:$port/api/sessions" | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])')
stop_serve

# campaign.py PORT TOKEN MESSAGE DEVICES INTERVAL TIMEOUT DATABASE: posts an alert campaign to
# everyone, polls it every INTERVAL s until sent + failed = DEVICES; prints "id seconds sent
# failed recipients payload-sha256", seconds from just before the POST to the last push recorded
# (the newest updatedAt of its deliveries in serve's DATABASE: exact, where a poll is late by up
# to INTERVAL, and polling often enough to see that is a load of its own on serve).
cat > campaign.py <<'PY'
import http.client, json, sqlite3, sys, time
port, token, message = int(sys.argv[1]), sys.argv[2], sys.argv[3]
devices, interval, timeout, database = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
def call(method, path, body=None):
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data else None)
body = json.dumps({"audience": {"all": True}, "message": message, "title": "20% off", "mode": "alert"})
posted_at = time.time()
t0 = time.perf_counter()
status, created = call("POST", "/api/admin/campaigns", body)
if status != 202: sys.exit("POST /api/admin/campaigns: %d %s" % (status, created))
# The POST answers once its first 5,000 recipients are queued; the rest follows in the background.
if created["devices"] > devices: sys.exit("campaign %s targets %s devices, expected %d" % (created["id"], created["devices"], devices))
while True:
    status, progress = call("GET", "/api/admin/campaigns/%d" % created["id"])
    if status != 200: sys.exit("GET /api/admin/campaigns/%d: %d %s" % (created["id"], status, progress))
    if progress["sent"] + progress["failed"] >= devices: break
    if time.perf_counter() - t0 > timeout:
        sys.exit("campaign %d: %d of %d sent after %.0f s" % (created["id"], progress["sent"], devices, timeout))
    time.sleep(interval)
if progress["devices"] != devices: sys.exit("campaign %s targeted %s devices, expected %d" % (created["id"], progress["devices"], devices))
last = sqlite3.connect(database).execute("SELECT max(updatedAt) FROM deliveries WHERE campaignId = ? AND state IN ('sent', 'failed')",
                                         (created["id"],)).fetchone()[0]
print(created["id"], "%.6f" % (last - posted_at), progress["sent"], progress["failed"], progress["recipients"], progress["payload"])
PY

# --- 1. Fan-out: 2 x ROUNDS campaigns, each followed by h2load with that campaign's payload.
start_serve data 0
jwt=$(cat jwt.txt)
expiration=$(( $(date +%s) + 86400 ))
campaigns=$(( 2 * rounds ))
cids=()
failed_total=0
: > fanout.txt
# CPU, in seconds: of a process so far (from /proc), and of this shell's finished children (h2load).
hz=$(getconf CLK_TCK)
cpu_of() { awk -v hz="$hz" '{printf "%.2f\n", ($14 + $15) / hz}' "/proc/$1/stat"; }
# (`times` runs in this shell, not in a command substitution's subshell, whose children are its own.)
children_cpu() { awk 'NR == 2 {split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2]}' "$1"; }
: > cpu.txt
for k in $(seq 1 "$campaigns"); do
    message=$(printf 'Flash sale #%02d' "$k")
    serve0=$(cpu_of "$serve_pid") sandbox0=$(cpu_of "$sandbox_pid")
    read -r cid seconds sent failed recipients sha < <(python3 campaign.py $port "$admin_token" "$message" "$n" 0.25 900 data/richpush.sqlite)
    serve1=$(cpu_of "$serve_pid") sandbox1=$(cpu_of "$sandbox_pid")
    cids+=("$cid")
    failed_total=$(( failed_total + failed ))
    rp_rate=$(echo "$n / $seconds" | bc -l)
    # The campaign's last push, byte for byte as richpush encodes it (the key order of docs/api.md#alert-pushes-and-payload-urls).
    tail -n 1 pushes.jsonl | python3 -c '
import json, sys
p = json.loads(sys.stdin.read())["payload"]
aps, alert = p["aps"], {}
if "title" in aps["alert"]: alert["title"] = aps["alert"]["title"]
alert["body"] = aps["alert"]["body"]
push = {"aps": {"alert": alert, "mutable-content": aps["mutable-content"], "sound": aps["sound"]},
        "richId": p["richId"], "richMessage": p["richMessage"], "richType": p["richType"], "richUrl": p["richUrl"]}
sys.stdout.write(json.dumps(push, separators=(",", ":"), ensure_ascii=False))' > payload.json
    sandbox2=$(cpu_of "$sandbox_pid"); times > times0.txt
    h2=$(h2load -n "$n" -c 1 -m 100 -i uris.txt -d payload.json -H "authorization: bearer $jwt" \
        -H "apns-topic: com.example.app" -H "apns-push-type: alert" -H "apns-priority: 10" \
        -H "apns-expiration: $expiration" -H "apns-id: $h2_id" -H "content-type: application/json" 2>&1)
    times > times1.txt; sandbox3=$(cpu_of "$sandbox_pid") h2load0=$(children_cpu times0.txt) h2load1=$(children_cpu times1.txt)
    echo "$h2" | grep -q "$n succeeded" || { echo "h2load failed: $h2" >&2; exit 1; }
    # µs of CPU per push: serve and the sandbox during the campaign; h2load and the sandbox during h2load's run.
    echo "$serve0 $serve1 $sandbox0 $sandbox1 $h2load0 $h2load1 $sandbox2 $sandbox3" |
        awk -v n="$n" '{printf "%.0f %.0f %.0f %.0f\n", ($2-$1)*1e6/n, ($4-$3)*1e6/n, ($6-$5)*1e6/n, ($8-$7)*1e6/n}' >> cpu.txt
    h2_rate=$(echo "$h2" | awk '/^finished in/ {gsub(",", ""); print $4}')
    # richpush-bench (SPEC §30) sends the same N pushes the same way, beside h2load's figure.
    rb_rate=$("$bench" --http2 --connections 1 --streams 100 --threads 1 --requests "$n" --urls uris.txt --method POST \
        --body-file payload.json --header "authorization: bearer $jwt" --header "apns-topic: com.example.app" \
        --header "apns-push-type: alert" --header "apns-priority: 10" --header "apns-expiration: $expiration" \
        --header "apns-id: $h2_id" --header "content-type: application/json" --insecure --json |
        python3 -c 'import json, sys; r = json.load(sys.stdin); assert r["errors"] == 0 and r["status"] == {"200": r["requests"]}, r; print(r["requestsPerSecond"])')
    printf 'fan-out %d: campaign %s, %d recipients, %d sent, %d failed in %.2f s: richpush %.0f pushes/s, h2load %.0f req/s, richpush-bench %.0f req/s; CPU µs per push: %s\n' \
        "$k" "$cid" "$recipients" "$sent" "$failed" "$seconds" "$rp_rate" "$h2_rate" "$rb_rate" \
        "$(tail -n 1 cpu.txt | awk '{printf "serve %d + sandbox %d, h2load %d + sandbox %d", $1, $2, $3, $4}')" >&2
    echo "$rp_rate $h2_rate $rb_rate" >> fanout.txt
done
payload_bytes=$(stat -c %s payload.json)
rss_n=$(hwm_kib)
stop_serve

# --- 2. First fetches. Per campaign, from the sandbox's log: each device's richUrl path, and
# GET /api/notifications/<richId> with its user's session (device i belongs to user u%05d of i).
python3 - "$n" "$campaigns" "$h2_id" <<'PY'
import json, sys
from urllib.parse import urlsplit
n, campaigns, h2_id = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sessions = dict(line.rstrip("\n").split("\t") for line in open("sessions.tsv"))
wanted = {"Flash sale #%02d" % k: k for k in range(1, campaigns + 1)}
rich = {k: [] for k in wanted.values()}
bearer = {k: [] for k in wanted.values()}
seen = {k: set() for k in wanted.values()}
for line in open("pushes.jsonl"):
    push = json.loads(line)
    if push["headers"].get("apns-id", "").upper() == h2_id: continue
    k = wanted.get(push["payload"].get("richMessage"))
    if k is None: continue
    token = push["token"]
    if token in seen[k]: sys.exit("device %s got campaign %d twice" % (token, k))
    seen[k].add(token)
    rich[k].append(urlsplit(push["payload"]["richUrl"]).path)
    bearer[k].append("/api/notifications/%s\tBearer %s" % (push["payload"]["richId"], sessions["u%05d" % int(token, 16)]))
for k in wanted.values():
    if len(rich[k]) != n: sys.exit("campaign %d reached %d devices in the sandbox's log, expected %d" % (k, len(rich[k]), n))
    open("rich-%d.txt" % k, "w").write("".join(p + "\n" for p in rich[k]))
    open("bearer-%d.txt" % k, "w").write("".join(p + "\n" for p in bearer[k]))
PY

start_serve data "$fetch_threads"
curl -fs -H "Authorization: Bearer $admin_token" "http://127.0.0.1:$port/media/$sha" -o image.png   # also warms the blob cache
image_bytes=$(stat -c %s image.png)
# bench/lib.sh's nginx answering every /p/<anything> with the image, as richpush answers /p/<token>.
start_nginx "$work/nginx" $nginx_port image.png "location /p/ { try_files /image.png =404; }"
cap=$(( n / 50 + 60 ))

nginx_worker=$(pgrep -P "$nginx_pid")   # its one worker, which serves
# fetch NAME PORT FILE: one wrk run over FILE's paths -> "NAME <fetches/s> fetches/s (<seconds> s) <CPU µs a fetch>",
# the CPU being the server's (user + system, from /proc: nginx's worker, or all of serve's threads) during the run.
fetch() {
    local name=$1 target=$2 file=$3 out="$work/fetch-$1-$round.out" pid c0 c1
    pid=$([ "$target" = "$nginx_port" ] && echo "$nginx_worker" || echo "$serve_pid")
    c0=$(cpu_ticks "$pid")
    WRK_PATHS=$file WRK_BODY_BYTES=$image_bytes wrk -t1 -c"$conns" -d"${cap}s" -s "$repo/bench/paths.lua" \
        "http://127.0.0.1:$target" > "$out" 2>&1 || true
    local result
    result=$(awk '/^paths:/ {ok = $4; other = $6; secs = $8} /^Fetches\/sec:/ {rps = $2}
                  END {if (rps == "") print "none"; else printf "%d %d %s %s\n", ok, other, secs, rps}' "$out")
    local ok other secs rps
    read -r ok other secs rps <<< "$result"
    if [ "$ok" = none ] || [ "$ok" -ne "$n" ] || [ "$other" -ne 0 ]; then
        echo "$name, round $round: not every path answered once with the ${image_bytes}-byte image (ok=$ok other=${other:-?}); see $out:" >&2
        cat "$out" >&2
        exit 1
    fi
    c1=$(cpu_ticks "$pid")
    printf '%s %.0f fetches/s (%s s) %.1f\n' "$name" "$rps" "$secs" "$(echo "($c1 - $c0) * 1000000 / $hz / $n" | bc -l)"
}
: > fetches.txt
for round in $(seq 1 "$rounds"); do
    a=$(( 2 * round - 1 )) b=$(( 2 * round ))
    for k in 0 1 2; do
        case $(( (round - 1 + k) % 3 )) in
            0) fetch nginx $nginx_port "$work/rich-$a.txt" ;;
            1) fetch richurl $port "$work/rich-$a.txt" ;;
            2) fetch bearer $port "$work/bearer-$b.txt" ;;
        esac | tee -a fetches.txt | sed "s/^/first fetches, round $round: /" >&2
    done
done
rss_fetch=$(hwm_kib)
# Every fetched notification is marked read: each campaign should count N fetches now.
fetched=$(python3 - "$port" "$admin_token" "${cids[@]}" <<'PY'
import http.client, json, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
counts = []
for cid in sys.argv[3:]:
    conn.request("GET", "/api/admin/campaigns/" + cid, headers={"Authorization": "Bearer " + sys.argv[2]})
    counts.append(str(json.loads(conn.getresponse().read())["fetched"]))
print(" ".join(counts))
PY
)
stop_serve
kill "$nginx_pid" 2>/dev/null || true
wait "$nginx_pid" 2>/dev/null || true
nginx_pid=

# --- 3. Peak RSS at 100,000 devices: fresh data directory, fresh serve, one campaign.
rss_big='' big_seconds=''
if [ "${SKIP_100K:-0}" != 1 ]; then
    echo "100k: importing $big users, inserting $big registrations directly into richpush.sqlite (serve not running)..." >&2
    python3 - "$big" <<'PY'
import json, sys
hashed = open("bcrypt.txt").read().strip()
with open("users-big.jsonl", "w") as f:
    for i in range(1, int(sys.argv[1]) + 1):
        f.write(json.dumps({"name": "u%05d" % i, "bcrypt": hashed}) + "\n")
PY
    "$rp" users import users-big.jsonl --data data-big >&2
    echo "$admin_password" | "$rp" users add admin --admin --password-stdin --data data-big >/dev/null
    # Registrations as PUT /api/register leaves them (platform apns, the handle, the username tag).
    python3 - data-big/richpush.sqlite "$big" <<'PY'
import json, os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30)
count, now = int(sys.argv[2]), time.time()
rows = ((os.urandom(16).hex(), "u%05d" % i, "apns", "%064x" % i, json.dumps(["username:u%05d" % i], separators=(",", ":")), now, now)
        for i in range(1, count + 1))
with db:
    db.executemany("INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
found = db.execute("SELECT count(*) FROM registrations WHERE handle IS NOT NULL").fetchone()[0]
db.close()
if found != count: sys.exit("inserted %d registrations, expected %d" % (found, count))
PY
    start_serve data-big 0
    big_admin=$(curl -fs -X POST -u "admin:$admin_password" "http://127.0.0.1:$port/api/sessions" | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])')
    read -r cid big_seconds sent failed recipients _ < <(python3 campaign.py $port "$big_admin" "Flash sale #big" "$big" 0.5 1800 data-big/richpush.sqlite)
    rss_big=$(hwm_kib)
    failed_total=$(( failed_total + failed ))
    printf '100k: campaign %s, %d recipients, %d sent, %d failed in %.1f s (%.0f pushes/s); serve VmHWM %.1f MiB\n' \
        "$cid" "$recipients" "$sent" "$failed" "$big_seconds" "$(echo "$big / $big_seconds" | bc -l)" "$(echo "$rss_big / 1024" | bc -l)" >&2
    stop_serve
fi

# --- Summary.
rp_med=$(awk '{print $1}' fanout.txt | median)
h2_med=$(awk '{print $2}' fanout.txt | median)
col() { awk -v name="$1" '$1 == name {print $2}' fetches.txt | median; }
cpu_col() { awk -v name="$1" '$1 == name {print $6}' fetches.txt | median; }
nginx_rps=$(col nginx)
mib() { echo "$1 / 1024" | bc -l; }
printf '%-66s %12s\n' "alert campaign to $n devices ($((n + 1)) recipients) via the APNs sandbox" "pushes/s"
printf '%-66s %12.0f\n' "h2load, 1 connection, 100 streams, the same ${payload_bytes}-byte alert" "$h2_med"
printf '%-66s %12.0f\n' "richpush-bench, the same (--http2 --streams 100 --urls --requests $n)" "$(awk '{print $3}' fanout.txt | median)"
printf '%-66s %12.0f\n' "richpush: POST /api/admin/campaigns -> sent = $n" "$rp_med"
printf 'ratio richpush/h2load: %.2f (target >= 0.9, issue #51); medians of %d alternating rounds; deliveries failed: %d\n' \
    "$(echo "$rp_med / $h2_med" | bc -l)" "$campaigns" "$failed_total"
cpu_med() { awk -v k="$1" '{print $k}' cpu.txt | median; }
printf 'CPU per push (µs, medians): serve %.0f + sandbox %.0f during the campaigns; h2load %.0f + sandbox %.0f during h2load\n' \
    "$(cpu_med 1)" "$(cpu_med 2)" "$(cpu_med 3)" "$(cpu_med 4)"
echo
printf '%-66s %12s %7s %9s\n' "first fetches: $n paths once each, a new connection per request" "fetches/s" "ratio" "CPU µs"
printf '%-66s %12.0f %7.2f %9.1f\n' "nginx, /p/<token> -> the same ${image_bytes}-byte image" "$nginx_rps" 1 "$(cpu_col nginx)"
printf '%-66s %12.0f %7.2f %9.1f\n' "richpush GET /p/<token> (richUrl, no credentials)" "$(col richurl)" "$(echo "$(col richurl) / $nginx_rps" | bc -l)" "$(cpu_col richurl)"
printf '%-66s %12.0f %7.2f %9.1f\n' "richpush GET /api/notifications/<id> (Bearer session)" "$(col bearer)" "$(echo "$(col bearer) / $nginx_rps" | bc -l)" "$(cpu_col bearer)"
printf 'targets: both >= 0.8x nginx; wrk -t1 -c%d, medians of %d rounds; richpush event loops %s, nginx 1 worker\n' \
    "$conns" "$rounds" "$fetch_threads"
printf 'fetched per campaign afterwards (expected %d each): %s\n' "$n" "$fetched"
echo
printf '%-66s %12s\n' "peak RSS of richpush serve (VmHWM)" "MiB"
printf '%-66s %12.1f\n' "after $campaigns campaigns to $n devices" "$(mib "$rss_n")"
if [ -n "$rss_big" ]; then
    printf '%-66s %12.1f\n' "after 1 campaign to $big devices (registrations inserted directly)" "$(mib "$rss_big")"
else
    printf '%-66s %12s\n' "after 1 campaign to $big devices" "skipped"
fi
printf 'target: < 200 MiB at both; serve during the first fetches: %.1f MiB\n' "$(mib "$rss_fetch")"
