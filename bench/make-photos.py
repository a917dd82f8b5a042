#!/usr/bin/env python3
"""Generates the ingest benchmark's image set: ~100 mixed PNG/JPEG photos and screenshots, ~100 MB.

Deterministic (fixed seeds), so every run measures the same bytes. The JPEG photos carry a
phone's EXIF (GPS, serial, Orientation) and a comment, the PNG photos a text chunk: what ingest
strips. Needs Pillow and numpy.
Usage: make-photos.py OUT_DIR
"""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFont, PngImagePlugin

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(2026)


def photo(w, h, seed):
    """Photo-like content: smooth gradients, a horizon, texture and sensor noise."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    sky = np.stack([80 + 90 * y / h, 130 + 70 * y / h, 220 - 50 * y / h], -1)
    horizon = h * (0.5 + 0.1 * r.random()) + 40 * np.sin(x / (80 + 100 * r.random()))
    ground = np.stack([70 + 40 * np.sin(x / 31.0 + y / 47.0), 110 + 35 * np.cos(y / 19.0), 60 + 20 * np.sin(x / 13.0)], -1)
    img = np.where((y > horizon)[..., None], ground, sky)
    img += r.normal(0, 7, (h, w, 3)).astype(np.float32)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def screenshot(w, h, seed):
    """Screenshot-like content: flat panels, text, a few icons."""
    r = np.random.default_rng(seed)
    img = Image.new("RGB", (w, h), tuple(int(v) for v in r.integers(230, 256, 3)))
    d = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 18)
    except OSError:
        font = ImageFont.load_default()
    d.rectangle([0, 0, w, 56], fill=tuple(int(v) for v in r.integers(20, 90, 3)))
    d.rectangle([0, 56, 260, h], fill=(240, 242, 245))
    for i in range(30):
        d.text((20, 80 + i * 30), f"Menu item {i} · {r.integers(1000)}", fill=(60, 60, 60), font=font)
    for row in range(40):
        y = 80 + row * 24
        words = " ".join(f"word{int(v)}" for v in r.integers(0, 500, 12))
        d.text((290, y), words, fill=(30, 30, 30), font=font)
    for i in range(12):
        x0, y0 = int(r.integers(300, w - 200)), int(r.integers(80, h - 200))
        d.rounded_rectangle([x0, y0, x0 + 160, y0 + 120], 12, fill=tuple(int(v) for v in r.integers(0, 256, 3)))
    return img


def camera_exif(i):
    """What a phone writes: make, model, serial, capture time, Orientation, and a GPS position."""
    exif = Image.Exif()
    exif[0x010F], exif[0x0110], exif[0xA431] = "Phone Maker", "Phone 15", f"SN{i:08d}"
    exif[0x0132] = "2026:11:23 06:00:00"
    exif[0x0112] = 1 + i % 8
    gps = exif.get_ifd(0x8825)
    gps.update({1: "N", 2: (48.0, 51.0, 29.0 + i), 3: "E", 4: (2.0, 17.0, 40.0)})
    return exif


n = 0
for i in range(40):  # JPEG photos, ~1.2-2.5 MB each, with a phone's EXIF (GPS included) and a comment
    photo(2600 + 16 * i, 1800, 100 + i).save(f"{out}/photo-{i:03d}.jpg", quality=92, exif=camera_exif(i), comment=b"holiday")
    n += 1
for i in range(15):  # PNG photos, ~2-3 MB each, with a text chunk
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", f"photo {i}")
    photo(1200, 900 + 8 * i, 300 + i).save(f"{out}/photo-{i:03d}.png", compress_level=6, pnginfo=info)
    n += 1
for i in range(45):  # PNG screenshots, ~100-300 KB each
    screenshot(1920, 1080 + 4 * i, 500 + i).save(f"{out}/screen-{i:03d}.png", compress_level=6)
    n += 1
total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
print(f"{n} images, {total / 1e6:.1f} MB in {out}")
