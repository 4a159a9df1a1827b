"""vyre.lib.bincount and histogram: exact u32 counts equal to numpy's (searchsorted on the
edges, numpy's rule for explicit edges; S9/S11 comparisons), on every backend."""

from __future__ import annotations

import numpy as np
import pytest
from models import canonical
from props import rng_for, sizes, tag, take_form, workgroup_size

import vyre.lib as L
from vyre.driver import UnsupportedFeature
from vyre.lib import LibError


def _edges_model(v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """numpy's explicit-edge rule on values canonicalised as S9 says (subnormals -> ±0)."""
    v = v.astype(np.float32)
    bits = np.array([canonical(int(b), "f32") for b in v.view(np.uint32)], np.uint32).view(np.float32)
    B = edges.size - 1
    idx = np.searchsorted(edges, bits, side="right") - 1
    idx[bits == edges[-1]] = B - 1
    ok = (bits >= edges[0]) & (bits <= edges[-1])
    return np.bincount(idx[ok], minlength=B).astype(np.uint32)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("bins", [1, 256, 257, 5000])
def test_bincount_matches_numpy(backend, dtype, bins, request):
    """Random sizes (0 included, and one past 20000), one random workgroup size."""
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng) + [int(rng.integers(20000, 21000))]:
        x = rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, bins + 3, n).astype(dtype)
        want = np.bincount(x[(x >= 0) & (x < bins)].astype(np.int64), minlength=bins).astype(np.uint32)
        try:
            got = L.bincount(x, bins, backend=backend, workgroup_size=wg)
        except UnsupportedFeature:
            assert backend.id() == "wgpu" and dtype is np.int64
            return
        assert got.dtype == np.uint32 and got.tobytes() == want.tobytes(), tag(n=n, bins=bins, wg=wg)


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_histogram_with_edges_matches_numpy(backend, fmt):
    ml_dtypes = pytest.importorskip("ml_dtypes")

    rng = np.random.default_rng(30)
    edges = np.sort(rng.standard_normal(18).astype(np.float32))
    edges[3] = edges[4]                                  # an empty bin between equal edges
    x = rng.standard_normal(20011).astype(np.float32)
    x[:3] = [edges[0], edges[-1], np.nan]
    cast = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[fmt]
    xv = x.astype(cast)
    got = L.histogram(xv, edges, backend=backend)
    assert got.tobytes() == _edges_model(xv, edges).tobytes()


def test_every_f16_value_lands_in_its_bin(backend):
    """All 65536 f16 bit patterns (subnormals, infinities, NaNs) against edges at subnormal,
    normal and extreme values: the integer f16 -> f32 conversion is exact."""
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    edges = np.float32([-65504, -1, -6.1e-5, -1e-7, 0, 3e-8, 6.1e-5, 1, 2, 65504])
    assert L.histogram(x, edges, backend=backend).tobytes() == _edges_model(x, edges).tobytes()


def test_histogram_refuses_bad_edges(reference_backend):
    for edges, code in ((np.float32([1.0]), "L002"), (np.float32([1, 0]), "L004"),
                        (np.float32([0, np.nan]), "L004"), (np.float64([0, 1]), "L001")):
        with pytest.raises(LibError) as err:
            L.histogram(np.zeros(3, np.float32), edges, backend=reference_backend)
        assert err.value.code == code
    with pytest.raises(LibError) as err:
        L.bincount(np.zeros(3, np.uint32), 0, backend=reference_backend)
    assert err.value.code == "L005"
    assert L.bincount(np.zeros(0, np.uint32), 4, backend=reference_backend).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("serial", [True, False])
def test_counts_in_shared_bins_and_in_rows(backend, monkeypatch, serial):
    """Both forms of the counting pass give numpy's counts on every backend: workgroup bins
    shared through atomics (GPUs) and each invocation's own row of plain counters over its own
    run (`runner.serial`: PoCL), one invocation a workgroup by default or the caller's size
    (shrunk until the rows fit workgroup memory)."""

    take_form(monkeypatch, backend, serial)
    rng = np.random.default_rng(31)
    x = rng.integers(-2, 300, 30011).astype(np.int32)
    for bins, wg in ((256, None), (256, 64), (2048, 16), (1, 3)):
        want = np.bincount(x[(x >= 0) & (x < bins)], minlength=bins).astype(np.uint32)
        got = L.bincount(x, bins, backend=backend, workgroup_size=wg)
        assert got.tobytes() == want.tobytes(), tag(bins=bins, wg=wg, serial=serial)
    edges = np.float32([-1, 0, 0.5, 2])
    f = rng.standard_normal(20011).astype(np.float32)
    assert L.histogram(f, edges, backend=backend).tobytes() == _edges_model(f, edges).tobytes()
