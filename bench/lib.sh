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
now() { date +%s.%N; }

# median VALUE...: the median of the values given (the mean of the two middle ones for an even count).
median_of() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
