#!/usr/bin/env bash
# docs/api.md#options-badges-and-paced-sends's paced campaign, measured: two `serve` processes on one data directory (SQLite; both
# dispatch from its outbox under leases) and `richpush apns-sandbox`, 100 users with a device
# each, one alert campaign with "ratePerMinute": 600. Its pushes are due a tenth of a second
# apart; the sandbox logs when it accepted each, and the spread from the first to the last is
# compared with the 9.9 s the pace asks for (99 steps), and with the issue's 10 s ± 10%.
#
# Usage: bench/pace.sh [DEVICES] [RATE]   (env RICHPUSH_BIN: a richpush to use instead of a
# release build; a debug build will do, the pace is not CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
devices=${1:-100}
rate=${2:-600}
if [ -n "${RICHPUSH_BIN:-}" ]; then
    rp=$(realpath "$RICHPUSH_BIN")
else
    swift build -c release --product richpush >&2
    rp="$(swift build -c release --show-bin-path)/richpush"
fi
work=$(mktemp -d /tmp/richpush-pace.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

{
    echo '{"name":"root","password":"rootpw","admin":true}'
    for i in $(seq -f %05g 1 "$devices"); do echo "{\"name\":\"u$i\",\"password\":\"pw\"}"; done
} > users.jsonl
"$rp" users import users.jsonl --data data >/dev/null
# The sample image the campaign carries (serve ingests ./media/logo.png on its first start).
mkdir -p media && cp "$OLDPWD/media/logo.png" media/
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out AuthKey.p8
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout apns.key -out apns.pem -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
apns=$(free_port); a=$(free_port); b=$(free_port)
"$rp" apns-sandbox --port "$apns" --team-id TEAM123456 --key-id KEY1234567 --public-key AuthKey.p8 --tls-cert apns.pem --tls-key apns.key \
    --log pushes.jsonl --token-update-interval 0 > sandbox.log 2>&1 &
pids+=($!)
for port in "$a" "$b"; do
    "$rp" serve --port "$port" --data data --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 \
        --apns-topic com.example.richpush --apns-env "https://127.0.0.1:$apns" --push-ca apns.pem --log-level warning > "serve-$port.log" 2>&1 &
    pids+=($!)
done
wait_port "$a"; wait_port "$b"; wait_port "$apns"

python3 - "$a" "$b" "$devices" "$rate" <<'PY'
import sys, json, base64, hashlib, time, urllib.request, concurrent.futures
a, b, n, rate = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def call(port, method, path, user, password, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=body,
        headers={"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode(), "Content-Type": "application/json"})
    return urllib.request.urlopen(req).read()
def register(i):
    user, port = f"u{i:05d}", (a if i % 2 else b)
    rid = json.loads(call(port, "POST", "/api/register", user, "pw"))["registrationId"]
    call(port, "PUT", f"/api/register/{rid}", user, "pw", json.dumps({"platform": "apns", "handle": hashlib.sha256(user.encode()).hexdigest(), "tags": []}).encode())
# Four at a time: one address gets at most 4 password checks at once.
with concurrent.futures.ThreadPoolExecutor(4) as pool: list(pool.map(register, range(1, n + 1)))
made = json.loads(call(a, "POST", "/api/admin/campaigns", "root", "rootpw",
                       json.dumps({"audience": {"all": True}, "title": "Paced", "message": f"{rate} a minute", "ratePerMinute": rate}).encode()))
print(f"campaign {made['id']}: {made['devices']} devices, {rate} a minute, expected end {made.get('expectedEnd')}", file=sys.stderr)
deadline = time.time() + 60 + n * 60 / rate * 2
while time.time() < deadline:
    try: lines = [json.loads(l) for l in open("pushes.jsonl")]
    except FileNotFoundError: lines = []
    if len(lines) >= n: break
    time.sleep(0.2)
at = sorted(o["at"] for o in lines)
spread = at[-1] - at[0]
asked = (n - 1) * 60 / rate
gaps = [y - x for x, y in zip(at, at[1:])]
print(f"{len(at)} pushes of {n}; first to last {spread:.2f} s (the pace asks {asked:.2f} s; target 10 s ± 10%: "
      f"{'met' if abs(spread - 10) <= 1 else 'NOT met'}); widest gap {max(gaps):.2f} s, median gap {sorted(gaps)[len(gaps)//2]:.3f} s")
PY
# Both nodes sent: each one's count of pushes sent, from its /metrics.
for port in "$a" "$b"; do
    sent=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^richpush_pushes_total\{.*outcome="sent"/ { n += $NF } END { print n + 0 }')
    echo "node :$port sent $sent pushes"
done
