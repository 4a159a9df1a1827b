"""Exact f32 remainder (C ``fmod``, S7) on the bit patterns, u32 operations only.

Operands are flushed (S9). NaN operands, an infinite dividend or a zero divisor give the
canonical NaN; an infinite divisor, a zero dividend or ``|x| < |y|`` give ``x``. Otherwise
``|x| = mx * 2^ex'`` and ``|y| = my * 2^ey'`` with 24-bit significands and ``ex' >= ey'``,
and ``fmod = sign(x) * 2^ey' * ((mx * 2^(ex'-ey')) mod my)``, computed by reducing ``mx``
modulo ``my`` and then bringing in the exponent difference eight bits at a time
(``r << 8 < 2^32`` since ``r < my < 2^24``): at most 32 steps. The remainder is exact; it is
normalised with a count of leading zeros, and one below 2^-126 is flushed (S9).
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import Function
from vyre.ir.types import DataType, UnOp

from .build import ABS, FRAC, HIDDEN, INF, NAN, SIGN, Body, U, any_, flush, is_nan, not_, sel, u

MOD = "vyl_f32_mod"


def mod_function() -> Function:
    """``vyl_f32_mod(a, b) -> bits of fmod(a, b)``."""
    b = Body((("a", U), ("b", U)))
    x = flush(b, b.arg(0))
    y = flush(b, b.arg(1))
    s = b.let(x & SIGN, "s")
    ax = b.let(x & ABS, "ax")
    ay = b.let(y & ABS, "ay")
    nan = b.let(any_(is_nan(ax), is_nan(ay), ax.eq(u(INF)), ay.eq(u(0))), "nan")
    keep = b.let(any_(ay.eq(u(INF)), ax.eq(u(0)), ax.lt(ay)), "keep")
    work = b.let(not_(any_(nan, keep)), "work")
    ex = b.let(ax >> 23, "ex")
    ey = b.let(ay >> 23, "ey")
    my = b.let((ay & FRAC) | HIDDEN, "my")
    d = b.let(sel(work, ex - ey, 0), "d")
    r = b.let(((ax & FRAC) | HIDDEN) % my, "r")
    step = N.Assign(r.name, (r << 8) % my)
    b.add(N.Loop("k", u(0), d >> 3, (step,)))
    b.set(r, (r << (d & 7)) % my)
    lz = b.let(E.Un(UnOp.CLZ, r) - 8, "lz")
    flushed = any_(r.eq(u(0)), ey.le(lz))
    mag = sel(flushed, 0, ((ey - lz) << 23) | ((r << lz) & FRAC))
    result = sel(nan, NAN, sel(keep, x, s | mag))
    return b.function(MOD, result)


def remainder(a: E.Expr, b: E.Expr, name: str = MOD) -> E.Expr:
    """The f32 expression ``fmod(a, b)`` through the helper."""
    return E.Bitcast(DataType.F32, E.Call(name, (E.Bitcast(U, a), E.Bitcast(U, b))))
