"""Fused multiply-add ``a*b + c`` for f32 with one rounding (S8), u32 operations only.

Operands are flushed (S9); NaNs, infinities and zero products are decided on the bits (a
zero product plus a zero ``c`` is -0 only when both are negative, as in round-to-nearest).
Otherwise the exact product ``P = ma * mb`` (48 bits, from u32 ``*`` and ``mul_high``) and
``C = mc << 24`` (48 bits) are two integers with known exponents of their lowest bits. The
one whose lowest bit weighs more (``X``) is placed at bit 47 of a 96-bit integer held in
three words, so that ``X << 47 < 2^95`` leaves room for a carry; the other (``Y``) is placed
by the difference ``d`` of the exponents, exactly when ``d <= 47``, and otherwise shifted
right with the bits it loses OR-ed into bit 0 (a sticky bit: then ``X << 47 >= 2^93`` and
``Y`` is below 2^48, so the rounding position of the 24-bit result is far above bit 1 and
the sticky bit only breaks ties, exactly as the lost bits would). The exact sum or
difference is normalised by counting leading zeros and rounded once to nearest even; a
result at or past 2^128 is infinity, and one below 2^-126 is flushed (S9) unless it rounds
to 2^-126, which is when its biased exponent is 0 and its top 24 bits are all ones.
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir.program import Function
from vyre.ir.types import BinOp, DataType, UnOp

from .build import (
    ABS,
    FRAC,
    HIDDEN,
    INF,
    NAN,
    SIGN,
    Body,
    U,
    all_,
    any_,
    flush,
    is_nan,
    not_,
    sel,
    u,
)

FMA = "vyl_f32_fma"
W3 = tuple[E.Expr, E.Expr, E.Expr]   # (w2, w1, w0): a 96-bit integer, w2 the high word


def _shr(b: Body, w: W3, d: E.Expr) -> W3:
    """``w >> d`` (any d) with the bits shifted out OR-ed into bit 0."""
    w2, w1, w0 = w
    big = b.let(d.ge(u(96)), "big")
    ge64 = b.let(d.ge(u(64)), "g64")
    ge32 = b.let(all_(d.ge(u(32)), not_(ge64)), "g32")
    lost = b.let(sel(ge64, w1 | w0, sel(ge32, w0, 0)), "lost")
    a0 = b.let(sel(ge64, w2, sel(ge32, w1, w0)), "a0")
    a1 = b.let(sel(ge64, 0, sel(ge32, w2, w1)), "a1")
    a2 = b.let(sel(any_(ge64, ge32), 0, w2), "a2")
    s = b.let(d & 31, "s")
    z = b.let(s.eq(u(0)), "z")
    back = b.let(u(32) - s, "back")
    lost2 = b.let(lost | sel(z, 0, a0 << back), "lost")
    r0 = sel(z, a0, (a0 >> s) | (a1 << back))
    r1 = sel(z, a1, (a1 >> s) | (a2 << back))
    r2 = a2 >> s
    sticky = sel(lost2.ne(u(0)), 1, 0)
    anyw = sel(any_(w2.ne(u(0)), w1.ne(u(0)), w0.ne(u(0))), 1, 0)
    return (b.let(sel(big, 0, r2), "y2"), b.let(sel(big, 0, r1), "y1"),
            b.let(sel(big, anyw, r0 | sticky), "y0"))


def _shl(b: Body, w: W3, n: E.Expr) -> W3:
    """``w << n`` for n in [0, 96) (the bits shifted out are zero here)."""
    w2, w1, w0 = w
    ge64 = b.let(n.ge(u(64)), "g64")
    ge32 = b.let(all_(n.ge(u(32)), not_(ge64)), "g32")
    a2 = b.let(sel(ge64, w0, sel(ge32, w1, w2)), "a2")
    a1 = b.let(sel(ge64, 0, sel(ge32, w0, w1)), "a1")
    a0 = b.let(sel(any_(ge64, ge32), 0, w0), "a0")
    s = b.let(n & 31, "s")
    z = b.let(s.eq(u(0)), "z")
    back = b.let(u(32) - s, "back")
    return (b.let(sel(z, a2, (a2 << s) | (a1 >> back)), "n2"),
            b.let(sel(z, a1, (a1 << s) | (a0 >> back)), "n1"),
            b.let(a0 << s, "n0"))


def _add(b: Body, x: W3, y: W3) -> W3:
    r0 = b.let(x[2] + y[2], "s0")
    c0 = b.let(E.Cast(U, r0.lt(x[2])), "c0")
    t1 = b.let(x[1] + y[1], "t1")
    r1 = b.let(t1 + c0, "s1")
    c1 = b.let(E.Cast(U, any_(t1.lt(x[1]), r1.lt(t1))), "c1")
    r2 = b.let(x[0] + y[0] + c1, "s2")
    return (r2, r1, r0)


def _sub(b: Body, x: W3, y: W3) -> W3:
    """``x - y`` for ``x >= y``."""
    r0 = b.let(x[2] - y[2], "d0")
    c0 = b.let(E.Cast(U, x[2].lt(y[2])), "b0")
    t1 = b.let(x[1] - y[1], "t1")
    r1 = b.let(t1 - c0, "d1")
    c1 = b.let(E.Cast(U, any_(x[1].lt(y[1]), t1.lt(c0))), "b1")
    r2 = b.let(x[0] - y[0] - c1, "d2")
    return (r2, r1, r0)


def _ge(x: W3, y: W3) -> E.Expr:
    return any_(x[0].gt(y[0]), all_(x[0].eq(y[0]), any_(x[1].gt(y[1]),
                                                     all_(x[1].eq(y[1]), x[2].ge(y[2])))))


def fma_function() -> Function:
    """``vyl_f32_fma(a, b, c) -> bits of fma(a, b, c)``."""
    b = Body((("a", U), ("b", U), ("c", U)))
    xa = flush(b, b.arg(0))
    xb = flush(b, b.arg(1))
    xc = flush(b, b.arg(2))
    aa, ab, ac = (b.let(v & ABS, "m") for v in (xa, xb, xc))
    sp = b.let((xa ^ xb) & SIGN, "sp")
    sc = b.let(xc & SIGN, "sc")
    ma = b.let((aa & FRAC) | HIDDEN, "ma")
    mb = b.let((ab & FRAC) | HIDDEN, "mb")
    mc = b.let((ac & FRAC) | HIDDEN, "mc")
    # P = ma * mb < 2^48 as (ph, pl); C = mc << 24 as (ch, cl)
    pl = b.let(ma * mb, "pl")
    ph = b.let(E.Bin(BinOp.MUL_HIGH, ma, mb), "ph")
    ch = b.let(mc >> 8, "ch")
    cl = b.let(mc << 24, "cl")
    czero = b.let(ac.eq(u(0)), "cz")
    # exponents of the lowest bits, plus 400: P: ea + eb - 300, C: ec - 174
    lp = b.let((aa >> 23) + (ab >> 23) + 100, "lp")
    lc = b.let((ac >> 23) + 226, "lc")
    px = b.let(any_(czero, lp.ge(lc)), "px")      # X is the product
    lx = b.let(sel(px, lp, lc), "lx")
    d = b.let(sel(czero, 0, sel(px, lp - lc, lc - lp)), "d")
    xh = b.let(sel(px, ph, ch), "xh")
    xl = b.let(sel(px, pl, cl), "xl")
    yh = b.let(sel(czero, 0, sel(px, ch, ph)), "yh")
    yl = b.let(sel(czero, 0, sel(px, cl, pl)), "yl")
    sx = b.let(sel(px, sp, sc), "sx")
    sy = b.let(sel(px, sc, sp), "sy")
    fx = (b.let((xh << 15) | (xl >> 17), "x2"), b.let(xl << 15, "x1"), u(0))
    fy0 = (b.let((yh << 15) | (yl >> 17), "y2"), b.let(yl << 15, "y1"), u(0))
    fy = _shr(b, fy0, d)
    same = b.let(any_(sx.eq(sy), czero), "same")
    xbig = b.let(_ge(fx, fy), "xbig")
    total = _add(b, fx, fy)
    big, small = ((b.let(sel(xbig, p, q), "hi") for p, q in zip(fx, fy)),
                  (b.let(sel(xbig, q, p), "lo") for p, q in zip(fx, fy)))
    diff = _sub(b, tuple(big), tuple(small))
    v = tuple(b.let(sel(same, t, q), "v") for t, q in zip(total, diff))
    sign = b.let(sel(any_(same, xbig), sx, sy), "sg")
    exact_zero = b.let(all_(v[0].eq(u(0)), v[1].eq(u(0)), v[2].eq(u(0))), "ez")
    c2 = E.Un(UnOp.CLZ, v[0])
    c1 = E.Un(UnOp.CLZ, v[1])
    c0 = E.Un(UnOp.CLZ, v[2])
    lz = b.let(sel(v[0].ne(u(0)), c2, sel(v[1].ne(u(0)), c1 + 32, c0 + 64)), "lz")
    n = _shl(b, v, sel(exact_zero, 0, lz))
    bo = b.let(lx + 100 - lz, "bo")            # biased exponent + 326
    m24 = b.let(n[0] >> 8, "m24")
    g = b.let((n[0] >> 7) & 1, "g")
    st = b.let(sel(any_((n[0] & 0x7F).ne(u(0)), n[1].ne(u(0)), n[2].ne(u(0))), 1, 0), "st")
    up = b.let(g & (st | m24) & 1, "up")
    packed = b.let(((bo - 326) << 23) + m24 + up, "pk")
    normal = b.let(bo.ge(u(326)), "nm")
    mag = sel(normal, sel(packed.ge(u(INF)), INF, packed),
              sel(all_(bo.eq(u(325)), m24.eq(u(0xFFFFFF))), HIDDEN, 0))
    general = b.let(sel(exact_zero, 0, sign | mag), "gen")
    # special operands
    pzero = b.let(any_(aa.eq(u(0)), ab.eq(u(0))), "pz")
    pinf = b.let(any_(aa.eq(u(INF)), ab.eq(u(INF))), "pi")
    cinf = b.let(ac.eq(u(INF)), "ci")
    nan = any_(is_nan(aa), is_nan(ab), is_nan(ac), all_(pinf, pzero),
               all_(pinf, cinf, sp.ne(sc)))
    zero_sum = sel(czero, sp & sc, xc)
    result = sel(nan, NAN, sel(pinf, sp | INF, sel(cinf, xc, sel(pzero, zero_sum, general))))
    return b.function(FMA, result)


def fma(a: E.Expr, b: E.Expr, c: E.Expr, name: str = FMA) -> E.Expr:
    """The f32 expression ``fma(a, b, c)`` through the helper."""
    return E.Bitcast(DataType.F32, E.Call(name, (E.Bitcast(U, a), E.Bitcast(U, b), E.Bitcast(U, c))))
