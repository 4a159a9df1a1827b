"""vyre.lib.cumsum / exclusive_cumsum: integers wrap (S1) like numpy's cumsum in the array's
type; float prefixes are each the exact prefix sum rounded once (S35), on every backend, for
odd sizes and several workgroup sizes."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from models import adversarial_f32, canonical, round_exact, to_float

import vyre.lib as L
from vyre.driver import UnsupportedFeature

SIZES = [1, 2, 61, 255, 257, 1009, 4097]


def _wgs(backend) -> list[int]:
    if backend.id() == "reference":
        return [int(w) for w in np.random.default_rng(8).integers(1, 100, 2)] + [64]
    return [64, 48]


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint64, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_scans_wrap_like_numpy(backend, dtype):
    rng = np.random.default_rng(20)
    info = np.iinfo(dtype)
    for wg in _wgs(backend)[:2]:
        for n in SIZES + [20000]:
            x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
            with np.errstate(over="ignore"):
                inc = np.cumsum(x, dtype=dtype)
            exc = np.concatenate([np.zeros(1, dtype), inc[:-1]])
            try:
                got_inc = L.cumsum(x, backend=backend, workgroup_size=wg)
                got_exc = L.exclusive_cumsum(x, backend=backend, workgroup_size=wg)
            except UnsupportedFeature:
                assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8
                return
            assert got_inc.dtype == x.dtype and got_inc.tobytes() == inc.tobytes(), (n, wg)
            assert got_exc.tobytes() == exc.tobytes(), (n, wg)


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


@pytest.mark.parametrize("fmt", ["f32", "f16"])
def test_float_prefixes_are_exact_sums_rounded_once(backend, fmt):
    rng = np.random.default_rng(21)
    for n in [1, 61, 509 if backend.id() == "reference" else 1009]:
        bits = adversarial_f32(rng, n, specials=False)
        if fmt == "f32":
            x = bits.view(np.float32)
        else:
            with np.errstate(over="ignore"):
                x = (rng.standard_normal(n) * 100).astype(np.float16)
            bits = x.view(np.uint16)
        blist = [int(b) for b in bits]
        for inclusive, fn in ((True, L.cumsum), (False, L.exclusive_cumsum)):
            want = _prefix_model(blist, fmt, inclusive)
            for wg in _wgs(backend)[: 1 if n > 1000 else 2]:
                got = fn(x, backend=backend, workgroup_size=wg)
                view = got.view(np.uint32 if fmt == "f32" else np.uint16)
                assert [int(v) for v in view] == want, (fmt, n, wg, inclusive)


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
