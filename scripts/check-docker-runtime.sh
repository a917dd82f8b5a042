#!/usr/bin/env bash
# Checks the Dockerfile where no Docker engine runs (this machine kind has only the client).
#
# The build stage's command is run here as written (`swift build -c release
# --static-swift-stdlib --product richpush`, Swift 6 on Debian bookworm, as in the swift image).
# The runtime stage is reproduced in a debootstrapped Debian bookworm (minbase, what
# bookworm-slim is built from): the packages its `apt-get install` line names, its user, its
# `/data` and `/app`, `media/` copied in, its ENV, USER, ENTRYPOINT + CMD run as written, and
# its HEALTHCHECK command run inside. Then the tutorial flow is driven from outside, and the
# container is stopped with SIGTERM as `docker stop` would.
#
# Everything the stage needs is read from the Dockerfile itself, so the check follows edits.
# Needs root (chroot) and Debian's mirror (debootstrap, apt). The root file system is cached in
# $ROOTFS (default /var/tmp/richpush-rootfs); `--fresh` rebuilds it.
#
# Usage: scripts/check-docker-runtime.sh [--fresh]
set -euo pipefail
cd "$(dirname "$0")/.."
rootfs=${ROOTFS:-/var/tmp/richpush-rootfs}
port=${PORT:-18480}
[ "$(id -u)" = 0 ] || { echo "needs root (chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y debootstrap >&2

step() { printf '\n== %s\n' "$*" >&2; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- what the Dockerfile says -----------------------------------------------------------------
runtime=$(awk '/^FROM / { n++ } n == 2' Dockerfile)
[ -n "$runtime" ] || fail "no second (runtime) stage in the Dockerfile"
base=$(awk '/^FROM / { n++; if (n == 2) print $2 }' Dockerfile)
[[ $base == debian:bookworm* ]] || fail "runtime base is $base; this check reproduces debian:bookworm"
packages=$(echo "$runtime" | tr '\\' '\n' | grep -o 'apt-get install [^&]*' | sed 's/apt-get install//; s/-y//; s/--no-install-recommends//')
uid=$(echo "$runtime" | grep -o -- '--uid [0-9]*' | awk '{print $2}')
user=$(echo "$runtime" | awk '/^USER / {print $2}')
workdir=$(echo "$runtime" | awk '/^WORKDIR / {print $2}')
json_list() { python3 -c 'import json,sys; print("\n".join(json.loads(sys.stdin.read())))'; }
mapfile -t entrypoint < <(echo "$runtime" | sed -n 's/^ENTRYPOINT //p' | json_list)
mapfile -t cmd < <(echo "$runtime" | sed -n 's/^CMD //p' | json_list)
mapfile -t envs < <(echo "$runtime" | sed -n 's/^ENV //p')
health=$(echo "$runtime" | awk '/^HEALTHCHECK/ {h=1; next} h && /CMD/ {sub(/^ *CMD +/, ""); print; exit}')
echo "runtime: $base; packages:$packages; user $user ($uid); workdir $workdir" >&2
echo "entrypoint + cmd: ${entrypoint[*]} ${cmd[*]}; env: ${envs[*]}; healthcheck: $health" >&2

# --- build stage ---------------------------------------------------------------------------------
step "build stage: swift build -c release --static-swift-stdlib --product richpush"
grep -q -- '--static-swift-stdlib --product richpush' Dockerfile || fail "the build stage no longer builds as this check assumes"
swift build -c release --static-swift-stdlib --product richpush --scratch-path .build-static >&2
binary="$(swift build -c release --static-swift-stdlib --show-bin-path --scratch-path .build-static)/richpush"

# --- runtime stage -------------------------------------------------------------------------------
if [ "${1:-}" = --fresh ] || [ ! -x "$rootfs/usr/bin/apt-get" ]; then
    step "debootstrap bookworm (minbase) into $rootfs"
    rm -rf "$rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >&2
fi
cleanup() {
    [ -n "${server_pid:-}" ] && kill "$server_pid" 2>/dev/null || true
    for m in proc dev/pts dev sys; do umount -l "$rootfs/$m" 2>/dev/null || true; done
}
trap cleanup EXIT
for m in proc sys dev dev/pts; do mountpoint -q "$rootfs/$m" || mount --bind "/$m" "$rootfs/$m"; done
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"

step "RUN: apt-get install$packages; useradd; /data and $workdir"
# shellcheck disable=SC2086
chroot "$rootfs" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages" >&2
chroot "$rootfs" sh -c "id $user >/dev/null 2>&1 || useradd --system --uid $uid --home-dir $workdir --shell /usr/sbin/nologin $user"
rm -rf "$rootfs/data" "$rootfs$workdir"
mkdir -p "$rootfs/data" "$rootfs$workdir"
chroot "$rootfs" chown "$user:$user" /data
install -D "$binary" "$rootfs/usr/local/bin/richpush"
cp -r media "$rootfs$workdir/media"

step "the binary needs nothing the stage does not install"
missing=$(chroot "$rootfs" ldd /usr/local/bin/richpush | grep 'not found' || true)
[ -z "$missing" ] || fail "libraries missing in the runtime stage: $missing"
chroot "$rootfs" ldd /usr/local/bin/richpush | awk '{print "  " $1}' >&2

in_container() { chroot --userspec="$uid:$uid" "$rootfs" env -i HOME="$workdir" PATH=/usr/local/bin:/usr/bin:/bin "${envs[@]}" "$@"; }

step "ENTRYPOINT + CMD as $user: ${entrypoint[*]} ${cmd[*]} (RICHPUSH_PORT=$port: the host's 8080 may be taken)"
in_container env RICHPUSH_PORT=$port sh -c "cd $workdir && exec ${entrypoint[*]} ${cmd[*]}" > /tmp/richpush-container.log 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done

step "HEALTHCHECK inside: $health"
in_container sh -c "${health//8080/$port}" >&2 || fail "the HEALTHCHECK command fails"
echo >&2

step "the tutorial flow against the container"
echo 'wonderland' | in_container richpush users add alice --password-stdin >&2
api="http://alice:wonderland@127.0.0.1:$port"
token=$(printf 'ab%.0s' $(seq 1 32))
reg=$(curl -fsS -X POST "$api/api/register" | python3 -c 'import json,sys; print(json.load(sys.stdin)["registrationId"])') || fail "registration"
curl -fsS -X PUT "$api/api/register/$reg" -H 'Content-Type: application/json' \
    -d "{\"platform\":\"apns\",\"handle\":\"$token\",\"tags\":[]}" >&2 || fail "registration update"
id=$(curl -fsS -X POST "$api/api/notifications" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') || fail "notification"
curl -fsS "$api/api/notifications/$id" -o /tmp/richpush-container-payload
cmp /tmp/richpush-container-payload media/logo.png || fail "the payload is not media/logo.png"
echo "notification $id: payload is media/logo.png, byte for byte" >&2
[ "$(stat -c %u "$rootfs/data")" = "$uid" ] || fail "/data is not $user's (uid $uid)"
[ -n "$(find "$rootfs/data" -name '*.sqlite*' -print -quit)" ] || fail "no SQLite file under /data"
running_as=$(ps -o uid= -p "$(pgrep -f 'richpush serve --host 0.0.0.0 --data /data' | head -1)" | tr -d ' ')
[ "$running_as" = "$uid" ] || fail "the service runs as uid $running_as, not $user ($uid)"
echo "the service runs as uid $running_as; /data holds: $(cd "$rootfs/data" && ls | tr '\n' ' ')" >&2

step "docker stop: SIGTERM, clean exit"
kill -TERM "$(pgrep -f "richpush serve --host 0.0.0.0 --data /data" | head -1)"
for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server_pid" 2>/dev/null && fail "still running 10 s after SIGTERM"
wait "$server_pid" && status=0 || status=$?
[ "$status" = 0 ] || fail "exit status $status after SIGTERM (log: /tmp/richpush-container.log)"
server_pid=
echo "OK: the runtime stage runs the service as $user on $base, data in /data, healthy, stops cleanly" >&2
