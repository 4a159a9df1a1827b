"""vyre.lib on the dask backend (a real two-worker LocalCluster): the primitives give the
bytes they give everywhere else, for random sizes (0, 1, a prime) too (each pass runs whole
on one worker: the library's passes use workgroup memory and atomics)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from models import adversarial_f32, exact_sum_bits, float_unique_model
from props import rng_for, sizes, tag

import vyre.lib as L
from vyre.driver import acquire

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def dask_backend():
    os.environ.setdefault("VYRE_DASK_WORKERS", "2")
    # the backend is shared with later tests (tests/test_dask.py shuts it down at its end)
    return acquire("dask")


def test_primitives_on_dask_match_the_models(dask_backend):
    rng = np.random.default_rng(60)
    x = (rng.standard_normal(5003) * np.exp2(rng.integers(-30, 30, 5003))).astype(np.float32)
    assert L.sum(x, backend=dask_backend) == np.float32(math.fsum(x.astype(np.float64)))
    idx = rng.integers(0, 50, 5003).astype(np.uint32)
    added = L.index_add(np.zeros(50, np.float32), idx, x, backend=dask_backend)
    assert added.tobytes() == L.index_add(np.zeros(50, np.float32), idx, x, backend="reference").tobytes()
    u = rng.integers(0, 2**32, 5003, dtype=np.uint64).astype(np.uint32)
    assert L.cumsum(u, backend=dask_backend).tobytes() == np.cumsum(u, dtype=np.uint32).tobytes()
    assert L.sort(u, backend=dask_backend).tobytes() == np.sort(u).tobytes()


def test_primitives_on_dask_for_random_sizes(dask_backend, request):
    """Sizes 0, 1 and a random prime: sums (narrow integers included), min/max, scans, f32
    keys in totalOrder (NaNs, ±0, subnormals), top-k ties to the lowest index, unique and
    select give numpy's / the exact model's bytes on dask too. The default workgroup size
    only: every dask worker compiles each new program for its own backend (random
    workgroup sizes are drawn on the other backends)."""
    rng = rng_for(request.node.name)
    for n in sizes(rng, 3000)[:3]:
        b = rng.integers(0, 256, n).astype(np.uint8)
        got = L.sum(b, backend=dask_backend)
        assert type(got) is np.uint64 and got == np.sum(b), tag(n=n)
        bits = adversarial_f32(rng, n)
        keys = bits.view(np.float32)
        assert int(np.float32(L.sum(keys, backend=dask_backend)).view(np.uint32)) \
            == exact_sum_bits([int(v) for v in bits], "f32"), tag(n=n)
        u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        assert L.cumsum(u, backend=dask_backend).tobytes() == np.cumsum(u, dtype=np.uint32).tobytes(), tag(n=n)
        order = np.argsort(_total_order(keys), kind="stable")
        assert L.sort(keys, backend=dask_backend).tobytes() == keys[order].tobytes(), tag(n=n)
        ints = rng.integers(-50, 50, n).astype(np.int32)
        assert L.unique(ints, backend=dask_backend).tobytes() == np.unique(ints).tobytes(), tag(n=n)
        assert L.unique(keys, backend=dask_backend).tobytes() == float_unique_model(bits, "f32").tobytes(), tag(n=n)
        mask = rng.random(n) < 0.5
        assert L.select(keys, mask, backend=dask_backend).tobytes() == keys[mask].tobytes(), tag(n=n)
        if n:
            assert L.min(ints, backend=dask_backend) == ints.min() and L.max(ints, backend=dask_backend) == ints.max()
            k = int(rng.integers(1, n + 1))
            tv, ti = L.top_k(ints, k, backend=dask_backend)
            want = np.argsort(-ints.astype(np.int64), kind="stable")[:k]
            assert ti.tobytes() == want.astype(np.uint32).tobytes() and tv.tobytes() == ints[want].tobytes(), tag(n=n, k=k)


def _total_order(k: np.ndarray) -> np.ndarray:
    b = k.view(np.uint32)
    return np.where(b >> 31 == 1, ~b, b | np.uint32(0x80000000)).astype(np.uint32)
