"""vyre.lib.cumsum / exclusive_cumsum: integers wrap (S1) like numpy's cumsum in the array's
type; float prefixes (f32, f16, bf16) are each the exact prefix sum rounded once (S35), on
every backend, for random sizes (0, 1, a prime, 2**k±1) and random workgroup sizes
(tests/lib/props.py)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from models import adversarial_f32, canonical, round_exact, to_float
from props import rng_for, sizes, tag, take_form, workgroup_size

import vyre.lib as L
from vyre.driver import UnsupportedFeature


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint64, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_scans_wrap_like_numpy(backend, dtype, request):
    rng = rng_for(request.node.name)
    info = np.iinfo(dtype)
    wg = workgroup_size(rng)
    for n in sizes(rng, 20000):
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        with np.errstate(over="ignore"):
            inc = np.cumsum(x, dtype=dtype)
        exc = np.concatenate([np.zeros(min(n, 1), dtype), inc[:-1]])
        try:
            got_inc = L.cumsum(x, backend=backend, workgroup_size=wg)
            got_exc = L.exclusive_cumsum(x, backend=backend, workgroup_size=wg)
        except UnsupportedFeature:
            assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8
            return
        assert got_inc.dtype == x.dtype and got_inc.tobytes() == inc.tobytes(), tag(n=n, wg=wg)
        assert got_exc.dtype == x.dtype and got_exc.tobytes() == exc.tobytes(), tag(n=n, wg=wg)


def _prefix_model(bits: list[int], fmt: str, inclusive: bool) -> list[int]:
    out, acc, specials = [], Fraction(0), []
    nan = {"f32": 0x7FC00000, "f16": 0x7E00, "bf16": 0x7FC0}[fmt]
    for b in bits:
        if not inclusive:
            out.append(_with_specials(acc, specials, fmt, nan))
        v = to_float(canonical(b, fmt), fmt)
        if np.isnan(v) or np.isinf(v):
            specials.append(v)
        else:
            acc += Fraction(v)
        if inclusive:
            out.append(_with_specials(acc, specials, fmt, nan))
    return out


def _with_specials(acc: Fraction, specials: list[float], fmt: str, nan: int) -> int:
    from models import exact_sum_bits

    if not specials:
        return round_exact(acc, fmt)
    inf = {"f32": 0x7F800000, "f16": 0x7C00, "bf16": 0x7F80}
    if any(np.isnan(s) for s in specials):
        return nan
    return exact_sum_bits([inf[fmt] | (0 if s > 0 else (0x80000000 if fmt == "f32" else 0x8000))
                           for s in specials], fmt)


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_float_prefixes_are_exact_sums_rounded_once(backend, fmt, request):
    """S35 over adversarial values (±0, subnormals, extremes, huge cancellation; f16: the
    values that fit it), random sizes (0 included) and a random workgroup size."""
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng, 600 if backend.id() == "reference" else 2100):
        bits = adversarial_f32(rng, n, specials=False)
        if fmt == "f32":
            x = bits.view(np.float32)
        elif fmt == "f16":
            with np.errstate(over="ignore"):
                x = (rng.standard_normal(n) * 100).astype(np.float16)
            x[rng.integers(0, max(n, 1), min(n, 3))] = [np.float16(6e-8), np.float16(-0.0), np.float16(65504)][:min(n, 3)]
            bits = x.view(np.uint16)
        else:
            bits = (bits >> 16).astype(np.uint16)
            x = _bf16(bits)
        blist = [int(b) for b in bits]
        for inclusive, fn in ((True, L.cumsum), (False, L.exclusive_cumsum)):
            want = _prefix_model(blist, fmt, inclusive)
            got = fn(x, backend=backend, workgroup_size=wg)
            view = got.view(np.uint32 if fmt == "f32" else np.uint16)
            assert got.dtype == x.dtype and [int(v) for v in view] == want, tag(fmt=fmt, n=n, wg=wg, inclusive=inclusive)


def _bf16(bits: np.ndarray):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return bits.view(ml_dtypes.bfloat16)


def test_float_prefix_specials(backend):
    x = np.float32([1, np.inf, 2, -np.inf, 3])
    got = L.cumsum(x, backend=backend).view(np.uint32)
    assert [hex(v) for v in got] == ["0x3f800000", "0x7f800000", "0x7f800000", "0x7fc00000", "0x7fc00000"]


def test_empty_scans(reference_backend):
    assert L.cumsum(np.zeros(0, np.uint32), backend=reference_backend).size == 0
    assert L.exclusive_cumsum(np.zeros(0, np.float32), backend=reference_backend).dtype == np.float32


@pytest.mark.parametrize("staged", [True, False])
def test_integer_scan_through_the_tile_and_directly(backend, monkeypatch, staged):
    """Both forms of the scan pass give numpy's bytes on every backend: tiles through
    workgroup memory (what CUDA runs) and each invocation's run read directly (CPUs), over
    several tiles per workgroup and a scan of the chunk totals."""
    from vyre.lib import runner

    monkeypatch.setattr(runner, "STAGED", frozenset({backend.id()} if staged else ()))
    rng = np.random.default_rng(23)
    x = rng.integers(0, 2**32, 30011, dtype=np.uint64).astype(np.uint32)
    want = np.cumsum(x, dtype=np.uint32)
    assert L.cumsum(x, backend=backend, workgroup_size=16).tobytes() == want.tobytes()
    assert L.exclusive_cumsum(x, backend=backend).tobytes() == np.concatenate([[0], want[:-1]]).astype(np.uint32).tobytes()


@pytest.mark.parametrize("serial", [True, False])
def test_integer_scan_by_runs(backend, monkeypatch, serial):
    """The serial form (`runner.serial`: PoCL; each invocation sums, then scans, its own run)
    and the tiled one give numpy's bytes on every backend: one run, many runs whose totals are
    scanned the same way, the caller's workgroup size, 64-bit integers."""

    take_form(monkeypatch, backend, serial)
    rng = np.random.default_rng(24)
    for n, wg, dtype in ((200, None, np.uint32), (30011, None, np.int32), (30011, 7, np.uint32), (5003, None, np.int64)):
        x = rng.integers(-2**31, 2**31, n).astype(dtype)
        want = np.cumsum(x, dtype=dtype)
        assert L.cumsum(x, backend=backend, workgroup_size=wg).tobytes() == want.tobytes(), (n, wg, dtype)
        excl = np.concatenate([[0], want[:-1]]).astype(dtype)
        assert L.exclusive_cumsum(x, backend=backend, workgroup_size=wg).tobytes() == excl.tobytes(), (n, wg, dtype)


@pytest.mark.parametrize("groups", [1024, 5])
def test_integer_scan_chunks_add_the_totals_before_them(backend, monkeypatch, groups):
    """Each workgroup of the scan pass starts from the sum of the chunk totals before its own
    (`scan.SCAN_GROUPS` chunks at most): 313 chunks of one 128-element tile (the last workgroup
    adds 312 totals, 39 rounds of its 8 invocations), or 5 chunks of 63 tiles each."""
    from vyre.lib import runner, scan

    take_form(monkeypatch, backend, False)
    monkeypatch.setitem(runner._CHUNK_GROUPS, backend.id(), 1 << 24)
    monkeypatch.setattr(scan, "SCAN_GROUPS", groups)
    rng = np.random.default_rng(25)
    x = rng.integers(0, 2**32, 40000, dtype=np.uint64).astype(np.uint32)
    want = np.cumsum(x, dtype=np.uint32)
    assert L.cumsum(x, backend=backend, workgroup_size=8).tobytes() == want.tobytes()
    assert L.exclusive_cumsum(x, backend=backend, workgroup_size=8).tobytes() == \
        np.concatenate([[0], want[:-1]]).astype(np.uint32).tobytes()
