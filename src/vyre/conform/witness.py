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
        want = np.uint32 if decl.dtype is DataType.BOOL else decl.dtype.numpy
        out.append(np.ascontiguousarray(x).view(want) if isinstance(x, np.ndarray) and x.itemsize == 4 else x)
    return out + list(arrays[len(out):])


def edges(dtype: DataType) -> list[int]:
    if dtype is DataType.F32:
        return list(F32_EDGE_BITS)
    if dtype is DataType.BOOL:
        return [0, 1, 2, 0xFFFFFFFF]
    return list(U32_EDGES)


def witness_words(dtype: DataType, n: int, seed: int) -> np.ndarray:
    """``n`` u32 words: the type's boundary values first (cycled), then seeded random ones."""
    rng = random.Random(seed)
    base = edges(dtype)
    out = np.empty(n, dtype=np.uint32)
    for i in range(n):
        if i < len(base):
            out[i] = base[i]
        elif dtype is DataType.F32 and rng.random() < 0.7:
            out[i] = np.float32(rng.uniform(-100, 100) * (10.0 ** rng.randint(-3, 3))).view(np.uint32)
        elif rng.random() < 0.3:
            out[i] = rng.choice(base)
        else:
            out[i] = rng.getrandbits(32) if rng.random() < 0.5 else rng.randint(0, 64)
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
