#!/usr/bin/env bash
# Is richpush-bench as trustworthy as wrk and h2load over HTTPS and HTTP/2 (SPEC §30, issue #51)?
# Each pair loads the same nginx (nginx-light, one worker, the same ECDSA P-256 certificate)
# serving media/logo.png, one client thread each, alternating ROUNDS times; medians reported,
# with richpush-bench's figure as a ratio of its peer's in the same round, the median of the
# rounds' ratios (target: requests/s within 5%), with a 95% interval for that median.
#
# In the keep-alive pairs nginx is busy through every run, so a run's rate is nginx's speed in that
# run, and on this shared machine that speed moves by a quarter from one run to the next, seconds
# apart. Many short rounds tell the tools apart better than a few long ones: the default is 15
# rounds of 2 s, and the interval (between order statistics of the rounds' ratios, which needs no
# assumption about their spread) says whether the rounds were enough.
#
#   https-h1     wrk -t1 -c32                      richpush-bench -c32 --insecure https://…
#   h2-tls       h2load -t1 -c32 -m10 (ALPN h2)    richpush-bench -c32 --http2 --streams 10 --insecure
#   h2c          h2load -t1 -c32 -m10 http://…     richpush-bench -c32 --http2 --streams 10 http://…
#                (prior knowledge, an nginx port that speaks only h2)
#   urls-h2      h2load -i FILE (100 paths)        richpush-bench --urls FILE (the same 100)
#   new-conn     wrk -t1 -c32 -H 'Connection: close'   richpush-bench -c32 --new-connection
#   new-tls      the same over TLS, to an nginx that neither caches sessions nor issues tickets,
#                so every handshake of both tools is a full one (wrk would otherwise resume)
#
# h2load prints no percentiles: for the HTTP/2 pairs the mean latency is compared; for wrk's, p50.
# Beside each tool's figures, the nginx worker's CPU per request under it and the share of the run
# it was busy: a worker busy all the run set the rate, so two clients' rates then differ by what
# each one's way of sending costs nginx, not by what either counts.
#
# Usage: bench/loadtool-peers.sh [ROUNDS] [SECONDS]   (default 15 2)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-15}
seconds=${2:-2}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/loadtool-peers
source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk h2load:nghttp2-client /usr/bin/time:time
swift build -c release --product richpush-bench >&2
bench="$(swift build -c release --show-bin-path)/richpush-bench"
rm -rf "$work" && mkdir -p "$work"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
tls="ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;"
# Each nginx counts the requests it answered (stub_status), so each run's count can be set against
# the one its client reported.
status="location = /nginx-status { stub_status; }"
start_nginx "$work/nginx" 18521 media/logo.png \
    "listen 127.0.0.1:18522 ssl http2; listen 127.0.0.1:18523 http2; $tls ssl_session_cache shared:SSL:1m; location / { try_files \$uri /logo.png; } $status"
main_pid=$nginx_pid
start_nginx "$work/nginx-full" 18524 media/logo.png "listen 127.0.0.1:18525 ssl; $tls ssl_session_cache off; ssl_session_tickets off; $status"
full_pid=$nginx_pid
trap 'kill $main_pid $full_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
# nginx on the first core, each client on the second: on two cores, a process the scheduler moves
# between them (or that shares one with the other) moves its figure by 10-20% from run to run.
for pid in $main_pid $full_pid $(pgrep -P "$main_pid") $(pgrep -P "$full_pid"); do taskset -pc 0 "$pid" >/dev/null; done
pin="/usr/bin/time -f %U+%S -o $work/cpu taskset -c 1"
main_worker=$(pgrep -P "$main_pid") full_worker=$(pgrep -P "$full_pid")
hz=$(getconf CLK_TCK)
# The serving nginx worker's CPU per request, and how busy it was: if it was busy the whole run,
# the server set the rate, and a difference between two clients is what each one's way of sending
# costs the server; if not, the client did.
# PAIR: the worker that serves it (new-tls has an nginx of its own).
# And the requests nginx answered in the run (its stub_status count, less the one that read it):
# the client's own count over nginx's says whether the client counts what the server did.
served() { curl -fs "http://127.0.0.1:$status_port/nginx-status" | awk 'NR == 3 { print $3 }'; }
server_start() {
    worker=$main_worker status_port=18521
    [ "$1" = new-tls ] && worker=$full_worker status_port=18524
    t0=$(cpu_ticks "$worker") n0=$(served)
}
server_cost() { # REQ/S -> "µs/request busy counted/served"
    echo "$(cpu_ticks "$worker") $t0 $1 $(served) $n0" | awk -v hz="$hz" -v s="$seconds" '{ cpu = ($1 - $2) / hz; n = $4 - $5 - 1
        printf "%.1f %.2f %.3f", ($3 > 0 ? cpu * 1e6 / ($3 * s) : 0), cpu / s, (n > 0 ? $3 * s / n : 0) }'
}
# µs of the client's CPU per request: from /usr/bin/time's user+system seconds and the run's req/s.
cpu_per_request() { echo "($(cat "$work/cpu")) * 1000000 / ($1 * $seconds)" | bc -l; }
for i in $(seq 1 100); do echo "/logo.png?n=$i"; done > "$work/paths.txt"
sed 's|^|https://127.0.0.1:18522|' "$work/paths.txt" > "$work/uris.txt"

# Columns: pair tool req/s latency(ms) errors
rb() { # PAIR ARGS... -> one line
    local pair=$1; shift
    server_start "$pair"
    $pin "$bench" --threads 1 --duration "${seconds}s" --json "$@" | python3 -c '
import json, sys
r = json.load(sys.stdin)
bad = r["errors"] + sum(n for s, n in r["status"].items() if not s.startswith("2"))
print(sys.argv[1], "richpush-bench", r["requestsPerSecond"], r["latency"]["p50"], bad, sep=" ")' "$pair" > "$work/line"
    local rps; rps=$(awk '{print $3}' "$work/line")
    echo "$(cat "$work/line") $(cpu_per_request "$rps") $(server_cost "$rps")"
}
rbmean() { # the same with the mean latency (compared with h2load's)
    local pair=$1; shift
    server_start "$pair"
    $pin "$bench" --threads 1 --duration "${seconds}s" --latency "$@" | awk -v pair="$pair" '
        /^Requests\/sec:/ { rps = $2 } /Latency distribution/ { mean = $4; gsub(/[()ms]/, "", mean) }
        /Non-2xx/ { e += $5 } /Socket errors/ { gsub(/,/, ""); e += $4 + $6 + $8 }
        END { printf "%s richpush-bench %.0f %.3f %d\n", pair, rps, mean, e }' > "$work/line"
    local rps; rps=$(awk '{print $3}' "$work/line")
    echo "$(cat "$work/line") $(cpu_per_request "$rps") $(server_cost "$rps")"
}
wrk1() { # PAIR ARGS...
    local pair=$1; shift
    server_start "$pair"
    $pin wrk -t1 -d"${seconds}s" --latency "$@" | awk -v pair="$pair" '
        function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
        /Requests\/sec:/ { rps = $2 } /^ +50%/ { p50 = ms($2) } /Non-2xx/ { e += $NF } /Socket errors/ { gsub(/,/, ""); e += $4 + $6 + $8 + $10 }
        END { printf "%s wrk %.0f %.3f %d\n", pair, rps, p50, e }' > "$work/line"
    local rps; rps=$(awk '{print $3}' "$work/line")
    echo "$(cat "$work/line") $(cpu_per_request "$rps") $(server_cost "$rps")"
}
h2l() { # PAIR ARGS...
    local pair=$1; shift
    server_start "$pair"
    $pin h2load -t1 -D "$seconds" "$@" | awk -v pair="$pair" '
        function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
        /^finished in/ { rps = $4 + 0 } /succeeded,/ { e += $10 + $12 + $14 } /^status codes:/ { e += $5 + $7 + $9 } /^time for request:/ { mean = ms($6) }
        END { printf "%s h2load %.0f %.3f %d\n", pair, rps, mean, e }' > "$work/line"
    local rps; rps=$(awk '{print $3}' "$work/line")
    echo "$(cat "$work/line") $(cpu_per_request "$rps") $(server_cost "$rps")"
}
: > "$work/results.txt"
pairs=${PAIRS:-https-h1 h2-tls h2c urls-h2 new-conn new-tls}
peer_https_h1() { wrk1 https-h1 -c32 https://127.0.0.1:18522/logo.png; }
rb_https_h1() { rb https-h1 --connections 32 --insecure https://127.0.0.1:18522/logo.png; }
peer_h2_tls() { h2l h2-tls -c32 -m10 https://127.0.0.1:18522/logo.png; }
rb_h2_tls() { rbmean h2-tls --connections 32 --http2 --streams 10 --insecure https://127.0.0.1:18522/logo.png; }
peer_h2c() { h2l h2c -c32 -m10 http://127.0.0.1:18523/logo.png; }
rb_h2c() { rbmean h2c --connections 32 --http2 --streams 10 http://127.0.0.1:18523/logo.png; }
peer_urls_h2() { h2l urls-h2 -c32 -m10 -i "$work/uris.txt"; }
rb_urls_h2() { rbmean urls-h2 --connections 32 --http2 --streams 10 --insecure --urls "$work/uris.txt"; }
peer_new_conn() { wrk1 new-conn -c32 -H 'Connection: close' http://127.0.0.1:18521/logo.png; }
rb_new_conn() { rb new-conn --connections 32 --new-connection http://127.0.0.1:18521/logo.png; }
peer_new_tls() { wrk1 new-tls -c32 -H 'Connection: close' https://127.0.0.1:18525/logo.png; }
rb_new_tls() { rb new-tls --connections 32 --new-connection --insecure https://127.0.0.1:18525/logo.png; }
# Each pair's two runs are back to back, the peer first in odd rounds and richpush-bench first in
# even ones: the machine's speed drifts by a quarter over minutes here, and a ratio of the two runs
# of one round sees less of that drift than a ratio of medians taken minutes apart.
for round in $(seq 1 "$rounds"); do
    for pair in $pairs; do
        if (( round % 2 )); then "peer_${pair//-/_}"; "rb_${pair//-/_}"; else "rb_${pair//-/_}"; "peer_${pair//-/_}"; fi
    done | awk -v r="$round" '{ print $1, $2, $3, $4, $5, $6, r, $7, $8, $9 }' | tee -a "$work/results.txt" >&2
done
# Columns of results.txt: pair tool req/s latency(ms) errors µs/request round server-µs/request server-busy
# counted/served
col() { awk -v p="$1" -v t="$2" -v c="$3" '$1 == p && $2 == t {print $c}' "$work/results.txt" | median; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# richpush-bench's req/s over its peer's in the same round, one line per round.
ratios() { awk -v p="$1" '$1 == p { if ($2 == "richpush-bench") rb[$7] = $3; else peer[$7] = $3 }
    END { for (r in rb) if (r in peer && peer[r] > 0) print rb[r] / peer[r] }' "$work/results.txt"; }
# A 95% interval for the median of a pair's round ratios, between order statistics k and n+1-k,
# with k the largest for which a binomial(n, 1/2) falls below k with probability at most 2.5%.
interval() { ratios "$1" | python3 -c '
import math, sys
r = sorted(float(v) for v in sys.stdin.read().split())
n = len(r); k = 0
while k + 1 <= n and sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n <= 0.025: k += 1
print("%.2f-%.2f" % (r[k - 1], r[n - k]) if k >= 1 else "n/a")'; }
errs() { awk -v p="$1" '$1 == p {s += $5} END {print s + 0}' "$work/results.txt"; }
printf '%-9s %-7s %10s %10s %8s %10s %13s %8s %8s %9s %9s %9s %9s %11s %7s\n' pair peer "peer r/s" "rb r/s" "ratio" "95% of it" "round ratios" "peer ms" "rb ms" "peer µs/r" "rb µs/r" "srv/peer" "srv/rb" "counted" errors
for pair in $pairs; do
    peer=$(awk -v p="$pair" '$1 == p && $2 != "richpush-bench" {print $2; exit}' "$work/results.txt")
    printf '%-9s %-7s %10.0f %10.0f %8.3f %10s %13s %8.3f %8.3f %9.1f %9.1f %9s %9s %11s %7d\n' "$pair" "$peer" "$(col "$pair" "$peer" 3)" "$(col "$pair" richpush-bench 3)" \
        "$(ratios "$pair" | median)" "$(interval "$pair")" "$(ratios "$pair" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f-%.2f", lo, hi}')" \
        "$(col "$pair" "$peer" 4)" "$(col "$pair" richpush-bench 4)" "$(col "$pair" "$peer" 6)" "$(col "$pair" richpush-bench 6)" \
        "$(col "$pair" "$peer" 8)/$(col "$pair" "$peer" 9)" "$(col "$pair" richpush-bench 8)/$(col "$pair" richpush-bench 9)" \
        "$(col "$pair" "$peer" 10)/$(col "$pair" richpush-bench 10)" "$(errs "$pair")"
done
echo "(ratio: the median over $rounds rounds of richpush-bench's req/s over its peer's in the same round, the two back to back,"
echo " in turns, and a 95% interval for that median (n/a under 6 rounds); req/s, ms and µs/r: medians of ${seconds}s runs; nginx one worker on the first core, each client one thread on"
echo " the second; latency: p50 against wrk, mean against h2load; µs/r: the client's own CPU per request;"
echo " srv/peer, srv/rb: the nginx worker's CPU µs per request / the share of the run it was busy, with each client;"
echo " counted: the requests each client counted over those nginx answered in its runs, peer/rb; a run's last requests in"
echo " flight are answered and not counted, up to connections x streams of them)"
