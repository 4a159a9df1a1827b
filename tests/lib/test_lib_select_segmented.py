"""vyre.lib select/partition/unique/run_length_encode/top_k and the segmented reductions:
the same bytes as numpy models on every backend (stable orders, ties to the lowest index,
exact float segment sums)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from models import adversarial_f32, exact_sum_bits, float_unique_model, order_key
from props import rng_for, sizes, tag, workgroup_size

import vyre.lib as L
from vyre.driver import UnsupportedFeature
from vyre.lib import LibError


def _wide_refused(backend, dtype) -> None:
    assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8


def _values(rng: np.random.Generator, dtype, n: int, spread: int | None = None) -> np.ndarray:
    """``n`` values of ``dtype`` (f32: adversarial bits, NaNs and infinities included;
    ``spread``: integers in a small range, so that many are equal)."""
    if dtype is np.float32:
        return adversarial_f32(rng, n).view(np.float32)
    info = np.iinfo(dtype)
    if spread is not None:
        lo = -spread if info.min < 0 else 0
        return rng.integers(lo, lo + 2 * spread, n).astype(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=lambda d: np.dtype(d).name)
def test_select_and_partition_are_stable(backend, dtype, request):
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng):
        x = _values(rng, dtype, n)
        mask = rng.random(n) < rng.random()
        try:
            got = L.select(x, mask, backend=backend, workgroup_size=wg)
            parted, count = L.partition(x, mask, backend=backend, workgroup_size=wg)
        except UnsupportedFeature:
            return _wide_refused(backend, dtype)
        assert got.dtype == x.dtype and got.tobytes() == x[mask].tobytes(), tag(n=n, wg=wg)
        assert count == mask.sum() and parted.tobytes() == np.concatenate([x[mask], x[~mask]]).tobytes(), tag(n=n, wg=wg)


@pytest.mark.parametrize("dtype", [np.int32, np.uint64, np.int64], ids=lambda d: np.dtype(d).name)
def test_unique_matches_numpy(backend, dtype, request):
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng, 600 if np.dtype(dtype).itemsize == 8 and backend.id() == "reference" else 2100):
        x = _values(rng, dtype, n, spread=int(rng.integers(1, 3000)))
        if n > 2 and np.dtype(dtype).itemsize == 8:
            x[:2] = (np.iinfo(dtype).min, np.iinfo(dtype).max)          # keys that need all 64 bits
        try:
            got = L.unique(x, backend=backend, workgroup_size=wg)
        except UnsupportedFeature:
            return _wide_refused(backend, dtype)
        assert got.dtype == x.dtype and got.tobytes() == np.unique(x).tobytes(), tag(n=n, wg=wg)


def _float_bits(rng: np.random.Generator, fmt: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(array, f32 bits of its values)``: adversarial bits (NaN payloads of both signs, ±0,
    subnormals, ±inf), with repeats."""
    import ml_dtypes

    if fmt == "f32":
        b = adversarial_f32(rng, n)
        if n:                                           # repeats: a third from the first eighth
            b = np.where(rng.random(n) < 0.3, rng.choice(b[: max(1, n // 8)], n), b).astype(np.uint32)
        return b.view(np.float32), b
    h = rng.integers(0, 2**16, n, dtype=np.uint32).astype(np.uint16)
    h = np.where(rng.random(n) < 0.5, h, rng.choice(np.uint16([0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01,
                                                               0x7F80, 0xFF80, 0x7FC1, 1, 0x8001, 0x3C00]), n))
    if fmt == "bf16":
        return h.view(ml_dtypes.bfloat16), h.astype(np.uint32) << 16
    return h.view(np.float16), h.view(np.float16).astype(np.float32).view(np.uint32)


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_float_unique_matches_numpy(backend, fmt, request):
    pytest.importorskip("ml_dtypes")
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng, 2100):
        x, wide = _float_bits(rng, fmt, n)
        got = L.unique(x, backend=backend, workgroup_size=wg)
        want = float_unique_model(wide, fmt)
        assert got.dtype == x.dtype and got.tobytes() == want.tobytes(), tag(n=n, wg=wg)
        ref = np.unique(x.astype(np.float32))                      # numpy's own, values only
        np.testing.assert_array_equal(got.astype(np.float32), ref, err_msg=tag(n=n, wg=wg))


def test_float_unique_edges(backend):
    nan_bits = np.uint32([0xFFC00001, 0x7F800001, 0x7FC00000, 0xFFFFFFFF])
    cases = [([0.0, -0.0], 0x00000000), ([-0.0, 0.0, -0.0], 0x80000000)]
    for values, zero in cases:
        got = L.unique(np.float32(values), backend=backend)
        assert got.view(np.uint32).tolist() == [zero]
    x = np.concatenate([nan_bits, np.float32([np.inf, -np.inf, 1e-45, -1e-45, 1.0]).view(np.uint32)]).view(np.float32)
    got = L.unique(x, backend=backend).view(np.uint32)
    assert got.tolist() == [0xFF800000, 0x80000001, 0x00000001, 0x3F800000, 0x7F800000, 0x7FC00000]


def test_unique_refuses_narrow_integers_with_a_fix(reference_backend):
    with pytest.raises(LibError) as err:
        L.unique(np.zeros(3, np.int8), backend=reference_backend)
    assert err.value.code == "L001" and "Fix:" in str(err.value)


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_select_partition_and_runs_of_16_bit_floats(backend, fmt, request):
    """f16/bf16 elements (any bits, runs of equal bits) move as their bits: select and
    partition are numpy's boolean indexing, the runs numpy's comparison of the bits."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    cast = np.float16 if fmt == "f16" else ml_dtypes.bfloat16
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng, 2100):
        h = rng.integers(0, 2**16, n, dtype=np.uint32).astype(np.uint16)
        h[rng.random(n) < 0.5] = h[0] if n else 0                   # runs of equal bits
        x, mask = h.view(cast), rng.random(n) < rng.random()
        got = L.select(x, mask, backend=backend, workgroup_size=wg)
        parted, count = L.partition(x, mask, backend=backend, workgroup_size=wg)
        assert got.dtype == x.dtype and got.view(np.uint16).tobytes() == h[mask].tobytes(), tag(n=n, wg=wg)
        assert count == mask.sum() and parted.view(np.uint16).tobytes() == np.concatenate([h[mask], h[~mask]]).tobytes()
        values, lengths = L.run_length_encode(x, backend=backend, workgroup_size=wg)
        starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]]) if n else np.zeros(0, np.int64)
        assert values.dtype == x.dtype and values.view(np.uint16).tobytes() == h[starts].tobytes(), tag(n=n, wg=wg)
        assert lengths.tolist() == np.diff(np.r_[starts, n]).tolist(), tag(n=n, wg=wg)


def test_run_length_encode(backend, request):
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng, 300):
        runs = np.repeat(rng.integers(0, 5, n), rng.integers(1, 6, n)).astype(np.uint32)
        values, lengths = L.run_length_encode(runs, backend=backend, workgroup_size=wg)
        starts = np.flatnonzero(np.concatenate([[True], runs[1:] != runs[:-1]])) if runs.size else np.zeros(0, int)
        assert values.tobytes() == runs[starts].tobytes(), tag(n=n, wg=wg)
        assert lengths.tobytes() == np.diff(np.append(starts, runs.size)).astype(np.uint32).tobytes(), tag(n=n, wg=wg)


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint64, np.int64], ids=lambda d: np.dtype(d).name)
def test_top_k_is_the_largest_first_ties_to_the_lowest_index(backend, dtype, request):
    """The model: numpy's stable argsort of the descending order key (f32 in IEEE totalOrder:
    +NaN above +inf, -0 below +0); many equal values so that ties show."""
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    wide = np.dtype(dtype).itemsize == 8
    for j, n in enumerate(s for s in sizes(rng, 600 if wide and backend.id() == "reference" else 2100) if s):
        x = _values(rng, dtype, n, spread=None if dtype is np.float32 else 40)
        if dtype is np.float32:
            x[: n // 3] = x[n // 3: 2 * (n // 3)]                          # equal floats too
        order = np.argsort(~order_key(x), kind="stable")                   # descending, ties by index
        for k in ([1, int(rng.integers(1, n + 1)), n][j % 3],):            # one sort per size
            try:
                tv, ti = L.top_k(x, k, backend=backend, workgroup_size=wg)
            except UnsupportedFeature:
                return _wide_refused(backend, dtype)
            want = order[:k]
            assert ti.dtype == np.uint32 and ti.tobytes() == want.astype(np.uint32).tobytes(), tag(n=n, k=k, wg=wg)
            assert tv.dtype == x.dtype and tv.tobytes() == x[want].tobytes(), tag(n=n, k=k, wg=wg)



@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_segments_match_numpy(backend, dtype):
    rng = np.random.default_rng(72)
    x = rng.integers(-1000 if np.dtype(dtype).kind == "i" else 0, 1000, 3001).astype(dtype)
    offs = np.sort(rng.integers(0, 3001, 41))
    offs[0], offs[-1], offs[5] = 0, 3001, offs[4]                       # one empty segment
    segs = [x[offs[s]:offs[s + 1]] for s in range(40)]
    info = np.iinfo(dtype)
    try:
        got = [L.segment_sum(x, offs, backend=backend), L.segment_min(x, offs, backend=backend),
               L.segment_max(x, offs, backend=backend)]
    except UnsupportedFeature:
        assert backend.id() == "wgpu" and dtype is np.int64
        return
    with np.errstate(over="ignore"):
        want = [np.array([s.sum(dtype=dtype) for s in segs], dtype),
                np.array([s.min() if s.size else info.max for s in segs], dtype),
                np.array([s.max() if s.size else info.min for s in segs], dtype)]
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]


def test_float_segment_sums_are_exact(backend):
    rng = np.random.default_rng(73)
    bits = adversarial_f32(rng, 2003, specials=False)
    offs = np.sort(rng.integers(0, 2003, 31))
    offs[0], offs[-1] = 0, 2003
    want = [exact_sum_bits([int(b) for b in bits[offs[s]:offs[s + 1]]], "f32") for s in range(30)]
    got = L.segment_sum(bits.view(np.float32), offs, backend=backend)
    assert [int(b) for b in got.view(np.uint32)] == want


def test_reduce_by_key(backend):
    rng = np.random.default_rng(74)
    keys = np.sort(rng.integers(0, 40, 3001)).astype(np.int32)
    vals = rng.standard_normal(3001).astype(np.float32)
    rk, rv = L.reduce_by_key(keys, vals, backend=backend)
    uk = np.unique(keys)
    assert rk.tobytes() == uk.tobytes()
    assert rv.tobytes() == np.array([math.fsum(vals[keys == u].astype(np.float64)) for u in uk], np.float32).tobytes()
    _, mx = L.reduce_by_key(keys, vals, "max", backend=backend)
    assert mx.tobytes() == np.array([vals[keys == u].max() for u in uk], np.float32).tobytes()


def test_bad_segment_and_select_arguments(reference_backend):
    x = np.arange(10, dtype=np.uint32)
    for offs in (np.array([0, 5, 3, 10]), np.array([0, 11])):
        with pytest.raises(LibError) as err:
            L.segment_sum(x, offs.astype(np.uint32), backend=reference_backend)
        assert err.value.code == "L004"
    with pytest.raises(LibError) as err:
        L.select(x, np.ones(9, bool), backend=reference_backend)
    assert err.value.code == "L002"
    with pytest.raises(LibError) as err:
        L.top_k(x, 11, backend=reference_backend)
    assert err.value.code == "L005"
    with pytest.raises(LibError) as err:
        L.reduce_by_key(x, x, "mean", backend=reference_backend)
    assert err.value.code == "L005"
