#!/usr/bin/env bash
# CPU per first fetch (issue #51): N fetches of media/logo.png (~50 KB), each over a new plain
# HTTP connection that asks to close (wrk -t1 -c32 with bench/paths.lua, as a broadcast's phones
# fetch), served by nginx (one worker, sendfile), by the Swift floor (bench/fetch-floor.swift:
# epoll, one read, one sendfile, close, nothing else) and by one or more `richpush serve`
# binaries (`--public-media`, one event loop), in turn (the order turning each round), ROUNDS
# times. For each run it prints the rate and the server's CPU per fetch (user + system, from
# /proc): on this shared 2-core machine the CPU a fetch costs moves less from run to run than
# the rate, which wrk's own core bounds for nginx.
#
# Usage: bench/fetch-cpu.sh [ROUNDS] [N]   (env BINS="a b": richpush binaries to compare, each
#        named by its file name, so give them different ones; by default this checkout's release
#        build; BENCH_WORK)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-3}
n=${2:-10000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/fetch-cpu
nginx_port=18691
first_port=18692
source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk
if [ -z "${BINS:-}" ]; then
    swift build -c release --product richpush >&2
    BINS="$(swift build -c release --show-bin-path)/richpush"
fi
rm -rf "$work" && mkdir -p "$work"

pids=() ports=() names=() nginx_pid=
trap 'kill "${pids[@]:1}" $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
start_nginx "$work/nginx" $nginx_port media/logo.png "location /p/ { try_files /logo.png =404; }"
worker=$(pgrep -P "$nginx_pid")   # its one worker, which serves (fails the script if there is none)
pids=("$worker") ports=($nginx_port) names=(nginx)
# The floor: the least a Swift process spends on such a fetch (bench/fetch-floor.swift).
swiftc -O -import-objc-header bench/fetch-floor.h bench/fetch-floor.swift -o "$work/fetch-floor"
port=$first_port
"$work/fetch-floor" $port media/logo.png 2> "$work/floor.log" &
pids+=($!) ports+=($port) names+=(swift-floor)
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
port=$((port + 1))
for bin in $BINS; do
    "$bin" serve --data "$work/data-$port" --port $port --public-media --log-level warning --threads 1 2> "$work/serve-$port.log" &
    pids+=($!) ports+=($port) names+=("$(basename "$bin")")
    for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
    curl -fs "http://127.0.0.1:$port/health" >/dev/null || { echo "$bin did not start (see $work/serve-$port.log)" >&2; exit 1; }
    port=$((port + 1))
done
id=$(sha256sum media/logo.png | cut -c1-64)
size=$(stat -c %s media/logo.png)
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) print "/p/" i }' > "$work/nginx.txt"
awk -v n="$n" -v p="/media/$id" 'BEGIN { for (i = 0; i < n; i++) print p }' > "$work/richpush.txt"
tck=$(getconf CLK_TCK)
# run INDEX: one wrk run against server INDEX -> "name fetches/s µs-per-fetch"
run() {
    local i=$1 paths c0 c1 rps
    paths=$([ "$i" = 0 ] && echo "$work/nginx.txt" || echo "$work/richpush.txt")
    c0=$(cpu_ticks "${pids[$i]}")
    rps=$(WRK_PATHS=$paths WRK_BODY_BYTES=$size wrk -t1 -c32 -d120s -s "$repo/bench/paths.lua" "http://127.0.0.1:${ports[$i]}" |
        awk -v n="$n" '/^paths:/ { if ($4 != n || $6 > 0) { print "not every fetch a 200 of the image: " $4 " of " n " were, " $6 " were not" > "/dev/stderr"; exit 1 } }
                       /^Fetches\/sec:/ { print $2 }')
    c1=$(cpu_ticks "${pids[$i]}")
    echo "${names[$i]} $rps $(( (c1 - c0) * 1000000 / tck / n ))"
}
for i in "${!pids[@]}"; do
    if [ "$i" != 0 ]; then run "$i" > /dev/null; fi   # warm each cache
done
# The order turns each round: server k runs at place (k + round) mod count.
count=${#pids[@]}
for round in $(seq 1 "$rounds"); do
    for place in $(seq 0 $((count - 1))); do
        run $(( (place + round) % count )) | tee -a "$work/results.txt" >&2
    done
done
# column K N: column N of server K's runs (bench/lib.sh's median_of takes them as arguments).
column() { awk -v k="$1" -v c="$2" '$1 == k { print $c }' "$work/results.txt"; }
printf '%-24s %12s %14s\n' "medians of $rounds rounds" "fetches/s" "CPU µs/fetch"
for name in "${names[@]}"; do
    # shellcheck disable=SC2046 # one value per word
    printf '%-24s %12.0f %14.1f\n' "$name" "$(median_of $(column "$name" 2))" "$(median_of $(column "$name" 3))"
done
