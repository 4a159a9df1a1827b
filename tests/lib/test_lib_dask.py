"""vyre.lib on the dask backend (a real two-worker LocalCluster): a few primitives give the
bytes they give everywhere else (each pass runs whole on one worker: the library's passes use
workgroup memory and atomics)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

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
