#!/usr/bin/env python3
"""Write engine/tests/data/quant/goldens.bin: random-but-valid blocks of every tensor type
baro-top reads, with gguf-py's dequantisation of them (`gguf.quants.dequantize`), and f32
inputs with gguf-py's quantisation (`gguf.quants.quantize`) for the types baro-top quantises.
engine/tests/it/quant_types.rs asserts baro-top reproduces every bit.

    pip install gguf numpy && python3 scripts/quant_goldens.py

Format (little-endian): b"BTQG", u32 version (1), u32 records; then per record u32 kind
(0: bytes -> expected f32 by dequantisation, 1: f32 input -> expected bytes by quantisation),
u32 ggml type id, u32 elements, u32 bytes, the bytes, the elements as f32.
"""

import pathlib
import struct

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

rng = np.random.default_rng(20261201)

# Finite f16 scales worth covering: zero, signed zero, ones, the largest, the smallest normal
# and subnormal, and ordinary magnitudes.
SPECIAL_F16 = [0.0, -0.0, 1.0, -1.0, 65504.0, -65504.0, 6.103515625e-05, 5.960464477539063e-08,
               -5.960464477539063e-08, 0.0123, -0.0456, 2.5, 1e-3]


def rand_f16(n):
    """n finite f16 values as bytes: half from SPECIAL_F16, half random finite bit patterns."""
    out = np.empty(n, dtype=np.uint16)
    for i in range(n):
        if rng.random() < 0.4:
            out[i] = np.array(SPECIAL_F16[rng.integers(len(SPECIAL_F16))], dtype=np.float16).view(np.uint16)
        else:
            while True:
                b = rng.integers(0, 1 << 16)
                if (b >> 10) & 31 != 31:  # not inf/nan
                    break
            out[i] = b
    return out


# Byte offsets of the f16 fields of each block type (ggml-common.h).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_XS: [0], T.IQ4_NL: [0],
}


def blocks_of(ty, n):
    """n blocks of type ty: random bytes with finite f16 fields, then special blocks."""
    _, size = GGML_QUANT_SIZES[ty]
    b = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for off in F16_FIELDS[ty]:
        b[:, off:off + 2] = rand_f16(n).view(np.uint8).reshape(n, 2)
    # Special blocks: all zero bytes; all 0xFF quants with a unit scale; every byte value in
    # order (every nibble in every position); a negative second scale (dmin / m) with the
    # largest first scale.
    b[0, :] = 0
    b[1, :] = 0xFF
    for off in F16_FIELDS[ty]:
        b[1, off:off + 2] = np.array([1.0], dtype=np.float16).view(np.uint8)
    b[2, :] = np.arange(size, dtype=np.uint32).astype(np.uint8)
    for off in F16_FIELDS[ty]:
        b[2, off:off + 2] = np.array([0.5], dtype=np.float16).view(np.uint8)
    offs = F16_FIELDS[ty]
    b[3, offs[0]:offs[0] + 2] = np.array([65504.0], dtype=np.float16).view(np.uint8)
    if len(offs) > 1:
        b[3, offs[1]:offs[1] + 2] = np.array([-3.25], dtype=np.float16).view(np.uint8)
        b[4, offs[1]:offs[1] + 2] = np.array([-65504.0], dtype=np.float16).view(np.uint8)
    return b


records = []


def dequant_record(ty, raw):
    expect = dequantize(raw, ty).astype(np.float32).reshape(-1)
    records.append((0, int(ty), expect.size, raw.tobytes(), expect))


def quant_record(ty, x):
    x = x.astype(np.float32).reshape(1, -1)
    q = quantize(x, ty)
    records.append((1, int(ty), x.size, np.asarray(q).view(np.uint8).tobytes(), x.reshape(-1)))


# Dequantisation: 32-element types 128 blocks, 256-element types 24 blocks.
for ty in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]:
    dequant_record(ty, blocks_of(ty, 128))
for ty in [T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]:
    dequant_record(ty, blocks_of(ty, 24))
# F16 and BF16: every exponent, both signs, infinities, and (BF16, a bit view) NaNs.
h = np.concatenate([rand_f16(1024), np.array([0x7C00, 0xFC00, 0x0001, 0x8001, 0x3C00], dtype=np.uint16)])
dequant_record(T.F16, h.view(np.uint8))
bf = rng.integers(0, 1 << 16, size=2048, dtype=np.uint32).astype(np.uint16)
bf = np.concatenate([bf, np.array([0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0001, 0x8000, 0x7F7F], dtype=np.uint16)])
dequant_record(T.BF16, bf.view(np.uint8))

# Quantisation: normal values at several magnitudes, then special blocks of 32: all zero,
# all equal, one outlier, all negative, exact .5 ties on the quant grid, a huge range.
def quant_input():
    parts = [rng.normal(0, s, size=32 * 16).astype(np.float32) for s in (1.0, 1e-3, 300.0)]
    special = [
        np.zeros(32),
        np.full(32, 0.75),
        np.where(np.arange(32) == 5, 40.0, 0.01),
        -np.abs(rng.normal(0, 2, 32)),
        (np.arange(32) - 16) * 0.5,
        np.linspace(-60000.0, 60000.0, 32),
        np.linspace(-1e-6, 3e-6, 32),
    ]
    return np.concatenate(parts + [np.asarray(s, dtype=np.float32) for s in special])


for ty in [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]:
    x = quant_input()
    if ty == T.BF16:
        # Rounding ties and overflow to infinity: the low halves 0x8000 exactly.
        ties = np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0xBF808000, 0x00008000], dtype=np.uint32)
        x = np.concatenate([x, np.resize(ties.view(np.float32), 32)])
    quant_record(ty, x)

# IQ4_NL (added 2026-12-05, last, so every record above keeps its random draws): 128 blocks.
# Its quantisation golden is ggml's own (scripts/fixtures/kquant_goldens.c): gguf-py has none.
dequant_record(T.IQ4_NL, blocks_of(T.IQ4_NL, 128))

out = pathlib.Path(__file__).resolve().parent.parent / "engine/tests/data/quant/goldens.bin"
out.parent.mkdir(parents=True, exist_ok=True)
with open(out, "wb") as f:
    f.write(b"BTQG" + struct.pack("<II", 1, len(records)))
    for kind, ty, n, raw, floats in records:
        f.write(struct.pack("<IIII", kind, ty, n, len(raw)))
        f.write(raw)
        f.write(np.asarray(floats, dtype="<f4").tobytes())
print(f"wrote {out} ({out.stat().st_size} bytes, {len(records)} records)")
