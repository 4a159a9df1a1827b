"""vyre.lib select/partition/unique/run_length_encode/top_k and the segmented reductions:
the same bytes as numpy models on every backend (stable orders, ties to the lowest index,
exact float segment sums)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from models import adversarial_f32, exact_sum_bits

import vyre.lib as L
from vyre.driver import UnsupportedFeature
from vyre.lib import LibError


@pytest.mark.parametrize("n", [1, 61, 4097])
def test_select_and_partition_are_stable(backend, n):
    rng = np.random.default_rng(70 + n)
    x = rng.standard_normal(n).astype(np.float32)
    mask = rng.random(n) < 0.4
    assert L.select(x, mask, backend=backend).tobytes() == x[mask].tobytes()
    parted, count = L.partition(x, mask, backend=backend)
    assert count == mask.sum() and parted.tobytes() == np.concatenate([x[mask], x[~mask]]).tobytes()


def test_unique_rle_top_k(backend):
    rng = np.random.default_rng(71)
    x = rng.integers(-20, 20, 2001).astype(np.int32)
    assert L.unique(x, backend=backend).tobytes() == np.unique(x).tobytes()
    runs = np.repeat(rng.integers(0, 5, 300), rng.integers(1, 6, 300)).astype(np.uint32)
    values, lengths = L.run_length_encode(runs, backend=backend)
    starts = np.flatnonzero(np.concatenate([[True], runs[1:] != runs[:-1]]))
    assert values.tobytes() == runs[starts].tobytes()
    assert lengths.tobytes() == np.diff(np.append(starts, runs.size)).astype(np.uint32).tobytes()
    for k in (1, 10, 2001):
        tv, ti = L.top_k(x, k, backend=backend)
        order = np.argsort(-x.astype(np.int64), kind="stable")[:k]      # ties: lowest index first
        assert ti.tobytes() == order.astype(np.uint32).tobytes() and tv.tobytes() == x[order].tobytes()


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
