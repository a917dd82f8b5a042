#!/usr/bin/env bash
# Is richpush-bench as trustworthy as wrk? Both load nginx (nginx-light, one worker, sendfile)
# serving media/logo.png with 32 connections and one thread, alternating ROUNDS times.
# Targets: requests/s within 10% of wrk's, p50 within 20%, zero errors.
#
# Usage: bench/loadtool.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
seconds=${2:-10}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/loadtool
port=18092
source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk
swift build -c release --product richpush-bench >&2
bench="$(swift build -c release --show-bin-path)/richpush-bench"
start_nginx "$work" $port media/logo.png
trap 'kill $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/logo.png"
: > "$work/results.txt"
for round in $(seq 1 "$rounds"); do
    wrk -t1 -c32 -d"${seconds}s" --latency "$url" | awk '
        function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
        /Requests\/sec:/ { rps = $2 } /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) }
        /Non-2xx/ { e += $NF } /Socket errors/ { gsub(/,/, ""); e += $4 + $6 + $8 + $10 }
        END { printf "wrk %.0f %.3f %.3f %d\n", rps, p50, p99, e }' | tee -a "$work/results.txt" >&2
    "$bench" --threads 1 --connections 32 --duration "${seconds}s" --json "$url" | python3 -c '
import sys, json
j = json.load(sys.stdin); bad = sum(v for k, v in j["status"].items() if not k.startswith("2"))
print("richpush-bench %.0f %.3f %.3f %d" % (j["requestsPerSecond"], j["latency"]["p50"], j["latency"]["p99"], j["errors"] + bad))' \
        | tee -a "$work/results.txt" >&2
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$work/results.txt" | median; }
errs() { awk -v n="$1" '$1 == n {s += $5} END {print s + 0}' "$work/results.txt"; }
printf '%-16s %10s %9s %9s %7s\n' "vs nginx, 32 conns, 1 thread" "req/s" "p50 ms" "p99 ms" "errors"
for n in wrk richpush-bench; do printf '%-28s %10.0f %9.3f %9.3f %7d\n' "$n" "$(col $n 2)" "$(col $n 3)" "$(col $n 4)" "$(errs $n)"; done
printf 'req/s ratio %.3f (target 0.90-1.10), p50 ratio %.3f (target 0.80-1.20)\n' \
    "$(echo "$(col richpush-bench 2) / $(col wrk 2)" | bc -l)" "$(echo "$(col richpush-bench 3) / $(col wrk 3)" | bc -l)"
