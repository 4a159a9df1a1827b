"""vyre.lib reductions (S34, S1, S10): sum, min, max over every numeric type (8- and 16-bit
integers included) and the exact f32 dot, on every backend, for random sizes (0, 1, a prime,
2**k±1), random workgroup sizes (tests/lib/props.py) and adversarial floats, against plain
Python/numpy models (tests/lib/models.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from models import adversarial_f32, exact_dot_bits, exact_sum_bits, float_minmax_bits
from props import rng_for, sizes, tag, take_form, workgroup_size

import vyre.lib as L
from vyre.driver import UnsupportedFeature
from vyre.lib import LibError

INT_TYPES = [np.uint32, np.int32, np.uint64, np.int64, np.uint8, np.int8, np.uint16, np.int16]


def _run_or_refused(fn, backend, dtype):
    """wgpu refuses 64-bit integers (UnsupportedFeature): the same error every call."""
    try:
        return fn()
    except UnsupportedFeature:
        assert backend.id() == "wgpu" and np.dtype(dtype).itemsize == 8
        return None


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_integer_sum_min_max_match_numpy(backend, dtype, request):
    """S1: 32- and 64-bit sums wrap in the array's type; 8- and 16-bit ones are numpy's
    (exact, u64/i64); min and max are exact and keep the type. Random sizes (0 included) and
    a random workgroup size."""
    rng = rng_for(request.node.name)
    info = np.iinfo(dtype)
    wg = workgroup_size(rng)
    for n in sizes(rng):
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        if n > 2:
            x[rng.integers(0, n, 2)] = (info.min, info.max)              # the extremes
        ops = (L.sum, L.min, L.max) if n else (L.sum,)
        got = _run_or_refused(lambda: [op(x, backend=backend, workgroup_size=wg) for op in ops], backend, dtype)
        if got is None:
            return
        with np.errstate(over="ignore"):
            want = [np.sum(x) if info.bits < 32 else np.sum(x, dtype=dtype), *((x.min(), x.max()) if n else ())]
        assert [type(g) for g in got] == [type(w) for w in want], tag(n=n, wg=wg)
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want], tag(n=n, wg=wg)


def test_narrow_sums_take_numpys_type_and_never_wrap(reference_backend):
    """np.sum of uint8/uint16 is uint64, of int8/int16 int64 (64-bit Linux): so is vyre's."""
    for dtype, wide in ((np.uint8, np.uint64), (np.uint16, np.uint64), (np.int8, np.int64), (np.int16, np.int64)):
        info = np.iinfo(dtype)
        for v in (info.max, info.min):
            x = np.full(70001, v, dtype)
            got = L.sum(x, backend=reference_backend, workgroup_size=1024)
            assert type(got) is np.dtype(wide).type and got == 70001 * int(v) and np.sum(x) == got


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_float_sum_is_the_exact_sum_rounded_once(backend, fmt, request):
    """S34 over adversarial values: ±0, subnormals (S9 flushes f32/bf16 ones), extremes,
    huge cancellation; random sizes (0 included), one random workgroup size and the default
    one give the same bits."""
    rng = rng_for(request.node.name)
    wgs = [workgroup_size(rng), None]
    for n in sizes(rng):
        bits = adversarial_f32(rng, n, specials=False)
        x, blist = _as_fmt(bits, fmt)
        want = exact_sum_bits(blist, fmt)
        for wg in wgs:
            got = L.sum(x, backend=backend, workgroup_size=wg)
            assert _bits(got, fmt) == want, tag(fmt=fmt, n=n, wg=wg, got=hex(_bits(got, fmt)), want=hex(want))


def _as_fmt(bits32: np.ndarray, fmt: str):
    if fmt == "f32":
        return bits32.view(np.float32), [int(b) for b in bits32]
    if fmt == "f16":
        with np.errstate(over="ignore"):
            h = bits32.view(np.float32).astype(np.float16)
        return h, [int(b) for b in h.view(np.uint16)]
    b16 = (bits32 >> 16).astype(np.uint16)
    try:
        import ml_dtypes

        return b16.view(ml_dtypes.bfloat16), [int(b) for b in b16]
    except ImportError:
        pytest.skip("bfloat16 arrays need ml_dtypes or torch")


def _bits(value, fmt: str) -> int:
    a = np.asarray(value).reshape(1)
    return int(a.view(np.uint32 if fmt == "f32" else np.uint16)[0])


@pytest.mark.parametrize("case,want", [
    ([1e30, 1.0, -1e30], 1.0),                      # huge cancellation
    ([3e38, 3e38, -3e38], 3e38),                    # the intermediate overflows f32; the sum does not
    ([3e38, 3e38], float("inf")),                   # rounds past the largest finite value
    ([1e-45, -1e-45, 0.0], 0.0),                    # subnormals flush (S9); a zero sum is +0
    ([-0.0, -0.0], 0.0),                            # an exact zero is +0 (as math.fsum)
    ([float("inf"), 1.0], float("inf")),
    ([float("inf"), float("-inf")], float("nan")),
    ([float("nan"), float("inf")], float("nan")),
    ([2.0**-125, -(2.0**-125 - 2.0**-149)], 0.0),   # the exact 2**-149 is subnormal: flushed
])
def test_float_sum_specials_and_cancellation(backend, case, want):
    x = np.asarray(case, np.float32)
    got = np.float32(L.sum(x, backend=backend))
    assert got.tobytes() == np.float32(want).tobytes() or (np.isnan(want) and got.view(np.uint32) == 0x7FC00000)


def test_float_sum_equals_math_fsum_rounded_once(backend):
    """Wide exponent range: numpy's pairwise sum differs, math.fsum rounded to f32 does not."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(30001) * np.exp2(rng.integers(-60, 60, 30001))).astype(np.float32)
    got = L.sum(x, backend=backend)
    assert got.tobytes() == np.float32(math.fsum(x.astype(np.float64))).tobytes()
    assert L.sum(rng.permutation(x), backend=backend).tobytes() == got.tobytes()


def test_dot_is_exact(backend, request):
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for n in sizes(rng):
        xb, yb = adversarial_f32(rng, n, specials=False), adversarial_f32(rng, n, specials=False)
        want = exact_dot_bits([int(b) for b in xb], [int(b) for b in yb])
        got = L.dot(xb.view(np.float32), yb.view(np.float32), backend=backend, workgroup_size=wg)
        assert int(np.float32(got).view(np.uint32)) == want, tag(n=n, wg=wg)
    inf0 = L.dot(np.float32([np.inf, 1]), np.float32([0, 1]), backend=backend, workgroup_size=wg)
    assert np.float32(inf0).view(np.uint32) == 0x7FC00000                  # inf * 0 is NaN


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_float_min_max_follow_s10(backend, fmt, request):
    """S10 over adversarial values with infinities and NaNs (every other size: a NaN gives
    NaN, so half the draws have none); random sizes, one random workgroup size."""
    rng = rng_for(request.node.name)
    wg = workgroup_size(rng)
    for k, n in enumerate(s for s in sizes(rng) if s):
        bits = adversarial_f32(rng, n, specials=k % 2 == 1)
        x, blist = _as_fmt(bits, fmt)
        for op, is_min in ((L.min, True), (L.max, False)):
            got = op(x, backend=backend, workgroup_size=wg)
            assert _bits(got, fmt) == float_minmax_bits(blist, fmt, is_min), tag(fmt=fmt, n=n, wg=wg, min=is_min)
    zeros = np.asarray([0.0, -0.0, 0.0], np.float32)
    assert L.min(zeros, backend=backend).tobytes() == np.float32(-0.0).tobytes()
    assert L.max(zeros[::-1].copy(), backend=backend).tobytes() == np.float32(0.0).tobytes()


def test_empty_inputs(reference_backend):
    assert L.sum(np.zeros(0, np.float32), backend=reference_backend).tobytes() == np.float32(0).tobytes()
    assert L.sum(np.zeros(0, np.int64), backend=reference_backend) == 0
    for op in (L.min, L.max):
        with pytest.raises(LibError) as err:
            op(np.zeros(0, np.uint32), backend=reference_backend)
        assert err.value.code == "L003" and "Fix:" in str(err.value)


@pytest.mark.parametrize("bad,code", [
    (np.zeros(4, np.float64), "L001"), (np.zeros(4, np.bool_), "L001"), ([1, 2, 3], "L001"),
    (np.zeros((2, 2), np.float32), "L002"), ("x", "L001"),
])
def test_bad_arguments_are_lib_errors_with_a_fix(reference_backend, bad, code):
    with pytest.raises(LibError) as err:
        L.sum(bad, backend=reference_backend)
    assert err.value.code == code and str(err.value).rstrip().split("Fix:")[1].strip()


def test_dot_refuses_mismatched_vectors(reference_backend):
    with pytest.raises(LibError) as err:
        L.dot(np.zeros(3, np.float32), np.zeros(4, np.float32), backend=reference_backend)
    assert err.value.code == "L002"
    with pytest.raises(LibError) as err:
        L.dot(np.zeros(3, np.uint32), np.zeros(3, np.uint32), backend=reference_backend)
    assert err.value.code == "L001"
    with pytest.raises(LibError) as err:
        L.sum(np.zeros(3, np.float32), backend=reference_backend, workgroup_size=0)
    assert err.value.code == "L005"


@pytest.mark.parametrize("serial", [True, False])
def test_reductions_over_runs_and_strided(backend, monkeypatch, serial):
    """Both shares of a reduction pass give the model's bytes on every backend: grid-strided
    items (GPUs) and each invocation's own run, one invocation a workgroup by default
    (`runner.serial`: PoCL): u32/i32 sums (one pass), min/max and 64-bit sums (two passes),
    narrow sums, the exact f32 sum and the f32 dot; the caller's workgroup size too."""

    take_form(monkeypatch, backend, serial)
    rng = np.random.default_rng(34)
    n = 3001 if backend.id() == "reference" else 20011
    for wg in (None, 5):
        # the caller's size: one type per width class (every type at the default size)
        for dtype in ((np.uint32, np.int32, np.int64, np.uint8, np.int16) if wg is None else (np.int32, np.int64, np.uint8)):
            info = np.iinfo(dtype)
            x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
            got = _run_or_refused(lambda x=x: [op(x, backend=backend, workgroup_size=wg) for op in (L.sum, L.min, L.max)],
                                  backend, dtype)
            if got is None:
                continue
            with np.errstate(over="ignore"):
                want = [np.sum(x) if info.bits < 32 else np.sum(x, dtype=dtype), x.min(), x.max()]
            assert [g.tobytes() for g in got] == [w.tobytes() for w in want], tag(dtype=dtype, wg=wg, serial=serial)
    f = adversarial_f32(rng, n, specials=False).view(np.float32)
    bits = f.view(np.uint32).tolist()
    g = adversarial_f32(rng, 1000, specials=False).view(np.float32)
    for wg in (None, 5):
        assert int(L.sum(f, backend=backend, workgroup_size=wg).view(np.uint32)) == exact_sum_bits(bits, "f32")
    assert int(L.dot(f[:1000], g, backend=backend).view(np.uint32)) == \
        exact_dot_bits(bits[:1000], g.view(np.uint32).tolist())


@pytest.mark.parametrize("wg", [None, 3])
def test_exact_sum_bins_far_past_a_mantissa(backend, monkeypatch, wg):
    """On serial backends an invocation adds each f32's signed mantissa to an i64 bin of its
    exponent and adds the bins to its digits at the end: bins of thousands of maximal
    mantissas of one exponent (either sign, the two cancelling nearly), beside tiny values,
    still give the exact sum rounded once."""

    take_form(monkeypatch, backend, True)
    rng = np.random.default_rng(35)
    n = 3001
    x = np.full(n, np.float32(1.9999999), np.float32)
    x[1::2] = np.float32(-1.9999998)
    x[::97] = (rng.standard_normal(x[::97].size) * 1e-30).astype(np.float32)
    x[5] = np.float32(3e38)
    bits = x.view(np.uint32).tolist()
    got = L.sum(x, backend=backend, workgroup_size=wg)
    assert int(np.float32(got).view(np.uint32)) == exact_sum_bits(bits, "f32")
    assert int(np.float32(L.sum(-x, backend=backend, workgroup_size=wg)).view(np.uint32)) == \
        exact_sum_bits((-x).view(np.uint32).tolist(), "f32")


@pytest.mark.parametrize("fmt", ["f32", "bf16"])
def test_binned_sum_reads_a_run_again_only_for_its_specials(backend, monkeypatch, fmt):
    """On serial backends the bins of exponent 255 say whether an invocation's run holds a
    NaN or an infinity, and only then is the run read again for the flags: a special in one
    run of many (first, middle, last element, the tail past the last whole block), an
    infinity of each sign in different runs, and the adversarial mix with specials all give
    the model's bits."""

    take_form(monkeypatch, backend, True)
    rng = np.random.default_rng(36)
    n = 2003 if backend.id() == "reference" else 20011
    base = adversarial_f32(rng, n, specials=False)
    cases = []
    for at in (0, n // 3, n - 1, n - 2):
        for special in (0x7F800000, 0xFF800000, 0x7FC00001):
            b = base.copy()
            b[at] = special
            cases.append(b)
    both = base.copy()
    both[7], both[n - 5] = 0x7F800000, 0xFF800000
    cases += [both, adversarial_f32(rng, n, specials=True)]
    for k, bits in enumerate(cases):
        x, blist = _as_fmt(bits, fmt)
        want = exact_sum_bits(blist, fmt)
        # the reference interprets every element: the default size only there
        for wg in ((None,) if backend.id() == "reference" else (None, 5)):
            got = L.sum(x, backend=backend, workgroup_size=wg)
            assert _bits(got, fmt) == want, tag(fmt=fmt, case=k, wg=wg, got=hex(_bits(got, fmt)), want=hex(want))


@pytest.mark.parametrize("wg", [None, 3])
def test_binned_sum_is_one_dispatch(backend, monkeypatch, request, wg):
    """On serial backends the binned exact f32 sum runs both passes in one dispatch
    (`vyre.lib.reduce.binned_sum_program`: the workgroups' digits, a grid sync, then their
    total rounded once): one `Runner.run` per call, the model's bits for sizes 0, 1, a prime
    and 2**k +- 1, one workgroup or many, with the flags of specials in any workgroup."""
    from vyre.lib import runner

    take_form(monkeypatch, backend, True)
    calls = []
    real = runner.Runner.run

    def counted(self, *args, **kwargs):
        calls.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(runner.Runner, "run", counted)
    rng = rng_for(request.node.name)
    for n in sizes(rng, 3000):
        for special in (None, 0x7F800000, 0xFF800000, 0x7FC00001):
            bits = adversarial_f32(rng, n, specials=False)
            if special is not None and n:
                bits[int(rng.integers(0, n))] = special
            calls.clear()
            got = L.sum(bits.view(np.float32), backend=backend, workgroup_size=wg)
            assert int(np.float32(got).view(np.uint32)) == exact_sum_bits(bits.tolist(), "f32"), tag(n=n, wg=wg)
            assert len(calls) == (1 if n else 0), tag(n=n, wg=wg)
