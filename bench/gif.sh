#!/usr/bin/env bash
# GIF ingest (docs/api.md#options-badges-and-paced-sends): `richpush media add` of a set of animated GIFs made here with Pillow
# (moving noise and gradients, 24 frames each, with a comment to strip), next to its floor in
# the same run on the same files: `sha256sum` of the files plus one process that decodes each
# whole with giflib's own DGifSlurp (bench/gif-floor.c, no limits). Runs alternate floor/ours
# ROUNDS times; medians are reported.
#
# Usage: bench/gif.sh [ROUNDS] [FILES]   (env BENCH_WORK; RICHPUSH_BIN: a richpush to use instead
# of a release build, for trying the script only: a debug build's figures mean nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-5}
files_wanted=${2:-30}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/gif
images="$work/images"
mkdir -p "$images"
if [ -n "${RICHPUSH_BIN:-}" ]; then
    bin=$(realpath "$RICHPUSH_BIN")
else
    swift build -c release --product richpush >&2
    bin="$(swift build -c release --show-bin-path)/richpush"
fi
floor_bin="$work/gif-floor"
cc -O2 -Wall bench/gif-floor.c -lgif -o "$floor_bin"

python3 - "$images" "$files_wanted" <<'PY'
import os, random, sys
from PIL import Image
out, count = sys.argv[1], int(sys.argv[2])
for n in range(count):
    path = os.path.join(out, f"anim{n:03d}.gif")
    if os.path.exists(path): continue
    random.seed(n)
    w, h = random.choice([(480, 360), (400, 400), (640, 240)])
    frames = []
    for f in range(24):
        im = Image.effect_noise((w, h), 40 + f).convert("RGB")
        grad = Image.linear_gradient("L").resize((w, h)).rotate(f * 15)
        im = Image.merge("RGB", (grad, im.split()[1], Image.eval(grad, lambda v: 255 - v)))
        frames.append(im.convert("P", palette=Image.ADAPTIVE, colors=64))
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=60, loop=0, comment=b"made by bench/gif.sh")
PY

mapfile -t files < <(find "$images" -type f -name '*.gif' | sort | head -n "$files_wanted")
count=${#files[@]}
bytes=$(cat "${files[@]}" | wc -c)
cat "${files[@]}" > /dev/null   # warm the page cache for both sides alike

floor_times=()
ours_times=()
for round in $(seq 1 "$rounds"); do
    t0=$(now)
    sha256sum "${files[@]}" > /dev/null
    "$floor_bin" "${files[@]}" > "$work/floor.out"
    t1=$(now)
    floor_times+=("$(echo "$t1 - $t0" | bc -l)")

    rm -rf "$work/data"
    t0=$(now)
    "$bin" media add --data "$work/data" "${files[@]}" > "$work/add.out"
    t1=$(now)
    stored=$(grep -c . "$work/add.out")
    if [ "$stored" -ne "$count" ]; then echo "richpush reported $stored of $count files" >&2; cat "$work/add.out" >&2; exit 1; fi
    ours_times+=("$(echo "$t1 - $t0" | bc -l)")
    echo "round $round: floor ${floor_times[-1]}s, richpush ${ours_times[-1]}s" >&2
done

floor=$(median_of "${floor_times[@]}")
ours=$(median_of "${ours_times[@]}")
mb=$(echo "$bytes / 1000000" | bc -l)
printf '%-38s %8s %10s %10s\n' "GIF ingest ($count files, $(printf %.1f "$mb") MB)" "seconds" "MB/s" "files/s"
printf '%-38s %8.2f %10.1f %10.1f\n' "floor: sha256sum + giflib DGifSlurp" "$floor" "$(echo "$mb / $floor" | bc -l)" "$(echo "$count / $floor" | bc -l)"
printf '%-38s %8.2f %10.1f %10.1f\n' "richpush media add (fsync each)" "$ours" "$(echo "$mb / $ours" | bc -l)" "$(echo "$count / $ours" | bc -l)"
printf 'ratio richpush/floor throughput: %.2f\n' "$(echo "$floor / $ours" | bc -l)"
