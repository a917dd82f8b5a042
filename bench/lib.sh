# Shared by the benchmark scripts: source it, do not run it.

# start_nginx DIR PORT FILE [DIRECTIVES]: nginx-light with one worker and sendfile, serving FILE
# as http://127.0.0.1:PORT/<name of FILE>, with DIRECTIVES added to its server block; sets nginx_pid.
start_nginx() {
    local dir=$1 port=$2 file=$3 directives=${4:-}
    rm -rf "$dir" && mkdir -p "$dir/www" "$dir/tmp"
    cp "$file" "$dir/www/"
    cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp;
    scgi_temp_path $dir/tmp;
    types { image/png png; image/jpeg jpg; }
    server { listen 127.0.0.1:$port; root $dir/www; $directives }
}
CONF
    nginx -c "$dir/nginx.conf" -p "$dir" &
    nginx_pid=$!
    for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$port/$(basename "$file")" >/dev/null && return 0; sleep 0.1; done
    echo "nginx did not start on port $port" >&2
    return 1
}

# install_missing COMMAND:PACKAGE...: apt-get install the packages whose commands are missing.
install_missing() {
    local need=() pair
    for pair in "$@"; do command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}"); done
    [ ${#need[@]} -eq 0 ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }
}

# ensure_photos DIR: bench/make-photos.py's ~100 photos and screenshots in DIR, made once.
ensure_photos() {
    local dir=$1
    # v2: photos with EXIF and text chunks (session 8); an older set is made again.
    [ "$(cat "$dir/.complete" 2>/dev/null)" = v2 ] && return 0
    python3 -c 'import PIL, numpy' 2>/dev/null || pip install --quiet Pillow numpy
    rm -rf "$dir"
    python3 bench/make-photos.py "$dir" >&2
    echo v2 > "$dir/.complete"
}

# now: the time in seconds, with nanoseconds (for bc).
# richpush_binary: sets rp to RICHPUSH_BIN when given (another build's richpush, for an A/B), else
# to this checkout's release build, built first.
richpush_binary() {
    if [ -n "${RICHPUSH_BIN:-}" ]; then
        rp=$(realpath "$RICHPUSH_BIN")
    else
        swift build -c release --product richpush >&2
        rp="$(swift build -c release --show-bin-path)/richpush"
    fi
}

now() { date +%s.%N; }

# cpu_ticks PID: the CPU process PID has used so far (user + system, clock ticks: getconf CLK_TCK a second).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# pg_cluster_ticks DIR: the CPU so far of the PostgreSQL cluster in DIR/pg: its live processes, and
# the backends that ended (the postmaster's reaped children). A backend's time reaches its parent
# only once it has exited: after a psql whose work should count, `sleep 0.5` first.
pg_cluster_ticks() {
    local master t c
    master=$(head -1 "$1/pg/postmaster.pid" 2>/dev/null) || { echo 0; return; }
    t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$master/stat")
    for c in $(pgrep -P "$master"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || echo 0))); done
    echo "$t"
}

# median VALUE...: the median of the values given (the mean of the two middle ones for an even count).
median_of() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# start_postgres DIR PORT: a throwaway PostgreSQL cluster in DIR/pg with a database `richpush`
# (user richpush, trust), as a user would run it: durable commits (fsync and synchronous_commit
# on). Needs $pg (the server's bin directory) and $as_pg (runuser as postgres when root).
start_postgres() {
    local dir=$1 port=$2
    $as_pg "$pg/initdb" -D "$dir/pg" -U richpush --auth=trust -E UTF8 --locale=C >/dev/null
    $as_pg "$pg/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=100 ${PG_OPTIONS:-}" start >/dev/null
    "$pg/psql" -h 127.0.0.1 -p "$port" -U richpush -qc "CREATE DATABASE richpush" postgres
}

# start_apns_sandbox RICHPUSH PORT: AuthKey.p8 (a new ES256 key) in the current directory, and
# `richpush apns-sandbox` on PORT checking tokens signed with it (TEAM123456 / KEY1234567), its
# pid in $sandbox_pid once it answers.
start_apns_sandbox() {
    local rp=$1 port=$2
    python3 - <<'PY'
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
key = ec.generate_private_key(ec.SECP256R1())
open("AuthKey.p8", "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
PY
    "$rp" apns-sandbox --port "$port" --team-id TEAM123456 --key-id KEY1234567 --public-key AuthKey.p8 --token-update-interval 0 2> sandbox.log &
    sandbox_pid=$!
    for _ in $(seq 1 100); do [ -f apns-sandbox-cert.pem ] && curl -sk -o /dev/null "https://127.0.0.1:$port/3/device" && break; sleep 0.1; done
}

# insert_devices ENGINE N [WHERE]: users u1..uN with an APNs device each (r1..rN), inserted
# straight into the store's tables: ENGINE is sqlite (the file WHERE, by default
# $work/data-sqlite/richpush.sqlite) or postgres (the database WHERE at $pgport, by default
# richpush; vacuumed after, as long-registered users' tables would be).
insert_devices() {
    if [ "$1" = sqlite ]; then
        python3 - "${3:-$work/data-sqlite/richpush.sqlite}" "$2" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); n = int(sys.argv[2])
db.executemany("INSERT INTO users (name, passwordHash, createdAt, admin) VALUES (?, 'x', 0, 0)", (("u%d" % i,) for i in range(1, n + 1)))
db.executemany("INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES (?, ?, 'apns', ?, '[]', 0, 0)",
               (("r%d" % i, "u%d" % i, "%064x" % i) for i in range(1, n + 1)))
db.commit()
PY
    else
        "$pg/psql" -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pgport" -U richpush -d "${3:-richpush}" -qc "
INSERT INTO users (name, passwordHash, createdAt, admin) SELECT 'u' || i, 'x', 0, 0 FROM generate_series(1, $2) AS s(i);
INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt)
  SELECT 'r' || i, 'u' || i, 'apns', lpad(to_hex(i), 64, '0'), '[]', 0, 0 FROM generate_series(1, $2) AS s(i);" \
            -c "VACUUM ANALYZE users" -c "VACUUM ANALYZE registrations"
    fi
}

# start_serve ENGINE WARMUP: `richpush serve` ($rp) on data-ENGINE and the database database_of
# ENGINE names, on $port, logging warnings to serve-ENGINE.log; once /health answers, one GET of
# WARMUP as admin:$password, so that the admin's bcrypt (cost 12) is checked before anything is
# timed (later calls hit the cache). Its pid in serve_pid; stop_serve stops it.
start_serve() {
    "$rp" serve --data "data-$1" --database "$(database_of "$1")" --port "$port" --log-level warning 2>> "serve-$1.log" &
    serve_pid=$!
    for _ in $(seq 1 600); do
        if curl -fs "http://127.0.0.1:$port/health" >/dev/null; then
            curl -fsS -u "admin:$password" "http://127.0.0.1:$port$2" >/dev/null
            return 0
        fi
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "serve ($1) did not start (see $work/serve-$1.log)" >&2
    return 1
}
stop_serve() { kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=; }

# use_engines: for a script that runs on each of $engines in $work: $pg (PostgreSQL's bin
# directory) and $as_pg (runuser as postgres when root) when $engines names postgres, and, on
# exit, serve ($serve_pid) and the cluster in $work/pg stopped, and $work removed after a run that
# succeeded (KEEP_WORK=1 keeps it).
use_engines() {
    serve_pid='' pg='' as_pg=''
    if [[ " $engines " == *" postgres "* ]]; then
        pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
        if [ "$(id -u)" = 0 ]; then as_pg="runuser -u postgres --"; chown postgres "$work"; fi
    fi
    trap engines_cleanup EXIT
}
engines_cleanup() {
    local status=$?
    if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; fi
    if [ -n "$pg" ]; then $as_pg "$pg/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true; fi
    wait 2>/dev/null || true
    if [ "$status" -eq 0 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$work"; else echo "work files kept in $work" >&2; fi
}
