#!/usr/bin/env bash
# Which tool's latency is right? wrk and richpush-bench load nginx (as bench/loadtool.sh does)
# while tcpdump captures the loopback traffic; bench/wire-latency.py measures each request's time
# on the wire (request segment to the response's last segment) in the same run, and each tool's
# own p50 is set against the wire's. The capture costs CPU, so latencies here are higher than
# without it; what matters is each tool against the wire of its own run.
#
# CONNECTIONS (environment, default 32) may list several counts.
# Usage: bench/loadtool-wire.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-3}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/loadtool-wire
port=18093
source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk tcpdump:tcpdump
swift build -c release --product richpush-bench >&2
bench="$(swift build -c release --show-bin-path)/richpush-bench"
start_nginx "$work" $port media/logo.png
trap 'kill $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/logo.png"

# capture NAME COMMAND...: runs COMMAND under tcpdump; prints "<tool's p50 µs> <wire line>".
capture() {
    local name=$1; shift
    tcpdump -i lo -s 128 -B 262144 -w "$work/$name.pcap" "tcp port $port" 2> "$work/tcpdump.log" &
    local dump=$!
    sleep 1
    local own
    own=$("$@")
    sleep 0.2
    kill -INT $dump; wait $dump 2>/dev/null || true
    local dropped
    dropped=$(awk '/dropped by kernel/ {print $1}' "$work/tcpdump.log")
    echo "$own $(python3 bench/wire-latency.py "$work/$name.pcap" $port) dropped=${dropped:-?}"
    rm -f "$work/$name.pcap"
}
wrk_p50() { wrk -t1 -c"$1" -d"${seconds}s" -s bench/wrk-percentiles.lua "$url" | awk '$1 == "wrk" {print $7}'; }
bench_p50() {
    "$bench" --threads 1 --connections "$1" --duration "${seconds}s" --json "$url" \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["latency"]["p50"]*1000))'
}
for conns in ${CONNECTIONS:-32}; do
    echo "$conns connections: tool p50 | wire: count mean p10 p25 p50 p75 p90 p99 (µs)"
    for round in $(seq 1 "$rounds"); do
        echo "wrk            $(capture wrk wrk_p50 "$conns")"
        echo "richpush-bench $(capture bench bench_p50 "$conns")"
    done
done
