"""Software float64, 64-bit integers and f32 comparisons on u32 words, in `vyre.lower.crmath.dsl`.

The WGSL printer implements every float64 and 64-bit integer operation of the language with
these functions (WGSL has neither type); they are written with 32-bit operations only
(``soft=True``), so they print to WGSL and to C alike, and tests compare their C with the
hardware's float64 and 64-bit arithmetic on millions of operands (tests/lower/test_crmath_soft.py).

Float64 results are IEEE 754 binary64, round to nearest even, with subnormals, exactly as
the hardware's: the significands are aligned, added, multiplied or divided as integers (the
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


def shr64_sticky(b: Block, x: W, s: Val) -> W:
    """x >> s for any u32 s, with bit 0 set when a 1 bit was shifted out."""
    short = b.let(s.lt(64), "inrange")
    r = shr64(b, x, b.let(select(short, s, u32(0)), "sc"))
    # the bits shifted out: x & ((1 << s) - 1)
    s5 = b.let(s & 31, "m5")
    m = b.let((u32(1) << s5) - 1, "m")
    mlo = select(s.lt(32), m, u32(0xFFFFFFFF))
    mhi = select(s.lt(32), u32(0), select(s.lt(64), m, u32(0xFFFFFFFF)))
    lost = b.let(((x[1] & mlo) | (x[0] & mhi)).ne(0), "lost")
    return select(short, r[0], u32(0)), b.let(select(short, r[1], u32(0)) | one(lost), "lo")


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
    with b.if_(is_zero64(x)):
        b.ret(pair(F64, 0, 0))
    lz = b.let(clz64(x), "lz")
    t = shl64(b, x, lz)
    b.ret(round_pack(b, u32(0), i32(1023 + 63) - lz.to(I32), t))


@function(I64, soft=True, a=I32)
def vyi_from_i32(b: Block, a: Val) -> None:
    b.ret(pair(I64, select(a.lt(0), u32(0xFFFFFFFF), u32(0)), a.to(U32)))


# ---- float64 -------------------------------------------------------------------------------------
def round_pack(b: Block, sign: Val, e: Val, t: W) -> Val:
    """The float64 sign | t 2^(e - 1023 - 63) rounded to nearest even, for t with its top bit
    (bit 63) set and any biased exponent e (I32): subnormal, normal or overflowing to inf."""
    sub = b.let(e.lt(1), "sub")
    sh = b.let(select(sub, (1 - e).to(U32), u32(0)), "sh")
    zh, zl = shr64_sticky(b, t, sh)
    mh = b.let(zh >> 11, "mh")
    ml = b.let((zl >> 11) | (zh << 21), "ml")
    rest = b.let(zl & 0x7FF, "rest")
    up = b.let(rest.gt(0x400) | (rest.eq(0x400) & (ml & 1).ne(0)), "up")
    rh, rl = add64(b, (mh, ml), (u32(0), one(up)))
    ep = b.let(select(sub, i32(0), e - 1), "ep")
    big = b.let(e.ge(2047), "big")
    hi = b.let(select(big, u32(0x7FF00000), (ep.to(U32) << 20) + rh), "hi")   # a carry may reach 0x7FF: inf
    over = b.let(hi.ge(0x7FF00000), "over")
    return pair(F64, sign | select(over, u32(0x7FF00000), hi), select(over, u32(0), rl))


class _Parts:
    """The fields of a float64 operand: sign bit, biased exponent, words, class tests."""

    def __init__(self, b: Block, v: Val, name: str) -> None:
        self.h = b.let(v.hi(), f"{name}h")
        self.l = v.lo()
        self.sign = b.let(self.h & SIGN, f"{name}s")
        self.mag = b.let(self.h & 0x7FFFFFFF, f"{name}m")
        self.e = b.let(self.mag >> 20, f"{name}e")
        self.special = self.e.eq(0x7FF)
        self.nan = b.let(self.mag.gt(0x7FF00000) | (self.mag.eq(0x7FF00000) & self.l.ne(0)), f"{name}nan")
        self.inf = b.let(self.mag.eq(0x7FF00000) & self.l.eq(0), f"{name}inf")
        self.zero = b.let((self.mag | self.l).eq(0), f"{name}z")

    def normalized(self, b: Block) -> tuple[Val, W]:
        """(exponent, significand) of a finite non-zero operand with the significand's top bit
        at bit 52 (subnormals shifted up, their exponent below 1)."""
        frac = (self.h & 0xFFFFF, self.l)
        sub = b.let(self.e.eq(0), "sub")
        lz = b.let(select(sub, clz64(frac) - 11, u32(0)), "lz")
        m = shl64(b, (b.let(frac[0] | select(sub, u32(0), u32(HIDDEN)), "fh"), frac[1]), lz)
        e = b.let(select(sub, i32(1), self.e.to(I32)) - lz.to(I32), "ex")
        return e, m


def _nan() -> Val:
    return pair(F64, *QNAN)


@function(F64, soft=True, a=F64, b=F64)
def vyd_add(b: Block, a: Val, c: Val) -> None:
    """a + b"""
    x, y = _Parts(b, a, "a"), _Parts(b, c, "b")
    with b.if_(x.special | y.special):
        with b.if_(x.nan | y.nan | (x.inf & y.inf & x.sign.ne(y.sign))):
            b.ret(_nan())
        b.ret(select(x.special, a, c))
    with b.if_(x.zero):
        b.ret(select(y.zero, pair(F64, x.sign & y.sign, 0), c))
    with b.if_(y.zero):
        b.ret(a)
    swap = b.let(lt64((x.mag, x.l), (y.mag, y.l)), "swap")
    big, small = (sel64(swap, (y.h, y.l), (x.h, x.l)), sel64(swap, (x.h, x.l), (y.h, y.l)))
    bh = b.let(big[0], "gh")
    sh_ = b.let(small[0], "lh")
    sign = b.let(bh & SIGN, "sign")
    eb = b.let((bh >> 20) & 0x7FF, "eg")
    es = b.let((sh_ >> 20) & 0x7FF, "el")
    mb = ((bh & 0xFFFFF) | select(eb.ne(0), u32(HIDDEN), u32(0)), b.let(big[1], "gl"))
    ms = ((sh_ & 0xFFFFF) | select(es.ne(0), u32(HIDDEN), u32(0)), b.let(small[1], "ll"))
    e1 = b.let(select(eb.eq(0), u32(1), eb), "e1")
    d = b.let(e1 - select(es.eq(0), u32(1), es), "d")
    X = shl64(b, mb, 9)                     # significand top at bit 61, 9 bits below its last
    Y = shr64_sticky(b, shl64(b, ms, 9), d)
    same = b.let(((bh ^ sh_) & SIGN).eq(0), "same")
    s = add64(b, X, Y)
    df = sub64(b, X, Y)
    z = (b.let(select(same, s[0], df[0]), "zh"), b.let(select(same, s[1], df[1]), "zl"))
    with b.if_(is_zero64(z)):
        b.ret(pair(F64, 0, 0))              # exact cancellation: +0
    lz = b.let(clz64(z), "lz")
    b.ret(round_pack(b, sign, e1.to(I32) + 2 - lz.to(I32), shl64(b, z, lz)))


@function(F64, soft=True, a=F64, b=F64)
def vyd_sub(b: Block, a: Val, c: Val) -> None:
    """a - b = a + (-b), exactly"""
    b.ret(vyd_add(a, pair(F64, c.hi() ^ SIGN, c.lo())))


@function(F64, soft=True, a=F64)
def vyd_neg(b: Block, a: Val) -> None:
    b.ret(pair(F64, a.hi() ^ SIGN, a.lo()))


@function(F64, soft=True, a=F64, b=F64)
def vyd_mul(b: Block, a: Val, c: Val) -> None:
    """a * b"""
    x, y = _Parts(b, a, "a"), _Parts(b, c, "b")
    sign = b.let(x.sign ^ y.sign, "sign")
    with b.if_(x.special | y.special):
        with b.if_(x.nan | y.nan | (x.inf & y.zero) | (y.inf & x.zero)):
            b.ret(_nan())
        b.ret(pair(F64, sign | 0x7FF00000, 0))
    with b.if_(x.zero | y.zero):
        b.ret(pair(F64, sign, 0))
    ex, (xh, xl) = x.normalized(b)
    ey, (yh, yl) = y.normalized(b)
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
    b.ret(round_pack(b, sign, ex + ey - 1023 + one(top).to(I32), (b.let(t[0], "nh"), b.let(t[1], "nl"))))


@function(F64, soft=True, a=F64, b=F64)
def vyd_div(b: Block, a: Val, c: Val) -> None:
    """a / b"""
    x, y = _Parts(b, a, "a"), _Parts(b, c, "b")
    sign = b.let(x.sign ^ y.sign, "sign")
    with b.if_(x.nan | y.nan | (x.inf & y.inf) | (x.zero & y.zero)):
        b.ret(_nan())
    with b.if_(x.inf | y.zero):
        b.ret(pair(F64, sign | 0x7FF00000, 0))
    with b.if_(x.zero | y.inf):
        b.ret(pair(F64, sign, 0))
    ex, mx = x.normalized(b)
    ey, my = y.normalized(b)
    lt = b.let(lt64(mx, my), "lt")
    n = sel64(lt, shl64(b, mx, 1), mx)          # the quotient n / my lies in [1, 2)
    rh, rl = sub64(b, n, my)
    qh = u32(1 << 22)                          # quotient bit 54 (of 0..54)
    ql = u32(0)
    for k in range(53, -1, -1):                # one quotient bit per step: r < my after each
        r2h = b.let((rh << 1) | (rl >> 31), "rh")
        r2l = b.let(rl << 1, "rl")
        ge = b.let(~lt64((r2h, r2l), my), "ge")
        dh, dl = sub64(b, (r2h, r2l), my)
        rh = b.let(select(ge, dh, r2h), "rh")
        rl = b.let(select(ge, dl, r2l), "rl")
        bit = select(ge, u32(1 << (k % 32)), u32(0))
        if k >= 32:
            qh = b.let(qh | bit, "qh")
        else:
            ql = b.let(ql | bit, "ql") if k < 31 else b.let(bit, "ql")
    sticky = one((rh | rl).ne(0))
    t = (b.let((qh << 9) | (ql >> 23), "th"), b.let((ql << 9) | sticky, "tl"))
    b.ret(round_pack(b, sign, ex - ey + 1023 - one(lt).to(I32), t))


@function(F64, soft=True, a=F64)
def vyd_sqrt(b: Block, a: Val) -> None:
    """the correctly rounded square root"""
    x = _Parts(b, a, "a")
    with b.if_(x.nan | (x.sign.ne(0) & ~x.zero)):
        b.ret(_nan())
    with b.if_(x.zero | x.inf):
        b.ret(a)
    e, m = x.normalized(b)
    k = b.let(e - 1023, "k")
    odd = b.let((k & 1).ne(0), "odd")
    mm = sel64(odd, shl64(b, m, 1), m)          # m 2^(k - 52) with k even: m < 2^54
    mh, ml = b.let(mm[0], "mh"), b.let(mm[1], "ml")
    # root of M = mm 2^56 (110 bits), two radicand bits per step from the top: mm's 54 bits
    # are bits 109..56 of M, the rest are zeros
    rh, rl = u32(0), u32(0)
    qh, ql = u32(0), u32(0)
    for i in range(54, -1, -1):
        pos = 2 * i - 56                       # the two bits (pos + 1, pos) of mm, if pos >= 0
        if pos >= 32:
            two = (mh >> (pos - 32)) & 3
        elif pos == 31:
            two = ((mh & 1) << 1) | (ml >> 31)
        elif pos >= 0:
            two = (ml >> pos) & 3
        else:
            two = u32(0)
        r2h = b.let((rh << 2) | (rl >> 30), "rh")
        r2l = b.let((rl << 2) | two, "rl")
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
    b.ret(round_pack(b, u32(0), (k >> 1) + 1023, t))


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
    with b.if_(e.eq(0xFF)):
        b.ret(pair(F64, s | 0x7FF00000 | select(f.ne(0), u32(0x80000), u32(0)) | (f >> 3), f << 29))
    with b.if_(e.eq(0)):
        with b.if_(f.eq(0)):
            b.ret(pair(F64, s, 0))
        p = b.let(31 - clz(f), "p")             # f = 1.xxx 2^p: x = f 2^-149
        hi, lo = shl64(b, (u32(0), f), b.let(52 - p, "sh"))
        b.ret(pair(F64, s | ((p + 874) << 20) | (hi & 0xFFFFF), lo))
    b.ret(pair(F64, s | ((e + 896) << 20) | (f >> 3), f << 29))


@function(F32, soft=True, a=F64)
def vyd_to_f32(b: Block, a: Val) -> None:
    """(float)a, rounded to nearest even (subnormal results too; overflow to infinity)"""
    x = _Parts(b, a, "a")
    with b.if_(x.nan):
        b.ret((x.sign | 0x7FC00000 | ((x.h & 0x7FFFF) << 3) | (x.l >> 29)).bits())
    with b.if_(x.inf | x.zero | x.e.eq(0)):      # double subnormals are far below every f32
        b.ret(select(x.inf, x.sign | 0x7F800000, x.sign).bits())
    e32 = b.let(x.e.to(I32) - 896, "e32")
    th = b.let(((x.h & 0xFFFFF) | HIDDEN) << 11 | (x.l >> 21), "th")   # significand top at bit 63
    tl = b.let(x.l << 11, "tl")
    sub = b.let(e32.lt(1), "sub")
    zh, zl = shr64_sticky(b, (th, tl), b.let(select(sub, (1 - e32).to(U32), u32(0)), "sh"))
    m = b.let(zh >> 8, "m")
    guard = b.let((zh >> 7) & 1, "g")
    sticky = b.let(((zh & 0x7F) | zl).ne(0), "st")
    up = guard & (one(sticky) | (m & 1))
    ep = b.let(select(sub, i32(0), e32 - 1), "ep")
    big = e32.ge(255)
    packed = b.let((ep.to(U32) << 23) + m + up, "pk")
    b.ret((x.sign | select(big | packed.ge(0x7F800000), u32(0x7F800000), packed)).bits())


@function(F64, soft=True, v=U32)
def vyd_from_u32(b: Block, v: Val) -> None:
    """(double)v, exact"""
    with b.if_(v.eq(0)):
        b.ret(pair(F64, 0, 0))
    lz = b.let(clz(v), "lz")
    mn = b.let(v << lz, "mn")
    b.ret(pair(F64, ((1054 - lz) << 20) | ((mn >> 11) & 0xFFFFF), mn << 21))


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
    x = _Parts(b, a, "a")
    with b.if_(x.e.lt(1023)):
        b.ret(i32(0))
    sh = b.let(select(x.e.gt(1075), u32(0), 1075 - x.e), "sh")
    _, lo = shr64(b, ((x.h & 0xFFFFF) | HIDDEN, x.l), sh)
    b.ret(select(x.sign.ne(0), 0 - lo, lo).to(I32))


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


SOFT = [vyu_mulhi32, vyu_add, vyu_sub, vyu_mul, vyu_mulhi, vyu_shl, vyu_shr, vyi_shr, vyu_lt, vyu_le,
        vyi_lt, vyi_le, vyu_clz, vyd_from_u64, vyi_from_i32, vyd_add, vyd_sub, vyd_neg, vyd_mul, vyd_div,
        vyd_sqrt, vyd_lt, vyd_le, vyd_eq, vyd_from_f32, vyd_to_f32, vyd_from_u32, vyd_from_i32, vyd_to_i32,
        vyf_lt, vyf_le, vyf_eq]
