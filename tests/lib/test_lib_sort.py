"""vyre.lib.sort / argsort: stable, equal to numpy's stable sort of the order key on every
backend (f32 keys in IEEE totalOrder: -NaN first, +NaN last, -0 before +0, subnormals kept)."""

from __future__ import annotations

import numpy as np
import pytest
from models import adversarial_f32

import vyre.lib as L
from vyre.driver import UnsupportedFeature
from vyre.lib import LibError


def _order_key(k: np.ndarray) -> np.ndarray:
    """The unsigned integer whose order is the key order (numpy only)."""
    if k.dtype == np.float32:
        b = k.view(np.uint32)
        return np.where(b >> 31 == 1, ~b, b | np.uint32(0x80000000)).astype(np.uint32)
    if k.dtype.kind == "i":
        return (k.view(np.dtype(f"u{k.itemsize}")) ^ (1 << (8 * k.itemsize - 1))).astype(f"u{k.itemsize}")
    return k


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.uint64, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_sort_and_argsort_are_stable_and_match_numpy(backend, dtype):
    rng = np.random.default_rng(40)
    for n in [1, 61, (257 if np.dtype(dtype).itemsize == 8 else 1009) if backend.id() == "reference" else 4097]:
        if dtype is np.float32:
            keys = adversarial_f32(rng, n).view(np.float32)
        else:
            info = np.iinfo(dtype)
            keys = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
            keys[: n // 2] = keys[n // 2: 2 * (n // 2)]          # many equal keys: stability shows
        order = np.argsort(_order_key(keys), kind="stable")
        values = rng.integers(0, 2**31, n).astype(np.int32)
        try:
            got_keys, got_values = L.sort(keys, values, backend=backend, workgroup_size=48 if n == 61 else None)
            got_idx = L.argsort(keys, backend=backend)
        except UnsupportedFeature:
            assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8
            return
        assert got_keys.dtype == keys.dtype and got_keys.tobytes() == keys[order].tobytes(), n
        assert got_values.tobytes() == values[order].tobytes(), n
        assert got_idx.dtype == np.uint32 and got_idx.tobytes() == order.astype(np.uint32).tobytes(), n


def test_f32_total_order(backend):
    keys = np.array([0x7FC00000, 0xFFC00000, 0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
                     0x00000001, 0x80000001, 0x3F800000], np.uint32).view(np.float32)
    want = [0xFFC00000, 0xFF800000, 0x80000001, 0x80000000, 0x00000000, 0x00000001, 0x3F800000,
            0x7F800000, 0x7FC00000]
    assert [int(b) for b in L.sort(keys, backend=backend).view(np.uint32)] == want


def test_sort_arguments(reference_backend):
    with pytest.raises(LibError) as err:
        L.sort(np.zeros(3, np.uint32), np.zeros(4, np.uint32), backend=reference_backend)
    assert err.value.code == "L002"
    with pytest.raises(LibError) as err:
        L.sort(np.zeros(3, np.float16), backend=reference_backend)
    assert err.value.code == "L001"
    k, v = L.sort(np.zeros(0, np.int32), np.zeros(0, np.float32), backend=reference_backend)
    assert k.dtype == np.int32 and v.dtype == np.float32 and k.size == v.size == 0


def test_sort_across_many_tiles_per_workgroup(backend):
    """A workgroup that moves several tiles in turn carries each digit's place from tile to
    tile (small workgroups: more tiles than workgroups on every backend)."""
    rng = np.random.default_rng(41)
    keys = rng.integers(0, 1000, 20011).astype(np.uint32)
    values = np.arange(keys.size, dtype=np.uint32)
    got_keys, got_values = L.sort(keys, values, backend=backend, workgroup_size=16)
    order = np.argsort(keys, kind="stable")
    assert got_keys.tobytes() == keys[order].tobytes() and got_values.tobytes() == order.astype(np.uint32).tobytes()
