#!/usr/bin/env bash
# Ingest benchmark: `richpush media add` of ~100 mixed photos and screenshots (~100 MB), next to
# its floor measured in the same run on the same files: `sha256sum` of the files plus one process
# that fully decodes them with libpng/libjpeg (bench/decode-floor.c, the same decode calls that
# RichPush makes). Runs alternate floor/ours ROUNDS times; medians are reported.
#
# Usage: bench/ingest.sh [ROUNDS]      (env: BENCH_WORK=dir for the image set and scratch data)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
work=${BENCH_WORK:-bench/work}
images="$work/photos"
mkdir -p "$work"
source bench/lib.sh

ensure_photos "$images"

swift build -c release --product richpush >&2
bin="$(swift build -c release --show-bin-path)/richpush"
floor_bin="$work/decode-floor"
cc -O2 -Wall -ISources/CImageCodecs/include $(pkg-config --cflags libpng libjpeg) \
    bench/decode-floor.c Sources/CImageCodecs/rp_codecs.c Sources/CImageCodecs/rp_gif.c Sources/CImageCodecs/rp_variants.c $(pkg-config --libs libpng libjpeg) -lgif -lm \
    -o "$floor_bin"

mapfile -t files < <(find "$images" -type f \( -name '*.png' -o -name '*.jpg' \) | sort)
count=${#files[@]}
bytes=$(cat "${files[@]}" | wc -c)
cat "${files[@]}" > /dev/null   # warm the page cache for both sides alike

floor_times=()
ours_times=()
for round in $(seq 1 "$rounds"); do
    t0=$(now)
    sha256sum "${files[@]}" > /dev/null
    "$floor_bin" "${files[@]}" > /dev/null
    t1=$(now)
    floor_times+=("$(echo "$t1 - $t0" | bc -l)")

    rm -rf "$work/data"
    t0=$(now)
    "$bin" media add --data "$work/data" "$images" > "$work/add.out"
    t1=$(now)
    stored=$(wc -l < "$work/add.out")
    if [ "$stored" -ne "$count" ]; then echo "richpush reported $stored of $count files" >&2; exit 1; fi
    ours_times+=("$(echo "$t1 - $t0" | bc -l)")
    echo "round $round: floor ${floor_times[-1]}s, richpush ${ours_times[-1]}s" >&2
done
"$bin" media verify --data "$work/data" > /dev/null

floor=$(median_of "${floor_times[@]}")
ours=$(median_of "${ours_times[@]}")
mb=$(echo "$bytes / 1000000" | bc -l)
printf '%-34s %8s %10s %10s\n' "ingest ($count images, $(printf %.1f "$mb") MB)" "seconds" "MB/s" "images/s"
printf '%-34s %8.2f %10.1f %10.1f\n' "floor: sha256sum + 1-process decode" "$floor" "$(echo "$mb / $floor" | bc -l)" "$(echo "$count / $floor" | bc -l)"
printf '%-34s %8.2f %10.1f %10.1f\n' "richpush media add (fsync each)" "$ours" "$(echo "$mb / $ours" | bc -l)" "$(echo "$count / $ours" | bc -l)"
printf 'ratio richpush/floor throughput: %.2f (target >= 1.00)\n' "$(echo "$floor / $ours" | bc -l)"
