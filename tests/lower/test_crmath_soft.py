"""vyre.lower.crmath.soft: the software float64, 64-bit integer and f32-comparison helpers the
WGSL print of vyre's math runs on. Each helper, printed as host C (gcc) and as WGSL (wgpu on
lavapipe), gives the bits of numpy's float64 / integer arithmetic or Python integers on edge
cases (zeros, subnormals, the overflow threshold, infinities, NaNs, carries, ties) and random
operands: 2^18 per helper through C, 2^14 through WGSL (scripts/crmath_soft_check.py runs
millions). NaN results are compared as NaN (payloads are not propagated)."""

from __future__ import annotations

import numpy as np
import pytest
from crmath_soft_cases import EDGES64, HostC, f64_pairs, f64_values, u64_values, wgsl

from vyre.lower.crmath import soft

N_C, N_WGSL = 1 << 18, 1 << 14


@pytest.fixture(scope="module")
def host():
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this machine")
    return HostC()


def _as_bits(v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(v).view(np.uint64)


def _f64_result(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-equal float64 results (any NaN matches any NaN)."""
    g, w = got.view(np.float64), want.view(np.float64)
    bad = ~((got == want) | (np.isnan(g) & np.isnan(w)))
    assert not bad.any(), [(hex(int(x)), hex(int(y))) for x, y in zip(got[bad][:5], want[bad][:5])]


def _binary_f64(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = a.view(np.float64), b.view(np.float64)
    with np.errstate(all="ignore"):
        r = {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y}[op]
    return _as_bits(r)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_float64_arithmetic_is_ieee(host, op):
    fn = getattr(soft, f"vyd_{op}")
    a, b = f64_pairs(N_C, 1 + len(op))
    _f64_result(host(fn, a, b), _binary_f64(op, a, b))
    a, b = f64_pairs(N_WGSL, 5 + len(op))
    _f64_result(wgsl(fn, a, b), _binary_f64(op, a, b))


def test_float64_mul_add_rounds_twice(host):
    """vyd_mul_add (WGSL's dsl.fma) is the product rounded, then the sum rounded: unfused."""
    for n, seed, run in ((N_C, 21, host), (N_WGSL, 22, wgsl)):
        a, b = f64_pairs(n, seed)
        c = np.random.default_rng(seed).permutation(a)
        want = _binary_f64("add", _binary_f64("mul", a, b), c)
        _f64_result(run(soft.vyd_mul_add, a, b, c), want)


def test_float64_sqrt_is_ieee(host):
    rng = np.random.default_rng(3)
    squares = (rng.integers(1, 1 << 26, 4096).astype(np.float64) ** 2).view(np.uint64)
    for n, run in ((N_C, lambda a: host(soft.vyd_sqrt, a)), (N_WGSL, lambda a: wgsl(soft.vyd_sqrt, a))):
        a = np.concatenate([EDGES64, squares, f64_values(n, rng)])
        with np.errstate(all="ignore"):
            want = _as_bits(np.sqrt(a.view(np.float64)))
        _f64_result(run(a), want)


def test_float64_negation_flips_the_sign(host):
    a = f64_values(4096, np.random.default_rng(4))
    assert np.array_equal(host(soft.vyd_neg, a), a ^ np.uint64(1 << 63))


@pytest.mark.parametrize("op", ["lt", "le", "eq"])
def test_float64_comparisons_are_ieee(host, op):
    a, b = f64_pairs(N_C // 4, 11)
    b[::3] = a[::3]                              # equal operands
    b[1::7] = a[1::7] ^ np.uint64(1 << 63)       # opposite signs (and -0 / +0)
    x, y = a.view(np.float64), b.view(np.float64)
    with np.errstate(all="ignore"):
        want = {"lt": x < y, "le": x <= y, "eq": x == y}[op].astype(np.uint64)
    fn = getattr(soft, f"vyd_{op}")
    assert np.array_equal(host(fn, a, b), want)
    assert np.array_equal(wgsl(fn, a[:N_WGSL], b[:N_WGSL]), want[:N_WGSL])


def _f32_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    edges = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
                      0x7FC00000, 0x7F800001, 0x3F800000, 0xBF800000], np.uint32)
    return np.concatenate([edges, rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)])


def test_f32_to_float64_is_exact(host):
    x = _f32_bits(np.random.default_rng(5), N_C)
    with np.errstate(invalid="ignore"):
        want = _as_bits(x.view(np.float32).astype(np.float64))
    _f64_result(host(soft.vyd_from_f32, x.astype(np.uint64)), want)
    _f64_result(wgsl(soft.vyd_from_f32, x[:N_WGSL].astype(np.uint64)), want[:N_WGSL])


def test_float64_to_f32_rounds_to_nearest_even(host):
    rng = np.random.default_rng(6)
    a = f64_values(N_C, rng)
    # values just around f32 midpoints, the f32 subnormal range and the overflow threshold
    with np.errstate(invalid="ignore"):
        f = rng.integers(0, 1 << 32, N_C // 4, dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)
    mid = (f.view(np.uint64) + np.uint64(1 << 28) + rng.integers(-2, 3, f.size).astype(np.uint64))
    a = np.concatenate([EDGES64, a, mid, _as_bits(np.float64(2.0 ** -150) * rng.uniform(0.4, 3, 4096)),
                        np.array([0x47EFFFFFF0000000, 0x47EFFFFFEFFFFFFF, 0x36A0000000000000], np.uint64)])
    with np.errstate(all="ignore"):
        want = a.view(np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(a.view(np.float64))
    got = host(soft.vyd_to_f32, a)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all((got[nan] & np.uint64(0x7FFFFFFF)) > 0x7F800000)
    got = wgsl(soft.vyd_to_f32, a[:N_WGSL])
    assert np.array_equal(got[~nan[:N_WGSL]], want[:N_WGSL][~nan[:N_WGSL]])


def test_integers_to_float64(host):
    rng = np.random.default_rng(7)
    i = np.concatenate([np.array([0, 1, -1, 2**31 - 1, -2**31], np.int64),
                        rng.integers(-2**31, 2**31, N_C)]).astype(np.int32)
    want = _as_bits(i.astype(np.float64))
    assert np.array_equal(host(soft.vyd_from_i32, i.view(np.uint32).astype(np.uint64)), want)
    assert np.array_equal(host(soft.vyd_from_u32, i.view(np.uint32).astype(np.uint64)),
                          _as_bits(i.view(np.uint32).astype(np.float64)))
    u = u64_values(N_C, rng)
    want64 = np.array([float(int(v)).hex() for v in u[:4096]])   # Python rounds ints to nearest even
    got = host(soft.vyd_from_u64, u)
    assert np.array_equal(np.array([float(v).hex() for v in got[:4096].view(np.float64)]), want64)
    assert np.array_equal(got, _as_bits(u.astype(np.float64)))
    assert np.array_equal(wgsl(soft.vyd_from_u64, u[:N_WGSL]), _as_bits(u[:N_WGSL].astype(np.float64)))
    assert np.array_equal(wgsl(soft.vyd_from_i32, i[:N_WGSL].view(np.uint32).astype(np.uint64)), want[:N_WGSL])


def test_float64_to_i32_truncates(host):
    rng = np.random.default_rng(8)
    x = np.concatenate([np.array([0.0, -0.0, 0.5, -0.999, 1.0, -1.0, 2**31 - 0.5, -2**31, 95.99, 1e-300]),
                        rng.uniform(-2**31 + 1, 2**31 - 1, N_C), rng.uniform(-200, 200, N_C)])
    want = np.trunc(x).astype(np.int64).astype(np.int32).view(np.uint32).astype(np.uint64)
    assert np.array_equal(host(soft.vyd_to_i32, _as_bits(x)), want)
    assert np.array_equal(wgsl(soft.vyd_to_i32, _as_bits(x[:N_WGSL])), want[:N_WGSL])


@pytest.mark.parametrize("op", ["lt", "le", "eq"])
def test_f32_comparisons_on_the_bits_are_ieee(host, op):
    rng = np.random.default_rng(9)
    x = _f32_bits(rng, N_C)
    y = _f32_bits(rng, N_C)
    y[::3] = x[::3]
    y[1::5] = x[1::5] ^ np.uint32(0x80000000)
    y[2::7] = x[2::7] + np.uint32(1)
    fx, fy = x.view(np.float32), y.view(np.float32)
    with np.errstate(all="ignore"):
        want = {"lt": fx < fy, "le": fx <= fy, "eq": fx == fy}[op].astype(np.uint64)
    fn = getattr(soft, f"vyf_{op}")
    assert np.array_equal(host(fn, x.astype(np.uint64), y.astype(np.uint64)), want)
    assert np.array_equal(wgsl(fn, x[:N_WGSL].astype(np.uint64), y[:N_WGSL].astype(np.uint64)), want[:N_WGSL])


def _u64_expected(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if op in ("add", "sub", "mul"):
        with np.errstate(all="ignore"):
            return {"add": a + b, "sub": a - b, "mul": a * b}[op]
    if op == "mulhi":
        return np.array([(int(x) * int(y)) >> 64 for x, y in zip(a, b)], np.uint64)
    s = b & np.uint64(63)
    if op == "shl":
        return a << s
    if op == "shr":
        return a >> s
    if op == "ishr":
        return (a.view(np.int64) >> s.astype(np.int64)).view(np.uint64)
    if op == "lt":
        return (a < b).astype(np.uint64)
    if op == "le":
        return (a <= b).astype(np.uint64)
    if op == "ilt":
        return (a.view(np.int64) < b.view(np.int64)).astype(np.uint64)
    if op == "ile":
        return (a.view(np.int64) <= b.view(np.int64)).astype(np.uint64)
    raise AssertionError(op)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "mulhi", "shl", "shr", "ishr", "lt", "le", "ilt", "ile"])
def test_u64_and_i64_operations_wrap_like_c(host, op):
    rng = np.random.default_rng(10)
    a = u64_values(N_C // 4, rng)
    b = u64_values(N_C // 4, rng)
    rng.shuffle(b)
    if op in ("shl", "shr", "ishr"):
        b = rng.integers(0, 200, a.size).astype(np.uint64)
    fn = {"ishr": soft.vyi_shr, "ilt": soft.vyi_lt, "ile": soft.vyi_le}.get(op) or getattr(soft, f"vyu_{op}")
    want = _u64_expected(op, a, b)
    assert np.array_equal(host(fn, a, b), want)
    assert np.array_equal(wgsl(fn, a[:N_WGSL], b[:N_WGSL]), want[:N_WGSL])


def test_u32_high_product_and_leading_zeros(host):
    rng = np.random.default_rng(12)
    a = u64_values(N_C // 4, rng)
    want = np.array([64 - int(v).bit_length() for v in a], np.uint64)
    assert np.array_equal(host(soft.vyu_clz, a), want)
    assert np.array_equal(wgsl(soft.vyu_clz, a[:N_WGSL]), want[:N_WGSL])
    x = a & np.uint64(0xFFFFFFFF)
    y = (a >> np.uint64(32))[::-1].copy()
    want = (x * y) >> np.uint64(32)
    assert np.array_equal(host(soft.vyu_mulhi32, x, y), want)
    assert np.array_equal(wgsl(soft.vyu_mulhi32, x[:N_WGSL], y[:N_WGSL]), want[:N_WGSL])


def test_i32_widens_with_its_sign(host):
    i = np.array([0, 1, -1, 2**31 - 1, -2**31, 12345, -98765], np.int32)
    want = i.astype(np.int64).view(np.uint64)
    assert np.array_equal(host(soft.vyi_from_i32, i.view(np.uint32).astype(np.uint64)), want)


# the helpers the tests above exercise (a new helper fails the next test until it has one)
COVERED = {*(f"vyd_{o}" for o in ("add", "sub", "mul", "mul_add", "div", "sqrt", "neg", "lt", "le", "eq", "from_f32",
                                  "to_f32", "from_i32", "from_u32", "from_u64", "to_i32")),
           *(f"vyf_{o}" for o in ("lt", "le", "eq")),
           *(f"vyu_{o}" for o in ("add", "sub", "mul", "mulhi", "shl", "shr", "lt", "le", "clz", "mulhi32")),
           "vyi_shr", "vyi_lt", "vyi_le", "vyi_from_i32"}


def test_every_helper_is_tested():
    assert {fn.name for fn in soft.SOFT} == COVERED
