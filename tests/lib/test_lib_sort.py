"""vyre.lib.sort / argsort: stable, equal to numpy's stable sort of the order key on every
backend (f32 keys in IEEE totalOrder: -NaN first, +NaN last, -0 before +0, subnormals kept),
for random sizes (0, 1, a prime, 2**k±1) and random workgroup sizes (tests/lib/props.py)."""

from __future__ import annotations

import numpy as np
import pytest
from models import adversarial_f32, order_key
from props import rng_for, sizes, tag, take_form, workgroup_size

import vyre.lib as L
from vyre.driver import UnsupportedFeature
from vyre.lib import LibError


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.uint64, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_sort_and_argsort_are_stable_and_match_numpy(backend, dtype, request):
    """Random sizes (0 included), a random workgroup size, many equal keys (stability
    shows); f32 keys adversarial (±0, subnormals, infinities, NaNs of both signs)."""
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    cap = (600 if np.dtype(dtype).itemsize == 8 else 1500) if backend.id() == "reference" else 5000
    drawn = sizes(rng, cap)
    for n in drawn:
        keys = _keys(rng, dtype, n)
        order = np.argsort(order_key(keys), kind="stable")
        values = rng.integers(0, 2**31, n).astype(np.int32)
        try:
            got_keys, got_values = L.sort(keys, values, backend=backend, workgroup_size=wg)
            # argsort is the same passes with indices for values: one size (the largest) shows it
            got_idx = L.argsort(keys, backend=backend, workgroup_size=wg) if n == drawn[-1] else order.astype(np.uint32)
        except UnsupportedFeature:
            assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8
            return
        assert got_keys.dtype == keys.dtype and got_keys.tobytes() == keys[order].tobytes(), tag(n=n, wg=wg)
        assert got_values.tobytes() == values[order].tobytes(), tag(n=n, wg=wg)
        assert got_idx.dtype == np.uint32 and got_idx.tobytes() == order.astype(np.uint32).tobytes(), tag(n=n, wg=wg)


def _keys(rng: np.random.Generator, dtype, n: int) -> np.ndarray:
    """Random keys of ``dtype``, the first half repeating the second (equal keys)."""
    if dtype is np.float32:
        keys = adversarial_f32(rng, n).view(np.float32)
    else:
        info = np.iinfo(dtype)
        keys = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    keys[: n // 2] = keys[n // 2: 2 * (n // 2)]
    return keys


def test_f32_total_order(backend):
    keys = np.array([0x7FC00000, 0xFFC00000, 0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
                     0x00000001, 0x80000001, 0x3F800000], np.uint32).view(np.float32)
    want = [0xFFC00000, 0xFF800000, 0x80000001, 0x80000000, 0x00000000, 0x00000001, 0x3F800000,
            0x7F800000, 0x7FC00000]
    assert [int(b) for b in L.sort(keys, backend=backend).view(np.uint32)] == want


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_half_keys_sort_in_total_order(backend, fmt, request):
    """f16/bf16 keys (every bit pattern possible: NaNs of both signs, ±0, subnormals): sort
    with values, argsort and top-k equal numpy's stable sort of the 16-bit totalOrder key,
    bits kept; a random workgroup size and random sizes."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    cast = np.float16 if fmt == "f16" else ml_dtypes.bfloat16
    drawn = sizes(rng, 300 if backend.id() == "reference" else 3000)
    for n in drawn:
        h = rng.integers(0, 2**16, n, dtype=np.uint32).astype(np.uint16)
        h[: n // 2] = h[n // 2: 2 * (n // 2)]                        # equal keys
        keys = h.view(cast)
        okey = np.where(h >> 15 == 1, ~h & 0xFFFF, h | 0x8000).astype(np.uint32)
        order = np.argsort(okey, kind="stable")
        values = rng.integers(0, 2**31, n).astype(np.int32)
        got_keys, got_values = L.sort(keys, values, backend=backend, workgroup_size=wg)
        assert got_keys.dtype == keys.dtype and got_keys.tobytes() == h[order].tobytes(), tag(n=n, wg=wg)
        assert got_values.tobytes() == values[order].tobytes(), tag(n=n, wg=wg)
        if n != drawn[-1]:      # argsort and top-k: the same passes; the largest size shows them
            continue
        assert L.argsort(keys, backend=backend, workgroup_size=wg).tobytes() == order.astype(np.uint32).tobytes()
        k = min(n, 9)
        top = np.argsort(~okey, kind="stable")[:k]                   # largest first, ties to the lowest index
        tv, ti = L.top_k(keys, k, backend=backend, workgroup_size=wg)
        assert tv.dtype == keys.dtype and tv.tobytes() == h[top].tobytes() and ti.tolist() == top.tolist(), tag(n=n)


def test_sort_arguments(reference_backend):
    with pytest.raises(LibError) as err:
        L.sort(np.zeros(3, np.uint32), np.zeros(4, np.uint32), backend=reference_backend)
    assert err.value.code == "L002"
    with pytest.raises(LibError) as err:
        L.sort(np.zeros(3, np.int8), backend=reference_backend)
    assert err.value.code == "L001" and "Fix:" in str(err.value)
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


@pytest.mark.parametrize("serial", [True, False])
def test_sort_by_tiles_and_by_runs(backend, monkeypatch, serial):
    """Both forms of a radix pass give numpy's stable order on every backend: tiles sorted in
    workgroup memory (GPUs) and each invocation's run counted and moved in order
    (`runner.serial`: PoCL), one invocation a workgroup by default or the caller's size; 32-
    and 64-bit keys, values, argsort and the descending sort of top_k."""

    take_form(monkeypatch, backend, serial)
    rng = np.random.default_rng(32)
    n = 3001 if backend.id() == "reference" else 20011
    for dtype, wg in ((np.int32, None), (np.float32, 5), (np.uint64, None)):
        keys = _keys(rng, dtype, n)
        order = np.argsort(order_key(keys), kind="stable")
        values = rng.integers(0, 2**31, n).astype(np.int32)
        try:
            got_keys, got_values = L.sort(keys, values, backend=backend, workgroup_size=wg)
        except UnsupportedFeature:
            assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8
            continue
        assert got_keys.tobytes() == keys[order].tobytes(), tag(dtype=dtype, wg=wg, serial=serial)
        assert got_values.tobytes() == values[order].tobytes(), tag(dtype=dtype, wg=wg, serial=serial)
        assert L.argsort(keys, backend=backend).tobytes() == order.astype(np.uint32).tobytes()
    x = rng.integers(0, 50, n).astype(np.int32)
    vals, idx = L.top_k(x, 7, backend=backend)
    want = np.argsort(-x.astype(np.int64), kind="stable")[:7]
    assert idx.tolist() == want.tolist() and vals.tolist() == x[want].tolist()
