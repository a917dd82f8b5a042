#!/usr/bin/env python3
"""GIF seeds and bombs for the fuzzer's corpus (SPEC §22), named as libFuzzer names its inputs
(the SHA-1 of the bytes): a valid animation, one with metadata to strip, and the bombs that
GIFTests checks (a side past the limit, 5,001 frames, a flood of clear codes, an undefined code,
a cut frame). FuzzReplayTests replays every corpus file on each test run, each within a second.

    python3 fuzz/make-gif-seeds.py fuzz/corpus
"""
import hashlib, io, os, struct, sys
from PIL import Image

def le16(v): return struct.pack("<H", v)

def sub_blocks(data):
    out = b""
    for i in range(0, len(data), 255):
        chunk = data[i:i + 255]
        out += bytes([len(chunk)]) + chunk
    return out + b"\0"

def codes(values, width=9):
    out, acc, bits = bytearray(), 0, 0
    for v in values:
        acc |= v << bits; bits += width
        while bits >= 8:
            out.append(acc & 0xFF); acc >>= 8; bits -= 8
    if bits: out.append(acc & 0xFF)
    return bytes(out)

def literals(indices):
    out = []
    for i, v in enumerate(indices):
        if i % 254 == 0: out.append(256)
        out.append(v)
    return out + [257]

def frame(w, h, indices=None, data=None):
    gce = b"\x21\xF9\x04\x04" + le16(10) + b"\0\0"
    desc = b"\x2C" + le16(0) + le16(0) + le16(w) + le16(h) + b"\0"
    return gce + desc + b"\x08" + sub_blocks(data if data is not None else codes(literals(indices or [1] * (w * h))))

def gif(w, h, frames, extra=b""):
    head = b"GIF89a" + le16(w) + le16(h) + b"\xF1\0\0" + bytes([0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 255])
    loop = b"\x21\xFF\x0BNETSCAPE2.0\x03\x01\0\0\0"
    return head + loop + extra + b"".join(frames) + b"\x3B"

seeds = []
buf = io.BytesIO()
frames = [Image.new("P", (16, 16), i) for i in range(3)]
frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
seeds.append(buf.getvalue())
seeds.append(gif(8, 8, [frame(8, 8)], extra=b"\x21\xFE" + sub_blocks(b"shot at 48.85N") +
                 b"\x21\xFF\x0BXMP DataXMP" + sub_blocks(b"<x:xmpmeta/>")) + b"trailing bytes")
seeds.append(gif(20000, 10, [frame(1, 1)]))
seeds.append(gif(1, 1, [frame(1, 1)] * 5001))
seeds.append(gif(1, 1, [frame(1, 1, data=codes([256] * 60000 + [0, 257]))]))
seeds.append(gif(4, 1, [frame(4, 1, data=codes([256, 1, 300, 257]))]))
whole = gif(40, 30, [frame(40, 30)])
seeds.append(whole[:len(whole) - 20])

out = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus"
for seed in seeds:
    with open(os.path.join(out, hashlib.sha1(seed).hexdigest()), "wb") as f:
        f.write(seed)
print(f"{len(seeds)} GIF seeds written to {out}")
