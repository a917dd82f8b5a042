#!/usr/bin/env bash
# docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries (issue #26): a local-time campaign to N users (default 100,000), each with a device,
# spread over 20 time zones on both sides of the date line, queued zone by zone as each zone's
# 09:00 comes. `richpush benchmark-schedule` runs the scheduler in process with its clock moved
# through the day (nobody waits 26 hours) on a scratch data directory, and prints how long the
# POST's work and the queueing took and the process's resident memory before, during and after.
# Target: the whole campaign queued in under 10 s, and memory flat (it must not grow with N:
# compare N=10,000 with N=100,000, both printed).
#
# Usage: bench/schedule.sh [N]   (env BENCH_WORK, KEEP_WORK=1)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/schedule
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
for users in 10000 "$n"; do
    "$rp" benchmark-schedule --users "$users" --work "$work/$users"
done
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
