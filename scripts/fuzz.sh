#!/usr/bin/env bash
# Fuzzes the C codec shim (Sources/CImageCodecs) with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, starting from the conformance corpus and the sample media.
#
# Usage: scripts/fuzz.sh [SECONDS] [JOBS]   (default 600 s, 1 job)
# Each input must settle within 3 s under the sanitizers (about 1 s without) and allocate no
# block over 256 MB, or it counts as a crash. New interesting inputs go to fuzz/work/corpus (not committed); a crashing input is written to
# fuzz/crashes/, which the test suite replays on every run (ImageInspector must settle it).
# Afterwards the inputs that add coverage are merged into fuzz/corpus (committed, replayed by
# the tests as well, and the next run's starting point).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
jobs=${2:-1}
command -v clang >/dev/null || { echo "fuzz: clang is needed (the Swift toolchain has one)" >&2; exit 2; }
mkdir -p fuzz/work/corpus fuzz/crashes
bin=fuzz/work/image_fuzzer
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I Sources/CImageCodecs/include $(pkg-config --cflags libpng libjpeg) \
    fuzz/image_fuzzer.c Sources/CImageCodecs/rp_codecs.c Sources/CImageCodecs/rp_gif.c Sources/CImageCodecs/rp_variants.c \
    $(pkg-config --libs libpng libjpeg) -lgif -lm -o "$bin"
mkdir -p fuzz/corpus
seeds=(fuzz/corpus Tests/Corpus/pngsuite Tests/Corpus/jpeg media)
[ -d fuzz/crashes ] && seeds+=(fuzz/crashes)
echo "fuzz: ${seconds}s, ${jobs} job(s), seeds: ${seeds[*]}" >&2
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")   # logs then go to fuzz-N.log
"$bin" fuzz/work/corpus "${seeds[@]}" -max_total_time="$seconds" "${parallel[@]}" \
    -max_len=1048576 -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=3 -artifact_prefix=fuzz/crashes/ -print_final_stats=1

# Keep the smallest set of inputs with the same coverage, for the tests to replay.
"$bin" -merge=1 fuzz/corpus fuzz/work/corpus >/dev/null 2>&1 || true
echo "fuzz: fuzz/corpus holds $(ls fuzz/corpus | wc -l) inputs, fuzz/crashes $(ls fuzz/crashes | wc -l)" >&2
