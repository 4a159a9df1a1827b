"""Correctly rounded f32 division and reciprocal (S7) on the bit patterns, u32 operations only.

For targets whose native division is not correctly rounded (WGSL allows 2.5 ULP). Operands
are flushed (S9); NaNs, infinities and zeros are decided on the bits. For two normal operands
the significand quotient ``n / mb`` (``n`` the dividend's 24-bit significand, doubled when it
is below the divisor's, so the quotient lies in [1, 2)) is found exactly by long division in
three 8-bit steps (every partial remainder ``r`` is below ``mb < 2^24``, so ``r << 8`` fits a
word). Each step's digit ``floor(256 r / mb)`` is first estimated without a division as
``(r * inv) >> 23`` with ``inv = floor((2^31 - 1) / mb)`` (one u32 division per quotient;
``r * inv < 2^32``): the estimate is low by less than ``256 r (mb + 1) / (mb 2^31) < 2``, so
two conditional subtractions of ``mb`` make the digit and the remainder exact. That gives 24
fraction bits, the last of them the guard bit, and the remainder
as the sticky bit. Rounding to nearest even adds 1 to the packed result, so a carry into the
exponent is exact; an exponent past 254 gives infinity. A quotient below 2^-126 is flushed
(S9) unless it rounds to 2^-126 itself, which happens exactly when the biased exponent would be
0 and the quotient is at least ``2 - 2^-23`` (the half-way point below 2^-126, a tie to the
even 2^-126 included). ``reciprocal(x)`` is ``1 / x``.
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir.program import Function

from .build import ABS, FRAC, HIDDEN, INF, NAN, SIGN, Body, U, all_, any_, flush, is_nan, sel, u

DIV = "vyl_f32_div"


def div_function() -> Function:
    """``vyl_f32_div(a, b) -> bits of a / b`` for f32 bit patterns ``a`` and ``b``."""
    b = Body((("a", U), ("b", U)))
    x = flush(b, b.arg(0))
    y = flush(b, b.arg(1))
    s = b.let((x ^ y) & SIGN, "s")
    ax = b.let(x & ABS, "ax")
    ay = b.let(y & ABS, "ay")
    ma = b.let((ax & FRAC) | HIDDEN, "ma")
    mb = b.let((ay & FRAC) | HIDDEN, "mb")
    lt = b.let(ma.lt(mb), "lt")
    n = b.let(sel(lt, ma << 1, ma), "n")
    r = b.let(n - mb, "r")
    q = b.let(u(1), "q")
    inv = b.let(u(0x7FFFFFFF) // mb, "inv")        # floor((2^31 - 1) / mb), in [128, 255]
    for _ in range(3):
        t = b.let(r << 8, "n")
        d = b.let((r * inv) >> 23, "d")            # floor(t / mb) - 2 <= d <= floor(t / mb)
        r = b.let(t - d * mb, "r")
        for _ in range(2):
            up = b.let(r.ge(mb), "c")
            d = b.let(d + E.Cast(U, up), "d")
            r = b.let(sel(up, r - mb, r), "r")
        q = b.let((q << 8) | d, "q")
    # biased exponent of the quotient, plus 128 so it stays positive: ea - eb + 127 - lt + 128
    eo = b.let((ax >> 23) + 255 - (ay >> 23) - E.Cast(U, lt), "e")
    mant = b.let(q >> 1, "m")
    up = b.let(q & (sel(r.ne(u(0)), 1, 0) | mant) & 1, "up")
    packed = b.let(((eo - 129) << 23) + mant + up, "p")
    big = b.let(all_(eo.ge(u(129)), packed.ge(u(INF))), "big")
    tiny = sel(all_(eo.eq(u(128)), q.ge(u(0x1FFFFFE))), HIDDEN, 0)
    mag = b.let(sel(big, INF, sel(eo.ge(u(129)), packed, tiny)), "mag")
    nan = any_(is_nan(ax), is_nan(ay), all_(ax.eq(u(INF)), ay.eq(u(INF))), all_(ax.eq(u(0)), ay.eq(u(0))))
    inf = any_(ax.eq(u(INF)), ay.eq(u(0)))
    zero = any_(ax.eq(u(0)), ay.eq(u(INF)))
    result = sel(nan, NAN, s | sel(inf, INF, sel(zero, 0, mag)))
    return b.function(DIV, result)


def divide(a: E.Expr, b: E.Expr, name: str = DIV) -> E.Expr:
    """The f32 expression ``a / b`` through the helper."""
    from vyre.ir.types import DataType

    return E.Bitcast(DataType.F32, E.Call(name, (E.Bitcast(U, a), E.Bitcast(U, b))))


def reciprocal(x: E.Expr, name: str = DIV) -> E.Expr:
    """The f32 expression ``1 / x`` through the helper."""
    from vyre.ir.types import DataType

    return E.Bitcast(DataType.F32, E.Call(name, (u(0x3F800000), E.Bitcast(U, x))))
