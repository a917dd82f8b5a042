#!/usr/bin/env bash
# Fan-out per platform (issue 12): one alert campaign to 2,000 devices of one platform, through
# that platform's stand-in, timed from POST /api/admin/campaigns until the stand-in has accepted
# all 2,000, next to a reference sender in the same round that sends the stand-in 2,000 valid
# messages of the same shape without building, encrypting or recording anything:
#   APNs     -> richpush apns-sandbox (TLS, HTTP/2, ES256 check), reference h2load (1 connection, 100 streams)
#   FCM      -> richpush fcm-sandbox (plain HTTP/1.1, bearer + schema check), reference richpush-bench --method POST
#   Web Push -> richpush webpush-sandbox (plain HTTP/1.1, VAPID check + decryption), reference richpush-bench --method POST
# The Web Push reference posts one body encrypted beforehand by PyPI's http_ece with a py_vapid
# header: it pays no ECDH, which is the point. The stand-in decrypts every message either way.
# Then the encryption alone: `richpush webpush-encrypt` against http_ece (OpenSSL) in Python.
#
# Usage: bench/platforms.sh [ROUNDS] [DEVICES]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-3}
devices=${2:-2000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/platforms
apns_port=22298 fcm_port=22293 web_port=22294 port=18297
source bench/lib.sh
install_missing h2load:nghttp2-client bc:bc
python3 -c 'import cryptography, http_ece, py_vapid' 2>/dev/null || pip install --quiet cryptography http_ece py_vapid
swift build -c release --product richpush >&2
swift build -c release --product richpush-bench >&2
bin="$(swift build -c release --show-bin-path)"
rp="$bin/richpush" bench="$bin/richpush-bench"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

# Keys: APNs provider key and a token for h2load; an FCM service account; a VAPID key.
python3 - "$fcm_port" <<'PY'
import base64, json, sys, time
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
pem = lambda k: k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
apns = ec.generate_private_key(ec.SECP256R1())
open("AuthKey.p8", "wb").write(pem(apns))
signing_input = b64(b'{"alg":"ES256","kid":"KEY1234567"}') + "." + b64(json.dumps({"iss": "TEAM123456", "iat": int(time.time())}).encode())
r, s = decode_dss_signature(apns.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
open("apns-jwt.txt", "w").write(signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
fcm = rsa.generate_private_key(public_exponent=65537, key_size=2048)
json.dump({"type": "service_account", "project_id": "richpush-bench", "private_key_id": "k1", "private_key": pem(fcm).decode(),
           "client_email": "sender@richpush-bench.iam.gserviceaccount.com", "token_uri": "http://127.0.0.1:%s/token" % sys.argv[1]},
          open("service-account.json", "w"))
open("vapid.pem", "wb").write(pem(ec.generate_private_key(ec.SECP256R1())))
PY

"$rp" apns-sandbox --port $apns_port --team-id TEAM123456 --key-id KEY1234567 --public-key AuthKey.p8 --token-update-interval 0 --log apns.jsonl 2> apns-sandbox.log &
pids=($!)
"$rp" fcm-sandbox --port $fcm_port --service-account service-account.json --log fcm.jsonl --log-level warning 2> fcm-sandbox.log &
pids+=($!)
"$rp" webpush-sandbox --port $web_port --log web.jsonl --log-level warning 2> web-sandbox.log &
pids+=($!)
trap 'kill ${pids[*]} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -f apns-sandbox-cert.pem ] && curl -sk -o /dev/null "https://127.0.0.1:$apns_port/3/device" && break; sleep 0.1; done
mkdir -p media && cp "$repo/media/logo.png" media/
echo "bench-password" | "$rp" users add root --admin --password-stdin --data data >/dev/null
# A user has at most 100 devices: 100 users' worth per platform, iphones0, androids0, browsers0, ...
groups=$(( (devices + 99) / 100 ))
for user in iphones androids browsers; do
    for k in $(seq 0 $((groups - 1))); do echo "{\"name\":\"$user$k\",\"password\":\"bench-password\"}"; done
done > users.jsonl
"$rp" users import users.jsonl --data data >/dev/null
"$rp" serve --data data --port $port --log-level warning --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 \
    --apns-topic com.example.richpush --apns-env "https://127.0.0.1:$apns_port" --push-ca apns-sandbox-cert.pem \
    --fcm-service-account service-account.json --fcm-endpoint "http://127.0.0.1:$fcm_port" \
    --vapid-key vapid.pem --vapid-subject mailto:bench@example.com 2> serve.log &
serve_pid=$!
pids+=($serve_pid)
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

# Devices: 2,000 per platform, each made by its stand-in as the phone or browser would get it,
# registered through the API. Also what the references send.
echo "registering $((3 * devices)) devices through the API..." >&2
python3 - "$port" "$devices" "$apns_port" "$fcm_port" "$web_port" <<'PY'
import base64, http.client, json, sys, time
import http_ece, py_vapid
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives import hashes
port, n, apns_port, fcm_port, web_port = map(int, sys.argv[1:])
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def call(port, method, path, body=None, headers={}):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse(); data = r.read(); c.close()
    assert 200 <= r.status < 300, (path, r.status, data)
    return data
api = http.client.HTTPConnection("127.0.0.1", port)
def register(user, platform, handle):
    auth = {"Authorization": "Basic " + base64.b64encode(("%s:bench-password" % user).encode()).decode(), "Content-Type": "application/json"}
    api.request("POST", "/api/register", headers=auth); created = api.getresponse(); data = created.read(); assert created.status in (200, 201), (created.status, data); rid = json.loads(data)["registrationId"]
    api.request("PUT", "/api/register/" + rid, body=json.dumps({"platform": platform, "handle": handle}), headers=auth)
    r = api.getresponse(); data = r.read(); assert r.status == 200, (r.status, data)
server_key = json.loads(call(port, "GET", "/api/webpush/key"))["publicKey"]
tokens, fcm_tokens, subscriptions = [], [], []
for i in range(n):
    tokens.append("%064x" % (i + 1)); register("iphones%d" % (i // 100), "apns", tokens[-1])
    fcm_tokens.append(json.loads(call(fcm_port, "POST", "/register"))["token"]); register("androids%d" % (i // 100), "fcm", fcm_tokens[-1])
    subscriptions.append(json.loads(call(web_port, "POST", "/subscribe", json.dumps({"applicationServerKey": server_key}))))
    register("browsers%d" % (i // 100), "web", subscriptions[-1])
open("uris.txt", "w").write("".join("https://127.0.0.1:%d/3/device/%s\n" % (apns_port, t) for t in tokens))
# What RichPush's alert campaign sends, per platform, with a payload URL of the same length.
rich_url = "http://127.0.0.1:%d/p/1234/%s?e=1900000000&s=%s" % (port, "a" * 64, "b" * 43)
content = {"richId": "1234", "richMessage": "50% off everything this weekend", "richType": "img", "richUrl": rich_url}
open("apns-payload.json", "w").write(json.dumps({"aps": {"alert": {"title": "Sale", "body": content["richMessage"]}, "mutable-content": 1}, **content}))
account = json.load(open("service-account.json"))
key = serialization.load_pem_private_key(account["private_key"].encode(), None)
now = int(time.time())
signing = b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(
    {"iss": account["client_email"], "scope": "https://www.googleapis.com/auth/firebase.messaging", "aud": account["token_uri"], "iat": now, "exp": now + 3600}).encode())
assertion = signing + "." + b64(key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256()))
token = json.loads(call(fcm_port, "POST", "/token", "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion,
                        {"Content-Type": "application/x-www-form-urlencoded"}))["access_token"]
open("fcm-auth.txt", "w").write("Authorization: Bearer " + token)
open("fcm-body.json", "w").write(json.dumps({"message": {"token": fcm_tokens[0], "data": content,
                                                         "notification": {"title": "Sale", "body": content["richMessage"], "image": "https://example.com/i.png"}}}))
sub = subscriptions[0]
open("web-endpoint.txt", "w").write(sub["endpoint"])
plaintext = json.dumps({**content, "title": "Sale"}).encode()
b64d = lambda text: base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
body = http_ece.encrypt(plaintext, private_key=ec.generate_private_key(ec.SECP256R1()), dh=b64d(sub["keys"]["p256dh"]),
                        auth_secret=b64d(sub["keys"]["auth"]), version="aes128gcm")
open("web-body.bin", "wb").write(body)
vapid = py_vapid.Vapid.from_file("vapid.pem")
origin = "http://127.0.0.1:%d" % web_port
headers = vapid.sign({"aud": origin, "exp": now + 12 * 3600, "sub": "mailto:bench@example.com"})
open("web-auth.txt", "w").write("Authorization: " + headers["Authorization"])
PY

lines() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
cpu() { awk '{print $14 + $15}' /proc/$serve_pid/stat; }   # utime + stime, in clock ticks
ticks=$(getconf CLK_TCK)
auth="Authorization: Basic $(printf 'root:bench-password' | base64)"
# campaign USERS LOG: sets elapsed, the seconds from the POST until LOG has $devices more lines,
# and cpu_used, the server's CPU seconds meanwhile.
campaign() {
    local before t0 c0 t1 names
    names=$(for k in $(seq 0 $((groups - 1))); do printf '"%s%d",' "$1" "$k"; done)
    before=$(lines "$2"); c0=$(cpu); t0=$(date +%s.%N)
    curl -fs -X POST -H "$auth" -H 'Content-Type: application/json' "http://127.0.0.1:$port/api/admin/campaigns" \
        -d "{\"audience\":{\"users\":[${names%,}]},\"mode\":\"alert\",\"title\":\"Sale\",\"message\":\"50% off everything this weekend\"}" >/dev/null
    while [ $(( $(lines "$2") - before )) -lt "$devices" ]; do sleep 0.005; done
    t1=$(date +%s.%N)
    cpu_used=$(echo "($(cpu) - $c0) / $ticks" | bc -l)
    elapsed=$(echo "$t1 - $t0" | bc -l)
}
# reference_post URL BODY AUTH LOG: req/s of richpush-bench posting BODY for 2 s, 8 connections
# (AsyncHTTPClient's HTTP/1.1 pool per host), and that every request was accepted.
reference_post() {
    local out
    out=$("$bench" --method POST --body-file "$2" --header "$3" --header "Content-Type: application/octet-stream" \
        --header "Content-Encoding: aes128gcm" --header "TTL: 86400" --header "Urgency: high" \
        --connections 8 --threads 1 --duration 2s --json "$1")
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["errors"]==0 and all(k.startswith("2") for k in r["status"]), r; print(r["requestsPerSecond"])' "$out"
}
declare -A rp_rates ref_rates cpus
for round in $(seq 1 "$rounds"); do
    campaign iphones apns.jsonl; rp_rates[apns]+="$(echo "$devices / $elapsed" | bc -l) "; cpus[apns]+="$cpu_used "
    h2=$(h2load -n "$devices" -c 1 -m 100 -i uris.txt -d apns-payload.json -H "authorization: bearer $(cat apns-jwt.txt)" \
        -H "apns-topic: com.example.richpush" -H "apns-push-type: alert" -H "apns-priority: 10" 2>&1)
    echo "$h2" | grep -q "$devices succeeded" || { echo "h2load failed: $h2" >&2; exit 1; }
    ref_rates[apns]+="$(echo "$h2" | awk '/^finished in/ {gsub(",", ""); print $4}') "

    campaign androids fcm.jsonl; rp_rates[fcm]+="$(echo "$devices / $elapsed" | bc -l) "; cpus[fcm]+="$cpu_used "
    ref_rates[fcm]+="$(reference_post "http://127.0.0.1:$fcm_port/v1/projects/richpush-bench/messages:send" fcm-body.json "$(cat fcm-auth.txt)") "

    campaign browsers web.jsonl; rp_rates[web]+="$(echo "$devices / $elapsed" | bc -l) "; cpus[web]+="$cpu_used "
    ref_rates[web]+="$(reference_post "$(cat web-endpoint.txt)" web-body.bin "$(cat web-auth.txt)") "
    echo "round $round: $(for p in apns fcm web; do printf '%s %.0f/%.0f  ' $p "$(echo ${rp_rates[$p]} | awk '{print $NF}')" "$(echo ${ref_rates[$p]} | awk '{print $NF}')"; done)" >&2
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
failed=$(for id in $(seq 1 $((3 * rounds))); do "$rp" deliveries --data data --json --campaign "$id"; done | grep -vc '"state":"sent"' || true)
printf '%-10s %-44s %10s %10s %8s %16s\n' platform "reference" "ref/s" "richpush/s" ratio "server CPU/1000"
for p in apns fcm web; do
    ref=$(echo "${ref_rates[$p]}" | median); ours=$(echo "${rp_rates[$p]}" | median); c=$(echo "${cpus[$p]}" | median)
    case $p in apns) name="h2load, 1 connection, 100 streams";; *) name="richpush-bench --method POST, 8 connections";; esac
    printf '%-10s %-44s %10.0f %10.0f %8.2f %14.0f ms\n' "$p" "$name" "$ref" "$ours" "$(echo "$ours / $ref" | bc -l)" "$(echo "$c * 1000 * 1000 / $devices" | bc -l)"
done
echo "deliveries not sent: $failed"

# Encryption alone, on one core: RichPush (swift-crypto) against http_ece (Python over OpenSSL).
"$rp" webpush-encrypt --count 2000 --size 250
python3 - <<'PY'
import time, os, json
import http_ece
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization
receiver = ec.generate_private_key(ec.SECP256R1())
dh = receiver.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
auth, plaintext, n = os.urandom(16), b"a" * 250, 2000
t = time.perf_counter()
for _ in range(n):
    http_ece.encrypt(plaintext, private_key=ec.generate_private_key(ec.SECP256R1()), dh=dh, auth_secret=auth, version="aes128gcm")
print(json.dumps({"http_ece encryptMicrosecondsPerMessage": round((time.perf_counter() - t) / n * 1e6, 1)}))
PY
