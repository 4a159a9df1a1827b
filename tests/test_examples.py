"""The real programs of `vyre.examples`, byte-identical on every backend to the reference and
equal to what libraries nobody here wrote compute (hashlib, numpy)."""

from __future__ import annotations

import numpy as np

from vyre import examples as X
from vyre.driver import DispatchConfig

from helpers import run_checked


def test_sha256_matches_hashlib(backend):
    msgs = X.random_messages(300, seed=1) + [b"", b"abc", b"a" * 55]
    out = run_checked(backend, X.sha256_blocks(), [X.pad_messages(msgs)], X.sha256_config(len(msgs)))
    assert np.array_equal(np.frombuffer(out[0], np.uint32), X.digests_expected(msgs))


def test_matmul_tiled_matches_float64_within_rounding(backend):
    n = 64
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, n, n)).astype(np.float32)
    out = run_checked(backend, X.matmul_tiled(n), [a.ravel(), b.ravel()],
                      DispatchConfig(grid_override=X.matmul_grid(n)))
    c = np.frombuffer(out[0], np.float32).reshape(n, n)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


def test_histogram_matches_bincount(backend):
    data = np.random.default_rng(3).integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32)
    out = run_checked(backend, X.histogram_privatised(), [data],
                      DispatchConfig(grid_override=X.histogram_grid(data.size)))
    assert np.array_equal(np.frombuffer(out[0], np.uint32), X.histogram_expected(data))


def test_workgroup_scan_matches_cumsum(backend):
    data = np.random.default_rng(4).integers(0, 2**32, 256 * 9 + 17, dtype=np.uint64).astype(np.uint32)
    out = run_checked(backend, X.scan_workgroup(), [data])
    assert np.array_equal(np.frombuffer(out[0], np.uint32), X.scan_expected(data))


def test_workgroup_bitonic_sort_matches_numpy_sort(backend):
    data = np.random.default_rng(5).integers(0, 2**32, 128 * 6, dtype=np.uint64).astype(np.uint32)
    out = run_checked(backend, X.bitonic_sort_workgroup(128), [data])
    assert np.array_equal(np.frombuffer(out[0], np.uint32), X.bitonic_expected(data, 128))
