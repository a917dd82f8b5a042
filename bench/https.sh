#!/usr/bin/env bash
# HTTPS benchmark (issue #13): GET of media/logo.png over TLS from `serve --tls-cert --tls-key
# --public-media` and from nginx (nginx-light, one worker, `listen … ssl http2`) with the same
# ECDSA P-256 certificate and the same file, alternating ROUNDS times, medians reported.
#
# 1. HTTP/1.1 over TLS: wrk -t1 -c32 -d SECONDS (keep-alive; the handshakes happen once), so the
#    image fast path is measured behind TLS.
# 2. HTTP/2: h2load -c32 -m10 -n N (ALPN h2; 32 connections with 10 streams each).
# 3. A new TLS connection per fetch, as a broadcast's phones make them (issue #28): FRESH
#    fetches (default 5,000), each over its own connection (wrk -t1 -c32 with bench/paths.lua,
#    which says `Connection: close` and reconnects). wrk's OpenSSL offers the session ticket of
#    its previous connection, so after the first few every handshake is a TLS 1.3 resumption
#    (a PSK with a fresh X25519 exchange, no certificate signature) on both servers, as a phone
#    that has fetched before makes it: in a perf profile of serve under this load, ECDSA signing
#    is 2 samples of 9,601 and the PSK binder check is in every handshake. nginx 1.22 (Debian's)
#    offers only TLS 1.2 unless told otherwise, where a resumption skips the key exchange: it is
#    given `ssl_protocols TLSv1.2 TLSv1.3` (RichPush's own range), and the script checks that both
#    servers answer wrk's OpenSSL with TLS 1.3.
# 4. The same with the TLS 1.3 cipher order phones offer: iOS and Android (BoringSSL) list
#    TLS_AES_128_GCM_SHA256 first, OpenSSL (wrk) TLS_AES_256_GCM_SHA384. The suite's hash is the
#    handshake's key schedule: SHA-384 has no instruction of its own on x86 (BoringSSL runs it in
#    its generic assembly), SHA-256 has SHA-NI where the CPU has it. wrk is given that order
#    through an OpenSSL configuration file (OPENSSL_CONF), and both servers follow the client's.
# 5. The same from a client that offers only TLS 1.2 (MaxProtocol = TLSv1.2), as an old phone
#    would: a resumption is then an abbreviated handshake with no key exchange at all, which is
#    what nginx's figure was before it was given TLS 1.3.
#
# 6. richpush-bench (SPEC §30) beside h2load and wrk on the same targets: HTTP/2 with
#    --streams 10 and --requests N (h2load -c32 -m10 -n N), and a new TLS connection per fetch
#    (--new-connection --requests FRESH over --urls), where every handshake is a full one (it
#    offers no session: a phone's very first fetch), unlike wrk's resumptions in 3.
# 7. The fetch storm over HTTP/2: STORM fetches (default 10,000) over 500 new TLS connections at
#    once, by h2load (-c500 -n STORM) and by richpush-bench (--connections 500 --requests STORM).
#    Beside h2load's rate, the server's CPU per fetch during it (nginx's worker, or `serve`; user +
#    system from /proc; its ratio nginx / richpush): this shared machine moves it less than the
#    rate. Two STORM sizes split it into a connection's cost and a request's (BENCHMARKS.md).
#
# RichPush runs one event loop (as bench/http.sh), matching nginx's single worker: on 2 cores
# the load generator needs the other one.
#
# Usage: bench/https.sh [ROUNDS] [SECONDS] [N]   (env BENCH_WORK, FRESH, STORM; STORM_ONLY=1 runs
#        the storm alone, ROUNDS times each in turn)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-5}
n=${3:-100000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/https
nginx_port=18491
rp_port=18490
source bench/lib.sh
install_missing nginx:nginx-light wrk:wrk h2load:nghttp2-client
swift build -c release --product richpush >&2
swift build -c release --product richpush-bench >&2
bench="$(swift build -c release --show-bin-path)/richpush-bench"
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$work" && mkdir -p "$work"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
start_nginx "$work/nginx" 18492 media/logo.png "listen 127.0.0.1:$nginx_port ssl http2; ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem; ssl_session_cache shared:SSL:1m;"
"$rp" serve --data "$work/data" --port $rp_port --public-media --log-level warning --threads 1 \
    --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" 2> "$work/serve.log" &
rp_pid=$!
trap 'kill $rp_pid $nginx_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
nginx_worker=$(pgrep -P "$nginx_pid")   # its one worker, whose CPU a storm is measured by
for _ in $(seq 1 100); do curl -fs --cacert "$work/cert.pem" "https://127.0.0.1:$rp_port/health" >/dev/null && break; sleep 0.1; done
id=$(sha256sum media/logo.png | cut -c1-64)
size=$(stat -c %s media/logo.png)
for url in "https://127.0.0.1:$nginx_port/logo.png" "https://127.0.0.1:$rp_port/media/$id"; do
    for version in --http1.1 --http2; do
        [ "$(curl -fs --cacert "$work/cert.pem" $version "$url" | wc -c)" -eq "$size" ] || { echo "wrong body from $url ($version)" >&2; exit 1; }
    done
done

for port in $nginx_port $rp_port; do
    protocol=$(openssl s_client -connect "127.0.0.1:$port" -CAfile "$work/cert.pem" </dev/null 2>/dev/null | awk '/^New, /{ print $2 }' || true)
    [ "$protocol" = "TLSv1.3," ] || { echo "port $port answers OpenSSL with ${protocol:-nothing}, not TLS 1.3" >&2; exit 1; }
done
# client_conf FILE SETTING: an OpenSSL configuration (for OPENSSL_CONF) whose one SETTING applies
# to every TLS client the program makes.
client_conf() {
    printf '%s\n' 'openssl_conf = openssl_init' '[openssl_init]' 'ssl_conf = ssl_sect' '[ssl_sect]' \
        'system_default = system_default_sect' '[system_default_sect]' "$2" > "$1"
}
client_conf "$work/phones.cnf" 'Ciphersuites = TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256'
client_conf "$work/tls12.cnf" 'MaxProtocol = TLSv1.2'

h1() { # NAME URL -> "name rps p50ms"
    wrk -t1 -c32 -d"${seconds}s" --latency "$2" | awk -v name="$1" '
        function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
        /Requests\/sec:/ { rps = $2 } /^ +50%/ { p50 = ms($2) } /Non-2xx/ { bad += $NF }
        END { if (bad) print "errors: " bad > "/dev/stderr"; printf "%s %.0f %.3f\n", name, rps, p50 }'
}
h2() { # NAME URL -> "name rps"
    h2load -c32 -m10 -n "$n" "$2" | awk -v name="$1" '
        /^finished in/ { gsub(/,/, ""); rps = $4 } /^requests:/ { failed = $10; errored = $12 }
        /^status codes:/ { gsub(/,/, ""); ok = $3 }
        END { if (failed + errored > 0) print "h2load: " failed " failed, " errored " errored" > "/dev/stderr"; printf "%s %.0f\n", name, rps }'
}

fresh=${FRESH:-5000}
awk -v n="$fresh" 'BEGIN { for (i = 0; i < n; i++) print "/logo.png" }' > "$work/nginx-paths.txt"
awk -v n="$fresh" -v p="/media/$id" 'BEGIN { for (i = 0; i < n; i++) print p }' > "$work/richpush-paths.txt"
h1new() { # NAME BASE PATHS -> "name fetches/s"
    WRK_PATHS=$3 WRK_BODY_BYTES=$size wrk -t1 -c32 -d300s -s bench/paths.lua "$2" | awk -v name="$1" '
        /^paths:/ { other = $6 } /^Fetches\/sec:/ { rps = $2 }
        END { if (other > 0) print name ": " other " answers not a 200 of the image" > "/dev/stderr"; printf "%s %.0f\n", name, rps }'
}

rbjson() { # NAME -> "name rps", from richpush-bench --json on stdin; errors and non-2xx on stderr
    python3 -c '
import json, sys
r = json.load(sys.stdin)
bad = r["errors"] + sum(n for s, n in r["status"].items() if not s.startswith("2"))
if bad: print("richpush-bench: %d errors or non-2xx answers" % bad, file=sys.stderr)
print(sys.argv[1], "%.0f" % r["requestsPerSecond"])' "$1"
}
h2rb() { # NAME URL -> "name rps"
    "$bench" --threads 1 --connections 32 --http2 --streams 10 --requests "$n" --ca "$work/cert.pem" --json "$2" | rbjson "$1"
}
newrb() { # NAME BASE PATHS -> "name fetches/s", a full handshake each
    "$bench" --threads 1 --connections 32 --new-connection --requests "$fresh" --ca "$work/cert.pem" --urls "$3" --json "$2" | rbjson "$1"
}
storm=${STORM:-10000}
tck=$(getconf CLK_TCK)
storm() { # NAME URL PID -> "name fetches/s µs-of-PID's-CPU-per-fetch": h2load's, then richpush-bench's line
    local c0 c1
    c0=$(cpu_ticks "$3")
    h2load -c500 -n "$storm" "$2" | awk -v name="$1" '
        /^finished in/ { gsub(/,/, ""); rps = $4 } /^requests:/ { failed = $10; errored = $12 }
        END { if (failed + errored > 0) print "h2load: " failed " failed, " errored " errored" > "/dev/stderr"; printf "%s %.0f", name, rps }'
    c1=$(cpu_ticks "$3")
    echo " $(( (c1 - c0) * 1000000 / tck / storm ))"
    "$bench" --threads 1 --connections 500 --http2 --requests "$storm" --ca "$work/cert.pem" --json "$2" | rbjson "rb$1"
}

results="$work/results.txt"
: > "$results"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then order="nginx richpush"; else order="richpush nginx"; fi
    for who in $order; do
        url=$([ $who = nginx ] && echo "https://127.0.0.1:$nginx_port/logo.png" || echo "https://127.0.0.1:$rp_port/media/$id")
        if [ "${STORM_ONLY:-}" != 1 ]; then
            h1 "h1-$who" "$url" | tee -a "$results" >&2
            h2 "h2-$who" "$url" | tee -a "$results" >&2
            base="https://127.0.0.1:$([ $who = nginx ] && echo $nginx_port || echo $rp_port)"
            h1new "new-$who" "$base" "$work/$who-paths.txt" | tee -a "$results" >&2
            OPENSSL_CONF="$work/phones.cnf" h1new "phones-$who" "$base" "$work/$who-paths.txt" | tee -a "$results" >&2
            OPENSSL_CONF="$work/tls12.cnf" h1new "tls12-$who" "$base" "$work/$who-paths.txt" | tee -a "$results" >&2
            h2rb "h2rb-$who" "$url" | tee -a "$results" >&2
            newrb "newrb-$who" "$base" "$work/$who-paths.txt" | tee -a "$results" >&2
        fi
        storm "storm-$who" "$url" "$([ $who = nginx ] && echo "$nginx_worker" || echo "$rp_pid")" | tee -a "$results" >&2
    done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { awk -v k="$1" -v c="$2" '$1 == k {print $c}' "$results" | median; }
printf '%-44s %10s %10s %7s\n' "GET ${size}-byte PNG over TLS, $rounds rounds" "nginx" "richpush" "ratio"
if [ "${STORM_ONLY:-}" != 1 ]; then
    printf '%-44s %10.0f %10.0f %7.2f\n' "HTTP/1.1, wrk -c32 (req/s)" "$(col h1-nginx 2)" "$(col h1-richpush 2)" "$(echo "$(col h1-richpush 2) / $(col h1-nginx 2)" | bc -l)"
    printf '%-44s %10.3f %10.3f\n' "HTTP/1.1 p50 (ms)" "$(col h1-nginx 3)" "$(col h1-richpush 3)"
    printf '%-44s %10.0f %10.0f %7.2f\n' "HTTP/2, h2load -c32 -m10 (req/s)" "$(col h2-nginx 2)" "$(col h2-richpush 2)" "$(echo "$(col h2-richpush 2) / $(col h2-nginx 2)" | bc -l)"
    printf '%-44s %10.0f %10.0f %7.2f\n' "new TLS connection per fetch (fetches/s)" "$(col new-nginx 2)" "$(col new-richpush 2)" "$(echo "$(col new-richpush 2) / $(col new-nginx 2)" | bc -l)"
    printf '%-44s %10.0f %10.0f %7.2f\n' "the same, phones' cipher order (fetches/s)" "$(col phones-nginx 2)" "$(col phones-richpush 2)" "$(echo "$(col phones-richpush 2) / $(col phones-nginx 2)" | bc -l)"
    printf '%-44s %10.0f %10.0f %7.2f\n' "the same, a TLS 1.2 client (fetches/s)" "$(col tls12-nginx 2)" "$(col tls12-richpush 2)" "$(echo "$(col tls12-richpush 2) / $(col tls12-nginx 2)" | bc -l)"
    printf '%-44s %10.0f %10.0f %7.2f\n' "HTTP/2, richpush-bench -c32 --streams 10" "$(col h2rb-nginx 2)" "$(col h2rb-richpush 2)" "$(echo "$(col h2rb-richpush 2) / $(col h2rb-nginx 2)" | bc -l)"
    printf '%-44s %10.0f %10.0f %7.2f\n' "new TLS connection, full handshake (rb)" "$(col newrb-nginx 2)" "$(col newrb-richpush 2)" "$(echo "$(col newrb-richpush 2) / $(col newrb-nginx 2)" | bc -l)"
fi
printf '%-44s %10.0f %10.0f %7.2f\n' "storm: $storm over 500 new h2 conns, h2load" "$(col storm-nginx 2)" "$(col storm-richpush 2)" "$(echo "$(col storm-richpush 2) / $(col storm-nginx 2)" | bc -l)"
printf '%-44s %10.0f %10.0f %7.2f\n' "the same, server CPU µs a fetch (nginx/rp)" "$(col storm-nginx 3)" "$(col storm-richpush 3)" "$(echo "$(col storm-nginx 3) / $(col storm-richpush 3)" | bc -l)"
printf '%-44s %10.0f %10.0f %7.2f\n' "the same storm, richpush-bench" "$(col rbstorm-nginx 2)" "$(col rbstorm-richpush 2)" "$(echo "$(col rbstorm-richpush 2) / $(col rbstorm-nginx 2)" | bc -l)"
[ "${STORM_ONLY:-}" = 1 ] || h2pair="HTTP/2 -c32 -m10: nginx $(echo "$(col h2rb-nginx 2) / $(col h2-nginx 2)" | bc -l | cut -c1-5), richpush $(echo "$(col h2rb-richpush 2) / $(col h2-richpush 2)" | bc -l | cut -c1-5); "
echo "load tools beside each other (the same server, same run): richpush-bench / h2load, ${h2pair:-}storm: nginx $(echo "$(col rbstorm-nginx 2) / $(col storm-nginx 2)" | bc -l | cut -c1-5), richpush $(echo "$(col rbstorm-richpush 2) / $(col storm-richpush 2)" | bc -l | cut -c1-5)"
echo "peak RSS of serve: $(awk '/^VmHWM/ { printf "%.1f MiB", $2 / 1024 }' /proc/$rp_pid/status)"
