#!/usr/bin/env bash
# HTTP benchmark: GET /media/{id} and GET /api/notifications/{id} (with Basic credentials, and
# with a Bearer session) of media/logo.png (~48 KB PNG) with 32 keep-alive connections, next to
# nginx (Debian's nginx-light, one worker, sendfile) serving the same file. Runs alternate nginx /
# media / payload / bearer ROUNDS times with wrk (one thread), the order rotating each round;
# medians are reported, with RichPush's peak RSS under load, each round's own ratio, and each
# server's CPU a request (at 70–80,000 requests a second one wrk thread can set both rates).
#
# RichPush runs with one event loop (RICHPUSH_THREADS, default 1 here), matching nginx's single
# worker: on this 2-core machine the load generator needs the other core. RICHPUSH_THREADS=0
# measures the service's own default (one event loop per core).
#
# Usage: bench/http.sh [ROUNDS] [SECONDS]     (env BENCH_WORK, BENCH_TOOL=wrk|richpush-bench, RICHPUSH_BIN)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-10}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/http
tool=${BENCH_TOOL:-wrk}
nginx_port=18091
rp_port=18090
mkdir -p "$work"

source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk

swift build -c release --product richpush >&2
[ "$tool" = wrk ] || swift build -c release --product richpush-bench >&2
bin_dir=$(swift build -c release --show-bin-path)
# RICHPUSH_BIN: another build's richpush to serve (an A/B against this checkout's).
rp=${RICHPUSH_BIN:-"$bin_dir/richpush"}

# --- nginx: one worker, sendfile, the same file.
start_nginx "$work/nginx" $nginx_port media/logo.png

# --- richpush on scratch data: a user, the default image, one notification.
rm -rf "$work/data"
echo "bench-password" | "$rp" users add bench --password-stdin --data "$work/data" >/dev/null
"$rp" serve --data "$work/data" --port $rp_port --public-media --log-level warning --threads "${RICHPUSH_THREADS:-1}" &
rp_pid=$!
trap 'kill $rp_pid $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$rp_port/health" >/dev/null && break; sleep 0.1; done
id=$("$rp" media show logo.png --data "$work/data" --json | python3 -c 'import sys,json; print(json.load(sys.stdin)["sha256"])')
auth="Authorization: Basic $(printf 'bench:bench-password' | base64)"
nid=$(curl -fs -X POST -H "$auth" "http://127.0.0.1:$rp_port/api/notifications" | python3 -c 'import sys,json; print(json.load(sys.stdin)["id"])')
size=$(stat -c %s media/logo.png)
for url in "http://127.0.0.1:$nginx_port/logo.png" "http://127.0.0.1:$rp_port/media/$id"; do
    [ "$(curl -fs "$url" | wc -c)" -eq "$size" ] || { echo "wrong body from $url" >&2; exit 1; }
done
[ "$(curl -fs -H "$auth" "http://127.0.0.1:$rp_port/api/notifications/$nid" | wc -c)" -eq "$size" ] || { echo "wrong payload" >&2; exit 1; }
bearer="Authorization: Bearer $(curl -fs -X POST -H "$auth" "http://127.0.0.1:$rp_port/api/sessions" | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])')"
[ "$(curl -fs -H "$bearer" "http://127.0.0.1:$rp_port/api/notifications/$nid" | wc -c)" -eq "$size" ] || { echo "wrong payload by session" >&2; exit 1; }

# Peak RSS of richpush while the load runs (kept in a file: run() executes in a subshell).
echo 0 > "$work/peak_rss"
sample_rss() {
    local r p
    r=$(awk '/VmRSS/ {print $2}' /proc/$rp_pid/status)
    p=$(cat "$work/peak_rss")
    [ "$r" -gt "$p" ] && echo "$r" > "$work/peak_rss"
    true
}

# The server's own CPU per request, beside its rate: at 70–80,000 requests a second both servers
# can be faster than one wrk thread, which then sets the rate of both (session 48), while the CPU
# each spends per request still tells them apart. nginx's is its one worker's.
nginx_worker=$(pgrep -P "$nginx_pid")
hz=$(getconf CLK_TCK)

# run NAME URL [HEADER] -> "rps p50ms p99ms errors cpu-µs-a-request"
run() {
    local line ticks0 ticks1 server=$rp_pid
    [ "$1" = nginx ] && server=$nginx_worker
    ticks0=$(cpu_ticks "$server")
    line=$(measure "$@")
    ticks1=$(cpu_ticks "$server")
    echo "$line" | awk -v t=$((ticks1 - ticks0)) -v hz="$hz" -v s="$seconds" '{ printf "%s %.1f\n", $0, ($2 > 0 ? t / hz * 1e6 / ($2 * s) : 0) }'
}

# measure NAME URL [HEADER] -> "rps p50ms p99ms errors"
measure() {
    local name=$1 url=$2 header=${3:-}
    local out="$work/$name.out"
    if [ "$tool" = wrk ]; then
        if [ -n "$header" ]; then wrk -t1 -c32 -d"${seconds}s" --latency -H "$header" "$url" > "$out" &
        else wrk -t1 -c32 -d"${seconds}s" --latency "$url" > "$out" & fi
    else
        if [ -n "$header" ]; then "$bin_dir/richpush-bench" --threads 1 --connections 32 --duration "${seconds}s" --json --header "$header" "$url" > "$out" &
        else "$bin_dir/richpush-bench" --threads 1 --connections 32 --duration "${seconds}s" --json "$url" > "$out" & fi
    fi
    local load=$!
    while kill -0 $load 2>/dev/null; do sample_rss; sleep 0.5; done
    wait $load
    if [ "$tool" = wrk ]; then
        awk -v name="$name" '
            function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
            /Requests\/sec:/ { rps = $2 }
            /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) }
            /Non-2xx/ { errors += $NF } /Socket errors/ { gsub(/,/, ""); errors += $4 + $6 + $8 + $10 }
            END { printf "%s %.0f %.3f %.3f %d\n", name, rps, p50, p99, errors }' "$out"
    else
        python3 -c 'import sys,json; j=json.load(open(sys.argv[1])); bad=sum(v for k,v in j["status"].items() if not k.startswith("2")); print(sys.argv[2], round(j["requestsPerSecond"]), j["latency"]["p50"], j["latency"]["p99"], j["errors"]+bad)' "$out" "$name"
    fi
}

results="$work/results.txt"
: > "$results"
# The order rotates each round (nginx, media, payload, bearer; then media, payload, bearer,
# nginx; ...): a target that always ran right after another one measured a few percent low.
for round in $(seq 1 "$rounds"); do
    for k in 0 1 2 3; do
        case $(( (round - 1 + k) % 4 )) in
            0) run nginx "http://127.0.0.1:$nginx_port/logo.png" ;;
            1) run media "http://127.0.0.1:$rp_port/media/$id" ;;
            2) run payload "http://127.0.0.1:$rp_port/api/notifications/$nid" "$auth" ;;
            3) run bearer "http://127.0.0.1:$rp_port/api/notifications/$nid" "$bearer" ;;
        esac | tee -a "$results" >&2
    done
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$results" | median; }
errors() { awk -v n="$1" '$1 == n {s += $5} END {print s + 0}' "$results"; }
nginx_rps=$(col nginx 2)
printf 'richpush event loops: %s (0 = one per core); nginx: 1 worker\n' "${RICHPUSH_THREADS:-1}"
nginx_cpu=$(col nginx 6)
# round_ratio NAME: the median over rounds of NAME's req/s over nginx's in the same round (4 lines
# a round); round_cpu NAME: of nginx's CPU a request over NAME's. The machine's speed moves from
# round to round (the CPU a request by a fifth), so a round's own pair is the fairer figure.
round_ratio() { awk -v n="$1" '{ r = int((NR - 1) / 4); v[r, $1] = $2 } END { for (i = 0; i <= r; i++) print v[i, n] / v[i, "nginx"] }' "$results" | median; }
round_cpu() { awk -v n="$1" '{ r = int((NR - 1) / 4); v[r, $1] = $6 } END { for (i = 0; i <= r; i++) print v[i, "nginx"] / v[i, n] }' "$results" | median; }
printf '%-34s %10s %9s %9s %7s %7s %7s %8s %9s %7s\n' "GET ${size}-byte PNG, 32 conns ($tool)" "req/s" "p50 ms" "p99 ms" "errors" "ratio" "rounds" "CPU µs" "CPU ratio" "rounds"
for n in nginx media payload bearer; do
    printf '%-34s %10.0f %9.3f %9.3f %7d %7.2f %7.2f %8.1f %9.2f %7.2f\n' "$n" "$(col $n 2)" "$(col $n 3)" "$(col $n 4)" "$(errors $n)" "$(echo "$(col $n 2) / $nginx_rps" | bc -l)" \
        "$(round_ratio $n)" "$(col $n 6)" "$(echo "$nginx_cpu / $(col $n 6)" | bc -l)" "$(round_cpu $n)"
done
printf '(ratio: of the medians; rounds: the median of each round'"'"'s own ratio; CPU µs: the server'"'"'s CPU a request, median;\n'
printf ' CPU ratio: nginx'"'"'s over it, above 1 when it spends less than nginx)\n'
printf 'richpush peak RSS under load: %.1f MiB\n' "$(echo "$(cat "$work/peak_rss") / 1024" | bc -l)"
printf 'targets (issue #28): media >= 1.0x nginx, payload (Basic and Bearer) >= 0.9x, zero errors\n'
