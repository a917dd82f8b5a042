#!/usr/bin/env bash
# Variants (issue 14, docs/configuration.md#the-media-store), two measures in one run:
#
# 1. Making the push variant (a JPEG within 2048 px and 1 MB) of a 12 MP photo: RichPush's first
#    GET /media/{id}?variant=push (read, DCT-scaled decode, Lanczos-3, encode, validate, store with
#    fsync, answer), against vipsthumbnail (Debian's libvips-tools) and `convert -thumbnail`
#    (Debian's imagemagick) doing the same job on the same file; rounds alternate, a new photo
#    each round for RichPush (a variant is made once).
# 2. A variant hit against a plain blob hit: richpush-bench on /media/{source}?variant=thumb and
#    on /media/{thumb} (the same bytes under their own id), alternating; target >= 0.95.
#
# Usage: bench/variants.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-5}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/variants
port=18397
source bench/lib.sh
# Debian's ImageMagick 6 by its own name: a `convert` earlier on PATH may be something else.
install_missing vipsthumbnail:libvips-tools convert-im6.q16:imagemagick bc:bc
python3 -c 'import PIL, numpy' 2>/dev/null || pip install --quiet Pillow numpy
swift build -c release --product richpush >&2
swift build -c release --product richpush-bench >&2
bin="$(swift build -c release --show-bin-path)"
rp="$bin/richpush" bench="$bin/richpush-bench"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

# Photos of 4000x3000 (12 MP) as a phone takes them: quality 92, about 4-6 MB.
python3 - "$rounds" <<'PY'
import sys
import numpy as np
from PIL import Image
for i in range(int(sys.argv[1])):
    r = np.random.default_rng(1200 + i)
    h, w = 3000, 4000
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    sky = np.stack([80 + 90 * y / h, 130 + 70 * y / h, 220 - 50 * y / h], -1)
    horizon = h * (0.5 + 0.1 * r.random()) + 60 * np.sin(x / (80 + 100 * r.random()))
    ground = np.stack([70 + 40 * np.sin(x / 31.0 + y / 47.0), 110 + 35 * np.cos(y / 19.0), 60 + 20 * np.sin(x / 13.0)], -1)
    img = np.where((y > horizon)[..., None], ground, sky) + r.normal(0, 6, (h, w, 3)).astype(np.float32)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save("photo-%d.jpg" % i, quality=92)
PY
ids=()
for i in $(seq 0 $((rounds - 1))); do ids+=("$("$rp" media add --data data "photo-$i.jpg" | cut -c1-64)"); done
"$rp" serve --data data --port $port --public-media --log-level warning 2> serve.log &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ours="" vips="" magick=""
for i in $(seq 0 $((rounds - 1))); do
    ours+="$(seconds curl -fs -o "ours-$i.jpg" "http://127.0.0.1:$port/media/${ids[$i]}?variant=push") "
    vips+="$(seconds vipsthumbnail "photo-$i.jpg" -s 2048x2048 -o "$work/vips-$i.jpg[Q=85,strip]") "
    magick+="$(seconds convert-im6.q16 "photo-$i.jpg" -thumbnail 2048x2048 -quality 85 "magick-$i.jpg") "
    printf 'round %d: richpush %.3f s, vipsthumbnail %.3f s, convert %.3f s\n' "$i" "$(echo $ours | awk '{print $NF}')" \
        "$(echo $vips | awk '{print $NF}')" "$(echo $magick | awk '{print $NF}')" >&2
done
o=$(echo "$ours" | median) v=$(echo "$vips" | median) m=$(echo "$magick" | median)
size() { python3 -c "from PIL import Image; import os,sys; im=Image.open(sys.argv[1]); print('%dx%d %d KB' % (im.size + (os.path.getsize(sys.argv[1]) // 1024,)))" "$1"; }
printf '%-58s %8s  %s\n' "push variant of a 12 MP photo (median of $rounds)" seconds output
printf '%-58s %8.3f  %s\n' "richpush: first GET ?variant=push (make, store, answer)" "$o" "$(size ours-0.jpg)"
printf '%-58s %8.3f  %s\n' "vipsthumbnail -s 2048x2048 (Q=85)" "$v" "$(size vips-0.jpg)"
printf '%-58s %8.3f  %s\n' "convert -thumbnail 2048x2048 -quality 85" "$m" "$(size magick-0.jpg)"
printf 'time ratio richpush/vipsthumbnail %.2f, richpush/convert %.2f\n' "$(echo "$o / $v" | bc -l)" "$(echo "$o / $m" | bc -l)"

# Variant hit against plain hit, on the same bytes, alternating.
source_id=${ids[0]}
curl -fs -o thumb.jpg "http://127.0.0.1:$port/media/$source_id?variant=thumb"
thumb_id=$(sha256sum thumb.jpg | cut -c1-64)
plain="" variant=""
rps() { "$bench" --connections 16 --duration 3s --json "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["errors"]==0 and list(r["status"])==["200"], r; print(r["requestsPerSecond"])'; }
for _ in $(seq 1 "${HIT_ROUNDS:-5}"); do
    plain+="$(rps "http://127.0.0.1:$port/media/$thumb_id") "
    variant+="$(rps "http://127.0.0.1:$port/media/$source_id?variant=thumb") "
done
p=$(echo "$plain" | median) q=$(echo "$variant" | median)
printf '%-58s %10s\n' "GET of a $(stat -c %s thumb.jpg)-byte thumb, 16 connections, ${HIT_ROUNDS:-5} x 3 s each" "req/s"
printf '%-58s %10.0f\n' "plain hit: /media/{thumb}" "$p"
printf '%-58s %10.0f\n' "variant hit: /media/{source}?variant=thumb" "$q"
printf 'ratio variant/plain: %.2f (target >= 0.95); rounds plain %s, variant %s\n' "$(echo "$q / $p" | bc -l)" "$plain" "$variant"
