"""The correctly rounded f32 functions, one algorithm each, in `vyre.lower.crmath.dsl`.

Method (after CORE-MATH's binary32 functions): argument reduction and a polynomial evaluated
in float64 with IEEE basic operations only (+ - * / sqrt, exact conversions, bit
operations), so every target computes the same doubles, each within `DEVICE_EPS` relative
error of the exact value (measured on 2^16+ inputs per function by
tests/semantics/test_crmath.py, all under 2^-50).

Rounding that double to f32 is correct unless it lies within DEVICE_EPS of a rounding
boundary (a midpoint between neighbouring f32 values, the overflow threshold or the flush
threshold). ``vym_finish_<f>`` tests that on the double's bits (one in about 2^20 inputs
fails the test) and then searches the function's table of hard cases
(``crmath_hard_cases.json``, from scripts/crmath_hard_cases.py, which runs the reference's
rounding test over every f32 input): an input found there gets the table's result; any
other input's exact value is farther than 2^-47 = 2 DEVICE_EPS from every boundary (the
reference flags at 2^-46 with float64 values within 2^-50), so its double rounds correctly.
hypot needs no table: near a boundary it compares x^2 + y^2 with the boundary's square
exactly. Range reduction of sin/cos/tan: Cody-Waite in float64 below 2^20 (within 2^-51 of
the reduced argument, which is above 2^-28 for every f32 there), Payne-Hanek on 192 bits of
2/pi with 64-bit integer products above.

Speed (the C family; WGSL runs the same operations in software): the instructions of the
common path are the cost on a GPU (a loop of calls issues them all), so each algorithm keeps its
float64 operations few: explicit `fma` (the printers forbid contraction) in the polynomials and
where a product is exact; branches that lanes of a warp take differently are avoided on the
common path (sin/cos evaluate one polynomial with selected coefficients; e^y - 1 has no
small-argument branch); the entry point is straight-line up to one rarely taken branch to an
out-of-line function (special values, the hard-case search; `_entry`), and Payne-Hanek is out of
line too. fma is the one operation WGSL performs differently (unfused: two roundings, the
doubles every target computed before fma existed); both doubles are within DEVICE_EPS of the
exact value, so both round to the same f32 (`vyre.lower.crmath.dsl.fma`).
scripts/crmath_ptx.py counts the PTX, scripts/crmath_equal_c.py proves a changed algorithm
against the last proven one.

The entry points (`ENTRY`) take and return f32; ``vym_<f>_y`` (or the core named in
`DOUBLE`) is the double each one rounds. This text was C until the language existed; the
printed C computed the same doubles in the same order (scripts/crmath_equal_c.py compared it
with that C over every f32 input); since fma, the C family's doubles are the fused ones and the
f32 results are compared (``--results-only``).
"""

from __future__ import annotations

import functools
import json
import pathlib
import struct
from collections.abc import Callable

import mpmath

from .dsl import (
    BOOL,
    F32,
    F64,
    I32,
    U32,
    U64,
    Block,
    Function,
    Lookup,
    Val,
    clz,
    f32,
    f64,
    fma,
    function,
    i32,
    lookup,
    mulhi,
    pair,
    select,
    sqrt,
    table,
    u32,
    u64,
)

DEVICE_EPS = 2.0 ** -48   # relative error bound of every helper's double result
HARD_CASES = pathlib.Path(__file__).resolve().parent.parent / "crmath_hard_cases.json"
MAGIC = 1.5 * 2.0 ** 52         # adding it rounds a double below 2^51 to an integer (in its low bits)


@functools.cache
def hard_cases() -> dict[str, list[tuple[int, int]]]:
    """Per function name: sorted (input bits, correctly rounded output bits)."""
    raw = json.loads(HARD_CASES.read_text())
    return {k: [(int(a, 16), int(b, 16)) for a, b in (p.split(":") for p in v)] for k, v in raw.items()}


def _split(v: mpmath.mpf, bits: int) -> tuple[float, float]:
    """v as hi (``bits`` significant bits) + lo (the rest rounded to double)."""
    with mpmath.workprec(bits):
        hi = mpmath.mpf(v)
    with mpmath.workprec(200):
        return float(hi), float(v - hi)


def _f32(v: mpmath.mpf | float) -> float:
    """v rounded to the nearest f32 (as a Python float)."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def horner(var: Val, coeffs: list[float] | list[Val]) -> Val:
    """sum(c_i var^i) as c_0 + var * (c_1 + var * (...)), one `fma` a step."""
    out = coeffs[-1] if isinstance(coeffs[-1], Val) else f64(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        out = fma(var, out, c)
    return out


# ---- f32 vocabulary (on the bits, as the C family's vy_isnan / vy_isinf) ---------------------
def fbits(bits: int) -> Val:
    """The f32 with these bits."""
    return u32(bits).bits()


def is_nan(x: Val) -> Val:
    return (x.bits() & 0x7FFFFFFF).gt(0x7F800000)


def is_inf(x: Val) -> Val:
    return (x.bits() & 0x7FFFFFFF).eq(0x7F800000)


def fabs(x: Val) -> Val:
    """|x| of an f32 (its sign bit cleared): `vym_fabs`"""
    return vym_fabs(x)


@function(F32, x=F32)
def vym_fabs(b: Block, x: Val) -> None:
    """|x| of an f32, its sign bit cleared. The C family prints a call as its own fabs
    (`vyre.lower.crmath.c.NATIVE`; the same bits for every f32 the functions see: their
    arguments are flushed, S9), which CUDA folds into the instruction that uses it as an
    operand modifier (|x| < 87.25 is one FSETP, where the mask and the compare took two)"""
    b.ret((x.bits() & 0x7FFFFFFF).bits())


def negative(x: Val) -> Val:
    """Whether the f32 ``x``'s sign bit is set."""
    return (x.bits() >> 31).ne(0)


NAN = 0x7FC00000
INF = 0x7F800000
NEG_INF = 0xFF800000


# ---- shared helpers ----------------------------------------------------------------------------
@function(F64, m=I32)
def vym_pow2i(b: Block, m: Val) -> None:
    """2^m, |m| < 1023"""
    b.ret(pair(F64, (m + 1023).to(U32) << 20, 0))


@function(F32, y=F64)
def vym_round(b: Block, y: Val) -> None:
    """y rounded once to f32 (nearest even, overflow to infinity), then flushed (S9): results
    below 2^-126 never go through a hardware conversion (ftz conversions may differ)"""
    a = b.let(select(y.lt(0.0), -y, y), "a")
    with b.if_(y.eq(0.0)):                       # keeps the zero's sign
        b.ret(y.to(F32))
    with b.if_(a.lt(2.0 ** -126)):
        r = b.let(select(a.ge(float.fromhex('0x1.fffffep-127')), f32(2.0 ** -126), f32(0.0)), "r")
        b.ret(select(y.lt(0.0), -r, r))
    b.ret(y.to(F32))


NOT_FOUND = 0xFFFFFFFF   # no hard case's result (a non-canonical NaN)


def hard(name: str) -> Lookup:
    """``name``'s hard cases: input bits -> correctly rounded result bits."""
    def pairs() -> list[tuple[int, int]]:
        got = hard_cases().get(name, [])
        assert all(v != NOT_FOUND for _, v in got)
        return got
    return lookup(f"vym_hard_{name}", pairs)


def off_midpoint(b: Block, y: Val) -> Val:
    """Whether the low 29 bits of the double ``y`` (of the 52 an f32 drops) are more than
    DEVICE_EPS |y| (under 32 of their units) from the half-way pattern: with h those bits less
    0x10000000, h > 40 or h < -40, tested as the unsigned 8 h + 320 > 640, where 8 h is the low
    word shifted left by 3 less 2^31 (mod 2^32; |8 h| < 2^31): a shift-and-add (one LEA on
    sm_90) and one compare, where the mask, the add and two compares took three"""
    return ((y.lo() << 3) + 0x80000140).gt(640)


def rounds_plainly(b: Block, y: Val) -> Val:
    """Whether the double ``y`` rounds to f32 as its exact value does (within DEVICE_EPS): a
    normal result (|y| >= 2^-126, on the bits) `off_midpoint`"""
    return (y.hi() & 0x7FFFFFFF).ge(0x38100000) & off_midpoint(b, y)


def plain_f32(b: Block, y: Val, normal: bool = False) -> tuple[Val, Val]:
    """(whether ``y`` rounds plainly to a finite f32 or to the overflow: `rounds_plainly` and
    |y| < 2^128; that f32), rounded on the bits: the exponent rebiased (mod 2^9, so the shifted-out
    bits need no mask), the top 23 bits of the mantissa, plus the round bit (bit 28 of the low word:
    the low 29 bits are not within 40 units of half-way, so it decides; a carry goes into the
    exponent, up to infinity: `vym_plain_f32`). ``normal``: the caller knows 2^-126 <= |y| < 2^128 (from the
    argument's range), so only `off_midpoint` is tested."""
    ok = off_midpoint(b, y) if normal else rounds_plainly(b, y) & (y.hi() & 0x7FFFFFFF).lt(0x47F00000)
    return ok, vym_plain_f32(y)


@function(F32, y=F64)
def vym_plain_f32(b: Block, y: Val) -> None:
    """y rounded to f32 on its bits, for a y `plain_f32` admits (|y| >= 2^-126, not within
    DEVICE_EPS of a midpoint): the exponent rebiased (mod 2^9, so the shifted-out bits need no
    mask), the top 23 bits of the mantissa, plus the round bit (bit 28 of the low word, which
    decides there; a carry goes into the exponent, up to infinity). That is IEEE's nearest
    conversion of such a y, so the C family prints a call as its native conversion instead
    (`vyre.lower.crmath.c.NATIVE`: CUDA's cvt.rn.f32.f64, one instruction where this takes
    five); WGSL, with no float64, runs this."""
    hi = b.let(y.hi(), "yh")
    lo = b.let(y.lo(), "yl")
    top = ((hi << 3) | (lo >> 29)) - 0xC0000000 + ((lo >> 28) & 1)  # (e - 896) << 23, mod 2^32
    b.ret((top | (hi & 0x80000000)).bits())


def finisher(name: str) -> Function:
    """The finishing function of one op: round the double, unless it lies within DEVICE_EPS
    of a rounding boundary (tested on its bits); then the hard-case table decides: an input
    in it gets the table's result, any other rounds its double (its exact value is farther
    than 2^-47 from every boundary, so the double rounds the same way)."""
    cases = hard(name)

    def build(b: Block, y: Val, xb: Val) -> None:
        with b.if_(rounds_plainly(b, y)):
            b.ret(y.to(F32))
        hit = b.let(cases.get(xb, NOT_FOUND), "hit")
        b.ret(select(hit.ne(NOT_FOUND), hit.bits(), vym_round(y)))

    return Function(f"vym_finish_{name}", F32, (("y", F64), ("xb", U32)), build)


# ---- e^x, 2^x, e^x - 1 -------------------------------------------------------------------------
# x = (k/N) ln 2 + r, |r| <= ln2/(2N) (+ a rounding), N = 2^lg entries of 2^(j/N) in a table.
# exp: x N/ln2 = t + x c_lo with t = x c_hi exact (x has 24 bits, c_hi 29), k the integer nearest
# t, u = (t - k) + x c_lo (within 2^-53); exp2: u = N x - k exactly. 2^(u/N) = 1 + u q(u), q fitted
# on |u| <= 1/2 + 2^-15 (`_fit`); e^y - 1's 2^(u/N) - 1 = u q(u) with q one degree higher.
# One description, two sizes (`exp_family`): the C family's N = 1024, where 2^(u/N) is within
# 2^-52.7 with q of degree 2 and e^y - 1's q within 2^-54 with degree 3 (one multiply-add fewer
# each than N = 128 needs: a table read costs the same whatever N), and WGSL's N = 128 (q of
# degrees 3 and 4: 2^-52.5 and 2^-54), since lavapipe compiles a table as a decision tree and
# 1024 leaves took expm1's kernel from 1.9 to 14.8 s. Both round to the same f32 (S13).
with mpmath.workprec(200):
    _LN2 = mpmath.log(2)

# table size (log2) -> (degree of exp's q, degree of e^y - 1's q)
EXP_DEGREES = {10: (2, 3), 7: (3, 4)}
LG_EXP, LG_EXP_WGSL = 10, 7


@functools.cache
def _fit(n: int, degree: int) -> tuple[float, ...]:
    """q(u) ~ (2^(u/n) - 1)/u on |u| <= 1/2 + 2^-15, of ``degree``: the interpolant at the
    Chebyshev nodes (near minimax), ascending coefficients"""
    k = degree + 1
    with mpmath.workprec(120):
        d = mpmath.mpf(0.5) + mpmath.mpf(2) ** -15
        nodes = [d * mpmath.cos(mpmath.pi * (i + mpmath.mpf(0.5)) / k) for i in range(k)]
        rows = mpmath.matrix([[u ** j for j in range(k)] for u in nodes])
        vals = mpmath.matrix([mpmath.expm1(u * _LN2 / n) / u for u in nodes])
        return tuple(float(c) for c in mpmath.lu_solve(rows, vals))


@functools.cache
def _exp_ta(lg: int) -> list[float]:
    """2^(j/N) with j/N taken off its exponent: the bits of 2^(j/N) less j << (52 - lg) (each a
    normal double, high word in [0x3FE00000, 0x3FFFFFFF]), so that adding k << (20 - lg) to the
    high word of entry k mod N gives 2^(k/N) (`vym_scale`)"""
    out = []
    with mpmath.workprec(200):
        for j in range(1 << lg):
            (u,) = struct.unpack("<Q", struct.pack("<d", float(mpmath.power(2, mpmath.mpf(j) / (1 << lg)))))
            out.append(struct.unpack("<d", struct.pack("<Q", u - (j << (52 - lg))))[0])
    return out


@functools.cache
def _expm1_table(lg: int) -> list[float]:
    """2^(j/N) - 1 for j = i - N/2, -N/2 <= j < N/2 (e^y - 1's part that must not cancel)"""
    n = 1 << lg
    with mpmath.workprec(200):
        return [float(mpmath.power(2, mpmath.mpf(i - n // 2) / n) - 1) for i in range(n)]


def exp_family(lg: int, shared: bool = False) -> dict[str, Function]:
    """vym_scale, vym_exp_d, vym_exp2_d, vym_expm1_d and vym_expm1_2d on a table of N = 2^lg
    entries (the same names at every size: a printer prints one family); ``shared``: the
    tables are read once per evaluation (`vyre.lower.crmath.dsl.Table`)"""
    n = 1 << lg
    q_exp, q_em1 = EXP_DEGREES[lg]
    with mpmath.workprec(200):
        c_hi, c_lo = _split(n / _LN2, 29)            # x c_hi exact for an f32 x
    ta = table("vym_exp_ta", F64, lambda: _exp_ta(lg), shared)
    # e^y - 1's table stays global: with it in shared memory too, tanh's loop took 3 % more time
    # on an H100, with only 2^(j/N) there 1 % less (both against both global)
    em1 = table("vym_expm1_t", F64, lambda: _expm1_table(lg))

    def poly(u: Val) -> Val:
        """2^(u/N) for |u| <= 1/2 + 2^-15: 1 + u q(u)"""
        return fma(u, horner(u, list(_fit(n, q_exp))), 1.0)

    @function(F64, ki=I32, p=F64)
    def vym_scale(b: Block, ki: Val, p: Val) -> None:
        """2^(k/N) * p for an integer |k| < 2^20 and a normal result: 2^(j/N), j = k mod N, with
        (k - j)/N added to its exponent (exact: the table's entry j, whose high word is that of
        2^(j/N) less j << (20 - lg), plus k << (20 - lg), one multiply-add), times p (one
        rounding)"""
        t = b.let(ta[ki & (n - 1)], "t")
        b.ret(pair(F64, t.hi() + (ki.to(U32) << (20 - lg)), t.lo()) * p)

    def reduce(b: Block, x: Val, scale: float) -> tuple[Val, Val]:
        """(scale x) N/ln2 = k + u for an f32 x and ``scale`` 1 or 2, |scale x| < 2^8: (k, u),
        |u| <= 1/2 + 2^-15, u within 2^-53. x scale c_hi is exact (24 + 29 bits), so each fma
        rounds once, as its unfused form (WGSL's) does: one operation fewer than a product, then
        sums; the scale goes into the constants (exact)"""
        hi, lo = scale * c_hi, scale * c_lo
        s = b.let(fma(x, hi, MAGIC), "s")      # k = nearest integer (even on ties), in s's low bits
        return b.let(s.lo().to(I32), "k"), b.let(fma(x, lo, fma(x, hi, -(s - MAGIC))), "u")

    @function(F64, x=F64)
    def vym_exp_d(b: Block, x: Val) -> None:
        """e^x for an f32 x, -160 < x < 100"""
        k, u = reduce(b, x, 1.0)
        b.ret(vym_scale(k, poly(u)))

    @function(F64, x=F64)
    def vym_exp2_d(b: Block, x: Val) -> None:
        """2^x for a double x, -160 < x < 160, with N x - k exact (an f32 x; pow's t, whose
        low bits fit): k the integer nearest N x, u = N x - k, 2^(u/N) as in exp"""
        t = b.let(x * float(n), "t")
        s = b.let(t + MAGIC, "s")
        b.ret(vym_scale(s.lo().to(I32), poly(t - (s - MAGIC))))

    def expm1(name: str, scale: float) -> Function:
        def build(b: Block, y: Val) -> None:
            k, u = reduce(b, y, scale)
            i = b.let((k + n // 2) & (n - 1), "i")
            m2 = b.let(pair(F64, ((k + n // 2 - i).to(U32) << (20 - lg)) + (1023 << 20), 0), "m2")  # 2^m
            a = b.let(fma(m2, em1[i], m2 - 1.0), "a")
            b.ret(a + vym_scale(k, u * horner(u, list(_fit(n, q_em1)))))

        doc = f"""e^(s y) - 1 with s = {scale:g}, for y an f32 or twice one, -160 < s y < 100,
        without a branch: with k, u as in exp and m, j the integers nearest k/N and k - N m
        (|j| <= N/2), e^(s y) - 1 = A + 2^(k/N) P where A = 2^(k/N) - 1 = 2^m (2^(j/N) - 1) +
        (2^m - 1) (the table's 2^(j/N) - 1, times 2^m exactly: one rounding; no cancellation,
        |A + B| > |A|/2) and P = 2^(u/N) - 1 = u q(u) (relative error under 2^-54: k = 0
        rounds P itself)"""
        return Function(name, F64, (("y", F64),), build, doc=doc)

    return {f.name: f for f in (vym_scale, vym_exp_d, vym_exp2_d, expm1("vym_expm1_d", 1.0),
                                expm1("vym_expm1_2d", 2.0))}


EXP_FAMILY = exp_family(LG_EXP, shared=True)
vym_exp_d, vym_exp2_d = EXP_FAMILY["vym_exp_d"], EXP_FAMILY["vym_exp2_d"]
vym_expm1_d, vym_expm1_2d = EXP_FAMILY["vym_expm1_d"], EXP_FAMILY["vym_expm1_2d"]   # 2d: tanh's e^(2|x|) - 1
#: what WGSL prints in place of the C family's exp functions (`vyre.lower.crmath.dsl.closure`)
_WGSL_FAMILY = exp_family(LG_EXP_WGSL)      # one family: its functions share one table and one vym_scale
WGSL_SUBSTITUTES: dict[int, Function] = {id(f): _WGSL_FAMILY[name] for name, f in EXP_FAMILY.items()}
# 2^(j/64), pow's double-double table (`vyre.lower.crmath.binary`)
EXP_T = table("vym_exp_t", F64, lambda: [float(mpmath.power(2, mpmath.mpf(j) / 64)) for j in range(64)])


# ---- ln, log2, ln(1 + x) ---------------------------------------------------------------------
# ln x = e ln2 - ln c_i + ln(1 + z), z = m c_i - 1 exact (c_i an f32 near 1/m on the mantissa's
# top 7 bits), |z| < 2^-7, degree-7 series (relative truncation z^7/8 < 2^-52); c_0 = 1 and
# c_127 = 1/2 make x next to 1 exact-relative. About 2^-51 relative.
@functools.cache
def _log_tables() -> tuple[list[float], list[float], list[float]]:
    c, lc_hi, lc_lo = [], [], []
    with mpmath.workprec(200):
        for i in range(128):
            ci = 1.0 if i == 0 else 0.5 if i == 127 else _f32(1 / (1 + (mpmath.mpf(i) + 0.5) / 128))
            v = -mpmath.log(ci) - (_LN2 if i >= 53 else 0)
            h, lo = _split(v, 53)
            c.append(ci)
            lc_hi.append(h)
            lc_lo.append(lo)
    return c, lc_hi, lc_lo


LOG_C = table("vym_log_c", F64, lambda: _log_tables()[0])
LOG_H = table("vym_log_h", F64, lambda: _log_tables()[1])
LOG_L = table("vym_log_l", F64, lambda: _log_tables()[2])
with mpmath.workprec(200):
    _L2HI, _L2LO = _split(_LN2, 44)
    _LOG_SERIES = [float(mpmath.mpf((-1) ** (i + 1)) / i) for i in range(2, 8)]
    _INV_LN2 = float(1 / _LN2)


@function(F64, z=F64)
def vym_log1p_s(b: Block, z: Val) -> None:
    """ln(1 + z) for |z| < 2^-7"""
    b.ret(fma(z * z, horner(z, _LOG_SERIES), z))


@function((F64, I32, F64), x=F32)
def vym_log_parts(b: Block, x: Val) -> None:
    """ln(x) = e' ln2 + h + lo for a positive normal f32 x: (h, e', lo)"""
    bx = b.let(x.bits(), "b")
    i = b.let((bx >> 16) & 127, "i")
    e = b.let((bx >> 23).to(I32) - 127 + select(i.ge(53), i32(1), i32(0)), "e")
    m = b.let(((bx & 0x007FFFFF) | 0x3F800000).bits().to(F64), "m")
    z = b.let(fma(m, LOG_C[i], -1.0), "z")                      # m c_i exact: as m * c - 1
    p = b.let(vym_log1p_s(z), "p")
    b.ret(LOG_H[i], e, p + LOG_L[i])


@function(F64, x=F32)
def vym_log_d(b: Block, x: Val) -> None:
    h, e, lo = b.let(vym_log_parts(x), "lp")
    b.ret(fma(e.to(F64), _L2HI, h) + fma(e.to(F64), _L2LO, lo))   # e L2HI exact


@function(F64, u=F64)
def vym_log_dd(b: Block, u: Val) -> None:
    """ln(u) for a positive normal double u: m split in 24 + 29 bits so m c_i - 1 stays exact"""
    bh = b.let(u.hi(), "bh")
    i = b.let((bh >> 13) & 127, "i")
    e = b.let((bh >> 20).to(I32) - 1023 + select(i.ge(53), i32(1), i32(0)), "e")
    m = b.let(pair(F64, (bh & 0x000FFFFF) | 0x3FF00000, u.lo()), "m")
    mh = b.let(pair(F64, m.hi(), m.lo() & 0xE0000000), "mh")
    c = b.let(LOG_C[i], "c")
    z = b.let((mh * c - 1.0) + (m - mh) * c, "z")
    b.ret((e.to(F64) * _L2HI + LOG_H[i]) + (e.to(F64) * _L2LO + (vym_log1p_s(z) + LOG_L[i])))


@function(F64, x=F32)
def vym_log2_d(b: Block, x: Val) -> None:
    h, e, lo = b.let(vym_log_parts(x), "lp")
    b.ret(e.to(F64) + (h + lo) * _INV_LN2)


# ---- sin, cos, tan ---------------------------------------------------------------------------
# r = x - q pi/2, q the integer nearest x 2/pi: Cody-Waite below 2^20 (pi/2 in three pieces,
# q c1 and q c2 exact), Payne-Hanek on 192 bits of 2/pi above; polynomials of degree 13 (sin)
# and 12 (cos) on |r| <= pi/4 (+ a rounding).
@functools.cache
def _two_over_pi() -> list[int]:
    with mpmath.workprec(600):
        words = [0]                              # one zero word: windows may start before bit 1
        f = 2 / mpmath.pi
        for _ in range(12):
            f *= 2 ** 32
            w = int(mpmath.floor(f))
            words.append(w)
            f -= w
    return words


TWO_OPI = table("vym_2opi", U32, _two_over_pi)
with mpmath.workprec(600):
    _PIO2 = float(mpmath.pi / 2)
# sin r = r + r z S(z), cos r = 1 + z C(z), z = r^2 <= h = (pi/4 (1 + 2^-30))^2: S and C of degree 5,
# mpmath.chebyfit of (sin(sqrt z)/sqrt z - 1)/z and (cos(sqrt z) - 1)/z on [0, h] at 120 bits
# (`sincos_fit` recomputes them; tests compare): approximation within 2^-55.4 |sin r| and 2^-51.6
# |cos r| (Taylor needed eight terms for cos)
_SIN_C = [float.fromhex(v) for v in (
    "-0x1.5555555555555p-3", "0x1.1111111110bb2p-7", "-0x1.a01a019e83aaep-13", "0x1.71de37968a0fcp-19",
    "-0x1.ae600b02b5e1ap-26", "0x1.5e0b19f89895dp-33")]
_COS_C = [float.fromhex(v) for v in (
    "-0x1.ffffffffffffap-2", "0x1.5555555554137p-5", "-0x1.6c16c1691d8abp-10", "0x1.a019fc7b4b9efp-16",
    "-0x1.27e0f5789d748p-22", "0x1.1c06480192f8fp-29")]


def sincos_fit() -> tuple[list[float], list[float], float, float]:
    """(S, C, error of S, error of C): the fit `_SIN_C` and `_COS_C` were made by (slow: tests)."""
    with mpmath.workprec(120):
        h = (mpmath.pi / 4 * (1 + mpmath.mpf(2) ** -30)) ** 2
        gs = lambda z: (mpmath.sin(mpmath.sqrt(z)) / mpmath.sqrt(z) - 1) / z if z > 0 else -mpmath.mpf(1) / 6  # noqa: E731
        gc = lambda z: (mpmath.cos(mpmath.sqrt(z)) - 1) / z if z > 0 else -mpmath.mpf(1) / 2  # noqa: E731
        sc, es = mpmath.chebyfit(gs, [0, h], 6, error=True, asc=True)
        cc, ec = mpmath.chebyfit(gc, [0, h], 6, error=True, asc=True)
        return [float(v) for v in sc], [float(v) for v in cc], float(es), float(ec)


with mpmath.workprec(600):
    _INV_PIO2 = float(2 / mpmath.pi)
    # pi/2 = C1 + C2 + C3 + (under 2^-118): C1, C2 of 33 bits (q C1, q C2 exact for q < 2^20)
    _C1 = float(mpmath.nint(mpmath.pi / 2 * 2 ** 32) / 2 ** 32)
    _C2 = _split(mpmath.pi / 2 - mpmath.mpf(_C1), 33)[0]
    _C3 = float(mpmath.pi / 2 - mpmath.mpf(_C1) - mpmath.mpf(_C2))
_CW_LIMIT = 2.0 ** 20          # Cody-Waite below, Payne-Hanek from here


@function(U64, g=I32)
def vym_2opi_w(b: Block, g: Val) -> None:
    """bits g .. g+63 of the padded 2/pi stream"""
    k = b.let(g >> 5, "k")
    sh = b.let((g & 31).to(U32), "sh")
    w0, w1, w2 = TWO_OPI[k], TWO_OPI[k + 1], TWO_OPI[k + 2]
    # w >> (32 - sh) as (w >> 1) >> (31 - sh): 0 when sh = 0
    hi = (w0 << sh) | ((w1 >> 1) >> (31 - sh))
    lo = (w1 << sh) | ((w2 >> 1) >> (31 - sh))
    b.ret(pair(U64, hi, lo))


@function((F64, I32), ax=F32, cold=True)
def vym_reduce_ph(b: Block, ax: Val) -> None:
    """Payne-Hanek for a finite |x| >= 2^20 (out of line: rare in a loop): (r, q mod 4)"""
    bx = b.let(ax.bits(), "b")
    e = b.let((bx >> 23).to(I32) - 150, "e")                     # ax = m 2^e, m a 24-bit integer
    m = b.let(((bx & 0x007FFFFF) | 0x00800000).to(U64), "m")
    g = b.let(e - 2 + 32, "g")                                   # bit b_(e-1) of 2/pi, after the pad word
    w0 = b.let(vym_2opi_w(g), "w0")
    w1 = b.let(vym_2opi_w(g + 64), "w1")
    w2 = b.let(vym_2opi_w(g + 128), "w2")
    # P = m (w0 w1 w2); x 2/pi mod 4 = P 2^-190: bits 191..64 of P
    h2 = b.let(mulhi(m, w2), "h2")
    l1 = b.let(m * w1, "l1")
    h1 = b.let(mulhi(m, w1), "h1")
    l0 = b.let(m * w0, "l0")
    p1 = b.let(h2 + l1, "p1")
    p2 = b.let(h1 + l0 + select(p1.lt(h2), u64(1), u64(0)), "p2")
    quad = b.var((p2 >> 62).to(U32).to(I32), "quad")
    fh = b.var((p2 << 2) | (p1 >> 62), "fh")                     # fraction, 128 bits
    fl = b.var(p1 << 2, "fl")
    sgn = b.var(f64(1.0), "sgn")
    with b.if_((fh >> 63).ne(0)):                                # fraction >= 1/2: next quadrant, negative r
        b.set(quad, quad + 1)
        b.set(sgn, -1.0)
        b.set(fh, ~fh)
        b.set(fl, ~fl + 1)
        with b.if_(fl.eq(0)):
            b.set(fh, fh + 1)
    n = b.var(i32(0), "n")
    with b.if_(fh.eq(0)):
        b.set(fh, fl)
        b.set(fl, 0)
        b.set(n, 64)
    s = b.let(clz(fh).to(I32), "s")
    with b.if_(s.gt(0)):
        b.set(fh, (fh << s) | (fl >> (64 - s)))
    b.ret(sgn * (fh.to(F64) * vym_pow2i(-64 - n - s)) * _PIO2, quad & 3)


@function((F64, I32), ax=F32)
def vym_reduce(b: Block, ax: Val) -> None:
    """|x| = q pi/2 + r, |r| <= pi/4 (+ a rounding), for a finite |x|: (r, q mod 4)"""
    with b.if_(ax.lt(_CW_LIMIT)):
        # Cody-Waite: q < 2^20, so q C1 and q C2 are exact; |x| - q C1 is exact (a multiple of
        # 2^-32 below 1); then two roundings of at most 2^-53 |r| each and under 2^-97 from
        # q C3 and the rest of pi/2: within 2^-51 |r| for every f32 below 2^20 (|r| > 2^-28)
        d = b.let(ax.to(F64), "d")
        sq = b.let(d * _INV_PIO2 + MAGIC, "sq")                   # q in the low bits (|x| < pi/4: 0, r = |x|)
        q = b.let(sq - MAGIC, "q")
        b.ret(fma(q, -_C3, fma(q, -_C2, fma(q, -_C1, d))), sq.lo().to(I32) & 3)   # q C1, q C2 exact
    r, q = b.let(vym_reduce_ph(ax), "rq")
    b.ret(r, q)


def _sincos(b: Block, r: Val, odd: Val) -> None:
    """cos r where ``odd`` holds, else sin r: a + (c z) P(z), z = r^2, with (a, c, P) = (1, 1,
    the cosine's C) or (r, r, the sine's S), both of six terms: one polynomial whose
    coefficients are selected, so a warp whose lanes need both evaluates it once (a row of a
    table indexed by ``odd`` took more instructions on sm_90: the compiler selected each address)"""
    z = b.let(r * r, "z")
    a = b.let(select(odd, f64(1.0), r), "a")
    coeffs = [select(odd, f64(c), f64(s)) for c, s in zip(_COS_C, _SIN_C, strict=True)]
    b.ret(fma(a * z, horner(z, coeffs), a))


@function(F64, r=F64, odd=BOOL)
def vym_sincos_p(b: Block, r: Val, odd: Val) -> None:
    _sincos(b, r, odd)


@function(F64, r=F64)
def vym_sin_p(b: Block, r: Val) -> None:
    z = b.let(r * r, "z")
    b.ret(fma(r * z, horner(z, _SIN_C), r))


@function(F64, r=F64)
def vym_cos_p(b: Block, r: Val) -> None:
    z = b.let(r * r, "z")
    b.ret(fma(z, horner(z, _COS_C), 1.0))


@function(F64, x=F32)
def vym_sin_y(b: Block, x: Val) -> None:
    r, q = b.let(vym_reduce(fabs(x)), "rq")
    y = b.let(vym_sincos_p(r, (q & 1).ne(0)), "y")
    b.ret(select((x.bits() >> 31).ne(((q >> 1) & 1).to(U32)), -y, y))   # x < 0 xor q = 2, 3: -y


@function(F64, x=F32)
def vym_cos_y(b: Block, x: Val) -> None:
    r, q0 = b.let(vym_reduce(fabs(x)), "rq")
    q = b.let((q0 + 1) & 3, "q")
    y = b.let(vym_sincos_p(r, (q & 1).ne(0)), "y")
    b.ret(select((q & 2).ne(0), -y, y))


@function(F64, x=F32)
def vym_tan_y(b: Block, x: Val) -> None:
    r, q = b.let(vym_reduce(fabs(x)), "rq")
    s = b.let(vym_sin_p(r), "s")
    c = b.let(vym_cos_p(r), "c")
    odd = b.let((q & 1).ne(0), "odd")
    # odd: -c / s, else s / c (one division either way)
    y = b.let(select(odd, -c, s) / select(odd, s, c), "y")
    b.ret(select(negative(x), -y, y))


# ---- tanh, sinh, cosh, expm1, log1p ------------------------------------------------------------
@function(F64, d=F64)
def vym_rcp_seed(b: Block, d: Val) -> None:
    """1/d for 2 <= d < 2^60, within 2^-17 relative: the seed `vym_tanh_y` refines. Here (WGSL)
    the quotient; the C family prints its own (`vyre.lower.crmath.c.NATIVE`: CUDA's
    rcp.approx.ftz.f64, one MUFU.RCP64H, within 2^-19.9 over every high word of d in [2, 2^64)
    (measured on an H200); OpenCL and host C the quotient)"""
    b.ret(1.0 / d)


@function(F64, x=F32)
def vym_tanh_y(b: Block, x: Val) -> None:
    """tanh x = e / (e + 2), e = e^(2|x|) - 1, for |x| clamped to 10 (tanh 10 rounds to 1, as
    tanh of every larger |x| does; NaN becomes 10 too: the entry's argument test sends it to the
    special values), without a division: with r0 a seed of 1/d (`vym_rcp_seed`, d = e + 2) and
    eps = 1 - d r0 (|eps| <= 2^-17), 1/d = r0 (1 + eps + eps^2) / (1 - eps^3), so
    e r0 (1 + eps + eps^2) is within 2^-51 of e/d before rounding; with the roundings of d,
    q0 and the last fma and e's own error, within about 2^-50.2 (DEVICE_EPS is 2^-48). The
    sign goes into the high word (tanh is odd; the result is never NaN)"""
    ax = b.let(select(fabs(x).lt(10.0), fabs(x), f32(10.0)), "ax")
    e = b.let(vym_expm1_2d(ax.to(F64)), "e")
    d = b.let(e + 2.0, "d")
    r0 = b.let(vym_rcp_seed(d), "r0")
    eps = b.let(fma(-d, r0, 1.0), "eps")
    q0 = b.let(e * r0, "q0")
    y = b.let(fma(q0, fma(eps, eps, eps), q0), "y")
    b.ret(pair(F64, y.hi() | (x.bits() & 0x80000000), y.lo()))


@function(F64, x=F32)
def vym_sinh_y(b: Block, x: Val) -> None:
    a = b.let(fabs(x).to(F64), "a")
    e = b.let(vym_expm1_d(a), "e")
    y = b.let(0.5 * (e + e / (e + 1.0)), "y")
    b.ret(select(negative(x), -y, y))


@function(F64, x=F32)
def vym_cosh_y(b: Block, x: Val) -> None:
    e = b.let(vym_exp_d(fabs(x).to(F64)), "e")
    b.ret(0.5 * (e + 1.0 / e))


@function(F64, x=F32)
def vym_expm1_y(b: Block, x: Val) -> None:
    b.ret(b.choose(x.lt(-110.0), lambda: f64(-1.0), lambda: vym_expm1_d(x.to(F64)), "y"))


@function(F64, x=F32)
def vym_log1p_y(b: Block, x: Val) -> None:
    d = b.let(x.to(F64), "d")
    with b.if_(d.gt(-2.0 ** -7) & d.lt(2.0 ** -7)):
        b.ret(vym_log1p_s(d))
    b.ret(vym_log_dd(1.0 + d))                   # 1 + d exact below 2^52 (above: harmless)


# ---- atan, asin, acos --------------------------------------------------------------------------
# atan(v) = atan(k/64) + atan(t), t = (v - k/64) / (1 + v k/64), |t| <= 1/128, for 0 <= v <= 1
# (v - k/64 exact); |x| > 1 through pi/2 - atan(1/|x|). Series through t^9 (truncation
# < 2^-66); about 2^-51 relative.
@functools.cache
def _atan_parts() -> list[tuple[float, float]]:
    with mpmath.workprec(200):
        return [_split(mpmath.atan(mpmath.mpf(k) / 64), 53) for k in range(65)]


ATAN_H = table("vym_atan_h", F64, lambda: [h for h, _ in _atan_parts()])
ATAN_L = table("vym_atan_l", F64, lambda: [lo for _, lo in _atan_parts()])
with mpmath.workprec(200):
    _ATAN_SERIES = [float(mpmath.mpf((-1) ** k) / (2 * k + 1)) for k in range(1, 5)]
    _PIO2_HI, _PIO2_LO = _split(mpmath.pi / 2, 53)


@function(F64, x=F64)
def vym_atan_d(b: Block, x: Val) -> None:
    """any double, infinities included"""
    a = b.let(select(x.lt(0.0), -x, x), "a")
    inv = b.let(a.gt(1.0), "inv")
    v = b.choose(inv, lambda: 1.0 / a, lambda: a, "v")
    s = b.let(v * 64.0 + MAGIC, "s")                            # nearest integer k, in s's low bits
    c = b.let((s - MAGIC) * 2.0 ** -6, "c")
    t = b.let((v - c) / (1.0 + v * c), "t")
    z = b.let(t * t, "z")
    k0 = b.let(s.lo().to(I32), "ki")
    ki = b.let(select(k0.lt(0), i32(0), select(k0.gt(64), i32(64), k0)), "ki")   # 0..64
    r = b.var(ATAN_H[ki] + (fma(t * z, horner(z, _ATAN_SERIES), t) + ATAN_L[ki]), "r")
    with b.if_(inv):
        b.set(r, (_PIO2_HI - r) + _PIO2_LO)
    b.ret(select(x.lt(0.0), -r, r))


@function(F64, x=F32)
def vym_atan_y(b: Block, x: Val) -> None:
    b.ret(vym_atan_d(x.to(F64)))


@function(F64, x=F32)
def vym_asin_y(b: Block, x: Val) -> None:
    """atan(x / sqrt((1 - x)(1 + x))); +-1: +-pi/2"""
    d = b.let(x.to(F64), "d")
    b.ret(vym_atan_d(d / sqrt((1.0 - d) * (1.0 + d))))


@function(F64, x=F32)
def vym_acos_y(b: Block, x: Val) -> None:
    """2 atan(sqrt((1 - x) / (1 + x))); -1: pi"""
    d = b.let(x.to(F64), "d")
    b.ret(2.0 * vym_atan_d(sqrt((1.0 - d) / (1.0 + d))))


# ---- cbrt, erf ---------------------------------------------------------------------------------
@function(F64, x=F32)
def vym_cbrt_y(b: Block, x: Val) -> None:
    """x normal, nonzero: m 2^(3q + r), Newton on [1, 8)"""
    bx = b.let(x.bits() & 0x7FFFFFFF, "b")
    e = b.let((bx >> 23).to(I32) - 127, "e")
    q = b.let(select(e.ge(0), e, e - 2) / 3, "q")
    r = b.let(e - 3 * q, "r")
    vf = b.let(((bx & 0x007FFFFF) | 0x3F800000) + (r.to(U32) << 23), "vf")   # bits of m 2^r (exact)
    v = b.let(vf.bits().to(F64), "v")
    y = b.var((vf / 3 + 0x2A5137A0).bits().to(F64), "y")                   # within about 6%
    for _ in range(4):
        b.set(y, y - (y * y * y - v) / (3.0 * y * y))
    b.set(y, y * vym_pow2i(q))
    b.ret(select(negative(x), -y, y))


# erf(a), 0 <= a < 6: odd series below 1/16; else the degree-12 Taylor polynomial of erf at the
# centre c of a's 1/16-wide interval (mpmath's coefficients), d = a - c exact, |d| <= 1/32
# (truncation < 2^-58 relative).
_ERF_DEG = 12


@functools.cache
def _erf_rows() -> list[float]:
    deg = _ERF_DEG
    rows = []
    with mpmath.workprec(80):
        for k in range(96):
            c = (mpmath.mpf(k) + 0.5) / 16
            g = 2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-c * c)   # erf^(n) = g (-1)^(n-1) H_(n-1)
            h = [mpmath.mpf(1), 2 * c]                             # Hermite: H_(n+1) = 2c H_n - 2n H_(n-1)
            while len(h) < deg:
                h.append(2 * c * h[-1] - 2 * (len(h) - 1) * h[-2])
            rows.append(float(mpmath.erf(c)))
            rows.extend(float(g * (-1) ** (n - 1) * h[n - 1] / mpmath.factorial(n)) for n in range(1, deg + 1))
    return rows


ERF_T = table("vym_erf_t", F64, _erf_rows)
with mpmath.workprec(80):
    _ERF_S0 = [float(2 / mpmath.sqrt(mpmath.pi) * mpmath.mpf(-1) ** n / (mpmath.factorial(n) * (2 * n + 1)))
               for n in range(7)]


@function(F64, a=F64)
def vym_erf_d(b: Block, a: Val) -> None:
    with b.if_(a.lt(0.0625)):
        z = b.let(a * a, "z")
        b.ret(a * horner(z, _ERF_S0))
    k0 = b.let((a * 16.0).to(I32), "k")
    k = b.let(select(k0.gt(95), i32(95), k0), "k")
    d = b.let(a - (k.to(F64) + 0.5) * 0.0625, "d")
    row = b.let(ERF_T.row(k, _ERF_DEG + 1), "c")     # erf(c) and its Taylor coefficients at c
    b.ret(horner(d, list(row)))


@function(F64, x=F32)
def vym_erf_y(b: Block, x: Val) -> None:
    ax = b.let(fabs(x), "ax")
    y = b.choose(ax.ge(6.0), lambda: f64(1.0), lambda: vym_erf_d(ax.to(F64)), "y")   # 1 - erf(6) < 2^-55
    b.ret(select(negative(x), -y, y))


# ---- the entry points ----------------------------------------------------------------------
# Each op's special values: (condition, result) pairs on the f32 ``x``, the first that holds
# decides. The entry point computes the core's double of every input (a special input is
# replaced by 1, so the core never sees NaN, infinity or a value outside its range) and returns
# it rounded when no special value applies and the double is far from every rounding boundary
# (`rounds_plainly`): one test, the common path straight-line. Everything else (the special
# values, the finisher's hard-case search) is ``vym_<name>_slow``, a cold function (not inlined)
# that decides as the entry did before it had a fast path.
Special = list[tuple[Val, Val]]


def _entry(name: str, core: Function, special: Callable[[Val], Special], fast: Fast | None) -> Function:
    """``vym_<name>(x)``: the core's double rounded on the common path, else
    ``vym_<name>_slow(x)``. The common path is taken for arguments in ``fast`` (`FAST`), else
    for those no special value claims."""
    fin = finisher(name)

    def slow_build(b: Block, x: Val) -> None:
        for cond, value in special(x):
            with b.if_(cond):
                b.ret(value)
        b.ret(fin(core(x), x.bits()))

    slow = Function(f"vym_{name}_slow", F32, (("x", F32),), slow_build, cold=True,
                    doc="the special values, then the finisher (the rare path)")

    def build(b: Block, x: Val) -> None:
        if fast is None:
            plain = ~functools.reduce(lambda a, c: a | c, [c for c, _ in special(x)])
        else:
            plain = fast.args(x)
        if fast is not None and fast.total:      # one branch: the argument test joins the rounding test
            y = b.let(core(x), "y")
            ok, r = plain_f32(b, y, fast.normal)
            with b.if_(plain & ok):
                b.ret(r)
            b.ret(slow(x))
            return
        with b.if_(~plain):
            b.ret(slow(x))
        y = b.let(core(x), "y")
        ok, r = plain_f32(b, y, fast is not None and fast.normal)
        with b.if_(ok):
            b.ret(r)
        b.ret(slow(x))

    return Function(f"vym_{name}", F32, (("x", F32),), build)


def _keep_zero(x: Val) -> Special:
    return [(x.eq(0.0), x)]                      # keeps the zero's sign


def _nan_if(cond: Val) -> Special:
    return [(cond, fbits(NAN))]


def _exp_special(x: Val) -> Special:
    return [*_nan_if(is_nan(x)), (x.gt(100.0), fbits(INF)), (x.lt(-110.0), f32(0.0))]


def _exp2_special(x: Val) -> Special:
    return [*_nan_if(is_nan(x)), (x.ge(128.0), fbits(INF)), (x.lt(-152.0), f32(0.0))]


def _log_special(x: Val) -> Special:
    return [*_nan_if(is_nan(x) | x.lt(0.0)), (x.eq(0.0), fbits(NEG_INF)), (is_inf(x), x)]


def _trig_special(x: Val) -> Special:
    return _nan_if(is_nan(x) | is_inf(x))


def _tanh_special(x: Val) -> Special:
    return _nan_if(is_nan(x))


def _sinh_special(x: Val) -> Special:
    return [*_keep_zero(x), *_nan_if(is_nan(x)),
            (fabs(x).ge(90.0), ((x.bits() & 0x80000000) | INF).bits())]


def _cosh_special(x: Val) -> Special:
    return [*_nan_if(is_nan(x)), (fabs(x).ge(90.0), fbits(INF))]


def _expm1_special(x: Val) -> Special:
    return [*_keep_zero(x), *_nan_if(is_nan(x)), (x.gt(100.0), fbits(INF))]


def _log1p_special(x: Val) -> Special:
    return [*_keep_zero(x), *_nan_if(is_nan(x) | x.lt(-1.0)), (x.eq(-1.0), fbits(NEG_INF)), (is_inf(x), x)]


def _atan_special(x: Val) -> Special:
    return [*_keep_zero(x), *_nan_if(is_nan(x))]


def _asin_special(x: Val) -> Special:
    return [*_keep_zero(x), *_nan_if(is_nan(x) | x.gt(1.0) | x.lt(-1.0))]


def _acos_special(x: Val) -> Special:
    return _nan_if(is_nan(x) | x.gt(1.0) | x.lt(-1.0))


def _cbrt_special(x: Val) -> Special:
    return [*_nan_if(is_nan(x)), (x.eq(0.0) | is_inf(x), x)]


# name -> (the double it rounds, the special values)
_ENTRIES = {
    "exp": (vym_exp_d, _exp_special), "exp2": (vym_exp2_d, _exp2_special),
    "log": (vym_log_d, _log_special), "log2": (vym_log2_d, _log_special),
    "sin": (vym_sin_y, _trig_special), "cos": (vym_cos_y, _trig_special), "tan": (vym_tan_y, _trig_special),
    "tanh": (vym_tanh_y, _tanh_special), "sinh": (vym_sinh_y, _sinh_special),
    "cosh": (vym_cosh_y, _cosh_special), "expm1": (vym_expm1_y, _expm1_special),
    "log1p": (vym_log1p_y, _log1p_special), "atan": (vym_atan_y, _atan_special),
    "asin": (vym_asin_y, _asin_special), "acos": (vym_acos_y, _acos_special),
    "cbrt": (vym_cbrt_y, _cbrt_special), "erf": (vym_erf_y, _atan_special),
}


class Fast:
    """An entry's common-path test on its argument, in float compares (a NaN fails each one)
    where the special-value tests work on the bits: it must exclude every argument a special
    value claims. ``normal``: every argument it admits has a normal, finite result (so the
    rounding test skips the result's range). ``total``: the core may run on every f32 argument
    (NaN and infinities included: no out-of-range table index, no loop, no trap; what it computes
    for an argument outside ``args`` is discarded), so the entry computes it before testing the
    argument and branches once, on both tests."""

    def __init__(self, args: Callable[[Val], Val], normal: bool = False, total: bool = False) -> None:
        self.args, self.normal, self.total = args, normal, total


FLT_MAX = float.fromhex("0x1.fffffep+127")


def _finite(x: Val) -> Val:
    return fabs(x).le(FLT_MAX)


def _nonzero(x: Val) -> Val:
    return fabs(x).gt(0.0)


# name -> the common path's arguments (see each function's special values above)
FAST: dict[str, Fast] = {
    # e^x in (2^-126, 2^128) for -87.336 < x < 88.722
    "exp": Fast(lambda x: fabs(x).lt(87.25), normal=True, total=True),
    "exp2": Fast(lambda x: x.gt(-126.0) & x.lt(128.0), normal=True),
    "log": Fast(lambda x: x.gt(0.0) & x.le(FLT_MAX)), "log2": Fast(lambda x: x.gt(0.0) & x.le(FLT_MAX)),
    "sin": Fast(_finite), "cos": Fast(_finite), "tan": Fast(_finite),
    # tanh: infinities too (the core clamps |x| to 10, whose tanh rounds to 1); |x| >= 2^-100
    # keeps the result normal
    "tanh": Fast(lambda x: fabs(x).ge(2.0 ** -100), normal=True, total=True),
    "sinh": Fast(lambda x: _nonzero(x) & fabs(x).lt(90.0)),
    "cosh": Fast(lambda x: fabs(x).lt(89.0), normal=True),    # cosh 89 < 2.3e38
    "expm1": Fast(lambda x: _nonzero(x) & x.lt(100.0)),
    "log1p": Fast(lambda x: _nonzero(x) & x.gt(-1.0) & x.le(FLT_MAX)),
    "atan": Fast(_nonzero), "erf": Fast(_nonzero),
    "asin": Fast(lambda x: _nonzero(x) & fabs(x).le(1.0)), "acos": Fast(lambda x: fabs(x).le(1.0)),
    "cbrt": Fast(lambda x: _nonzero(x) & fabs(x).le(FLT_MAX)),
}


def _core_of(name: str, core: Function) -> Function:
    """exp/exp2 round their core of (double)x: a one-line wrapper keeps the entry uniform."""
    if core.params[0][1] is F32:
        return core

    def build(b: Block, x: Val) -> None:
        b.ret(core(x.to(F64)))

    return Function(f"vym_{name}_y", F64, (("x", F32),), build)


_CORE: dict[str, Function] = {name: _core_of(name, core) for name, (core, _) in _ENTRIES.items()}
ENTRY: dict[str, Function] = {name: _entry(name, _CORE[name], special, FAST.get(name))
                              for name, (_, special) in _ENTRIES.items()}


def _lane(name: str, core: Function, fast: Fast) -> Function:
    """``vym_<name>_lane(x)``: the entry's common path with no branch, for a loop over
    lanes that a compiler vectorises (OpenCL on a CPU: `vyre.lower.cfamily`): the core's
    double rounded plainly, and whether the entry would have returned it (else the caller
    runs the entry, ``vym_<name>``, on that lane afterwards). Only for a `Fast` with
    ``total``: the core runs on every f32 argument."""

    def build(b: Block, x: Val) -> None:
        y = b.let(core(x), "y")
        ok, r = plain_f32(b, y, fast.normal)
        b.ret(r, fast.args(x) & ok)

    return Function(f"vym_{name}_lane", (F32, BOOL), (("x", F32),), build)


#: the lane functions (`_lane`) of the entries whose common path is total
LANE: dict[str, Function] = {name: _lane(name, _CORE[name], FAST[name])
                             for name in _ENTRIES if name in FAST and FAST[name].total}


@function(F32, x=F32, y=F32)
def vym_hypot(b: Block, x: Val, y: Val) -> None:
    """sqrt(x^2 + y^2): squares exact, their sum s + e exact (two-sum), sqrt within 2^-52;
    near a rounding boundary the exact sum decides against the boundary's square (exact too)"""
    with b.if_(is_inf(x) | is_inf(y)):
        b.ret(fbits(INF))
    with b.if_(is_nan(x) | is_nan(y)):
        b.ret(fbits(NAN))
    a = b.let(x.to(F64), "a")
    c = b.let(y.to(F64), "b")
    p = b.let(a * a, "p")
    q = b.let(c * c, "q")
    s = b.let(p + q, "s")
    bb = b.let(s - p, "bb")
    e = b.let((p - (s - bb)) + (q - bb), "e")
    r = b.let(sqrt(s), "r")
    with b.if_(r.eq(0.0)):
        b.ret(f32(0.0))
    with b.if_(r.ge(2.0 ** 128)):
        b.ret(fbits(INF))
    h = b.let((r.lo() & 0x1FFFFFFF).to(I32) - 0x10000000, "h")
    with b.if_(h.gt(40) | h.lt(-40)):              # r >= max(|x|, |y|) >= 2^-126
        b.ret(r.to(F32))
    fb = b.let(r.to(F32).bits(), "fb")
    fv = b.let(select(fb.eq(INF), f64(2.0 ** 128), fb.bits().to(F64)), "fv")
    ob = b.let(select(r.ge(fv), fb + 1, fb - 1), "ob")
    ov = b.let(select(ob.eq(INF), f64(2.0 ** 128), ob.bits().to(F64)), "ov")
    m = b.let(0.5 * (fv + ov), "m")                # the boundary: 25 bits, m * m exact
    d = b.let((s - m * m) + e, "d")                # sign of (x^2 + y^2 - m^2), exactly
    lo = b.let(select(fb.lt(ob), fb, ob), "lo")
    hi = b.let(select(fb.lt(ob), ob, fb), "hi")
    b.ret(select(d.gt(0.0), hi, select(d.lt(0.0), lo, select((lo & 1).ne(0), hi, lo))).bits())
