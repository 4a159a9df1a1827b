"""Correctly rounded f32 square root (S7) on the bit patterns, u32 operations only.

The operand is flushed (S9); NaN and negative non-zero operands give the canonical NaN, zeros
keep their sign, +inf stays. A normal ``x = m * 2^(e-150)`` (``m`` the 24-bit significand,
``e`` the biased exponent) is written ``R * 2^(2k)`` with the integer ``R = m << 23`` or
``m << 24`` (whichever makes the exponent even), so ``R`` lies in [2^46, 2^48) and its
integer square root ``root`` has exactly 24 bits: the result's significand. ``root`` and the
remainder ``R - root^2`` come from the restoring digit-by-digit method over R's 24 bit pairs
(the remainder stays below ``2 * root + 1 < 2^25``, so every step fits a word). A square root
is never half-way between two representable values (``(root + 1/2)^2`` is not an integer),
so it rounds up exactly when the remainder exceeds ``root``; the carry of that increment
into the exponent is exact. Results of normal operands are always normal.
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir.program import Function
from vyre.ir.types import DataType

from .build import ABS, FRAC, HIDDEN, INF, NAN, SIGN, Body, U, all_, any_, flush, is_nan, sel, u

SQRT = "vyl_f32_sqrt"


def sqrt_function() -> Function:
    """``vyl_f32_sqrt(a) -> bits of sqrt(a)``."""
    b = Body((("a", U),))
    x = flush(b, b.arg(0))
    ax = b.let(x & ABS, "ax")
    e = b.let(ax >> 23, "e")
    m = b.let((ax & FRAC) | HIDDEN, "m")
    odd = b.let(e & 1, "odd")
    # R = m << s with s = 24 - odd (so e - 150 - s is even), held as two words (hi < 2^16)
    hi = b.let(m >> (u(8) + odd), "hi")
    lo = b.let(m << (u(24) - odd), "lo")
    rem = b.let(u(0), "rem")
    root = b.let(u(0), "root")
    for i in range(24):
        p = 46 - 2 * i
        pair = (hi >> (p - 32)) & 3 if p >= 32 else (lo >> p) & 3
        cur = b.let((rem << 2) | pair, "c")
        trial = b.let((root << 2) | 1, "tr")
        ge = b.let(cur.ge(trial), "ge")
        rem = b.let(sel(ge, cur - trial, cur), "rem")
        root = b.let((root << 1) | E.Cast(U, ge), "root")
    up = E.Cast(U, rem.gt(root))
    biased = b.let((e + 126 + odd) >> 1, "be")   # (e + 150 - s) / 2
    mag = ((biased - 1) << 23) + root + up
    neg = all_((x & SIGN).ne(u(0)), ax.ne(u(0)))
    result = sel(any_(is_nan(ax), neg), NAN, sel(any_(ax.eq(u(0)), ax.eq(u(INF))), x, mag))
    return b.function(SQRT, result)


def sqrt(x: E.Expr, name: str = SQRT) -> E.Expr:
    """The f32 expression ``sqrt(x)`` through the helper."""
    return E.Bitcast(DataType.F32, E.Call(name, (E.Bitcast(U, x),)))
