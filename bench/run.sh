#!/usr/bin/env bash
# Every benchmark, one table: builds release, installs nginx-light / wrk / nghttp2-client when
# missing, runs ingest vs its floor, image GETs vs nginx (keep-alive, and the CPU of a fetch over
# a new connection: bench/fetch-cpu.sh), push fan-out vs h2load, and
# a campaign to 10,000 devices and its first fetches (bench/broadcast.sh), blobs in S3 vs
# files (bench/s3.sh), the PostgreSQL outbox vs SQLite's (bench/engines.sh), HTTPS vs nginx
# (bench/https.sh), the engines stopped and frozen under a server (bench/faults.sh),
# richpush-bench vs wrk, and campaigns to 10k, 100k and a million on each engine
# (bench/million.sh, about 25 minutes; quick: 10k against 100k), a dry run over 10,000 users
# (bench/dry-run.sh) and campaigns with tracing off and on (bench/traces.sh), each alternating against its
# reference in one run, then prints the figures and ratios. Paste the table into BENCHMARKS.md
# with the machine it ran on.
#
# Usage: bench/run.sh [quick]      (quick: fewer and shorter rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5; seconds=10; million=(1000000)
[ "${1:-}" = quick ] && { rounds=2; seconds=4; million=(100000 "sqlite postgres"); export SIZES=10000 ROUNDS=1; }
source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk h2load:nghttp2-client bc:bc
swift build -c release --product richpush --product richpush-bench >&2 || swift build -c release >&2
out=$(realpath -m "${BENCH_WORK:-bench/work}")/run
mkdir -p "$out"
bench/ingest.sh "$rounds" > "$out/ingest.txt"
bench/http.sh "$rounds" "$seconds" > "$out/http.txt"
bench/fetch-cpu.sh "$rounds" > "$out/fetch-cpu.txt"
bench/fanout.sh "$rounds" 2000 > "$out/fanout.txt"
bench/broadcast.sh 3 10000 > "$out/broadcast.txt"
bench/s3.sh 3 5 > "$out/s3.txt"
bench/engines.sh 3 5000 > "$out/engines.txt" 2>&1
bench/https.sh 3 5 50000 > "$out/https.txt"
bench/faults.sh 2 > "$out/faults.txt"
bench/loadtool.sh "$rounds" "$seconds" > "$out/loadtool.txt"
bench/million.sh "${million[@]}" 2>&1 | grep -E "^(sqlite|postgres): " > "$out/million.txt"
bench/dry-run.sh 10000 > "$out/dry-run.txt"
bench/traces.sh 10000 3 > "$out/traces.txt"
echo "# RichPush benchmarks, $(date -u +%Y-%m-%d), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}')"
for part in ingest http fetch-cpu fanout broadcast s3 engines https faults loadtool million dry-run traces; do echo; cat "$out/$part.txt"; done
