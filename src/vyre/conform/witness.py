"""Witness inputs: boundary values of each type plus seeded pseudo-random values, and a
blake3 digest of a witness set (part of every certificate)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import blake3
import numpy as np

from vyre.ir.types import DataType

U32_EDGES = [0, 1, 2, 3, 7, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF,
             0x55555555, 0xAAAAAAAA, 0x0000FFFF, 0xFFFF0000]
F32_EDGE_BITS = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000,
                 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF,  # NaN payloads
                 0x00000001, 0x807FFFFF, 0x00400000,  # subnormals
                 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F000000, 0xBF000000, 0x3FC00000,
                 0xBFC00000, 0x40200000, 0xC0200000, 0x4F800000, 0x4F000000, 0xCF000000,
                 0x3EAAAAAB, 0x4B000000, 0x4B000001]


def typed_inputs(program, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Witness words as arrays of each input buffer's own element type (the same bits):
    what a caller passes, since backends refuse arrays of another dtype."""
    out = []
    for decl, x in zip(program.inputs, arrays):
        want = np.dtype(np.uint32 if decl.dtype is DataType.BOOL else decl.dtype.numpy)
        if isinstance(x, np.ndarray) and x.dtype != want and x.nbytes % want.itemsize == 0:
            x = np.ascontiguousarray(x).reshape(-1).view(np.uint8).view(want)
        out.append(x)
    return out + list(arrays[len(out):])


F16_EDGE_BITS = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF,
                 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3800, 0xB800, 0x3E00, 0x5640, 0x1234]
BF16_EDGE_BITS = [0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFFF,
                  0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x3F00, 0xBF00, 0x3FC0, 0x4B00, 0x4F80]
U64_EDGES = [0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63,
             (1 << 64) - 1, (1 << 64) - 2, 0x5555555555555555, 0xAAAAAAAAAAAAAAAA, 63, 64, 65]


def edges(dtype: DataType) -> list[int]:
    if dtype is DataType.F32:
        return list(F32_EDGE_BITS)
    if dtype is DataType.F16:
        return list(F16_EDGE_BITS)
    if dtype is DataType.BF16:
        return list(BF16_EDGE_BITS)
    if dtype.is_wide:
        return list(U64_EDGES)
    if dtype is DataType.BOOL:
        return [0, 1, 2, 0xFFFFFFFF]
    if dtype.size < 4:
        top = (1 << dtype.bits) - 1
        return [0, 1, 2, top, top - 1, top >> 1, (top >> 1) + 1, 0x55 & top, 0xAA & top]
    return list(U32_EDGES)


def witness_words(dtype: DataType, n: int, seed: int) -> np.ndarray:
    """``n`` elements of ``dtype``'s storage (u32 words for the 32-bit types): the type's
    boundary values first (cycled), then seeded random ones."""
    rng = random.Random(seed)
    base = edges(dtype)
    bits = 32 if dtype.size == 4 else dtype.bits
    out = np.empty(n, dtype=np.uint32 if dtype.size == 4 else dtype.storage)
    for i in range(n):
        if i < len(base):
            out[i] = base[i]
        elif dtype is DataType.F32 and rng.random() < 0.7:
            out[i] = np.float32(rng.uniform(-100, 100) * (10.0 ** rng.randint(-3, 3))).view(np.uint32)
        elif dtype.is_half and rng.random() < 0.7:
            x = np.float32(rng.uniform(-100, 100) * (10.0 ** rng.randint(-2, 2)))
            out[i] = x.astype(np.float16).view(np.uint16) if dtype is DataType.F16 else \
                int(x.view(np.uint32)) >> 16
        elif rng.random() < 0.3:
            out[i] = rng.choice(base)
        else:
            out[i] = rng.getrandbits(bits) if rng.random() < 0.5 else rng.randint(0, 64)
    return out


def digest(inputs: Sequence[Sequence]) -> str:
    """blake3 over a list of witness sets (each a list of bytes-like buffers)."""
    h = blake3.blake3()
    for case in inputs:
        h.update(len(case).to_bytes(4, "little"))
        for buf in case:
            raw = bytes(memoryview(buf).cast("B"))
            h.update(len(raw).to_bytes(8, "little"))
            h.update(raw)
    return h.hexdigest()
