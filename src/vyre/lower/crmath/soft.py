"""Software float64, 64-bit integers and f32 comparisons on u32 words, in `vyre.lower.crmath.dsl`.

The WGSL printer implements every float64 and 64-bit integer operation of the language with
these functions (WGSL has neither type); they are written with 32-bit operations only
(``soft=True``), so they print to WGSL and to C alike, and tests compare their C with the
hardware's float64 and 64-bit arithmetic on millions of operands (tests/lower/test_crmath_soft.py).

Float64 results are IEEE 754 binary64, round to nearest even, with subnormals, exactly as
the hardware's (branch-free: every case is computed and selects pick the result, since
lavapipe runs both arms of a branch anyway and straight-line code compiles faster): the significands are aligned, added, multiplied or divided as integers (the
product and quotient exactly, plus a sticky bit), then `round_pack` rounds once. Loop-free:
division and square root are the restoring digit recurrences, one bit per step, unrolled.
A NaN result is the quiet NaN ``0x7FF8000000000000`` (payloads are not propagated; vyre's math
never produces a float64 NaN it looks at). Integer operations wrap like C's unsigned ones;
shift amounts are taken modulo 64.
"""

from __future__ import annotations

from .dsl import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    U32,
    U64,
    Block,
    Val,
    clz,
    function,
    i32,
    mulhi,
    pair,
    select,
    u32,
)

W = tuple[Val, Val]   # a 64-bit value as its (hi, lo) u32 words
SIGN, HIDDEN = 0x80000000, 0x00100000
QNAN = (0x7FF80000, 0)


def one(cond: Val) -> Val:
    """A bool as the u32 0 or 1."""
    return cond.to(U32)


# ---- 64-bit words (Python helpers: they emit code into the function being built) -------------
def add64(b: Block, x: W, y: W) -> W:
    lo = b.let(x[1] + y[1], "lo")
    return b.let(x[0] + y[0] + one(lo.lt(x[1])), "hi"), lo


def sub64(b: Block, x: W, y: W) -> W:
    lo = b.let(x[1] - y[1], "lo")
    return b.let(x[0] - y[0] - one(x[1].lt(y[1])), "hi"), lo


def lt64(x: W, y: W) -> Val:
    """Unsigned x < y."""
    return x[0].lt(y[0]) | (x[0].eq(y[0]) & x[1].lt(y[1]))


def is_zero64(x: W) -> Val:
    return (x[0] | x[1]).eq(0)


def sel64(c: Val, x: W, y: W) -> W:
    return select(c, x[0], y[0]), select(c, x[1], y[1])


def shl64(b: Block, x: W, s: Val | int) -> W:
    """x << s for 0 <= s < 64."""
    if isinstance(s, int):
        if s == 0:
            return x
        if s >= 32:
            return b.let(x[1] << (s - 32), "hi"), u32(0)
        return b.let((x[0] << s) | (x[1] >> (32 - s)), "hi"), b.let(x[1] << s, "lo")
    s5 = b.let(s & 31, "s5")
    hs = b.let((x[0] << s5) | ((x[1] >> 1) >> (31 - s5)), "hs")
    ls = b.let(x[1] << s5, "ls")
    big = b.let((s & 32).ne(0), "big")
    return b.let(select(big, ls, hs), "hi"), b.let(select(big, u32(0), ls), "lo")


def shr64(b: Block, x: W, s: Val | int) -> W:
    """x >> s (logical) for 0 <= s < 64."""
    if isinstance(s, int):
        if s == 0:
            return x
        if s >= 32:
            return u32(0), b.let(x[0] >> (s - 32), "lo")
        return b.let(x[0] >> s, "hi"), b.let((x[1] >> s) | (x[0] << (32 - s)), "lo")
    s5 = b.let(s & 31, "s5")
    ls = b.let((x[1] >> s5) | ((x[0] << 1) << (31 - s5)), "ls")
    hs = b.let(x[0] >> s5, "hs")
    big = b.let((s & 32).ne(0), "big")
    return b.let(select(big, u32(0), hs), "hi"), b.let(select(big, hs, ls), "lo")


def clz64(x: W) -> Val:
    return select(x[0].ne(0), clz(x[0]), 32 + clz(x[1]))


def mul32x32(b: Block, x: Val, y: Val) -> W:
    """The 64-bit product of two u32 values."""
    return b.let(mulhi(x, y), "ph"), b.let(x * y, "pl")


def words(v: Val) -> W:
    return v.hi(), v.lo()


# ---- u32 -----------------------------------------------------------------------------------------
@function(U32, soft=True, a=U32, b=U32)
def vyu_mulhi32(b: Block, a: Val, c: Val) -> None:
    """high word of a * b (16-bit halves; WGSL has no mulhi)"""
    al = b.let(a & 0xFFFF, "al")
    ah = b.let(a >> 16, "ah")
    bl = b.let(c & 0xFFFF, "bl")
    bh = b.let(c >> 16, "bh")
    lh = b.let(al * bh, "lh")
    hl = b.let(ah * bl, "hl")
    mid = b.let(((al * bl) >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF), "mid")
    b.ret(ah * bh + (lh >> 16) + (hl >> 16) + (mid >> 16))


# ---- u64 / i64 -----------------------------------------------------------------------------------
@function(U64, soft=True, a=U64, b=U64)
def vyu_add(b: Block, a: Val, c: Val) -> None:
    b.ret(pair(U64, *add64(b, words(a), words(c))))


@function(U64, soft=True, a=U64, b=U64)
def vyu_sub(b: Block, a: Val, c: Val) -> None:
    b.ret(pair(U64, *sub64(b, words(a), words(c))))


@function(U64, soft=True, a=U64, b=U64)
def vyu_mul(b: Block, a: Val, c: Val) -> None:
    """low 64 bits of a * b"""
    ah, al = words(a)
    bh, bl = words(c)
    ph, pl = mul32x32(b, al, bl)
    b.ret(pair(U64, ph + al * bh + ah * bl, pl))


@function(U64, soft=True, a=U64, b=U64)
def vyu_mulhi(b: Block, a: Val, c: Val) -> None:
    """high 64 bits of the 128-bit product a * b"""
    ah, al = words(a)
    bh, bl = words(c)
    h00, _ = mul32x32(b, al, bl)
    h01, l01 = mul32x32(b, al, bh)
    h10, l10 = mul32x32(b, ah, bl)
    h11, l11 = mul32x32(b, ah, bh)
    s1 = b.let(h00 + l01, "s1")
    w1 = b.let(s1 + l10, "w1")
    c1 = b.let(one(s1.lt(h00)) + one(w1.lt(s1)), "c1")
    s2 = b.let(h01 + h10, "s2")
    s3 = b.let(s2 + l11, "s3")
    w2 = b.let(s3 + c1, "w2")
    c2 = b.let(one(s2.lt(h01)) + one(s3.lt(s2)) + one(w2.lt(s3)), "c2")
    b.ret(pair(U64, h11 + c2, w2))


@function(U64, soft=True, a=U64, s=U32)
def vyu_shl(b: Block, a: Val, s: Val) -> None:
    b.ret(pair(U64, *shl64(b, words(a), b.let(s & 63, "s"))))


@function(U64, soft=True, a=U64, s=U32)
def vyu_shr(b: Block, a: Val, s: Val) -> None:
    b.ret(pair(U64, *shr64(b, words(a), b.let(s & 63, "s"))))


@function(I64, soft=True, a=I64, s=U32)
def vyi_shr(b: Block, a: Val, s: Val) -> None:
    """arithmetic shift right"""
    n = b.let(s & 63, "n")
    fill = b.let(select(a.hi().to(I32).lt(0), u32(0xFFFFFFFF), u32(0)), "fill")
    h, lo = shr64(b, (a.hi() ^ fill, a.lo() ^ fill), n)   # shift the complement of a negative value
    b.ret(pair(I64, h ^ fill, lo ^ fill))


@function(BOOL, soft=True, a=U64, b=U64)
def vyu_lt(b: Block, a: Val, c: Val) -> None:
    b.ret(lt64(words(a), words(c)))


@function(BOOL, soft=True, a=U64, b=U64)
def vyu_le(b: Block, a: Val, c: Val) -> None:
    b.ret(~lt64(words(c), words(a)))


@function(BOOL, soft=True, a=I64, b=I64)
def vyi_lt(b: Block, a: Val, c: Val) -> None:
    b.ret(lt64((a.hi() ^ SIGN, a.lo()), (c.hi() ^ SIGN, c.lo())))


@function(BOOL, soft=True, a=I64, b=I64)
def vyi_le(b: Block, a: Val, c: Val) -> None:
    b.ret(~lt64((c.hi() ^ SIGN, c.lo()), (a.hi() ^ SIGN, a.lo())))


@function(U32, soft=True, a=U64)
def vyu_clz(b: Block, a: Val) -> None:
    b.ret(clz64(words(a)))


@function(F64, soft=True, a=U64)
def vyd_from_u64(b: Block, a: Val) -> None:
    """(double)a, rounded to nearest even"""
    x = words(a)
    lz = b.let(clz64(x), "lz")
    r = round_pack(b, u32(0), i32(1023 + 63) - lz.to(I32), shl64(b, x, lz))
    b.ret(select(is_zero64(x), pair(F64, 0, 0), r))


@function(I64, soft=True, a=I32)
def vyi_from_i32(b: Block, a: Val) -> None:
    b.ret(pair(I64, select(a.lt(0), u32(0xFFFFFFFF), u32(0)), a.to(U32)))


# ---- float64 -------------------------------------------------------------------------------------
def shr64_jam(b: Block, x: W, s: Val) -> W:
    """x >> min(s, 63), bit 0 set when a 1 bit was shifted out (s any u32)."""
    sc = b.let(select(s.gt(63), u32(63), s), "sc")
    s5 = b.let(sc & 31, "s5")
    big = b.let(sc.ge(32), "big")
    hs = b.let(x[0] >> s5, "hs")
    ls = (x[1] >> s5) | ((x[0] << 1) << (31 - s5))
    m = b.let((u32(1) << s5) - 1, "m")
    lost = select(big, x[1] | (x[0] & m), x[1] & m).ne(0)
    return b.let(select(big, u32(0), hs), "hi"), b.let(select(big, hs, ls) | one(lost), "lo")


def round_pack(b: Block, sign: Val, e: Val, t: W, normal: bool = False) -> Val:
    """The float64 sign | t 2^(e - 1023 - 63) rounded to nearest even, for t with its top bit
    (bit 63) set and any biased exponent e (I32): subnormal, normal or overflowing to inf.
    ``normal``: the caller promises e >= 1 (a value below 2^-1022 then comes with t not
    normalized, and exact: it packs as the subnormal it is)."""
    if normal:
        zh, zl = t
        ep = e - 1
    else:   # shifting by more than 63 rounds to zero as 63 does
        sub = b.let(e.lt(1), "sub")
        zh, zl = shr64_jam(b, t, select(sub, (1 - e).to(U32), u32(0)))
        ep = select(sub, i32(0), e - 1)
    ml = b.let((zl >> 11) | (zh << 21), "ml")
    rest = b.let(zl & 0x7FF, "rest")
    up = rest.gt(0x400) | (rest.eq(0x400) & (ml & 1).ne(0))
    rh, rl = add64(b, (zh >> 11, ml), (u32(0), one(up)))
    hi = b.let((ep.to(U32) << 20) + rh, "hi")     # a carry may reach exponent 0x7FF: inf
    over = b.let(e.ge(2047) | hi.ge(0x7FF00000), "over")
    return pair(F64, sign | select(over, u32(0x7FF00000), hi), select(over, u32(0), rl))


def is_nan_words(mag: Val, lo: Val) -> Val:
    """Whether a float64 with these magnitude (high word, sign cleared) and low words is NaN."""
    return (mag + one(lo.ne(0))).gt(0x7FF00000)


def _nan() -> Val:
    return pair(F64, *QNAN)


@function(F64, soft=True, a=F64, b=F64)
def vyd_add(b: Block, a: Val, c: Val) -> None:
    """a + b"""
    ah, al, bh, bl = b.let(a.hi(), "ah"), a.lo(), b.let(c.hi(), "bh"), c.lo()
    am, bm = b.let(ah & 0x7FFFFFFF, "am"), b.let(bh & 0x7FFFFFFF, "bm")
    sa, sb = b.let(am.ge(0x7FF00000), "sa"), b.let(bm.ge(0x7FF00000), "sb")
    # branch-free: every case is computed, the last select picks (lavapipe runs both arms of
    # every branch anyway, and straight-line code compiles faster)
    special = select(sa & sb, select(ah.eq(bh) & al.eq(bl), a, _nan()), select(sa, a, c))
    swap = b.let(lt64((am, al), (bm, bl)), "swap")   # x: the larger magnitude, y the smaller
    xh, xl = b.let(select(swap, bh, ah), "xh"), b.let(select(swap, bl, al), "xl")
    yh, yl = b.let(select(swap, ah, bh), "yh"), b.let(select(swap, al, bl), "yl")
    ym = b.let(yh & 0x7FFFFFFF, "ym")
    # x + 0 = x; -0 + -0 = -0, else a zero sum is +0
    with_zero = select(((xh & 0x7FFFFFFF) | xl).eq(0), pair(F64, ah & bh, 0), pair(F64, xh, xl))
    ex = b.let((xh >> 20) & 0x7FF, "ex")
    ey = b.let(ym >> 20, "ey")
    e1 = b.let(select(ex.eq(0), u32(1), ex), "e1")     # subnormals: exponent 1, no hidden bit
    d = e1 - select(ey.eq(0), u32(1), ey)
    X = shl64(b, ((xh & 0xFFFFF) | select(ex.eq(0), u32(0), u32(HIDDEN)), xl), 9)   # top at bit 61
    Y = shr64_jam(b, shl64(b, ((yh & 0xFFFFF) | select(ey.eq(0), u32(0), u32(HIDDEN)), yl), 9), d)
    same = b.let(((ah ^ bh) & SIGN).eq(0), "same")
    s_, df = add64(b, X, Y), sub64(b, X, Y)
    z = (b.let(select(same, s_[0], df[0]), "zh"), b.let(select(same, s_[1], df[1]), "zl"))
    # normalize, but not below exponent 1: a sum below 2^-1022 is exact
    lz = b.let(clz64(z), "lz")
    lz = b.let(select(lz.gt(e1 + 1), e1 + 1, lz), "lz")
    r = round_pack(b, xh & SIGN, e1.to(I32) + 2 - lz.to(I32), shl64(b, z, lz), normal=True)
    r = select(is_zero64(z), pair(F64, 0, 0), r)      # exact cancellation: +0
    b.ret(select(sa | sb, special, select((ym | yl).eq(0), with_zero, r)))


@function(F64, soft=True, a=F64, b=F64)
def vyd_sub(b: Block, a: Val, c: Val) -> None:
    """a - b = a + (-b), exactly"""
    b.ret(vyd_add(a, pair(F64, c.hi() ^ SIGN, c.lo())))


@function(F64, soft=True, a=F64)
def vyd_neg(b: Block, a: Val) -> None:
    b.ret(pair(F64, a.hi() ^ SIGN, a.lo()))


def _normalized(b: Block, h: Val, lo: Val, e: Val) -> tuple[Val, W]:
    """(exponent, significand with its top bit at bit 52) of a finite non-zero float64 with
    high word h, low word lo and biased exponent e (a subnormal's exponent ends below 1)."""
    sub = b.let(e.eq(0), "sub")
    frac = (b.let(h & 0xFFFFF, "fh"), lo)
    lz = b.let(select(sub, clz64(frac) - 11, u32(0)), "lz")
    m = shl64(b, (frac[0] | select(sub, u32(0), u32(HIDDEN)), lo), lz)
    return b.let(select(sub, i32(1), e.to(I32)) - lz.to(I32), "ex"), m


@function(F64, soft=True, a=F64, b=F64)
def vyd_mul(b: Block, a: Val, c: Val) -> None:
    """a * b"""
    ah, al, bh, bl = b.let(a.hi(), "ah"), a.lo(), b.let(c.hi(), "bh"), c.lo()
    am, bm = b.let(ah & 0x7FFFFFFF, "am"), b.let(bh & 0x7FFFFFFF, "bm")
    sign = b.let((ah ^ bh) & SIGN, "sign")
    za, zb = b.let((am | al).eq(0), "za"), b.let((bm | bl).eq(0), "zb")
    # branch-free (as every helper here): each case is computed and selects pick the result
    # (lavapipe runs both arms of a branch anyway, and straight-line code compiles faster)
    special = b.let(am.ge(0x7FF00000) | bm.ge(0x7FF00000), "special")   # NaN, or inf * 0: NaN; else inf
    bad = is_nan_words(am, al) | is_nan_words(bm, bl) | za | zb
    special_r = select(bad, _nan(), pair(F64, sign | 0x7FF00000, 0))
    ex, (xh, xl) = _normalized(b, ah, al, am >> 20)
    ey, (yh, yl) = _normalized(b, bh, bl, bm >> 20)
    # the 106-bit product, words w3 w2 w1 w0
    h00, w0 = mul32x32(b, xl, yl)
    h01, l01 = mul32x32(b, xl, yh)
    h10, l10 = mul32x32(b, xh, yl)
    h11, l11 = mul32x32(b, xh, yh)
    s1 = b.let(h00 + l01, "s1")
    w1 = b.let(s1 + l10, "w1")
    c1 = b.let(one(s1.lt(h00)) + one(w1.lt(s1)), "c1")
    s2 = b.let(h01 + h10, "s2")
    s3 = b.let(s2 + l11, "s3")
    w2 = b.let(s3 + c1, "w2")
    w3 = b.let(h11 + one(s2.lt(h01)) + one(s3.lt(s2)) + one(w2.lt(s3)), "w3")
    # bits 105..42 as t, the rest as a sticky bit
    th = b.let((w3 << 22) | (w2 >> 10), "th")
    tl = b.let((w2 << 22) | (w1 >> 10) | one(((w1 & 0x3FF) | w0).ne(0)), "tl")
    top = b.let((th >> 31).ne(0), "top")
    t = sel64(top, (th, tl), ((th << 1) | (tl >> 31), tl << 1))
    r = round_pack(b, sign, ex + ey - 1023 + one(top).to(I32), (b.let(t[0], "nh"), b.let(t[1], "nl")))
    b.ret(select(special, special_r, select(za | zb, pair(F64, sign, 0), r)))


@function(F64, soft=True, a=F64, b=F64)
def vyd_div(b: Block, a: Val, c: Val) -> None:
    """a / b"""
    ah, al, bh, bl = b.let(a.hi(), "ah"), a.lo(), b.let(c.hi(), "bh"), c.lo()
    am, bm = b.let(ah & 0x7FFFFFFF, "am"), b.let(bh & 0x7FFFFFFF, "bm")
    sign = b.let((ah ^ bh) & SIGN, "sign")
    sa, sb = b.let(am.ge(0x7FF00000), "sa"), b.let(bm.ge(0x7FF00000), "sb")
    za, zb = b.let((am | al).eq(0), "za"), b.let((bm | bl).eq(0), "zb")
    # NaN, inf / inf, 0 / 0: NaN; x / 0, inf / y: inf; 0 / y, x / inf: 0
    nan = is_nan_words(am, al) | is_nan_words(bm, bl) | (sa & sb) | (za & zb)
    special_r = select(nan, _nan(), pair(F64, sign | select(sa | zb, u32(0x7FF00000), u32(0)), 0))
    ex, mx = _normalized(b, ah, al, am >> 20)
    ey, my = _normalized(b, bh, bl, bm >> 20)
    lt = b.let(lt64(mx, my), "lt")
    n = sel64(lt, shl64(b, mx, 1), mx)          # the quotient n / my lies in [1, 2)
    rh, rl = sub64(b, n, my)                   # quotient 1.d1 d2 ... d7, 8-bit digits
    # digit k: q = floor(256 r / my) < 256, estimated as floor((256 r >> 29) / ((my >> 29) + 1)),
    # which is q or q - 1 (my >> 29 >= 2^23, so the two truncations cost under 1 + 2^-15): one
    # conditional subtraction makes the digit and the remainder exact (r < my throughout)
    div = b.let((my[0] << 3 | my[1] >> 29) + 1, "dv")
    m_lo, m_mid = b.let(my[1] & 0xFFFF, "ml"), b.let(my[1] >> 16, "mm")
    digits = []
    for _ in range(7):
        th = b.let(rh << 8 | rl >> 24, "th")     # t = r << 8 < 2^61
        tl = b.let(rl << 8, "tl")
        q = b.let((th << 3 | tl >> 29) / div, "q")
        lo = q * m_lo
        mid = b.let(q * m_mid + (lo >> 16), "pm")   # q my < 2^61 as (q my_h + (mid >> 16), q my_l)
        ph, pl = q * my[0] + (mid >> 16), q * my[1]
        rh, rl = sub64(b, (th, tl), (ph, pl))
        up = b.let(~lt64((rh, rl), my), "up")
        dh, dl = sub64(b, (rh, rl), my)
        rh, rl = b.let(select(up, dh, rh), "rh"), b.let(select(up, dl, rl), "rl")
        digits.append(b.let(q + one(up), "d"))
    qh = (u32(1) << 24) | digits[0] << 16 | digits[1] << 8 | digits[2]
    ql = b.let(digits[3] << 24 | digits[4] << 16 | digits[5] << 8 | digits[6], "ql")
    t = (b.let(qh << 7 | ql >> 25, "th"), b.let(ql << 7 | one((rh | rl).ne(0)), "tl"))   # top at bit 63
    r = round_pack(b, sign, ex - ey + 1023 - one(lt).to(I32), t)
    b.ret(select(sa | sb | za | zb, special_r, r))


@function(F64, soft=True, a=F64)
def vyd_sqrt(b: Block, a: Val) -> None:
    """the correctly rounded square root"""
    ah, al = b.let(a.hi(), "ah"), a.lo()
    am = b.let(ah & 0x7FFFFFFF, "am")
    za = b.let((am | al).eq(0), "za")
    nan = b.let(is_nan_words(am, al) | (ah.ge(SIGN) & ~za), "nan")
    keep = b.let(za | am.eq(0x7FF00000), "keep")   # +-0, +inf
    e, m = _normalized(b, ah, al, am >> 20)
    k = b.let(e - 1023, "k")
    odd = b.let((k & 1).ne(0), "odd")
    mm = sel64(odd, shl64(b, m, 1), m)          # m 2^(k - 52) with k even: m < 2^54
    mh, ml = b.let(mm[0], "mh"), b.let(mm[1], "ml")
    # root of M = mm 2^56 (110 bits), two radicand bits per step from the top (mm's 54 bits
    # are bits 109..56 of M, the rest zeros): q gains one bit per step, r = (bits so far) - q^2
    # <= 2q. While q < 2^28 (the first 29 steps) r and 4q + 1 fit one word.
    def radicand(i: int) -> Val:
        pos = 2 * i - 56                       # the two bits (pos + 1, pos) of mm, if pos >= 0
        if pos >= 32:
            return (mh >> (pos - 32)) & 3
        if pos == 31:
            return ((mh & 1) << 1) | (ml >> 31)
        return (ml >> pos) & 3 if pos >= 0 else u32(0)

    r, q = u32(0), u32(0)
    for i in range(54, 25, -1):
        r2 = b.let(r << 2 | radicand(i), "r")
        t = b.let(q << 2 | 1, "t")
        ge = b.let(r2.ge(t), "ge")
        r = b.let(select(ge, r2 - t, r2), "r")
        q = b.let(q << 1 | one(ge), "q")
    rh, rl, qh, ql = u32(0), r, u32(0), q
    for i in range(25, -1, -1):
        r2h = b.let((rh << 2) | (rl >> 30), "rh")
        r2l = b.let((rl << 2) | radicand(i), "rl")
        th = b.let((qh << 2) | (ql >> 30), "th")
        tl = b.let((ql << 2) | 1, "tl")
        ge = b.let(~lt64((r2h, r2l), (th, tl)), "ge")
        dh, dl = sub64(b, (r2h, r2l), (th, tl))
        rh = b.let(select(ge, dh, r2h), "rh")
        rl = b.let(select(ge, dl, r2l), "rl")
        qh = b.let((qh << 1) | (ql >> 31), "qh")
        ql = b.let((ql << 1) | one(ge), "ql")
    sticky = one((rh | rl).ne(0))
    t = (b.let((qh << 9) | (ql >> 23), "th"), b.let((ql << 9) | sticky, "tl"))   # root top at bit 54
    b.ret(select(nan, _nan(), select(keep, a, round_pack(b, u32(0), (k >> 1) + 1023, t))))


def _cmp_parts(b: Block, a: Val, c: Val) -> tuple[Val, Val, Val, Val]:
    """(either is NaN, both are zero, a < b ignoring those two, bits equal)"""
    ah, al, ch, cl = b.let(a.hi(), "ah"), a.lo(), b.let(c.hi(), "bh"), c.lo()
    am, cm = b.let(ah & 0x7FFFFFFF, "am"), b.let(ch & 0x7FFFFFFF, "bm")
    nan = (am.gt(0x7FF00000) | (am.eq(0x7FF00000) & al.ne(0))) | (cm.gt(0x7FF00000) | (cm.eq(0x7FF00000) & cl.ne(0)))
    zero = (am | al | cm | cl).eq(0)
    sa, sc = b.let((ah >> 31).ne(0), "sa"), (ch >> 31).ne(0)
    less = select(sa.ne(sc), sa, select(sa, lt64((ch, cl), (ah, al)), lt64((ah, al), (ch, cl))))
    return b.let(nan, "nan"), b.let(zero, "zero"), b.let(less, "less"), ah.eq(ch) & al.eq(cl)


@function(BOOL, soft=True, a=F64, b=F64)
def vyd_lt(b: Block, a: Val, c: Val) -> None:
    nan, zero, less, _ = _cmp_parts(b, a, c)
    b.ret(~nan & ~zero & less)


@function(BOOL, soft=True, a=F64, b=F64)
def vyd_le(b: Block, a: Val, c: Val) -> None:
    nan, zero, less, same = _cmp_parts(b, a, c)
    b.ret(~nan & (zero | same | less))


@function(BOOL, soft=True, a=F64, b=F64)
def vyd_eq(b: Block, a: Val, c: Val) -> None:
    nan, zero, _, same = _cmp_parts(b, a, c)
    b.ret(~nan & (zero | same))


@function(F64, soft=True, x=F32)
def vyd_from_f32(b: Block, x: Val) -> None:
    """(double)x, exact"""
    u = b.let(x.bits(), "u")
    s = b.let(u & SIGN, "s")
    e = b.let((u >> 23) & 0xFF, "e")
    f = b.let(u & 0x7FFFFF, "f")
    special = pair(F64, s | 0x7FF00000 | select(f.ne(0), u32(0x80000), u32(0)) | (f >> 3), f << 29)
    p = b.let(31 - clz(f), "p")                 # a subnormal: f = 1.xxx 2^p, x = f 2^-149
    hi, lo = shl64(b, (u32(0), f), b.let((52 - p) & 63, "sh"))
    sub = select(f.eq(0), pair(F64, s, 0), pair(F64, s | ((p + 874) << 20) | (hi & 0xFFFFF), lo))
    normal = pair(F64, s | ((e + 896) << 20) | (f >> 3), f << 29)
    b.ret(select(e.eq(0xFF), special, select(e.eq(0), sub, normal)))


@function(F32, soft=True, a=F64)
def vyd_to_f32(b: Block, a: Val) -> None:
    """(float)a, rounded to nearest even (subnormal results too; overflow to infinity)"""
    ah, al = b.let(a.hi(), "ah"), a.lo()
    sign = b.let(ah & SIGN, "sign")
    am = b.let(ah & 0x7FFFFFFF, "am")
    e = b.let(am >> 20, "e")
    nan = sign | 0x7FC00000 | ((ah & 0x7FFFF) << 3) | (al >> 29)
    edge = select(e.eq(0), sign, sign | 0x7F800000)   # inf; zeros and double subnormals (far below f32's)
    e32 = b.let(e.to(I32) - 896, "e32")
    th = b.let(((ah & 0xFFFFF) | HIDDEN) << 11 | (al >> 21), "th")   # significand top at bit 63
    sub = b.let(e32.lt(1), "sub")
    zh, zl = shr64_jam(b, (th, al << 11), select(sub, (1 - e32).to(U32), u32(0)))
    m = b.let(zh >> 8, "m")
    guard = (zh >> 7) & 1
    sticky = ((zh & 0x7F) | zl).ne(0)
    up = guard & (one(sticky) | (m & 1))
    packed = b.let((select(sub, i32(0), e32 - 1).to(U32) << 23) + m + up, "pk")
    r = sign | select(e32.ge(255) | packed.ge(0x7F800000), u32(0x7F800000), packed)
    b.ret(select(is_nan_words(am, al), nan, select(e.eq(0x7FF) | e.eq(0), edge, r)).bits())


@function(F64, soft=True, v=U32)
def vyd_from_u32(b: Block, v: Val) -> None:
    """(double)v, exact"""
    lz = b.let(clz(v) & 31, "lz")
    mn = b.let(v << lz, "mn")
    r = pair(F64, ((1054 - lz) << 20) | ((mn >> 11) & 0xFFFFF), mn << 21)
    b.ret(select(v.eq(0), pair(F64, 0, 0), r))


@function(F64, soft=True, v=I32)
def vyd_from_i32(b: Block, v: Val) -> None:
    """(double)v, exact"""
    neg = b.let(v.lt(0), "neg")
    u = b.let(v.to(U32), "u")
    d = b.let(vyd_from_u32(select(neg, 0 - u, u)), "d")
    b.ret(pair(F64, d.hi() | select(neg, u32(SIGN), u32(0)), d.lo()))


@function(I32, soft=True, a=F64)
def vyd_to_i32(b: Block, a: Val) -> None:
    """(int)a, truncated, for |a| < 2^31 (others: not defined by C; here wrapped bits)"""
    ah = b.let(a.hi(), "ah")
    e = b.let((ah >> 20) & 0x7FF, "e")
    sh = select(e.gt(1075), u32(0), select(e.lt(1013), u32(63), 1075 - e))
    _, lo = shr64(b, ((ah & 0xFFFFF) | HIDDEN, a.lo()), b.let(sh, "sh"))
    b.ret(select(e.lt(1023), i32(0), select(ah.ge(SIGN), 0 - lo, lo).to(I32)))


# ---- f32 comparisons on the bits (WGSL keeps f32 values as their u32 bits) --------------------
def _f32_parts(b: Block, a: Val, c: Val) -> tuple[Val, Val, Val, Val]:
    x, y = b.let(a.bits(), "x"), b.let(c.bits(), "y")
    nan = (x & 0x7FFFFFFF).gt(0x7F800000) | (y & 0x7FFFFFFF).gt(0x7F800000)
    zero = ((x | y) & 0x7FFFFFFF).eq(0)
    sx, sy = b.let((x >> 31).ne(0), "sx"), (y >> 31).ne(0)
    less = select(sx.ne(sy), sx, select(sx, y.lt(x), x.lt(y)))
    return b.let(nan, "nan"), b.let(zero, "zero"), less, x.eq(y)


@function(BOOL, soft=True, a=F32, b=F32)
def vyf_lt(b: Block, a: Val, c: Val) -> None:
    nan, zero, less, _ = _f32_parts(b, a, c)
    b.ret(~nan & ~zero & less)


@function(BOOL, soft=True, a=F32, b=F32)
def vyf_le(b: Block, a: Val, c: Val) -> None:
    nan, zero, less, same = _f32_parts(b, a, c)
    b.ret(~nan & (zero | same | less))


@function(BOOL, soft=True, a=F32, b=F32)
def vyf_eq(b: Block, a: Val, c: Val) -> None:
    nan, zero, _, same = _f32_parts(b, a, c)
    b.ret(~nan & (zero | same))


@function(F64, soft=True, a=F64, b=F64, c=F64)
def vyd_mul_add(b: Block, a: Val, m: Val, c: Val) -> None:
    """a * b + c with two roundings: WGSL's form of the language's ``fma``"""
    b.ret(vyd_add(vyd_mul(a, m), c))


SOFT = [vyu_mulhi32, vyu_add, vyu_sub, vyu_mul, vyu_mulhi, vyu_shl, vyu_shr, vyi_shr, vyu_lt, vyu_le,
        vyi_lt, vyi_le, vyu_clz, vyd_from_u64, vyi_from_i32, vyd_add, vyd_sub, vyd_neg, vyd_mul, vyd_mul_add, vyd_div,
        vyd_sqrt, vyd_lt, vyd_le, vyd_eq, vyd_from_f32, vyd_to_f32, vyd_from_u32, vyd_from_i32, vyd_to_i32,
        vyf_lt, vyf_le, vyf_eq]
