"""pow(x, y) and atan2(y, x), correctly rounded for every pair of f32 values (S13).

Two inputs make 2^64 cases: no table of hard cases can cover them, so each function has a
second, more precise evaluation instead (after CORE-MATH's binary32 ``powf`` and
``atan2f``), all in IEEE float64 basic operations (+ - * / sqrt, exact conversions, bit
operations; no fma: exact products are Dekker's, with Veltkamp splits):

1. a fast double ``v`` within ``*_EPS_FAST`` relative error of the exact value; rounding it
   is correct unless a rounding boundary (a midpoint between neighbouring f32 values, the
   overflow threshold 2^128 - 2^103 or the flush threshold 2^-126 - 2^-150) lies within
   that error: `decided` tests that by rounding ``v (1 - 2 eps)`` and ``v (1 + 2 eps)``
   (measured on PoCL over the tests' random pairs: 4 of 587,240 pow pairs fail it, about
   2^-17, and none of 916,622 atan2 pairs);
2. then a double-double ``h + l`` within ``*_EPS_ACC`` (2^-95 for pow, 2^-100 for atan2);
   `vym_dd_round` finds the boundary ``B`` next to ``h`` and decides by the sign of
   ``(h - B) + l`` (``h - B`` exact), unless ``|h + l - B| <= 2 eps |h|``;
3. a pair that fails both is an exact case (pow only: ``x^y`` is then a boundary, an odd
   25-bit multiple of a power of two, found and computed exactly by `vym_pow_exact`) or
   a pair whose exact value lies within 2^-94 (pow) / 2^-99 (atan2) of a boundary.

Why the last kind does not occur. atan2: its value is never a boundary (atan and
pi - atan of a nonzero rational are transcendental); CORE-MATH's search over every 25-bit
boundary z in [2^-7, pi) (continued fractions of tan z with 24-bit numerators and
denominators, ``atan2f.wc``) finds no pair with more than 52 identical bits after the
round bit, i.e. every pair is farther than 2^-78 relative from a boundary; below 2^-7 the
value is atan(t) with t = |y/x| < 2^-6.9 and no complete search is published (for
t < 2^-25, atan(t) = t (1 - t^2/3 + ...) lies on t's side of every boundary, which t itself
misses by more than 2^-50 unless it is one). pow: no published bound covers all 2^64 pairs
here; CORE-MATH's exhaustive search for ``powf`` lists every pair with 44 or more identical
bits after the round bit (the ones in tests/semantics/data are checked byte for byte), and
the expected worst case of about 2^62 non-trivial pairs is near 62 identical bits, 2^-87,
well outside 2^-94. Should such a pair exist, the device returns ``h`` rounded, correct
unless ``h + l`` and the exact value straddle the boundary.

Error bounds (``*_EPS_*``; tests/semantics/test_crmath_pow_atan2.py measures each helper
against mpmath on thousands of pairs chosen to stress them, all below half the bound):

* pow fast: log2|x| = L = e + (lh_i + (ll_i + p)), p = log2(1 + r), r = m c_i - 1 exact
  (|r| < 2^-7, c_i the f32 table of `vyre.lower.crmath.functions`), p by a degree-8 series
  (truncation 2^-59, Horner error under 2.2u of |p|, u = 2^-53). With |lh_i| <= 1/2:
  for e != 0, |L| >= 0.49, |L - e| <= 1.05 |L|, |p| <= 0.023 |L| and the three additions
  err by at most 2.1u |L|; for e = 0 either lh_i = 0 (L = p: 5.2u |L|) or |L| >= 2 |p|
  (3.6u |L|). t = y L adds u |t|, so |dt| <= 6.2u |t| < 2^-43.4 for |t| < 130, and
  2^t (`vym_exp2_d`, whose reduction N t - k is exact for any double t, within 2^-51)
  is within ln2 2^-43.4 + 2^-51 < 2^-43.8: ``POW_EPS_FAST`` = 2^-43 (measured 2^-45.2).
* pow accurate: log2(1 + r) = r S(r) with S's terms through r^16 (truncation 2^-112), the
  first seven in double-double; L = e + lt_i + log2(1 + r) in double-double (relative
  error about 4 2^-106); t = y L as y h + y l with y h exact (two_prod) and the integer
  multiple of 1/64 subtracted exactly before any rounding of the fraction; 2^f for
  |f| <= 2^-7 by a degree-13 series in f (the first six terms double-double), times
  2^(j/64) (double-double table). The absolute error of t dominates: about
  |t| 2^-104 <= 2^-96.8, hence ``POW_EPS_ACC`` = 2^-95 (measured 2^-97.7).
* atan2 fast: q = min/max of |x|, |y| (one rounding), atan(q) by `vym_atan_d` (2^-51),
  pi/2 - a and pi - a with split constants (results >= pi/4 there, no cancellation):
  ``ATAN2_EPS_FAST`` = 2^-49 (measured 2^-51.4).
* atan2 accurate: q = qh + ql exactly up to 2^-106 (the remainder n - qh d is exact);
  atan(q) = atan(k/64) + atan(t), t = (q - k/64) / (1 + q k/64) in double-double
  (|t| <= 2^-7), series through t^15 (truncation 2^-112), the first terms double-double;
  ``ATAN2_EPS_ACC`` = 2^-100 (measured 2^-104.8).
"""

from __future__ import annotations

import functools

import mpmath

from .dsl import (
    BOOL,
    F32,
    F64,
    I32,
    U32,
    Block,
    Val,
    clz,
    f32,
    f64,
    function,
    i32,
    select,
    sqrt,
    table,
    u32,
)
from .functions import (
    ATAN_H,
    ATAN_L,
    EXP_T,
    INF,
    LOG_C,
    NAN,
    _f32,
    _split,
    fabs,
    fbits,
    horner,
    is_inf,
    is_nan,
    negative,
    vym_atan_d,
    vym_exp2_d,
    vym_pow2i,
    vym_round,
)

POW_EPS_FAST = 2.0 ** -43
POW_EPS_ACC = 2.0 ** -95
ATAN2_EPS_FAST = 2.0 ** -49
ATAN2_EPS_ACC = 2.0 ** -100
SPLITTER = 134217729.0           # 2^27 + 1: Veltkamp's split of a double into 26 + 27 bits
MAGIC = 1.5 * 2.0 ** 52


# ---- double-double arithmetic ------------------------------------------------------------------
@function((F64, F64), a=F64, c=F64)
def vym_two_sum(b: Block, a: Val, c: Val) -> None:
    """a + c = s + e exactly (Knuth's two-sum)"""
    s = b.let(a + c, "s")
    bb = b.let(s - a, "bb")
    b.ret(s, (a - (s - bb)) + (c - bb))


@function((F64, F64), a=F64, c=F64)
def vym_fast_two_sum(b: Block, a: Val, c: Val) -> None:
    """a + c = s + e exactly, for |a| >= |c| (or c = 0)"""
    s = b.let(a + c, "s")
    b.ret(s, c - (s - a))


@function((F64, F64), a=F64, c=F64)
def vym_two_prod(b: Block, a: Val, c: Val) -> None:
    """a c = p + e exactly (Dekker's product of Veltkamp's 26 + 27-bit halves), |a|, |c| < 2^995"""
    p = b.let(a * c, "p")
    ta = b.let(a * SPLITTER, "ta")
    ah = b.let(ta - (ta - a), "ah")
    al = b.let(a - ah, "al")
    tc = b.let(c * SPLITTER, "tc")
    ch = b.let(tc - (tc - c), "ch")
    cl = b.let(c - ch, "cl")
    b.ret(p, ((ah * ch - p) + ah * cl + al * ch) + al * cl)


@function((F64, F64), xh=F64, xl=F64, yh=F64, yl=F64)
def vym_dd_add(b: Block, xh: Val, xl: Val, yh: Val, yl: Val) -> None:
    """(xh + xl) + (yh + yl), normalised: one rounding of the low parts' sum"""
    s, e = b.let(vym_two_sum(xh, yh), "s")
    h, lo = b.let(vym_fast_two_sum(s, e + (xl + yl)), "r")
    b.ret(h, lo)


@function((F64, F64), xh=F64, xl=F64, yh=F64, yl=F64)
def vym_dd_mul(b: Block, xh: Val, xl: Val, yh: Val, yl: Val) -> None:
    """(xh + xl)(yh + yl), normalised (the xl yl term dropped: below 2^-104 relative)"""
    p, e = b.let(vym_two_prod(xh, yh), "p")
    h, lo = b.let(vym_fast_two_sum(p, e + (xh * yl + xl * yh)), "r")
    b.ret(h, lo)


@function((F64, F64), xh=F64, xl=F64, y=F64)
def vym_dd_mul_d(b: Block, xh: Val, xl: Val, y: Val) -> None:
    """(xh + xl) y, normalised"""
    p, e = b.let(vym_two_prod(xh, y), "p")
    h, lo = b.let(vym_fast_two_sum(p, e + xl * y), "r")
    b.ret(h, lo)


def decided(b: Block, v: Val, eps: float) -> Val:
    """Whether every value within ``eps |v|`` of the double ``v`` rounds (and flushes) to the
    f32 that ``v`` does: ``v (1 - 2 eps)`` and ``v (1 + 2 eps)`` (each one rounding, still
    beyond ``v (1 -+ eps)`` for eps >= 2^-51) round alike, and rounding is monotonic."""
    lo = b.let(vym_round(v * (1.0 - 2 * eps)), "lo")
    hi = b.let(vym_round(v * (1.0 + 2 * eps)), "hi")
    return lo.bits().eq(hi.bits())


_FLUSH_T = float.fromhex("0x1.fffffep-127")   # 2^-126 - 2^-150: below it a result flushes to 0


@function((BOOL, U32), h=F64, l=F64, eps=F64)
def vym_dd_round(b: Block, h: Val, l: Val, eps: Val) -> None:
    """(decided, f32 bits) of the value known to lie within eps |h| of h + l (|l| <= ulp(h)):
    the boundary B next to |h| (the flush threshold below 2^-126, else the midpoint between
    the nearest f32 and its neighbour on h's side, 2^128 standing for the f32 after the
    largest), d = (|h| - B) + l' (|h| - B exact when B is within a factor 2 of |h|; else
    |d| is large and its sign right); decided when |d| > 2 eps |h|: the side of B."""
    neg = b.let(h.lt(0.0), "neg")
    a = b.let(select(neg, -h, h), "a")
    lo = b.let(select(neg, -l, l), "lo")
    sign = b.let(select(neg, u32(0x80000000), u32(0)), "sign")
    with b.if_(a.ge(2.0 ** 128)):
        b.ret(True, sign | INF)
    with b.if_(a.lt(2.0 ** -126)):
        d0 = b.let((a - _FLUSH_T) + lo, "d0")
        b.ret(d0.gt(2.0 * eps * a) | d0.lt(-2.0 * eps * a), sign | select(d0.gt(0.0), u32(0x00800000), u32(0)))
    g = b.let(a.to(F32).bits(), "g")
    gv = b.let(select(g.eq(INF), f64(2.0 ** 128), g.bits().to(F64)), "gv")
    o = b.let(select(a.ge(gv), g + 1, g - 1), "o")
    ov = b.let(select(o.eq(INF), f64(2.0 ** 128), o.bits().to(F64)), "ov")
    d = b.let((a - 0.5 * (gv + ov)) + lo, "d")
    up = b.let(select(g.lt(o), o, g), "up")
    dn = b.let(select(g.lt(o), g, o), "dn")
    b.ret(d.gt(2.0 * eps * a) | d.lt(-2.0 * eps * a), sign | select(d.gt(0.0), up, dn))


# ---- pow -------------------------------------------------------------------------------------
def _log2_of_inverse() -> list[tuple[float, float]]:
    """-log2(c_i) (minus 1 where the reduction adds 1 to the exponent, i >= 53) as hi + lo."""
    with mpmath.workprec(300):
        return [_split(-mpmath.log(mpmath.mpf(c), 2) - (1 if i >= 53 else 0), 53)
                for i, c in enumerate(LOG_C.values)]


POW_LH = table("vym_pow_lh", F64, lambda: [h for h, _ in _log2_of_inverse()])
POW_LL = table("vym_pow_ll", F64, lambda: [lo for _, lo in _log2_of_inverse()])


def _exp_lo() -> list[float]:
    """2^(j/64) - vym_exp_t[j]: the low parts of the table (double-double 2^(j/64))."""
    with mpmath.workprec(300):
        return [float(mpmath.power(2, mpmath.mpf(j) / 64) - mpmath.mpf(EXP_T.values[j])) for j in range(64)]


EXP_TL = table("vym_exp_tl", F64, _exp_lo)


@functools.cache
def _pow_coefficients() -> dict[str, list]:
    with mpmath.workprec(300):
        ln2 = mpmath.log(2)
        series = [mpmath.mpf((-1) ** (j + 1)) / (j * ln2) for j in range(1, 18)]   # log2(1+r)/r
        exp2 = [ln2 ** n / mpmath.factorial(n) for n in range(14)]                   # 2^f
        return {"fast": [float(c) for c in series[:8]], "log_dd": [_split(c, 53) for c in series[:7]],
                "log_d": [float(c) for c in series[7:]], "exp_dd": [_split(c, 53) for c in exp2[:6]],
                "exp_d": [float(c) for c in exp2[6:]], "ln2": float(ln2)}


@function((F64, I32, F64), x=F32)
def vym_pow_reduce(b: Block, x: Val) -> None:
    """log2 x = e + log2(1/c_i) + log2(1 + r) for a positive normal f32 x: (e, i, r); r = m c_i - 1
    is exact (24-bit m times the f32 c_i, near 1) and |r| < 2^-7"""
    bx = b.let(x.bits(), "bx")
    i = b.let(((bx >> 16) & 127).to(I32), "i")
    e = b.let((bx >> 23).to(I32) - 127 + select(i.ge(53), i32(1), i32(0)), "e")
    m = b.let(((bx & 0x007FFFFF) | 0x3F800000).bits().to(F64), "m")
    b.ret(e.to(F64), i, m * LOG_C[i] - 1.0)


@function(F64, e=F64, i=I32, r=F64, y=F64)
def vym_pow_t(b: Block, e: Val, i: Val, r: Val, y: Val) -> None:
    """t = y log2 x in double (the fast path), |dt| < 2^-44.2 for |t| < 130"""
    c = _pow_coefficients()["fast"]
    b.ret(y * (e + (POW_LH[i] + (POW_LL[i] + r * horner(r, c)))))


@function((F64, F64), e=F64, i=I32, r=F64, y=F64)
def vym_pow_acc(b: Block, e: Val, i: Val, r: Val, y: Val) -> None:
    """2^(y log2 x) as a double-double within POW_EPS_ACC, for y log2 x in (-131, 130)"""
    k = _pow_coefficients()
    # S(r) = log2(1 + r) / r: terms 8..17 in double (below 2^-49 of S), then double-double Horner
    tail = b.let(r * horner(r, k["log_d"]), "tail")
    sh, sl = b.let(vym_fast_two_sum(k["log_dd"][6][0], tail), "s")
    sl = sl + k["log_dd"][6][1]
    for j in range(5, -1, -1):
        sh, sl = b.let(vym_dd_mul_d(sh, sl, r), "s")
        sh, sl = b.let(vym_dd_add(f64(k["log_dd"][j][0]), f64(k["log_dd"][j][1]), sh, sl), "s")
    ph, pl = b.let(vym_dd_mul_d(sh, sl, r), "p")                 # log2(1 + r)
    ah, al = b.let(vym_two_sum(e, POW_LH[i]), "a")               # e + log2(1/c_i): exact pair
    ah, al = b.let(vym_dd_add(ah, al + POW_LL[i], ph, pl), "a")  # log2 x
    th, te = b.let(vym_two_prod(y, ah), "t")                     # y log2 x = th + te + y al
    s = b.let(th * 64.0 + MAGIC, "ks")                           # k = nearest integer to 64 th
    fh = b.let((th * 64.0 - (s - MAGIC)) * 2.0 ** -6, "fh")     # th - k/64, exact
    fh, fl = b.let(vym_two_sum(fh, te + y * al), "f")            # f = t - k/64, |f| < 2^-6.9
    # 2^fh: terms 6..13 in double, then double-double Horner in fh; then times 1 + fl ln2
    q = b.let(fh * horner(fh, k["exp_d"]), "q")
    eh, el = b.let(vym_fast_two_sum(k["exp_dd"][5][0], q), "x")
    el = el + k["exp_dd"][5][1]
    for n in range(4, -1, -1):
        eh, el = b.let(vym_dd_mul_d(eh, el, fh), "x")
        eh, el = b.let(vym_dd_add(f64(k["exp_dd"][n][0]), f64(k["exp_dd"][n][1]), eh, el), "x")
    eh, el = b.let(vym_fast_two_sum(eh, el + eh * (fl * k["ln2"])), "x")
    ki = b.let(s.lo().to(I32), "ki")
    j = b.let(ki & 63, "j")
    rh, rl = b.let(vym_dd_mul(eh, el, EXP_T[j], EXP_TL[j]), "r")
    sc = b.let(vym_pow2i((ki - j) / 64), "sc")
    b.ret(rh * sc, rl * sc)


@function((BOOL, F64), x=F32, y=F32)
def vym_pow_exact(b: Block, x: Val, y: Val) -> None:
    """(whether x^y is an odd multiple of a power of two with at most 26 significant bits,
    its value) for a positive normal f32 x and a finite f32 y. Every rounding boundary is
    such a number; a power of two never is one, and x^y is one only for y = n / 2^k with
    n <= 15, k <= 3 (x = m 2^e with m odd: x^y dyadic needs m = r^(2^k), so r < 2^(24 / 2^k),
    and r^n < 2^26 with r >= 3). x^(1/2^k) is taken by k square roots, each checked exact
    (an exact root has at most 12 significant bits: with at most 26, s s is exact and must
    equal w); then r^n = r^(n & 1) r^(n & 2) r^(n & 4) r^(n & 8), exact when below 2^26
    (every factor and partial product is at most r^n), and at least 2^26 when r^n is (an odd
    r^n > 2^26 is not lost to 4 roundings)."""
    y8 = b.let((y.to(F64) * 8.0), "y8")
    ok0 = b.let(y8.ge(1.0) & y8.le(120.0), "ok0")
    n8 = b.let(select(ok0, y8, f64(1.0)).to(I32), "n8")
    ok = b.var(ok0 & n8.to(F64).eq(y8), "ok")                      # y = n8 / 8 exactly
    # k = 3 - (trailing zeros of n8, at most 3); n = n8 >> (3 - k)
    tz = b.let(select((n8 & 7).eq(0), i32(3), select((n8 & 3).eq(0), i32(2), select((n8 & 1).eq(0), i32(1), i32(0)))), "tz")
    k = b.let(3 - tz, "k")
    n = b.let(n8 >> tz, "n")
    b.set(ok, ok & n.le(15))
    w = b.var(x.to(F64), "w")
    for step in (1, 2, 3):                                       # w = x^(1/2^k), exactly or not ok
        s = b.let(sqrt(w), "s")
        exact = (s.lo() & 0x07FFFFFF).eq(0) & (s * s).eq(w)
        active = b.let(k.ge(step), "act")
        b.set(ok, ok & (~active | exact))
        b.set(w, select(active, s, w))
    # w = r 2^c, r odd (w has at most 24 significant bits)
    wb = b.let(w.bits(), "wb")
    mw = b.let(((wb >> 29).to(U32) & 0x007FFFFF) | 0x00800000, "mw")
    low = b.let(mw & (~mw + 1), "low")                            # the lowest set bit
    t = b.let((31 - clz(low)).to(I32), "tzw")
    r = b.let((mw >> t.to(U32)).to(F64), "r")
    c = b.let((wb.hi() >> 20).to(I32) - 1023 - 23 + t, "c")
    r2 = b.let(r * r, "r2")
    r4 = b.let(r2 * r2, "r4")
    q = b.let(select((n & 1).ne(0), r, f64(1.0)) * select((n & 2).ne(0), r2, f64(1.0))
              * select((n & 4).ne(0), r4, f64(1.0)) * select((n & 8).ne(0), r4 * r4, f64(1.0)), "q")
    ce = b.let(select(ok, c * n, i32(0)), "ce")
    okf = b.let(ok & r.gt(1.0) & q.lt(2.0 ** 26) & ce.gt(-1000) & ce.lt(1000), "okf")
    b.ret(okf, q * vym_pow2i(select(okf, ce, i32(0))))


@function(I32, y=F32)
def vym_int_class(b: Block, y: Val) -> None:
    """for a finite nonzero f32 or an infinity: 2 an odd integer, 1 an even integer (the
    infinities too), 0 not an integer"""
    by = b.let(y.bits() & 0x7FFFFFFF, "by")
    ex = b.let((by >> 23).to(I32) - 127, "ex")
    with b.if_(ex.lt(0)):
        b.ret(0)
    with b.if_(ex.ge(24)):
        b.ret(1)
    mant = b.let((by & 0x007FFFFF) | 0x00800000, "mant")
    sh = b.let((23 - ex).to(U32), "sh")
    with b.if_((mant & ((u32(1) << sh) - 1)).ne(0)):
        b.ret(0)
    b.ret(select(((mant >> sh) & 1).ne(0), i32(2), i32(1)))


@function(F32, x=F32, y=F32)
def vym_pow(b: Block, x: Val, y: Val) -> None:
    """x^y (IEEE 754-2019 9.2 special values, docs/semantics.md S13)"""
    xb = b.let(x.bits(), "xb")
    yb = b.let(y.bits(), "yb")
    ax = b.let(xb & 0x7FFFFFFF, "ax")
    ay = b.let(yb & 0x7FFFFFFF, "ay")
    with b.if_(ay.eq(0) | xb.eq(0x3F800000)):                  # x^(+-0) = 1^y = 1, NaN too
        b.ret(f32(1.0))
    with b.if_(ax.gt(INF) | ay.gt(INF)):
        b.ret(fbits(NAN))
    with b.if_(ay.eq(INF)):                                     # (-1)^(+-inf) = 1; else 0 or inf
        with b.if_(ax.eq(0x3F800000)):
            b.ret(f32(1.0))
        b.ret(select(ax.lt(0x3F800000).eq(negative(y)), fbits(INF), f32(0.0)))
    cls = b.let(vym_int_class(y), "cls")
    sign = b.let(select(negative(x) & cls.eq(2), u32(0x80000000), u32(0)), "sign")
    with b.if_(ax.eq(0) | ax.eq(INF)):                          # +-0, +-inf: 0 or inf, signed for odd y
        big = select(ax.eq(0), negative(y), ~negative(y))
        b.ret((sign | select(big, u32(INF), u32(0))).bits())
    with b.if_(negative(x) & cls.eq(0)):
        b.ret(fbits(NAN))
    a = b.let(ax.bits(), "a")
    yd = b.let(y.to(F64), "yd")
    e, i, r = b.let(vym_pow_reduce(a), "red")
    t = b.let(vym_pow_t(e, i, r, yd), "t")
    with b.if_(t.ge(129.0)):
        b.ret((sign | INF).bits())
    with b.if_(t.le(-130.0)):
        b.ret(sign.bits())
    v = b.let(vym_exp2_d(t), "v")
    with b.if_(decided(b, v, POW_EPS_FAST)):
        b.ret((vym_round(v).bits() | sign).bits())
    h, lo = b.let(vym_pow_acc(e, i, r, yd), "acc")
    ok, bits = b.let(vym_dd_round(h, lo, f64(POW_EPS_ACC)), "dec")
    with b.if_(ok):
        b.ret((bits | sign).bits())
    ex, xv = b.let(vym_pow_exact(a, y), "ex")
    b.ret((vym_round(select(ex, xv, h)).bits() | sign).bits())


# ---- atan2 -----------------------------------------------------------------------------------
@functools.cache
def _atan2_constants() -> dict[str, list]:
    with mpmath.workprec(300):
        return {"series_dd": [_split(mpmath.mpf((-1) ** k) / (2 * k + 1), 53) for k in (1, 2, 3)],
                "series_d": [float(mpmath.mpf((-1) ** k) / (2 * k + 1)) for k in range(4, 8)],
                "pi2": _split(mpmath.pi / 2, 53), "pi": _split(mpmath.pi, 53),
                "quarter": [_f32(mpmath.pi * k / 4) for k in (1, 2, 3, 4)]}




@function((F64, F64), n=F64, d=F64)
def vym_atan2_acc(b: Block, n: Val, d: Val) -> None:
    """atan(n / d) as a double-double within ATAN2_EPS_ACC, for f32 values 0 < n <= d"""
    k = _atan2_constants()
    qh = b.let(n / d, "qh")
    p1, p2 = b.let(vym_two_prod(qh, d), "p")
    ql = b.let(((n - p1) - p2) / d, "ql")                        # n - qh d is exact
    s = b.let(qh * 64.0 + MAGIC, "ks")
    c = b.let((s - MAGIC) * 2.0 ** -6, "c")
    nh, nl = b.let(vym_two_sum(qh - c, ql), "num")               # qh - c exact
    pc, pe = b.let(vym_two_prod(qh, c), "pc")
    dh, dl = b.let(vym_two_sum(1.0, pc), "den")
    dh, dl = b.let(vym_fast_two_sum(dh, dl + (pe + ql * c)), "den")
    th = b.let(nh / dh, "th")
    u, ue = b.let(vym_two_prod(th, dh), "u")
    tl = b.let((((nh - u) - ue) + nl - th * dl) / dh, "tl")
    th, tl = b.let(vym_fast_two_sum(th, tl), "t")
    zh, zl = b.let(vym_dd_mul(th, tl, th, tl), "z")
    q = b.let(zh * horner(zh, k["series_d"]), "q")               # t^2 (1/9 - t^2/11 + ...)
    ph, pl = b.let(vym_fast_two_sum(k["series_dd"][2][0], q), "sp")
    pl = pl + k["series_dd"][2][1]
    for j in (1, 0):
        ph, pl = b.let(vym_dd_mul(ph, pl, zh, zl), "sp")
        ph, pl = b.let(vym_dd_add(f64(k["series_dd"][j][0]), f64(k["series_dd"][j][1]), ph, pl), "sp")
    wh, wl = b.let(vym_dd_mul(th, tl, zh, zl), "w")
    wh, wl = b.let(vym_dd_mul(wh, wl, ph, pl), "w")              # t^3 (-1/3 + t^2/5 - ...)
    ah, al = b.let(vym_dd_add(th, tl, wh, wl), "at")
    ki = b.let(s.lo().to(I32), "ki")
    ah, al = b.let(vym_dd_add(ATAN_H[ki], ATAN_L[ki], ah, al), "at")
    b.ret(ah, al)


def _pi_parts() -> tuple[tuple[float, float], tuple[float, float]]:
    k = _atan2_constants()
    return k["pi2"], k["pi"]


@function(F64, n=F64, d=F64, sw=BOOL, xneg=BOOL)
def vym_atan2_fast(b: Block, n: Val, d: Val, sw: Val, xneg: Val) -> None:
    """|atan2(y, x)| within ATAN2_EPS_FAST, from n = min(|x|, |y|), d = max(|x|, |y|) (f32 values,
    0 < n <= d), sw = |y| > |x| and xneg = x < 0"""
    (pi2h, pi2l), (pih, pil) = _pi_parts()
    a0 = b.let(vym_atan_d(n / d), "a0")                           # in [0, pi/4]
    a1 = b.let(select(sw, (pi2h - a0) + pi2l, a0), "a1")          # pi/2 - a0 >= pi/4
    b.ret(select(xneg, (pih - a1) + pil, a1))                     # pi - a1 >= pi/2


@function((F64, F64), n=F64, d=F64, sw=BOOL, xneg=BOOL)
def vym_atan2_dd(b: Block, n: Val, d: Val, sw: Val, xneg: Val) -> None:
    """|atan2(y, x)| as a double-double within ATAN2_EPS_ACC (arguments as vym_atan2_fast)"""
    (pi2h, pi2l), (pih, pil) = _pi_parts()
    h0, l0 = b.let(vym_atan2_acc(n, d), "a0")
    hs, ls = b.let(vym_dd_add(f64(pi2h), f64(pi2l), -h0, -l0), "a1")
    h1 = b.let(select(sw, hs, h0), "h1")
    l1 = b.let(select(sw, ls, l0), "l1")
    hp, lp = b.let(vym_dd_add(f64(pih), f64(pil), -h1, -l1), "a2")
    b.ret(select(xneg, hp, h1), select(xneg, lp, l1))


@function(F32, y=F32, x=F32)
def vym_atan2(b: Block, y: Val, x: Val) -> None:
    """atan2(y, x) (IEEE 754-2019 9.2 special values, docs/semantics.md S13)"""
    q1, q2, q3, q4 = (f32(v) for v in _atan2_constants()["quarter"])
    with b.if_(is_nan(x) | is_nan(y)):
        b.ret(fbits(NAN))
    sy = b.let(y.bits() & 0x80000000, "sy")
    xneg = b.let(negative(x), "xneg")
    with b.if_(y.eq(0.0)):
        b.ret((sy | select(xneg, q4, f32(0.0)).bits()).bits())
    with b.if_(is_inf(y)):
        b.ret((sy | select(is_inf(x), select(xneg, q3, q1), q2).bits()).bits())
    with b.if_(x.eq(0.0)):
        b.ret((sy | q2.bits()).bits())
    with b.if_(is_inf(x)):
        b.ret((sy | select(xneg, q4, f32(0.0)).bits()).bits())
    ax = b.let(fabs(x).to(F64), "ax")
    ay = b.let(fabs(y).to(F64), "ay")
    sw = b.let(ay.gt(ax), "sw")
    n = b.let(select(sw, ax, ay), "n")
    d = b.let(select(sw, ay, ax), "d")
    a = b.let(vym_atan2_fast(n, d, sw, xneg), "a")
    with b.if_(decided(b, a, ATAN2_EPS_FAST)):
        b.ret((vym_round(a).bits() | sy).bits())
    h, lo = b.let(vym_atan2_dd(n, d, sw, xneg), "acc")
    ok, bits = b.let(vym_dd_round(h, lo, f64(ATAN2_EPS_ACC)), "dec")
    b.ret((select(ok, bits, vym_round(h).bits()) | sy).bits())
