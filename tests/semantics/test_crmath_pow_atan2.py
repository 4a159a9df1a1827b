"""S13 for the functions of two operands pow(x, y) and atan2(y, x): correctly rounded for every
pair of f32 values, with IEEE 754-2019 9.2's special values, and so byte-identical on every
backend.

Oracles that share no code with vyre: mpmath at 300 bits rounded to 24 bits here (`_round24`);
the C library's ``pow``/``atan2`` for the special pairs (C99 Annex F, which is IEEE 754-2019
9.2 for both); Python integers for pow's exact results and exact midpoints. Each cell
(function x backend) gets every special pair, the exact cases, CORE-MATH's published hard
pairs (tests/semantics/data) and 2^16 random pairs per function (log-uniform over the whole
range, next to 1, integer and half-integer exponents, the overflow and flush boundaries);
the reference, checked against the oracles on every special, exact and hard pair and on a
sample of the random ones, answers the rest."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from vyre import reference
from vyre.ir import BinOp, DataType, Expr
from vyre.lower.crmath import binary as dev
from vyre.reference import crmath as ref_crmath

from helpers import map_program

DATA = Path(__file__).parent / "data"
F32, U32 = np.float32, np.uint32
FUNCS = (BinOp.POW, BinOp.ATAN2)


# ---- oracles -----------------------------------------------------------------------------
def _bits(v: float) -> int:
    """f32 bits of a float (rounded to nearest even; beyond the range: infinity)."""
    with np.errstate(over="ignore"):
        return 0x7FC00000 if math.isnan(v) else int(np.float32(v).view(U32))


def _round24(v: mpmath.mpf) -> int:
    """f32 bits of v: 24-bit rounding (nearest even), then the f32 range and S9's flush."""
    with mpmath.workprec(300):
        with mpmath.workprec(24):
            r = +v
        a = abs(r)
        if a >= mpmath.mpf(2) ** 128:
            out = math.inf
        elif a < mpmath.mpf(2) ** -126:               # the f32 grid there is 2^-149: flush (S9)
            out = 2.0 ** -126 if abs(v) >= mpmath.mpf(2) ** -126 - mpmath.mpf(2) ** -150 else 0.0
        else:
            out = float(a)
        return _bits(-out if v < 0 else out)


def _canon(b: np.ndarray) -> np.ndarray:
    """S9 on f32 bits: NaN -> 0x7FC00000, subnormal -> zero of its sign."""
    b = np.asarray(b, U32)
    e = b & U32(0x7F800000)
    nan = (e == 0x7F800000) & ((b & U32(0x7FFFFF)) != 0)
    return np.where(nan, U32(0x7FC00000), np.where(e == 0, b & U32(0x80000000), b)).astype(U32)


def _mp(fn: BinOp, a: float, b: float) -> int | None:
    """mpmath's correctly rounded bits of pow(a, b) / atan2(a, b) at finite nonzero canonical
    operands (pow: a > 0, or b an integer), or None where 300 bits do not decide (an exact
    case of pow: see `test_exact_cases`)."""
    with mpmath.workprec(300):
        if fn is BinOp.POW:
            odd = b == math.floor(b) and abs(b) < 2 ** 24 and int(b) % 2 == 1
            v = mpmath.power(abs(mpmath.mpf(a)), mpmath.mpf(b)) * (-1 if a < 0 and odd else 1)
        else:
            v = mpmath.atan2(mpmath.mpf(a), mpmath.mpf(b))
        d = abs(v) * mpmath.mpf(2) ** -280
        lo, hi = _round24(v - d), _round24(v + d)
    return lo if lo == hi else None


@functools.cache
def _libm() -> ctypes.CDLL:
    """The C library's pow and atan2 (C99 Annex F: IEEE 754-2019 9.2's special values; numpy's
    scalar power takes a sqrt shortcut for y = 0.5, which gives pow(-0, 0.5) = -0)."""
    lib = ctypes.CDLL(ctypes.util.find_library("m") or ctypes.util.find_library("c"))
    for name in ("pow", "atan2"):
        getattr(lib, name).restype = ctypes.c_double
        getattr(lib, name).argtypes = [ctypes.c_double, ctypes.c_double]
    return lib


def _c_special(fn: BinOp, a: float, b: float) -> float:
    return _libm().pow(a, b) if fn is BinOp.POW else _libm().atan2(a, b)


def _oracle(fn: BinOp, ab: int, bb: int) -> int | None:
    """The expected bits at one pair of f32 bits: the C library's value when the operands
    are special or its float64 result is 0, inf, NaN or an exact f32, else `_mp`."""
    a, b = (float(v) for v in _canon(np.array([ab, bb], U32)).view(F32))
    want = _c_special(fn, a, b)
    special = not (math.isfinite(a) and math.isfinite(b) and a != 0 and b != 0)
    with np.errstate(over="ignore"):
        exact = not math.isfinite(want) or want == 0 or float(np.float32(want)) == want
    if special or exact:
        if 0 < abs(want) < 2.0 ** -126:               # an exact subnormal f32: flushed (S9)
            return _bits(math.copysign(0.0, want))
        return _bits(want)
    return _mp(fn, a, b)


# ---- inputs ------------------------------------------------------------------------------
_SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
            2.5, -2.5, 0.75, 2.0 ** 24, -(2.0 ** 24), 2.0 ** 23 + 1, -(2.0 ** 23 + 1), 2.0 ** -126,
            -(2.0 ** -126), float(np.finfo(F32).max), -float(np.finfo(F32).max), 1.0000001192092896,
            0.9999999403953552, 127.0, -149.0, 1e-30, 1e30]
_SPECIAL_BITS = [_bits(v) for v in _SPECIAL] + [0x00000001, 0x807FFFFF, 0x7F800001, 0xFFC00001]


def _special_pairs() -> tuple[np.ndarray, np.ndarray]:
    a, b = np.meshgrid(np.array(_SPECIAL_BITS, U32), np.array(_SPECIAL_BITS, U32))
    return a.ravel(), b.ravel()


def _exact_pow_cases() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, want) bits: x = r^(2^k) 2^(j 2^k) and y = n / 2^k (k <= 3, n <= 15), so that
    x^y = r^n 2^(j n) exactly, with r^n of 24 bits (an f32) or 25 (a midpoint: ties to even);
    negative x for integer y; want from Python's integers."""
    rng = np.random.default_rng(5)
    xs, ys, want = [], [], []
    for k in range(4):
        for n in range(2 if k == 0 else 1, 16):
            if k and n % 2 == 0:
                continue
            for r in range(3, 1 << 24, 2):
                rn = r ** n
                if r ** (1 << k) >= 1 << 24 or rn >= 1 << 25:
                    break
                if rn < 1 << 23 or rng.random() < 0.5:
                    continue
                span = 126 // (n << k)
                j = int(rng.integers(-span, span + 1))
                x = r ** (1 << k) * 2.0 ** (j << k)
                for sign in (1, -1) if k == 0 else (1,):
                    xs.append(sign * x)
                    ys.append(n / (1 << k))
                    w = _exact_bits(rn, j * n)
                    want.append(w | (0x80000000 if sign < 0 and n % 2 else 0))
    return np.array(xs, F32).view(U32), np.array(ys, F32).view(U32), np.array(want, U32)


def _exact_bits(num: int, e: int) -> int:
    """f32 bits of num * 2^e (num > 0) rounded to nearest even, with Fractions."""
    v = Fraction(num) * Fraction(2) ** e
    q = num.bit_length() + e - 1 - 23                # the quantum of v's binade
    n = v / Fraction(2) ** q
    fl = n.numerator // n.denominator
    if n - fl > Fraction(1, 2) or (n - fl == Fraction(1, 2) and fl % 2):
        fl += 1
    return _bits(float(Fraction(fl) * Fraction(2) ** q))


def _hard_pairs(fn: BinOp) -> tuple[np.ndarray, np.ndarray]:
    """CORE-MATH's hard-to-round pairs (pow: x, y; atan2: y, x, as in the files)."""
    name = "powf_hard.txt" if fn is BinOp.POW else "atan2f_hard.txt"
    a, b = [], []
    for line in (DATA / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            u, v = (_parse(t) for t in line.split(","))
            a.append(u)
            b.append(v)
    with np.errstate(all="ignore"):
        return np.array(a, F32).view(U32), np.array(b, F32).view(U32)


def _parse(s: str) -> float:
    s = s.strip()
    try:
        return float.fromhex(s)
    except ValueError:
        return float(s)


def _random_pairs(fn: BinOp, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n random pairs of f32 bits (first operand, second operand) for ``fn``."""
    rng = np.random.default_rng(seed)
    k = n // 8
    sign = lambda m: rng.choice([-1.0, 1.0], m)   # noqa: E731
    parts = [(rng.integers(0, 2 ** 32, k, dtype=np.uint64).astype(U32).view(F32),
              rng.integers(0, 2 ** 32, k, dtype=np.uint64).astype(U32).view(F32))]
    with np.errstate(all="ignore"):
        if fn is BinOp.POW:
            x = np.exp2(rng.uniform(-126, 128, 2 * k)) * sign(2 * k)
            t = rng.uniform(-160, 140, 2 * k)                        # y log2|x|: all of f32's range
            parts.append((x, t / np.log2(np.abs(x))))
            x = 1 + rng.uniform(-1, 1, k) * np.exp2(-rng.integers(1, 24, k))   # next to 1, large |y|
            parts.append((x, rng.uniform(-150, 130, k) / np.log2(x.astype(F32).astype(np.float64))))
            x = np.exp2(rng.uniform(-40, 40, k)) * sign(k)
            parts.append((x, rng.integers(-40, 41, k).astype(np.float64)))          # integer y
            parts.append((np.exp2(rng.uniform(-60, 60, k)), rng.integers(-80, 81, k) / 4.0))  # y = j/4
            x = np.exp2(rng.uniform(-126, 128, k))
            edge = rng.choice([128.0, -126.0, -127.0, -150.0], k) + rng.uniform(-1, 1, k) * 2.0 ** -18
            parts.append((x, edge / np.log2(x.astype(F32).astype(np.float64))))       # range edges
        else:
            y = np.exp2(rng.uniform(-126, 128, 3 * k)) * sign(3 * k)
            parts.append((y, y * np.exp2(rng.uniform(-60, 60, 3 * k)) * sign(3 * k)))
            y = np.exp2(rng.uniform(-100, 100, k)) * sign(k)
            parts.append((y, y * (1 + rng.uniform(-2 ** -10, 2 ** -10, k)) * sign(k)))   # |y| ~ |x|
            x = np.exp2(rng.uniform(0, 128, k)) * sign(k)
            parts.append((x * np.exp2(rng.uniform(-130, -118, k)) * sign(k), x))      # flush edge
            y = np.exp2(rng.uniform(-126, 128, 2 * k)) * sign(2 * k)
            parts.append((y, y * np.exp2(rng.uniform(-160, 160, 2 * k)) * sign(2 * k)))
        a = np.concatenate([np.asarray(p[0], np.float64).astype(F32) for p in parts])
        b = np.concatenate([np.asarray(p[1], np.float64).astype(F32) for p in parts])
    return _canon(a.view(U32)), _canon(b.view(U32))


# ---- running -----------------------------------------------------------------------------
def _program(fn: BinOp, t: DataType = DataType.F32):
    return map_program([t, t], t, lambda a, b: Expr.bin(fn, a, b), wg=64)


def _run(backend, fn: BinOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ins = [np.ascontiguousarray(a, U32).view(F32), np.ascontiguousarray(b, U32).view(F32)]
    out = reference.run(_program(fn), ins) if backend is None else backend.dispatch(_program(fn), ins)
    return np.frombuffer(out[0], U32)


def _first_bad(a, b, got, want) -> str:
    bad = np.flatnonzero(got != want)
    return f"{bad.size} differ: " + ", ".join(
        f"({a[i]:08x}, {b[i]:08x}): got {got[i]:08x} want {want[i]:08x}" for i in bad[:6])


def _cases(fn: BinOp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every special, exact and hard pair and 2^16 random ones, with the reference's answers
    (checked against the independent oracles by the reference tests below)."""
    parts = [_special_pairs(), _hard_pairs(fn), _random_pairs(fn, 1 << 16, 11 if fn is BinOp.POW else 12)]
    if fn is BinOp.POW:
        parts.append(_exact_pow_cases()[:2])
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    return a, b, _run(None, fn, a, b)


# ---- the reference against the oracles --------------------------------------------------
@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.value)
def test_reference_special_values(fn):
    """Every pair of special operands (zeros, infinities, NaN, ±1, odd/even/non-integers,
    subnormals, range ends): IEEE 754-2019 9.2 through the C library, else mpmath."""
    a, b = _special_pairs()
    got = _run(None, fn, a, b)
    want = np.array([_oracle(fn, int(x), int(y)) for x, y in zip(a, b)], dtype=object)
    keep = np.array([w is not None for w in want])
    assert keep.sum() > 0.9 * keep.size
    assert np.array_equal(got[keep], want[keep].astype(U32)), _first_bad(a[keep], b[keep], got[keep],
                                                                         want[keep].astype(U32))


def test_reference_pow_special_values_named():
    """The rules themselves, written out (docs/semantics.md S13)."""
    nan, inf = math.nan, math.inf
    rows = [(nan, 0.0, 1.0), (nan, -0.0, 1.0), (1.0, nan, 1.0), (1.0, inf, 1.0), (-1.0, inf, 1.0),
            (-1.0, -inf, 1.0), (0.5, inf, 0.0), (0.5, -inf, inf), (2.0, inf, inf), (2.0, -inf, 0.0),
            (-0.0, 3.0, -0.0), (-0.0, 2.0, 0.0), (-0.0, -3.0, -inf), (-0.0, -2.0, inf), (0.0, -0.5, inf),
            (-0.0, 0.5, 0.0), (-inf, 3.0, -inf), (-inf, -3.0, -0.0), (-inf, 2.5, inf), (-inf, -2.0, 0.0),
            (inf, -1.0, 0.0), (-2.0, 0.5, nan), (-2.0, 3.0, -8.0), (-2.0, -2.0, 0.25), (nan, 1.0, nan),
            (2.0, nan, nan), (2.0 ** -149, -1.0, inf), (2.0, 128.0, inf), (2.0, -127.0, 0.0),
            (4.0, 0.5, 2.0), (-1.0, 1e30, 1.0), (-1.0, 3.0, -1.0)]
    a = np.array([_bits(r[0]) for r in rows], U32)
    b = np.array([_bits(r[1]) for r in rows], U32)
    want = np.array([_bits(r[2]) for r in rows], U32)
    got = _run(None, BinOp.POW, a, b)
    assert np.array_equal(got, want), _first_bad(a, b, got, want)


def test_reference_atan2_special_values_named():
    nan, inf = math.nan, math.inf
    pi, q = float(np.float32(math.pi)), float(np.float32(math.pi / 4))
    rows = [(0.0, 1.0, 0.0), (-0.0, 1.0, -0.0), (0.0, 0.0, 0.0), (-0.0, 0.0, -0.0), (0.0, -0.0, pi),
            (-0.0, -0.0, -pi), (0.0, -1.0, pi), (-0.0, -1.0, -pi), (1.0, 0.0, 2 * q), (-1.0, -0.0, -2 * q),
            (1.0, inf, 0.0), (-1.0, inf, -0.0), (1.0, -inf, pi), (-1.0, -inf, -pi), (inf, 5.0, 2 * q),
            (-inf, -5.0, -2 * q), (inf, inf, q), (-inf, inf, -q), (inf, -inf, float(np.float32(3 * math.pi / 4))),
            (-inf, -inf, -float(np.float32(3 * math.pi / 4))), (nan, 1.0, nan), (1.0, nan, nan),
            (inf, nan, nan), (1.0, 1.0, q), (1e-30, 1e30, 0.0), (-1e-30, -1e30, -pi)]
    a = np.array([_bits(r[0]) for r in rows], U32)
    b = np.array([_bits(r[1]) for r in rows], U32)
    want = np.array([_bits(r[2]) for r in rows], U32)
    got = _run(None, BinOp.ATAN2, a, b)
    assert np.array_equal(got, want), _first_bad(a, b, got, want)


def test_exact_cases():
    """pow's exact results and exact midpoints (ties to even), against Python's integers."""
    a, b, want = _exact_pow_cases()
    assert a.size > 1000
    got = _run(None, BinOp.POW, a, b)
    assert np.array_equal(got, want), _first_bad(a, b, got, want)


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.value)
def test_reference_hard_pairs_against_mpmath(fn):
    """Every CORE-MATH hard pair, with mpmath directly."""
    a, b = _hard_pairs(fn)
    got = _run(None, fn, a, b)
    want = [_oracle(fn, int(x), int(y)) for x, y in zip(a, b)]
    keep = np.array([w is not None for w in want])
    assert keep.all()
    assert np.array_equal(got, np.array(want, U32)), _first_bad(a, b, got, np.array(want, U32))


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.value)
def test_reference_random_pairs_against_mpmath(fn):
    """A sample of the random pairs of every kind, with mpmath directly."""
    a, b = _random_pairs(fn, 1 << 16, 11 if fn is BinOp.POW else 12)
    idx = np.random.default_rng(3).choice(a.size, 600, replace=False)
    a, b = a[idx], b[idx]
    got = _run(None, fn, a, b)
    want = [_oracle(fn, int(x), int(y)) for x, y in zip(a, b)]
    keep = np.array([w is not None for w in want])
    assert keep.sum() >= 590
    w = np.array([v if v is not None else 0 for v in want], U32)
    assert np.array_equal(got[keep], w[keep]), _first_bad(a[keep], b[keep], got[keep], w[keep])


def test_pow_dyadic_finds_exact_powers():
    """The reference's exact-case detector against Fractions: x^y dyadic with a short
    numerator iff found, and then the value is right."""
    cases = [(9.0, 0.5, (3, 0)), (2.0 ** -20 * 81, 0.25, (3, -5)), (4097.0, 2.0, (4097 ** 2, 0)),
             (3.0, -1.0, None), (2.0, -3.0, (1, -3)), (8.0, 1 / 3, None), (2.0 ** 6, 0.5, (1, 3)),
             (2.0 ** 6, 1 / 64, None), (2.0 ** 64, 1 / 64, (1, 1)), (6.0, 0.5, None), (3.0, 50.0, None),
             (0.75, 3.0, (27, -6))]
    for x, y, want in cases:
        got = ref_crmath.pow_dyadic(x, y)
        assert got == want, (x, y, got)
        if got is not None:                           # (N 2^E)^q = x^p for y = p/q
            p, q = y.as_integer_ratio()
            assert (Fraction(got[0]) * Fraction(2) ** got[1]) ** q == Fraction(x) ** p


# ---- every backend: the same bytes ---------------------------------------------------------
@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.value)
def test_every_backend_is_byte_identical(backend, fn):
    """opencl, cuda (gpu) and wgpu (where it runs them: WGSL prints the same algorithm on
    software float64) give the reference's bytes on every case."""
    a, b, want = _cases(fn)
    got = _run(backend, fn, a, b)
    assert np.array_equal(got, want), _first_bad(a, b, got, want)


@pytest.mark.parametrize("t", [DataType.F16, DataType.BF16], ids=lambda t: t.value)
@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.value)
def test_half_forms_round_the_f32_result_once(opencl, fn, t):
    """S27: the f16/bf16 forms are the f32 result rounded once (numpy's float16 conversion for
    f16; bf16 by round-to-nearest-even of the top 16 bits)."""
    rng = np.random.default_rng(4)
    ha = rng.integers(0, 1 << 16, 4096, dtype=np.uint32).astype(np.uint16)
    hb = rng.integers(0, 1 << 16, 4096, dtype=np.uint32).astype(np.uint16)
    prog = _program(fn, t)
    want = reference.run(prog, [ha, hb])[0]
    assert opencl.dispatch(prog, [ha, hb])[0] == want
    wide = [(h.view(np.float16).astype(F32) if t is DataType.F16 else (h.astype(U32) << 16).view(F32))
            for h in (ha, hb)]
    f32 = _run(None, fn, _canon(wide[0].view(U32)), _canon(wide[1].view(U32))).view(F32)
    w = np.frombuffer(want, np.uint16)
    ok = ~np.isnan(f32)
    if t is DataType.F16:
        with np.errstate(over="ignore"):
            exp16 = f32.astype(np.float16).view(np.uint16)
    else:
        bits = f32.view(U32).astype(np.uint64)
        exp16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(w[ok], exp16[ok])


# ---- the device algorithm's parts against their error bounds -------------------------------
_PARTS = r"""
__kernel void vy_pow_parts(__global const float* xs, __global const float* ys, __global double* o) {
    size_t i = get_global_id(0);
    vym_pow_reduce_r red = vym_pow_reduce(xs[i]);
    double t = vym_pow_t(red.v0, red.v1, red.v2, (double)ys[i]);
    vym_pow_acc_r acc = vym_pow_acc(red.v0, red.v1, red.v2, (double)ys[i]);
    o[3 * i] = vym_exp2_d(t); o[3 * i + 1] = acc.v0; o[3 * i + 2] = acc.v1;
}
__kernel void vy_atan2_parts(__global const float* ys, __global const float* xs, __global double* o) {
    size_t i = get_global_id(0);
    double ax = fabs((double)xs[i]), ay = fabs((double)ys[i]);
    bool sw = ay > ax, xneg = xs[i] < 0.0f;
    double n = sw ? ax : ay, d = sw ? ay : ax;
    vym_atan2_dd_r acc = vym_atan2_dd(n, d, sw, xneg);
    o[3 * i] = vym_atan2_fast(n, d, sw, xneg); o[3 * i + 1] = acc.v0; o[3 * i + 2] = acc.v1;
}
__kernel void vy_dd_round(__global const double* hs, __global const double* ls, __global double* o) {
    size_t i = get_global_id(0);
    vym_dd_round_r r = vym_dd_round(hs[i], ls[i], 0x1p-100);
    o[2 * i] = r.v0 ? 1.0 : 0.0; o[2 * i + 1] = (double)r.v1;
}
__kernel void vy_pow_exact(__global const float* xs, __global const float* ys, __global double* o) {
    size_t i = get_global_id(0);
    vym_pow_exact_r r = vym_pow_exact(xs[i], ys[i]);
    o[2 * i] = r.v0 ? 1.0 : 0.0; o[2 * i + 1] = r.v1;
}
"""


def _cl_parts(opencl, kernel: str, a: np.ndarray, b: np.ndarray, width: int, dtype=F32) -> np.ndarray:
    cl = pytest.importorskip("pyopencl")
    from vyre.drivers.opencl.codegen import HEADER
    from vyre.lower.cfamily import PRELUDE
    from vyre.lower.crmath import c as crmath_c

    fns = [dev.vym_pow_reduce, dev.vym_pow_t, dev.vym_pow_acc, dev.vym_exp2_d, dev.vym_atan2_fast,
           dev.vym_atan2_dd, dev.vym_pow_exact, dev.vym_dd_round]
    ctx = cl.Context([opencl.device.rt.device])
    queue = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, HEADER + PRELUDE + crmath_c.source(fns) + _PARTS).build(options=["-cl-std=CL1.2"])
    mf = cl.mem_flags
    ab = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(a, dtype))
    bb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(b, dtype))
    out = np.empty(width * a.size)
    ob = cl.Buffer(ctx, mf.WRITE_ONLY, out.nbytes)
    getattr(prg, kernel)(queue, (a.size,), None, ab, bb, ob)
    cl.enqueue_copy(queue, out, ob)
    return out.reshape(-1, width)


def _rel(approx: mpmath.mpf, exact: mpmath.mpf) -> float:
    return float(abs(approx / exact - 1))


def test_pow_parts_are_within_their_error_bounds(opencl):
    """The fast double and the double-double of pow (PoCL; the same doubles as CUDA) against
    mpmath on pairs chosen to stress them (|t| up to 130, x next to 1, tiny t), with a
    margin of 2 on POW_EPS_FAST and POW_EPS_ACC."""
    rng = np.random.default_rng(9)
    n = 3000
    kind = rng.integers(0, 4, n)
    x = np.exp2(rng.uniform(-126, 128, n))
    x = np.where(kind == 1, 1 + rng.uniform(-2 ** -8, 2 ** -8, n) * np.exp2(-rng.integers(0, 16, n)), x)
    x = np.where(kind == 2, 1 + rng.uniform(-0.5, 0.5, n), x).astype(F32).astype(np.float64)
    x = np.where(x == 1, 1.5, x)
    t = rng.uniform(-130, 129, n)
    t = np.where(kind == 3, t * np.exp2(-rng.integers(0, 40, n)), t)
    with np.errstate(all="ignore"):
        y = (t / np.log2(x)).astype(F32).astype(np.float64)
    ok = np.isfinite(y) & (np.abs(y) >= 2.0 ** -126) & (np.abs(y) < 2.0 ** 127)
    x, y = x[ok], y[ok]
    o = _cl_parts(opencl, "vy_pow_parts", x, y, 3)
    fast = acc = 0.0
    with mpmath.workprec(400):
        for i in range(x.size):
            tt = mpmath.mpf(y[i]) * mpmath.log(mpmath.mpf(x[i]), 2)
            if -130 < tt < 129:
                v = mpmath.power(2, tt)
                fast = max(fast, _rel(mpmath.mpf(o[i, 0]), v))
                acc = max(acc, _rel(mpmath.mpf(o[i, 1]) + mpmath.mpf(o[i, 2]), v))
    assert fast <= dev.POW_EPS_FAST / 2, math.log2(fast)
    assert acc <= dev.POW_EPS_ACC / 2, math.log2(acc)


def test_atan2_parts_are_within_their_error_bounds(opencl):
    rng = np.random.default_rng(10)
    n = 3000
    with np.errstate(all="ignore"):
        y = (np.exp2(rng.uniform(-126, 128, n)) * rng.choice([-1, 1], n))
        x = (y * np.exp2(rng.uniform(-60, 60, n)) * rng.choice([-1, 1], n)).astype(F32)
        y = y.astype(F32)
    ok = np.isfinite(x) & np.isfinite(y) & (np.abs(x) >= 2.0 ** -126) & (np.abs(y) >= 2.0 ** -126)
    x, y = x[ok], y[ok]
    o = _cl_parts(opencl, "vy_atan2_parts", y, x, 3)
    fast = acc = 0.0
    with mpmath.workprec(300):
        for i in range(x.size):
            v = abs(mpmath.atan2(mpmath.mpf(float(y[i])), mpmath.mpf(float(x[i]))))
            fast = max(fast, _rel(mpmath.mpf(o[i, 0]), v))
            acc = max(acc, _rel(mpmath.mpf(o[i, 1]) + mpmath.mpf(o[i, 2]), v))
    assert fast <= dev.ATAN2_EPS_FAST / 2, math.log2(fast)
    assert acc <= dev.ATAN2_EPS_ACC / 2, math.log2(acc)


def test_device_finds_exactly_the_exact_cases(opencl):
    """vym_pow_exact: true with the exact value on every exact case (Python's integers for the
    integer exponents), false next to them (y one ulp up: no longer a multiple of 1/8)."""
    a, b, _ = _exact_pow_cases()
    xa = np.abs(a.view(F32))
    ya = b.view(F32)
    o = _cl_parts(opencl, "vy_pow_exact", xa, ya, 2)
    assert (o[:, 0] == 1).all()
    want = [float(Fraction(float(p)) ** Fraction(float(q))) if float(q) == int(float(q)) else None
            for p, q in zip(xa, ya)]
    ints = np.array([w is not None for w in want])
    assert np.array_equal(o[ints, 1], np.array([w for w in want if w is not None]))
    off = _cl_parts(opencl, "vy_pow_exact", xa, np.nextafter(ya, np.float32(np.inf)), 2)
    assert not off[:, 0].any()



def test_dd_round_decides_by_the_side_of_the_nearest_boundary(opencl):
    """vym_dd_round (h + l known within 2^-100 |h|): at midpoints, the flush threshold
    2^-126 - 2^-150 and the overflow threshold 2^128 - 2^103, an offset l of 2^-80 |h| is
    decided to its side (mpmath's rounding of h + l), one of 2^-120 |h| or none is not;
    values well inside an interval are decided."""
    rng = np.random.default_rng(12)
    v = np.exp2(rng.uniform(-125, 127, 300)).astype(F32)
    mids = [(float(p) + float(np.nextafter(p, np.float32(np.inf)))) / 2 for p in v]
    mids += [float.fromhex("0x1.fffffep-127"), 2.0 ** 128 - 2.0 ** 103, 2.0 ** -126 + 2.0 ** -150]
    hs, ls, decided = [], [], []
    for m in mids:
        for sign in (1.0, -1.0):
            for off, dec in ((2.0 ** -80, True), (-(2.0 ** -80), True), (2.0 ** -120, False), (0.0, False)):
                hs.append(sign * m)
                ls.append(sign * m * off)
                decided.append(dec)
            for inside in (m * (1 + 2.0 ** -40), m * (1 - 2.0 ** -40)):
                hs.append(sign * inside)
                ls.append(0.0)
                decided.append(True)
    hs += [2.0 ** 129, -(2.0 ** -140), 2.0 ** -200]
    ls += [0.0, 0.0, 0.0]
    decided += [True, True, True]
    o = _cl_parts(opencl, "vy_dd_round", np.array(hs), np.array(ls), 2, dtype=np.float64)
    assert np.array_equal(o[:, 0] == 1, np.array(decided)), np.flatnonzero((o[:, 0] == 1) != np.array(decided))[:5]
    with mpmath.workprec(300):
        want = [_round24(mpmath.mpf(h) + mpmath.mpf(lo)) for h, lo, d in zip(hs, ls, decided) if d]
    got = o[o[:, 0] == 1, 1].astype(np.uint64).astype(U32)
    assert np.array_equal(got, np.array(want, U32)), _first_bad(got, got, got, np.array(want, U32))
