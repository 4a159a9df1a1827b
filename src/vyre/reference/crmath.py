"""Correctly rounded f32 transcendentals (docs/semantics.md S13), vectorised.

Each function returns the f32 value nearest (ties to even) to the exact function of its
canonical f32 argument, then flushed as S9 says (a subnormal result becomes zero of its
sign; NaN is 0x7FC00000). The recipe: evaluate in float64 with numpy, round to f32, and
apply a rounding test: when the float64 value, widened by `EPS` relative error on each
side, rounds (and flushes) to two different f32 values, the exact value may lie on either
side of a rounding boundary (a midpoint between neighbouring f32 values, the overflow
threshold, or the flush threshold just below 2^-126). Only those elements are recomputed
with mpmath at `MP_PREC` bits and rounded exactly. numpy's float64 functions are accurate to
a few float64 ULPs (about 2^-50 relative), so `EPS = 2^-46` is a wide margin; the test flags
roughly one input in a million.

`flagged` exposes the rounding test itself: the hard-case search
(`scripts/crmath_hard_cases.py`) runs it over all 2^32 inputs.

pow and atan2 (two operands, `pow_`, `atan2`) use the same float64 evaluation and rounding
test (numpy's ``power``/``arctan2``, within a few float64 ULPs); a flagged element is
decided exactly, and why that terminates and is right:

* Every rounding boundary is a dyadic rational with an odd numerator of at most 25 bits
  (a midpoint m 2^k, the overflow threshold (2^25 - 1) 2^103, the flush threshold
  (2^24 - 1) 2^-150). So a value that is not such a dyadic is at a positive distance from
  every boundary, and a Ziv loop (`ziv_round`: evaluate with mpmath at p bits plus guard
  bits, widen by 2^-p relative, stop when both ends round alike, else double p) ends with
  the correctly rounded result.
* atan2 of nonzero f32 values is never a dyadic rational (atan and pi - atan of a nonzero
  rational are transcendental, by Lindemann), so the Ziv loop alone is right for it.
* x^y for f32 values can be dyadic (x = m 2^e, m odd, |y| = s 2^f, s odd): for an integer y
  exactly when m = 1 or y > 0 (m^y 2^(e y)); for y = ±s / 2^k exactly when m is a perfect
  (2^k)-th power r^(2^k), 2^k divides e, and r = 1 or y > 0 (x^(1/2^k) is then rational,
  and x^y rational implies it since gcd(s, 2^k) = 1). `pow_dyadic` decides this with Python
  integers (k integer square roots) and returns the exact value N 2^E when N is short
  (64 bits), which `mp_round_dyadic` rounds exactly; a longer N is no boundary either, so
  the Ziv loop handles it with every other x^y.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import mpmath
import numpy as np

from vyre.ir.types import UnOp

F32, U32 = np.float32, np.uint32
EPS = 2.0 ** -46          # relative margin of the rounding test
MP_PREC = 256             # bits of the exact evaluation of flagged elements
NAN_BITS = np.uint32(0x7FC00000)



def _exp2(x: np.ndarray) -> np.ndarray:
    """2^x as 2^n * 2^f with n = rint(x), |f| <= 1/2 exact: numpy's exp2 loses up to
    2^-43 relative for large |x| (measured), its value on [-1/2, 1/2] does not."""
    x = np.clip(x, -300.0, 300.0)
    n = np.rint(x)
    return np.ldexp(np.exp2(x - n), n.astype(np.int32))


def _erf_taylor(c: mpmath.mpf, deg: int) -> list[mpmath.mpf]:
    """erf^(n)(c) / n!, n <= deg: erf^(n) = 2/sqrt(pi) (-1)^(n-1) H_(n-1)(c) e^(-c^2)."""
    g = 2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-c * c)
    h = [mpmath.mpf(1), 2 * c]                           # H_(n+1) = 2c H_n - 2n H_(n-1)
    while len(h) < deg:
        h.append(2 * c * h[-1] - 2 * (len(h) - 1) * h[-2])
    return [mpmath.erf(c)] + [g * (-1) ** (n - 1) * h[n - 1] / mpmath.factorial(n) for n in range(1, deg + 1)]


@functools.cache
def _erf_table() -> tuple[np.ndarray, np.ndarray]:
    """Taylor coefficients (degree 12) of erf at the centres of [k/16, (k+1)/16), k < 96, and
    the odd series at 0 (mpmath)."""
    with mpmath.workprec(80):
        t = np.array([[float(c) for c in _erf_taylor((mpmath.mpf(k) + 0.5) / 16, 12)] for k in range(96)])
        s0 = np.array([float(2 / mpmath.sqrt(mpmath.pi) * mpmath.mpf(-1) ** n
                             / (mpmath.factorial(n) * (2 * n + 1))) for n in range(7)])
    return t, s0


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 (numpy has none): piecewise Taylor polynomials, about 2^-51 relative."""
    t, s0 = _erf_table()
    a = np.abs(x)
    z = a * a
    s = s0[6]
    for c in s0[5::-1]:
        s = c + z * s
    y = a * s
    big = np.flatnonzero(~(a < 0.0625))                # the table's range, 1, and NaN
    ab = a[big]
    k = np.minimum(np.nan_to_num(ab * 16, nan=0.0, posinf=95), 95).astype(np.int64)
    d = ab - (k + 0.5) / 16
    yb = t[k, 12]
    for i in range(11, -1, -1):
        yb = t[k, i] + d * yb
    y[big] = np.where(ab >= 6, 1.0, yb)
    return np.where(np.isnan(x), x, np.copysign(y, x))

# float64 evaluation (numpy) and exact evaluation (mpmath) of each function
F64: dict[UnOp, Callable[[np.ndarray], np.ndarray]] = {
    UnOp.EXP: np.exp, UnOp.EXP2: _exp2, UnOp.LOG: np.log, UnOp.LOG2: np.log2,
    UnOp.SIN: np.sin, UnOp.COS: np.cos, UnOp.TAN: np.tan, UnOp.TANH: np.tanh,
    UnOp.SINH: np.sinh, UnOp.COSH: np.cosh, UnOp.EXPM1: np.expm1, UnOp.LOG1P: np.log1p,
    UnOp.ATAN: np.arctan, UnOp.ASIN: np.arcsin, UnOp.ACOS: np.arccos, UnOp.CBRT: np.cbrt,
    UnOp.ERF: _erf,
}
EXACT: dict[UnOp, Callable[[mpmath.mpf], mpmath.mpf]] = {
    UnOp.EXP: mpmath.exp, UnOp.EXP2: lambda v: mpmath.power(2, v), UnOp.LOG: mpmath.log,
    UnOp.LOG2: lambda v: mpmath.log(v, 2), UnOp.SIN: mpmath.sin, UnOp.COS: mpmath.cos,
    UnOp.TAN: mpmath.tan, UnOp.TANH: mpmath.tanh, UnOp.SINH: mpmath.sinh, UnOp.COSH: mpmath.cosh,
    UnOp.EXPM1: mpmath.expm1, UnOp.LOG1P: mpmath.log1p, UnOp.ATAN: mpmath.atan,
    UnOp.ASIN: mpmath.asin, UnOp.ACOS: mpmath.acos, UnOp.CBRT: mpmath.cbrt, UnOp.ERF: mpmath.erf,
}
ODD = frozenset({UnOp.SIN, UnOp.TAN, UnOp.TANH, UnOp.SINH, UnOp.EXPM1, UnOp.LOG1P, UnOp.ATAN,
                 UnOp.ASIN, UnOp.CBRT, UnOp.ERF})


def round_flush(y: np.ndarray) -> np.ndarray:
    """float64 values rounded once to f32 (nearest even, overflow to infinity), then
    canonicalised as S9 says. Monotonic in y, which the rounding test relies on."""
    with np.errstate(all="ignore"):
        b = np.ascontiguousarray(np.asarray(y, dtype=np.float64).astype(F32)).view(U32)
    exp = b & U32(0x7F800000)
    nan = (exp == 0x7F800000) & ((b & U32(0x007FFFFF)) != 0)
    out = np.where(nan, NAN_BITS, np.where(exp == 0, b & U32(0x80000000), b))
    return out.astype(U32).view(F32)


def flagged(y: np.ndarray, eps: float = EPS) -> np.ndarray:
    """Where the exact value, known to lie within ``eps * |y|`` of the float64 ``y``, may
    round (and flush) to a different f32 than ``y`` does. Infinite and NaN ``y`` are exact
    special values here and never flagged, nor is a zero (sin, tan, tanh of a signed zero)."""
    with np.errstate(all="ignore"):
        d = np.abs(y) * eps
        lo, hi = round_flush(y - d).view(U32), round_flush(y + d).view(U32)
    return (lo != hi) & np.isfinite(y) & (y != 0)


def mp_round(v: mpmath.mpf) -> float:
    """An mpmath value rounded once to f32 (nearest even; subnormal range spaced 2^-149;
    overflow to infinity), then flushed as S9 says. Returned as a Python float."""
    if mpmath.isnan(v):
        return float("nan")
    if mpmath.isinf(v) or v == 0:
        return float(v)
    sign = -1.0 if v < 0 else 1.0
    a = abs(v)
    _, e = mpmath.frexp(a)                       # a = m * 2^e, 0.5 <= m < 1
    q = max(int(e) - 1 - 23, -149)                # quantum of the binade (or subnormals)
    n = mpmath.ldexp(a, -q)
    fl = int(mpmath.floor(n))
    frac = n - fl
    if frac > 0.5 or (frac == 0.5 and fl % 2 == 1):
        fl += 1
    r = float(mpmath.ldexp(fl, q))
    if r >= 2.0 ** 128:
        return sign * float("inf")
    if r < 2.0 ** -126:                           # subnormal result: flushed (S9)
        return sign * 0.0
    return sign * r


def exact_f32(op: UnOp, x: float) -> float:
    """The correctly rounded, flushed f32 result of ``op`` at the f32 value ``x``, with
    mpmath alone (special values included, IEEE 754-2019 9.2)."""
    if x == 0 and op in ODD:
        return x                                   # sin, tan, tanh keep the zero's sign
    with mpmath.workprec(MP_PREC):
        return mp_round(_exact(op, x))


def _exact(op: UnOp, x: float) -> mpmath.mpf:
    if np.isnan(x):
        return mpmath.nan
    if np.isinf(x):
        pos = x > 0
        return {UnOp.EXP: mpmath.inf if pos else mpmath.mpf(0),
                UnOp.EXP2: mpmath.inf if pos else mpmath.mpf(0),
                UnOp.LOG: mpmath.inf if pos else mpmath.nan,
                UnOp.LOG2: mpmath.inf if pos else mpmath.nan,
                UnOp.TANH: mpmath.mpf(1 if pos else -1),
                UnOp.SINH: mpmath.inf if pos else -mpmath.inf, UnOp.COSH: mpmath.inf,
                UnOp.EXPM1: mpmath.inf if pos else mpmath.mpf(-1),
                UnOp.LOG1P: mpmath.inf if pos else mpmath.nan,
                UnOp.ATAN: mpmath.pi / 2 if pos else -mpmath.pi / 2,
                UnOp.CBRT: mpmath.inf if pos else -mpmath.inf,
                UnOp.ERF: mpmath.mpf(1 if pos else -1)}.get(op, mpmath.nan)
    if op in (UnOp.LOG, UnOp.LOG2):
        if x == 0:
            return -mpmath.inf
        if x < 0:
            return mpmath.nan
    if (op is UnOp.LOG1P and x < -1) or (op in (UnOp.ASIN, UnOp.ACOS) and abs(x) > 1):
        return mpmath.nan
    if op is UnOp.CBRT and x < 0:
        return -mpmath.cbrt(mpmath.mpf(-x))
    return EXACT[op](mpmath.mpf(x))


def hypot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Correctly rounded hypot of canonical f32 values (IEEE 754-2019 9.2: an infinite
    operand gives +inf even with a NaN; else a NaN gives NaN)."""
    x, y = np.asarray(a, F32).astype(np.float64), np.asarray(b, F32).astype(np.float64)
    x, y = np.broadcast_arrays(x, y)
    with np.errstate(all="ignore"):
        z = np.sqrt(x * x + y * y)            # squares exact; sum and sqrt: under 2^-52
    r = round_flush(z)
    r = np.where(np.isinf(x) | np.isinf(y), np.float32(np.inf), r).astype(F32)
    hard = np.flatnonzero(flagged(z) & np.isfinite(x) & np.isfinite(y))
    for i in hard:
        xi, yi = mpmath.mpf(float(x.flat[i])), mpmath.mpf(float(y.flat[i]))
        with mpmath.workprec(MP_PREC):
            r.flat[i] = mp_round(mpmath.sqrt(xi * xi + yi * yi))
    return r


# ---- pow and atan2 ---------------------------------------------------------------------------

def _odd_part(v: float) -> tuple[int, int]:
    """A positive finite float as (n, k): v = n * 2^k with n an odd integer."""
    num, den = v.as_integer_ratio()                # den is a power of two
    tz = (num & -num).bit_length() - 1
    return num >> tz, tz - (den.bit_length() - 1)


def pow_dyadic(ax: float, y: float, max_bits: int = 64) -> tuple[int, int] | None:
    """``ax^y`` as (N, E), the exact value N * 2^E with N odd, when it is a dyadic rational
    whose numerator N has at most ``max_bits`` bits; else None. ``ax`` > 0 and ``y`` nonzero
    are finite floats.

    With ax = m 2^e and |y| = s 2^f (m, s odd): for f >= 0, y is the integer n = ±s 2^f and
    ax^n = m^n 2^(e n), dyadic iff m = 1 or n > 0. For f = -k < 0, ax^y is rational iff
    ax^(1/2^k) is (gcd(s, 2^k) = 1), i.e. iff m is a perfect (2^k)-th power r^(2^k) and 2^k
    divides e; then ax^y = r^(±s) 2^(±e s / 2^k), dyadic iff r = 1 or y > 0."""
    m, e = _odd_part(ax)
    s, f = _odd_part(abs(y))
    neg = y < 0
    if f < 0:
        k = -f
        if e % (1 << k):
            return None
        for _ in range(k):                          # r = m^(1/2^k), exactly, or not an integer
            if m == 1:
                break
            t = math.isqrt(m)
            if t * t != m:
                return None
            m = t
        e, n = e >> k, s
    else:
        n = s << f
    if m != 1 and (neg or n * m.bit_length() > max_bits + n):   # m^n too long (or not dyadic)
        return None
    if m != 1:
        big = m ** n
        if big.bit_length() > max_bits:
            return None
        return big, e * n
    return 1, -e * n if neg else e * n


def mp_round_dyadic(n: int, k: int) -> float:
    """The exact value n * 2^k (n a nonzero integer) rounded to f32 and flushed (S9)."""
    if k + n.bit_length() > 200:
        return math.copysign(math.inf, n)
    if k + n.bit_length() < -200:
        return math.copysign(0.0, n)
    with mpmath.workprec(n.bit_length() + 8):
        return mp_round(mpmath.ldexp(mpmath.mpf(n), k))   # exact: n fits the precision


def ziv_round(fn: Callable[[], mpmath.mpf]) -> float:
    """Correct f32 rounding of a value that is not a rounding boundary (so some precision
    decides it): ``fn`` evaluated at growing precision p (plus 64 guard bits) until the
    interval v (1 ± 2^-p) rounds to one f32 (mpmath's functions are within a few units of
    the last of p + 64 bits)."""
    p = 128
    while p <= 1 << 16:
        with mpmath.workprec(p + 64):
            v = fn()
            d = abs(v) * mpmath.ldexp(1, -p)
            lo, hi = mp_round(v - d), mp_round(v + d)
        if lo == hi or (math.isnan(lo) and math.isnan(hi)):
            return lo
        p *= 2
    raise AssertionError("a value on a rounding boundary reached ziv_round")   # never: see callers


def pow_exact(x: float, y: float) -> float:
    """Correctly rounded, flushed x^y for f32 values x, y (finite, nonzero, x > 0 or y an
    integer; the special values are `pow_`'s): exactly when x^y is dyadic with a short
    numerator (every rounding boundary is one: a 25-bit odd multiple of a power of two),
    else by `ziv_round` (x^y is then no boundary)."""
    odd = y == math.floor(y) and abs(y) < 2.0 ** 24 and int(y) % 2 == 1
    sign = -1.0 if x < 0 and odd else 1.0
    ax = abs(x)
    d = pow_dyadic(ax, y)
    if d is not None:
        return sign * mp_round_dyadic(*d)
    return sign * ziv_round(lambda: mpmath.exp(mpmath.mpf(y) * mpmath.log(mpmath.mpf(ax))))


def _is_odd_int(y: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return (np.abs(y) < 2.0 ** 24) & (np.floor(y) == y) & (np.fmod(y, 2.0) != 0)


def pow_(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Correctly rounded x^y of canonical f32 values, IEEE 754-2019 9.2 special values:
    x^±0 = 1 (any x, NaN too), 1^y = 1 (any y, NaN too), (-1)^±inf = 1; otherwise a NaN
    operand gives NaN; x^±inf is +0 or +inf by |x| < 1 or > 1; ±0^y is ±0 (y > 0 an odd
    integer), +0 (other y > 0), ±inf (y < 0 an odd integer), +inf (other y < 0); (±inf)^y
    likewise 1/(±0)^y; x < 0 with a non-integer finite y is NaN; x < 0 with an integer y is
    ±|x|^y (negative for odd y). The finite case: float64 `np.power` (within 2^-52), the
    rounding test, and `pow_exact` for the flagged elements."""
    x, y = np.asarray(a, F32).astype(np.float64), np.asarray(b, F32).astype(np.float64)
    x, y = np.broadcast_arrays(x, y)
    ax = np.abs(x)
    odd = _is_odd_int(y)
    neg = np.signbit(x)
    with np.errstate(all="ignore"):
        integer = np.isfinite(y) & (np.floor(y) == y)
        z = np.power(ax, y)                        # finite operands: within 2^-52
        r = round_flush(z)
        r = np.where(neg & odd, -r, r)
        # special values, in order of precedence (later assignments lose to earlier ones)
        zero_or_inf = np.where(ax == 0, y < 0, y > 0)              # |result| infinite?
        mag = np.where(zero_or_inf, np.inf, 0.0)
        r = np.where((ax == 0) | np.isinf(x), np.where(odd & neg, -mag, mag), r)
        r = np.where(np.isinf(y), np.where((ax < 1) == (y < 0), np.inf, 0.0), r)
        r = np.where(np.isinf(y) & (ax == 1), 1.0, r)
        r = np.where(neg & np.isfinite(x) & (ax != 0) & ~integer & np.isfinite(y), np.nan, r)
        r = np.where(np.isnan(x) | np.isnan(y), np.nan, r)
        r = np.where((y == 0) | (x == 1), 1.0, r)
    r = round_flush(r)
    finite = np.isfinite(x) & np.isfinite(y) & (ax != 0) & (y != 0) & ~(neg & ~integer)
    hard = np.flatnonzero(flagged(z) & finite)
    if hard.size:
        r = r.copy()
        for i in hard:
            r.flat[i] = pow_exact(float(x.flat[i]), float(y.flat[i]))
    return r


@functools.cache
def _pi_multiples() -> tuple[float, float, float, float]:
    """pi/4, pi/2, 3pi/4 and pi rounded to f32."""
    with mpmath.workprec(MP_PREC):
        return tuple(mp_round(mpmath.pi * k / 4) for k in (1, 2, 3, 4))


def atan2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Correctly rounded atan2(y = a, x = b) of canonical f32 values, in (-pi, pi], IEEE
    754-2019 9.2 special values: a NaN operand gives NaN; atan2(±0, x) is ±0 for x > 0 or
    x = +0 and ±pi for x < 0 or x = -0; atan2(y, ±0) = ±pi/2 (sign of y) for y != 0;
    atan2(±y, +inf) = ±0 and atan2(±y, -inf) = ±pi for finite y > 0; atan2(±inf, x) = ±pi/2
    for finite x; atan2(±inf, +inf) = ±pi/4, atan2(±inf, -inf) = ±3pi/4 (each rounded to
    f32). The finite case: float64 `np.arctan2`, the rounding test, and `ziv_round` with
    mpmath for the flagged elements (atan2 of nonzero f32 values is never a rounding
    boundary: atan and pi - atan of a nonzero rational are transcendental)."""
    y, x = np.asarray(a, F32).astype(np.float64), np.asarray(b, F32).astype(np.float64)
    y, x = np.broadcast_arrays(y, x)
    q1, q2, q3, q4 = _pi_multiples()
    sy = np.where(np.signbit(y), -1.0, 1.0)
    xneg = np.signbit(x)
    with np.errstate(all="ignore"):
        z = np.arctan2(y, x)
        r = round_flush(z)
        base = np.where(y == 0, np.where(xneg, q4, 0.0),
                        np.where(np.isinf(y), np.where(np.isinf(x), np.where(xneg, q3, q1), q2),
                                 np.where(x == 0, q2, np.where(xneg, q4, 0.0))))
        special = (y == 0) | (x == 0) | np.isinf(y) | np.isinf(x)
        r = np.where(special, sy * base, r)
        r = np.where(np.isnan(x) | np.isnan(y), np.nan, r)
    r = round_flush(r)
    hard = np.flatnonzero(flagged(z) & ~special & np.isfinite(x) & np.isfinite(y))
    if hard.size:
        r = r.copy()
        for i in hard:
            yi, xi = mpmath.mpf(float(y.flat[i])), mpmath.mpf(float(x.flat[i]))
            r.flat[i] = ziv_round(lambda yi=yi, xi=xi: mpmath.atan2(yi, xi))
    return r


def evaluate(op: UnOp, a: np.ndarray) -> np.ndarray:
    """``op`` on canonical f32 values: correctly rounded, flushed f32 results."""
    x = np.asarray(a, dtype=F32).astype(np.float64)
    with np.errstate(all="ignore"):
        y = F64[op](x)
    r = round_flush(y)
    hard = np.flatnonzero(flagged(y))
    if hard.size:
        r = r.copy()
        for i in hard:
            r.flat[i] = exact_f32(op, float(x.flat[i]))
    return r
