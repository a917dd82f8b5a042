#!/usr/bin/env bash
# Is richpush-bench as trustworthy as wrk? Both load nginx (nginx-light, one worker, sendfile)
# serving media/logo.png with one thread, at 1, 4, 16, 32 and 64 connections, alternating
# ROUNDS times per count. Targets: requests/s within 10% of wrk's, p50 within 20%, zero errors.
#
# Each tool's figures are the medians over the rounds; the p50 range shows how far each tool's
# own p50 moves from round to round (from 16 connections on, one client thread is saturated and
# both tools' latency distributions can turn bimodal, so the quartiles are printed as well).
#
# CONNECTIONS (environment, default "1 4 16 32 64") lists the counts: one table each.
#
# Usage: bench/loadtool.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-9}
seconds=${2:-5}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/loadtool
port=18092
source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk
swift build -c release --product richpush-bench >&2
bench="$(swift build -c release --show-bin-path)/richpush-bench"
start_nginx "$work" $port media/logo.png
trap 'kill $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/logo.png"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$work/results.txt" | median; }
range() { awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$work/results.txt" | sort -g | sed -n '1p;$p' | paste -sd- ; }
errs() { awk -v n="$1" '$1 == n {s += $3} END {print s + 0}' "$work/results.txt"; }
for conns in ${CONNECTIONS:-1 4 16 32 64}; do
: > "$work/results.txt"
# Columns: tool req/s errors mean p10 p25 p50 p75 p90 p99 (latencies in microseconds).
for round in $(seq 1 "$rounds"); do
    wrk -t1 -c"$conns" -d"${seconds}s" -s bench/wrk-percentiles.lua "$url" | grep '^wrk ' | tee -a "$work/results.txt" >&2
    "$bench" --threads 1 --connections "$conns" --duration "${seconds}s" --latency "$url" | awk '
        function us(v) { sub(/ms$/, "", v); return v * 1000 }
        /^Requests\/sec:/ { rps = $2 }
        /Latency distribution/ { mean = $4; gsub(/[()ms]/, "", mean); mean *= 1000 }
        $1 == "10%" { p10 = us($2) } $1 == "25%" { p25 = us($2) } $1 == "50%" { p50 = us($2) }
        $1 == "75%" { p75 = us($2) } $1 == "90%" { p90 = us($2) } $1 == "99%" { p99 = us($2) }
        /Non-2xx/ { e += $5 } /Socket errors/ { gsub(/,/, ""); e += $4 + $6 + $8 }
        END { printf "richpush-bench %.0f %d %.0f %d %d %d %d %d %d\n", rps, e, mean, p10, p25, p50, p75, p90, p99 }' \
        | tee -a "$work/results.txt" >&2
done
printf '%-15s %8s %6s %6s %6s %6s %6s %6s %6s %6s  %-9s\n' "$conns conns, 1 thr" "req/s" "errors" "mean" "p10" "p25" "p50" "p75" "p90" "p99" "p50 range"
for n in wrk richpush-bench; do
    printf '%-15s %8.0f %6d %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f  %-9s\n' "$n" "$(col $n 2)" "$(errs $n)" \
        "$(col $n 4)" "$(col $n 5)" "$(col $n 6)" "$(col $n 7)" "$(col $n 8)" "$(col $n 9)" "$(col $n 10)" "$(range $n 7)"
done
echo "(latencies in microseconds, medians of $rounds alternating rounds of ${seconds}s)"
printf 'req/s ratio %.3f (target 0.90-1.10), p50 ratio %.3f (target 0.80-1.20), mean ratio %.3f\n' \
    "$(echo "$(col richpush-bench 2) / $(col wrk 2)" | bc -l)" "$(echo "$(col richpush-bench 7) / $(col wrk 7)" | bc -l)" \
    "$(echo "$(col richpush-bench 4) / $(col wrk 4)" | bc -l)"
done
