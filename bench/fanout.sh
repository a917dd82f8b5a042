#!/usr/bin/env bash
# Push fan-out benchmark: one notification to 2,000 registered devices through the APNs sandbox
# (TLS, HTTP/2), timed from POST /api/notifications until the sandbox has accepted all 2,000,
# next to h2load (Debian's nghttp2-client) sending the same 2,000 valid requests (a signed
# provider token, the same payload) to the same sandbox over one connection. Rounds alternate.
#
# Usage: bench/fanout.sh [ROUNDS] [DEVICES]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
devices=${2:-2000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/fanout
sandbox_port=22198
port=18097
source bench/lib.sh
install_missing h2load:nghttp2-client
python3 -c 'import cryptography' 2>/dev/null || pip install --quiet cryptography
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

# Provider key, a signed token for h2load, device tokens, the payload.
python3 - "$devices" <<'PY'
import base64, json, sys, time
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
key = ec.generate_private_key(ec.SECP256R1())
open("AuthKey.p8", "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
signing_input = b64(b'{"alg":"ES256","kid":"KEY1234567"}') + "." + b64(json.dumps({"iss": "TEAM123456", "iat": int(time.time())}).encode())
r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
open("jwt.txt", "w").write(signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
n = int(sys.argv[1])
open("tokens.txt", "w").write("".join("%064x\n" % (i + 1) for i in range(n)))
open("payload.json", "w").write('{"aps":{"content-available":1,"sound":""},"richId":"1","richMessage":"Check this image out!","richType":"img"}')
PY

"$rp" apns-sandbox --port $sandbox_port --team-id TEAM123456 --key-id KEY1234567 --public-key AuthKey.p8 --token-update-interval 0 --log pushes.jsonl 2> sandbox.log &
sandbox_pid=$!
sleep 1
mkdir -p media && cp "$OLDPWD/media/logo.png" media/
echo "bench-password" | "$rp" users add bench --password-stdin --data data >/dev/null
"$rp" serve --data data --port $port --log-level warning --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 \
    --apns-topic com.example.richpush --apns-env "https://127.0.0.1:$sandbox_port" --push-ca apns-sandbox-cert.pem 2> serve.log &
serve_pid=$!
trap 'kill $serve_pid $sandbox_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

# Register every device through the API, as the app would.
python3 - $port <<'PY'
import base64, http.client, json, sys
auth = {"Authorization": "Basic " + base64.b64encode(b"bench:bench-password").decode(), "Content-Type": "application/json"}
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for token in open("tokens.txt").read().split():
    c.request("POST", "/api/register", headers=auth); rid = json.loads(c.getresponse().read())["registrationId"]
    c.request("PUT", "/api/register/" + rid, body=json.dumps({"platform": "apns", "handle": token, "tags": []}), headers=auth)
    r = c.getresponse(); r.read(); assert r.status == 200, r.status
PY
sed "s|^|https://127.0.0.1:$sandbox_port/3/device/|" tokens.txt > uris.txt
auth="Authorization: Basic $(printf 'bench:bench-password' | base64)"
accepted() { [ -f pushes.jsonl ] && wc -l < pushes.jsonl || echo 0; }
peak=0
results=()
for round in $(seq 1 "$rounds"); do
    before=$(accepted)
    t0=$(date +%s.%N)
    curl -fs -X POST -H "$auth" "http://127.0.0.1:$port/api/notifications" >/dev/null
    while [ $(( $(accepted) - before )) -lt "$devices" ]; do
        r=$(awk '/VmRSS/ {print $2}' /proc/$serve_pid/status); [ "$r" -gt "$peak" ] && peak=$r
        sleep 0.01
    done
    t1=$(date +%s.%N)
    rp_rate=$(echo "$devices / ($t1 - $t0)" | bc -l)
    h2=$(h2load -n "$devices" -c 1 -m 100 -i uris.txt -d payload.json -H "authorization: bearer $(cat jwt.txt)" \
        -H "apns-topic: com.example.richpush" -H "apns-push-type: background" -H "apns-priority: 5" 2>&1)
    echo "$h2" | grep -q "$devices succeeded" || { echo "h2load failed: $h2" >&2; exit 1; }
    h2_rate=$(echo "$h2" | awk '/^finished in/ {gsub(",", ""); print $4}')
    printf 'round %d: richpush %.0f pushes/s, h2load %.0f req/s\n' "$round" "$rp_rate" "$h2_rate" >&2
    results+=("$rp_rate $h2_rate")
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
rp_med=$(printf '%s\n' "${results[@]}" | awk '{print $1}' | median)
h2_med=$(printf '%s\n' "${results[@]}" | awk '{print $2}' | median)
failed=$("$rp" deliveries --data data --json | grep -vc '"state":"sent"' || true)
printf '%-46s %12s\n' "fan-out to $devices devices via the APNs sandbox" "pushes/s"
printf '%-46s %12.0f\n' "h2load, 1 connection, 100 streams" "$h2_med"
printf '%-46s %12.0f\n' "richpush: POST /api/notifications -> all accepted" "$rp_med"
printf 'ratio richpush/h2load: %.2f (target >= 0.5); deliveries not sent: %s; richpush peak RSS: %.1f MiB\n' \
    "$(echo "$rp_med / $h2_med" | bc -l)" "$failed" "$(echo "$peak / 1024" | bc -l)"
