"""vyre.lib.index_add and gather (S34 per slot; S1 for integers): the same bytes as a
math.fsum / numpy model on every backend, whatever the order of the contributions."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from models import adversarial_f32, exact_sum_bits
from props import rng_for, sizes, tag, take_form, workgroup_size

import vyre.lib as L
from vyre.driver import UnsupportedFeature
from vyre.lib import LibError


def _fsum_slots(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> np.ndarray:
    """math.fsum of each slot's initial value and contributions, rounded once to f32."""
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(target.size + 1))
    vals = values[order].astype(np.float64)
    return np.array([math.fsum([float(target[s]), *vals[bounds[s]:bounds[s + 1]]])
                     for s in range(target.size)], np.float32)


def test_float_index_add_is_exact_per_slot_and_order_independent(backend, request):
    """Random sizes (0 contributions included) into a random number of slots, adversarial
    values, one random workgroup size; a permutation of the contributions gives the same
    bytes."""
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng, 4100):
        slots = int(rng.integers(1, 300))
        bits = adversarial_f32(rng, n, specials=False)
        tbits = adversarial_f32(rng, slots, specials=False)
        index = rng.integers(0, slots, n).astype(np.int64)
        want = np.array([exact_sum_bits([int(tbits[s]), *(int(b) for b in bits[index == s])], "f32")
                         for s in range(slots)], np.uint32)
        got = L.index_add(tbits.view(np.float32), index, bits.view(np.float32), backend=backend, workgroup_size=wg)
        assert got.dtype == np.float32 and got.view(np.uint32).tobytes() == want.tobytes(), tag(n=n, slots=slots, wg=wg)
        p = rng.permutation(n)
        again = L.index_add(tbits.view(np.float32), index[p], bits[p].view(np.float32), backend=backend,
                            workgroup_size=wg)
        assert again.tobytes() == got.tobytes(), tag(n=n, slots=slots, wg=wg)


def test_index_add_specials_per_slot(backend):
    target = np.float32([0, 0, 1, -0.0])
    index = np.uint32([0, 0, 1, 1, 2, 2, 3])
    values = np.float32([np.inf, 1, np.inf, -np.inf, np.nan, 5, -0.0])
    got = L.index_add(target, index, values, backend=backend).view(np.uint32)
    assert [hex(v) for v in got] == ["0x7f800000", "0x7fc00000", "0x7fc00000", "0x0"]


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_half_index_add_rounds_once_to_the_half_type(backend, fmt):
    ml_dtypes = pytest.importorskip("ml_dtypes")

    rng = np.random.default_rng(9)
    n, slots = 300, 7
    x = rng.standard_normal(n).astype(np.float32)
    t = rng.standard_normal(slots).astype(np.float32)
    cast = np.float16 if fmt == "f16" else ml_dtypes.bfloat16
    xv, tv = x.astype(cast), t.astype(cast)
    index = rng.integers(0, slots, n).astype(np.uint32)
    xb, tb = xv.view(np.uint16), tv.view(np.uint16)
    want = [exact_sum_bits([int(tb[s]), *(int(b) for b in xb[index == s])], fmt) for s in range(slots)]
    got = L.index_add(tv, index, xv, backend=backend)
    assert got.dtype == tv.dtype and [int(b) for b in got.view(np.uint16)] == want


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int64])
def test_integer_index_add_wraps(backend, dtype):
    rng = np.random.default_rng(10)
    info = np.iinfo(dtype)
    t = rng.integers(info.min, info.max, 61, dtype=dtype)
    v = rng.integers(info.min, info.max, 1009, dtype=dtype)
    index = rng.integers(0, 61, 1009).astype(np.uint32)
    want = t.copy()
    with np.errstate(over="ignore"):
        np.add.at(want, index, v)
    try:
        got = L.index_add(t, index, v, backend=backend)
    except UnsupportedFeature:
        assert backend.id() == "wgpu" and dtype is np.int64
        return
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32, np.float16, np.uint64])
def test_gather_matches_numpy_indexing(backend, dtype, request):
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng, 2100):
        x = rng.integers(0, 1000, int(rng.integers(1, 300))).astype(dtype)
        index = rng.integers(0, x.size, n).astype(np.int64)
        try:
            got = L.gather(x, index, backend=backend, workgroup_size=wg)
        except UnsupportedFeature:
            assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8
            return
        assert got.dtype == x.dtype and got.tobytes() == x[index].tobytes(), tag(n=n, wg=wg)


def test_out_of_range_indices_are_refused(reference_backend):
    for bad in (np.array([0, 5], np.int64), np.array([-1], np.int32), np.array([7], np.uint32)):
        with pytest.raises(LibError) as err:
            L.index_add(np.zeros(5, np.float32), bad, np.ones(bad.size, np.float32), backend=reference_backend)
        assert err.value.code == "L004"
        with pytest.raises(LibError) as err:
            L.gather(np.zeros(5, np.float32), bad, backend=reference_backend)
        assert err.value.code == "L004"
    with pytest.raises(LibError) as err:
        L.index_add(np.zeros(5, np.float32), np.zeros(3, np.uint32), np.ones(3, np.int32), backend=reference_backend)
    assert err.value.code == "L001"
    with pytest.raises(LibError) as err:
        L.index_add(np.zeros(5, np.float32), np.zeros(3, np.uint32), np.ones(4, np.float32), backend=reference_backend)
    assert err.value.code == "L002"
    same = L.index_add(np.arange(3, dtype=np.float32), np.zeros(0, np.uint32), np.zeros(0, np.float32),
                       backend=reference_backend)
    assert same.tobytes() == np.arange(3, dtype=np.float32).tobytes()


def _fastest_local() -> str:
    from conftest import get_backend

    for name in ("opencl", "wgpu", "reference"):
        try:
            get_backend(name)
            return name
        except pytest.skip.Exception:
            continue
    return "reference"


def test_a_million_contributions_into_a_thousand_slots_give_identical_bytes():
    """The float-atomics test: 1M contributions into 1K slots, shuffled between runs: identical
    bytes, equal to math.fsum of each slot rounded once (the 1M case on the fastest local
    backend; the others run a 20K case)."""
    from conftest import get_backend

    rng = np.random.default_rng(12)
    fast = _fastest_local()
    for name in ("reference", "opencl", "wgpu"):
        try:
            b = get_backend(name)
        except pytest.skip.Exception:
            continue
        n = 1 << 20 if name == fast else 20000
        n = int(os.environ.get("VYRE_LIB_SCATTER_N", n)) if name == fast else n
        values = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
        index = rng.integers(0, 1000, n).astype(np.uint32)
        target = np.zeros(1000, np.float32)
        first = L.index_add(target, index, values, backend=b)
        p = rng.permutation(n)
        second = L.index_add(target, index[p], values[p], backend=b)
        assert first.tobytes() == second.tobytes(), name
        assert first.tobytes() == _fsum_slots(target, index, values).tobytes(), name


@pytest.mark.parametrize("serial", [False, True])
@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_64bit_atomic_path_gives_the_u32_paths_bytes(backend, monkeypatch, fmt, serial):
    """Where 64-bit atomics run, a float contribution is one 64-bit atomic (signed words, no
    carries: vyre.lib.scatter.WIDE_MAX); the bytes are those of the u32 chunk path, which
    backends without 64-bit atomics take (and calls with more than WIDE_MAX values). On
    serial backends (``serial``: forced here on every backend) the 64-bit words take plain
    adds from the invocation that owns the slot's range (fewer slots than ranges too)."""
    from vyre.lib import scatter

    take_form(monkeypatch, backend, serial)
    rng = np.random.default_rng(77)
    n = 3001
    for slots in (37, 3):
        bits = adversarial_f32(rng, n, specials=True)
        tbits = adversarial_f32(rng, slots, specials=True)
        values, target = bits.view(np.float32), tbits.view(np.float32)
        if fmt != "f32":
            cast = np.float16 if fmt == "f16" else pytest.importorskip("ml_dtypes").bfloat16
            with np.errstate(over="ignore", invalid="ignore"):
                values, target = values.astype(cast), target.astype(cast)
        index = rng.integers(0, slots, n).astype(np.uint32)
        monkeypatch.setattr(scatter, "WIDE_MAX", 1 << 24)
        first = L.index_add(target, index, values, backend=backend)
        monkeypatch.setattr(scatter, "WIDE_MAX", 0)
        assert L.index_add(target, index, values, backend=backend).tobytes() == first.tobytes(), slots


def _window_friendly_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    """f32 bits whose non-zero finite values lie within 2**17 of each other (one slot's
    terms fit a `vyre.lib.window` window, whatever their order), mixed with ±0, subnormals (zeros, S9), infinities,
    NaNs and exact cancelling pairs."""
    base = (rng.uniform(1, 2, n) * np.exp2(rng.integers(-8, 9, n))).astype(np.float32).view(np.uint32)
    pool = [base, base ^ np.uint32(0x80000000),                       # x and -x: huge cancellation
            np.zeros(n, np.uint32), np.full(n, 0x80000000, np.uint32),
            rng.integers(1, 0x800000, n).astype(np.uint32),           # subnormals
            np.full(n, 0x7F800000, np.uint32), np.full(n, 0xFF800000, np.uint32), np.full(n, 0x7FC00001, np.uint32)]
    weights = np.array([40, 20, 4, 4, 4, 1, 1, 1], float)
    pick = rng.choice(len(pool), n, p=weights / weights.sum())
    return np.choose(pick, pool).astype(np.uint32)


def _skip_without_window(backend, slots: int) -> None:
    """Skips a backend that refuses the window program for ``slots`` slots (its workgroup
    memory: CUDA's 48 KiB holds about 2,700 windows a range)."""
    from vyre.ir import DataType
    from vyre.lib import scatter, window
    from vyre.lib.runner import Runner

    cap = window.capacity(-(-slots // scatter.SERIAL_RANGES))
    for index_t in (DataType.U32, DataType.I32):
        if not scatter._runs_window(Runner(backend).backend, index_t, cap):
            pytest.skip(f"{backend.id()} refuses the window program for {slots} slots")


def _no_fallback(monkeypatch, backend, slots: int = 1024) -> None:
    """Makes every index_add path but `vyre.lib.window`'s fail (`_skip_without_window`)."""
    from vyre.lib import scatter

    _skip_without_window(backend, slots)

    def refuse(*args, **kwargs):
        raise AssertionError("the window path spilled or was not taken")

    for name in ("serial_wide_scatter_program", "wide_scatter_program", "scatter_program"):
        monkeypatch.setattr(scatter, name, refuse)


def test_window_path_is_exact_on_serial_backends(backend, monkeypatch, request):
    """The serial f32 index_add (`vyre.lib.window`: one i64 window per slot in workgroup
    memory, rounded by the i64 -> f32 conversion) gives math.fsum's bytes per slot, without
    falling back, for sizes 0, 1, a prime and 2**k +- 1 of contributions and of slots
    (more slots than ranges, fewer, a power of two), ±0, subnormals, specials and exact
    cancellation; the order changes nothing."""
    take_form(monkeypatch, backend, True)
    _no_fallback(monkeypatch, backend)
    rng = rng_for(request.node.name)
    for n in sizes(rng, 3000):
        for slots in (1, 2, 3, 64, 65, int(rng.integers(4, 600))):
            bits = _window_friendly_f32(rng, n)
            tbits = _window_friendly_f32(rng, slots)
            index = rng.integers(0, slots, n).astype(np.uint32)
            want = np.array([exact_sum_bits([int(tbits[s]), *(int(b) for b in bits[index == s])], "f32")
                             for s in range(slots)], np.uint32)
            got = L.index_add(tbits.view(np.float32), index, bits.view(np.float32), backend=backend)
            assert got.view(np.uint32).tobytes() == want.tobytes(), tag(n=n, slots=slots)
            p = rng.permutation(n)
            again = L.index_add(tbits.view(np.float32), index[p].astype(np.int32), bits[p].view(np.float32),
                                backend=backend)
            assert again.tobytes() == got.tobytes(), tag(n=n, slots=slots)


def test_window_rounding_at_the_edges(backend, monkeypatch):
    """Slot totals that round to the largest f32, land exactly on 2**-126, fall below it
    (subnormal: a zero of the total's sign, S9), cancel to +0, and windows that moved down
    and up (the first term far from the others), all without a spill; then totals that
    overflow to ±inf (beyond a window: they spill to the 16-word path)."""
    take_form(monkeypatch, backend, True)
    mx, tiny = 3.4028234663852886e38, 2.0**-126
    exact = [
        [mx, -mx * 2**-24, mx * 2**-25],             # rounds back to the largest f32
        [3 * tiny, -2 * tiny],                        # exactly 2**-126
        [1.5 * tiny, -tiny],                          # 2**-127: a subnormal, +0
        [-1.5 * tiny, tiny],                          # -2**-127: -0
        [1.0, -1.0, 2.0**-20, -(2.0**-20)],           # +0
        [2.0**-30, 1.0, 2.0**-30 * 3],                # a window below the first term
        [2.0**-10, 2.0**20, -(2.0**-11)],             # a window above the first term
        [1.0 + 2.0**-23, 2.0**-24, 2.0**-36],         # a tie broken by a far term
        [1.5 * tiny, -0.5 * tiny],                    # a subnormal term counts as zero (S9)
        [3.0, 2.0**-22, -(2.0**-22)],
    ]
    overflow = [[mx, mx * 2**-24], [-mx, -mx]]       # +inf (a tie to even), -inf

    def check(cases: list[list[float]]) -> list[str]:
        index = np.array([s for s, c in enumerate(cases) for _ in c], np.uint32)
        values = np.array([x for c in cases for x in c], np.float64).astype(np.float32)
        bits = values.view(np.uint32)
        want = [hex(exact_sum_bits([0, *(int(b) for b in bits[index == s])], "f32")) for s in range(len(cases))]
        got = L.index_add(np.zeros(len(cases), np.float32), index, values, backend=backend)
        assert [hex(b) for b in got.view(np.uint32)] == want
        return want

    assert check(overflow) == ["0x7f800000", "0xff800000"]
    _no_fallback(monkeypatch, backend)
    assert check(exact)[:4] == ["0x7f7fffff", "0x800000", "0x0", "0x80000000"]


def test_window_spill_falls_back(backend, monkeypatch):
    """Terms of one slot further apart than a window holds (here 2**100 and 2**-100) spill:
    the window program says so, and index_add gives the 16-word path's exact bytes."""
    from vyre.ir import DataType
    from vyre.lib import window
    from vyre.lib.runner import Runner, params

    take_form(monkeypatch, backend, True)
    _skip_without_window(backend, 2)
    values = np.float32([2.0**100, 2.0**-100, 1.0, -(2.0**100)])
    index = np.uint32([0, 0, 1, 0])
    target = np.float32([0, 5])
    r = Runner(backend)
    prog = window.window_scatter_program(DataType.U32, window.capacity(1))
    _, flag = r.run(prog, [values, index, params(1, window.first_window(values), 0, 2), target], 2, 2, keep=False)
    assert int(flag[0]) & window.SPILL
    got = L.index_add(target, index, values, backend=backend)
    assert got.view(np.uint32).tolist() == [exact_sum_bits([0, *values[[0, 1, 3]].view(np.uint32).tolist()], "f32"),
                                            0x40C00000]
