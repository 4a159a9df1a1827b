"""The 64-bit integer operations (S1-S4, S25, S28) on pairs of u32 words ``(lo, hi)``, as
builders of helper bodies (`vyre.lower.legalize.int64` declares and calls them).

Each builder takes the helper's `Body` and its argument locals and returns the result: a
``(lo, hi)`` pair for 64-bit results, one expression otherwise. Addition carries by
comparing the low sum with an operand; products come from u32 ``*`` and ``mul_high``;
division is restoring long division over the 64 dividend bits (a loop); signed division and
remainder work on magnitudes and raise S3's fault exactly where the reference does, through
an i32 division by a zero only the faulting case produces (every target reports that one).
Shift amounts are taken ``& 63`` (S4) and shifts by 0 or 32 avoid WGSL's masked amounts.
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.types import BinOp, UnOp

from .build import Body, I, U, all_, any_, not_, sel, u

Pair = tuple[E.Expr, E.Expr]
MASK = 0xFFFFFFFF


def neg_of(x: E.Expr) -> E.Expr:
    """Whether the high word ``x`` of a signed value is negative."""
    return (x >> 31).eq(u(1))


def add(b: Body, al, ah, bl, bh) -> Pair:
    lo = b.let(al + bl, "lo")
    return lo, ah + bh + E.Cast(U, lo.lt(al))


def sub(b: Body, al, ah, bl, bh) -> Pair:
    return al - bl, ah - bh - E.Cast(U, al.lt(bl))


def negate(b: Body, al, ah) -> Pair:
    return sub(b, u(0), u(0), al, ah)


def mul(b: Body, al, ah, bl, bh) -> Pair:
    return al * bl, E.Bin(BinOp.MUL_HIGH, al, bl) + al * bh + ah * bl


def mul_high_u(b: Body, al, ah, bl, bh) -> Pair:
    """The high 64 bits of the 128-bit product."""
    mh = lambda x, y: E.Bin(BinOp.MUL_HIGH, x, y)  # noqa: E731
    h00 = b.let(mh(al, bl), "h00")
    l01, h01 = b.let(al * bh, "l01"), b.let(mh(al, bh), "h01")
    l10, h10 = b.let(ah * bl, "l10"), b.let(mh(ah, bl), "h10")
    l11, h11 = b.let(ah * bh, "l11"), b.let(mh(ah, bh), "h11")
    s1 = b.let(h00 + l01, "s1")
    c1 = b.let(E.Cast(U, s1.lt(h00)), "c1")
    s1b = b.let(s1 + l10, "s1b")
    c1 = b.let(c1 + E.Cast(U, s1b.lt(s1)), "c1")
    w2 = b.let(h01 + h10, "w2")
    c2 = b.let(E.Cast(U, w2.lt(h01)), "c2")
    w2b = b.let(w2 + l11, "w2b")
    c2 = b.let(c2 + E.Cast(U, w2b.lt(w2)), "c2")
    w2c = b.let(w2b + c1, "w2c")
    c2 = b.let(c2 + E.Cast(U, w2c.lt(w2b)), "c2")
    return w2c, h11 + c2


def mul_high_s(b: Body, al, ah, bl, bh) -> Pair:
    hl, hh = mul_high_u(b, al, ah, bl, bh)
    hl, hh = b.let(hl, "hl"), b.let(hh, "hh")
    na, nb = b.let(neg_of(ah), "na"), b.let(neg_of(bh), "nb")
    l1, h1 = sub(b, hl, hh, sel(na, bl, 0), sel(na, bh, 0))
    l1, h1 = b.let(l1, "l1"), b.let(h1, "h1")
    return sub(b, l1, h1, sel(nb, al, 0), sel(nb, ah, 0))


def eq(b: Body, al, ah, bl, bh) -> E.Expr:
    return all_(al.eq(bl), ah.eq(bh))


def lt_u(b: Body, al, ah, bl, bh) -> E.Expr:
    return any_(ah.lt(bh), all_(ah.eq(bh), al.lt(bl)))


def lt_s(b: Body, al, ah, bl, bh) -> E.Expr:
    sa, sb = E.Bitcast(I, ah), E.Bitcast(I, bh)
    return any_(sa.lt(sb), all_(ah.eq(bh), al.lt(bl)))


def udivmod(b: Body, al, ah, bl, bh) -> tuple[Pair, Pair]:
    """Quotient and remainder of unsigned 64-bit division (``b != 0``), bit by bit."""
    bl, bh = b.let(bl, "bl"), b.let(bh, "bh")
    ql, qh = b.var(al, "ql"), b.var(ah, "qh")      # the dividend shifts out as the quotient shifts in
    rl, rh = b.var(u(0), "rl"), b.var(u(0), "rh")
    body = b.sub()
    top = body.let(qh >> 31, "top")
    body.set(qh, (qh << 1) | (ql >> 31))
    body.set(ql, ql << 1)
    body.set(rh, (rh << 1) | (rl >> 31))
    body.set(rl, (rl << 1) | top)
    ge = body.let(E.Un(UnOp.LOGICAL_NOT, lt_u(body, rl, rh, bl, bh)), "ge")
    dl, dh = sub(body, rl, rh, bl, bh)
    dl, dh = body.let(dl, "dl"), body.let(dh, "dh")
    body.set(rl, sel(ge, dl, rl))
    body.set(rh, sel(ge, dh, rh))
    body.set(ql, ql | E.Cast(U, ge))
    b.add(N.Loop("i", u(0), u(64), tuple(body.nodes)))
    return (ql, qh), (rl, rh)


def _ones_if(cond: E.Expr) -> E.Expr:
    return sel(cond, MASK, 0)


def div_u(b: Body, al, ah, bl, bh) -> Pair:
    zero = b.let(all_(bl.eq(u(0)), bh.eq(u(0))), "zero")
    (ql, qh), _ = udivmod(b, al, ah, sel(zero, 1, bl), bh)
    return ql | _ones_if(zero), qh | _ones_if(zero)


def mod_u(b: Body, al, ah, bl, bh) -> Pair:
    zero = b.let(all_(bl.eq(u(0)), bh.eq(u(0))), "zero")
    _, (rl, rh) = udivmod(b, al, ah, sel(zero, 1, bl), bh)
    return sel(zero, 0, rl), sel(zero, 0, rh)


def _fault(b: Body, cond: E.Expr) -> None:
    """S3: an i32 division by a zero that only ``cond`` produces (the target's fault path)."""
    b.let(E.Bin(BinOp.DIV, E.Expr.i32(1), E.Cast(I, sel(cond, 0, 1))), "fault")


def _signed_divmod(b: Body, al, ah, bl, bh, want_div: bool) -> Pair:
    zero = all_(bl.eq(u(0)), bh.eq(u(0)))
    minneg = all_(al.eq(u(0)), ah.eq(u(0x80000000)), bl.eq(u(MASK)), bh.eq(u(MASK)))
    bad = b.let(any_(zero, minneg), "bad")
    _fault(b, bad)
    na, nb = b.let(neg_of(ah), "na"), b.let(neg_of(bh), "nb")
    ml, mh = negate(b, al, ah)
    xl, xh = b.let(sel(na, ml, al), "xl"), b.let(sel(na, mh, ah), "xh")
    nl, nh = negate(b, bl, bh)
    yl, yh = b.let(sel(nb, nl, bl), "yl"), b.let(sel(nb, nh, bh), "yh")
    (ql, qh), (rl, rh) = udivmod(b, xl, xh, sel(bad, 1, yl), sel(bad, 0, yh))
    if want_div:
        flip = b.let(E.Bin(BinOp.NE, na, nb), "flip")
        vl, vh = ql, qh
    else:
        flip = na
        vl, vh = rl, rh
    sl, sh = negate(b, vl, vh)
    rl2, rh2 = b.let(sel(flip, sl, vl), "rl"), b.let(sel(flip, sh, vh), "rh")
    return sel(bad, 0, rl2), sel(bad, 0, rh2)


def div_s(b: Body, al, ah, bl, bh) -> Pair:
    return _signed_divmod(b, al, ah, bl, bh, True)


def mod_s(b: Body, al, ah, bl, bh) -> Pair:
    return _signed_divmod(b, al, ah, bl, bh, False)


def shl(b: Body, al, ah, amt) -> Pair:
    s = b.let(amt & 63, "s")
    big = b.let(s.ge(u(32)), "big")
    t = b.let(s & 31, "t")
    z = b.let(t.eq(u(0)), "z")
    lo = b.let(al << t, "l")
    hi = b.let(sel(z, ah, (ah << t) | (al >> (u(32) - t))), "h")
    return sel(big, 0, lo), sel(big, lo, hi)


def shr(b: Body, al, ah, amt, signed: bool) -> Pair:
    s = b.let(amt & 63, "s")
    big = b.let(s.ge(u(32)), "big")
    t = b.let(s & 31, "t")
    z = b.let(t.eq(u(0)), "z")
    fill = b.let(E.Bitcast(U, E.Bitcast(I, ah) >> 31) if signed else u(0), "fill")
    hi = b.let(E.Bitcast(U, E.Bitcast(I, ah) >> t) if signed else ah >> t, "h")
    lo = b.let(sel(z, al, (al >> t) | (ah << (u(32) - t))), "l")
    return sel(big, hi, lo), sel(big, fill, hi)


def rotl(b: Body, al, ah, amt) -> Pair:
    s = b.let(amt & 63, "s")
    big = b.let(s.ge(u(32)), "big")
    xl, xh = b.let(sel(big, ah, al), "xl"), b.let(sel(big, al, ah), "xh")
    t = b.let(s & 31, "t")
    z = b.let(t.eq(u(0)), "z")
    back = b.let(u(32) - t, "back")
    return sel(z, xl, (xl << t) | (xh >> back)), sel(z, xh, (xh << t) | (xl >> back))


def rotr(b: Body, al, ah, amt) -> Pair:
    return rotl(b, al, ah, u(64) - (amt & 63))


def min_max(b: Body, al, ah, bl, bh, signed: bool, want_min: bool) -> Pair:
    less = b.let((lt_s if signed else lt_u)(b, al, ah, bl, bh), "lt")
    pick_a = less if want_min else not_(less)
    return sel(pick_a, al, bl), sel(pick_a, ah, bh)


def abs_diff(b: Body, al, ah, bl, bh, signed: bool) -> Pair:
    gt = b.let((lt_s if signed else lt_u)(b, bl, bh, al, ah), "gt")
    dl, dh = sub(b, al, ah, bl, bh)
    el, eh = sub(b, bl, bh, al, ah)
    return sel(gt, dl, el), sel(gt, dh, eh)


def sat_add(b: Body, al, ah, bl, bh, signed: bool) -> Pair:
    lo, hi = add(b, al, ah, bl, bh)
    lo, hi = b.let(lo, "lo"), b.let(hi, "hi")
    if not signed:
        over = b.let(lt_u(b, lo, hi, al, ah), "ov")
        return lo | _ones_if(over), hi | _ones_if(over)
    na, nb, nr = neg_of(ah), neg_of(bh), neg_of(hi)
    over = b.let(all_(E.Bin(BinOp.EQ, na, nb), E.Bin(BinOp.NE, nr, na)), "ov")
    return _sat_pick(b, over, neg_of(ah), lo, hi)


def _sat_pick(b: Body, over, neg, lo, hi) -> Pair:
    """``(lo, hi)``, or MIN when ``over`` and ``neg``, MAX when ``over`` and not."""
    neg = b.let(neg, "neg")
    return sel(over, sel(neg, 0, MASK), lo), sel(over, sel(neg, 0x80000000, 0x7FFFFFFF), hi)


def sat_sub(b: Body, al, ah, bl, bh, signed: bool) -> Pair:
    lo, hi = sub(b, al, ah, bl, bh)
    lo, hi = b.let(lo, "lo"), b.let(hi, "hi")
    if not signed:
        under = b.let(lt_u(b, al, ah, bl, bh), "un")
        return sel(under, 0, lo), sel(under, 0, hi)
    na, nb, nr = neg_of(ah), neg_of(bh), neg_of(hi)
    over = b.let(all_(E.Bin(BinOp.NE, na, nb), E.Bin(BinOp.NE, nr, na)), "ov")
    return _sat_pick(b, over, neg_of(ah), lo, hi)


def sat_mul(b: Body, al, ah, bl, bh, signed: bool) -> Pair:
    lo, hi = mul(b, al, ah, bl, bh)
    lo, hi = b.let(lo, "lo"), b.let(hi, "hi")
    if not signed:
        hl, hh = mul_high_u(b, al, ah, bl, bh)
        over = b.let(any_(hl.ne(u(0)), hh.ne(u(0))), "ov")
        return lo | _ones_if(over), hi | _ones_if(over)
    hl, hh = mul_high_s(b, al, ah, bl, bh)
    ext = b.let(_ones_if(neg_of(hi)), "ext")
    over = b.let(any_(hl.ne(ext), hh.ne(ext)), "ov")
    return _sat_pick(b, over, E.Bin(BinOp.NE, neg_of(ah), neg_of(bh)), lo, hi)


def clz(b: Body, al, ah) -> Pair:
    return sel(ah.eq(u(0)), E.Un(UnOp.CLZ, al) + 32, E.Un(UnOp.CLZ, ah)), u(0)


def ctz(b: Body, al, ah) -> Pair:
    return sel(al.eq(u(0)), E.Un(UnOp.CTZ, ah) + 32, E.Un(UnOp.CTZ, al)), u(0)


def abs_s(b: Body, al, ah) -> Pair:
    n = b.let(neg_of(ah), "n")
    ml, mh = negate(b, al, ah)
    return sel(n, ml, al), sel(n, mh, ah)


def sign(b: Body, al, ah, signed: bool) -> Pair:
    nz = b.let(any_(al.ne(u(0)), ah.ne(u(0))), "nz")
    if not signed:
        return E.Cast(U, nz), u(0)
    n = b.let(neg_of(ah), "n")
    return sel(n, MASK, E.Cast(U, nz)), sel(n, MASK, 0)


def from_i32(b: Body, x) -> Pair:
    return x, E.Bitcast(U, E.Bitcast(I, x) >> 31)


def from_f32(b: Body, x, signed: bool) -> Pair:
    """f32 bits -> u64/i64: truncate toward zero, saturate, NaN -> 0 (S12, S28)."""
    a = b.let(x & 0x7FFFFFFF, "a")
    e = b.let(a >> 23, "e")
    m = b.let((a & 0x7FFFFF) | 0x800000, "m")
    neg = b.let((x >> 31).eq(u(1)), "neg")
    # magnitude = m * 2^(e - 150): left by e - 150 (< 40 here), or right by 150 - e
    left = b.let(e.ge(u(150)), "left")
    ls = b.let(sel(left, e - 150, 0), "ls")
    rs = b.let(sel(left, 0, u(150) - e), "rs")
    lo_l, hi_l = shl(b, m, u(0), ls)
    lo_r = b.let(sel(rs.ge(u(32)), 0, m >> (rs & 31)), "lr")
    ml, mh = b.let(sel(left, lo_l, lo_r), "ml"), b.let(sel(left, hi_l, 0), "mh")
    nan = a.gt(u(0x7F800000))
    tiny = e.lt(u(127))                                  # |x| < 1 (zeros, subnormals included)
    if not signed:
        big = b.let(all_(not_(neg), e.ge(u(127 + 64))), "big")          # >= 2^64, +inf
        zero = b.let(any_(nan, neg, tiny), "zero")
        return sel(zero, 0, sel(big, MASK, ml)), sel(zero, 0, sel(big, MASK, mh))
    big = b.let(e.ge(u(127 + 63)), "big")                 # |x| >= 2^63 (inf included)
    zero = b.let(any_(nan, tiny), "zero")
    nl, nh = negate(b, ml, mh)
    vl, vh = b.let(sel(neg, nl, ml), "vl"), b.let(sel(neg, nh, mh), "vh")
    sl, sh = sel(neg, 0, MASK), sel(neg, 0x80000000, 0x7FFFFFFF)
    return sel(zero, 0, sel(big, sl, vl)), sel(zero, 0, sel(big, sh, vh))


def to_f32(b: Body, al, ah, signed: bool) -> E.Expr:
    """u64/i64 -> f32 bits, rounded once to nearest even (S28)."""
    if signed:
        neg = b.let(neg_of(ah), "neg")
        ml, mh = negate(b, al, ah)
        al, ah = b.let(sel(neg, ml, al), "xl"), b.let(sel(neg, mh, ah), "xh")
    lz = b.let(sel(ah.eq(u(0)), E.Un(UnOp.CLZ, al) + 32, E.Un(UnOp.CLZ, ah)), "lz")
    nl, nh = shl(b, al, ah, sel(lz.ge(u(64)), 0, lz))
    nl, nh = b.let(nl, "nl"), b.let(nh, "nh")
    m24 = b.let(nh >> 8, "m")
    g = (nh >> 7) & 1
    st = sel(any_((nh & 0x7F).ne(u(0)), nl.ne(u(0))), 1, 0)
    up = b.let(g & (st | m24) & 1, "up")
    bits = b.let(((u(190) - lz - 1) << 23) + m24 + up, "bits")
    mag = sel(lz.ge(u(64)), 0, bits)
    return (sel(neg, 0x80000000, 0) | mag) if signed else mag
