"""The exact float superaccumulator, as vyre Program fragments (S34 in docs/semantics.md).

Owns the one recipe for adding floats exactly with integer operations and rounding the exact
total once: every float sum, dot, scatter-add and scan of `vyre.lib` is built from these
fragments, and so is the rewrite of float ``atomic_add`` for compiled targets
(`vyre.lower.accumulate`, S36). It lives in `vyre.ir` (it builds IR only) so that both
`vyre.lib` and `vyre.lower` can use it. Nothing here dispatches; each function returns IR
statements (`vyre.ir.Node`) to splice into a Program. Code that runs once per element (a
final rounding) may ask `normalise`, `load_slot` and `round_digits` for ``looped=True``: the
same steps as loops, a fraction of the source (and of the compile time).

The representation. A canonicalised finite float is ``m * 2**(s + base)`` with an integer
mantissa ``m`` (24 bits for f32 values, 48 for products of two f32) and a non-negative bit
position ``s``; ``base`` is the weight of bit 0 (2**-149 for f32/f16/bf16 values, 2**-298 for
products). The exact total is an integer in radix 2**16 *digits*: ``V = sum(d[k] * 2**(16k))``.

* A **local** accumulator is a per-invocation ``local`` array of i32 digits. Adding a value
  adds (or subtracts) its 16-bit chunks, so each digit moves by less than 2**16 per value:
  at most 2**14 values may be added between normalisations (`normalise`), which carry every
  digit into ``[0, 2**16)`` and leave the signed rest in the top digit.
* A **global** accumulator (scatter-add) is two arrays of u32 words, one for positive and
  one for negative contributions. A chunk is added with an integer atomic; when the word
  wraps (the atomic's old value says so) a 1 is carried two words up (a word holds 32 bits
  of weight 2**(16k)). The final memory is the exact total whatever the order.
* Specials travel as a flags word (`FLAG_NAN`, `FLAG_PINF`, `FLAG_NINF`) combined with OR.

`round_digits` turns normalised digits and flags into the bits of the target format: NaN
if any NaN or both infinities, else the infinity, else the exact value rounded once to
nearest even (IEEE gradual underflow), then S9's flush for formats that flush (f32, bf16);
an exact zero is +0.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Expr
from .node import Node
from .program import BufferDecl
from .types import AtomicOp, DataType

U, I = DataType.U32, DataType.I32
DIGIT_BITS = 16
DIGIT_MASK = 0xFFFF
FLAG_NAN, FLAG_PINF, FLAG_NINF = 1, 2, 4
LOCAL_HEADROOM = 1 << 14   # values a local accumulator takes between normalisations


@dataclass(frozen=True)
class Layout:
    """A fixed-point layout: ``base`` is the exponent of bit 0, ``digits`` the radix-2**16
    digits (room for the largest value times 2**32 contributions, plus the sign)."""

    base: int
    digits: int
    mantissa_bits: int   # 24 for values, 48 for products

    @property
    def chunks(self) -> int:
        """16-bit chunks a shifted mantissa spans."""
        return (self.mantissa_bits + 15 + 15) // 16


SUM = Layout(base=-149, digits=20, mantissa_bits=24)   # bits 0..276, +32 for the count
DOT = Layout(base=-298, digits=37, mantissa_bits=48)   # bits 0..553, +32 for the count


@dataclass(frozen=True)
class Format:
    """A binary float format the exact total is rounded to."""

    dtype: DataType
    precision: int    # significand bits, hidden bit included
    bias: int
    max_biased: int   # the biased exponent of infinity
    flush: bool       # S9: subnormal results become signed zeros
    nan_bits: int

    @property
    def emin(self) -> int:
        return 1 - self.bias


F32 = Format(DataType.F32, 24, 127, 255, True, 0x7FC00000)
F16 = Format(DataType.F16, 11, 15, 31, False, 0x7E00)
BF16 = Format(DataType.BF16, 8, 127, 255, True, 0x7FC0)
FORMATS = {DataType.F32: F32, DataType.F16: F16, DataType.BF16: BF16}


def v(name: str) -> Expr:
    return Expr.var(name)


def let(name: str, value: object) -> Node:
    return Node.let_bind(name, value)


def u(x: int) -> Expr:
    return Expr.u32(x)


def i(x: int) -> Expr:
    return Expr.i32(x)


def as_i32(x: Expr) -> Expr:
    return Expr.bitcast(I, x)


def as_u32(x: Expr) -> Expr:
    return Expr.bitcast(U, x)


# ---- decoding one value: (flags, neg, lo, hi, s) --------------------------------------------
def decode_f32(bits: Expr, p: str) -> list[Node]:
    """Decode f32 bits (a u32 expression) into ``{p}_flags`` (a special's flag, else 0),
    ``{p}_neg`` (u32 0/1), ``{p}_m`` (the 24-bit mantissa; 0 for a zero or a flushed
    subnormal) and ``{p}_s`` (the position of its bit 0 above 2**-149)."""
    b, e = v(f"{p}_b"), v(f"{p}_e")
    frac = b & 0x7FFFFF
    special = e.eq(u(255))
    inf_flag = Expr.select((b >> 31).eq(u(1)), u(FLAG_NINF), u(FLAG_PINF))
    return [
        let(f"{p}_b", bits),
        let(f"{p}_e", (b >> 23) & 0xFF),
        let(f"{p}_neg", b >> 31),
        let(f"{p}_flags", Expr.select(special, Expr.select(frac.eq(u(0)), inf_flag, u(FLAG_NAN)), u(0))),
        let(f"{p}_m", Expr.select(e.eq(u(0)).or_(special), u(0), frac | 0x800000)),
        let(f"{p}_s", Expr.select(e.eq(u(0)), u(0), e - 1)),
    ]


def decode_f16(bits: Expr, p: str) -> list[Node]:
    """As `decode_f32`, for f16 bits in the low half of a u32 (f16 subnormals are f32
    normals: S27 keeps them). Positions stay above 2**-149, so f16 and f32 totals share
    `SUM`."""
    b, e = v(f"{p}_b"), v(f"{p}_e")
    frac = b & 0x3FF
    special = e.eq(u(31))
    inf_flag = Expr.select(((b >> 15) & 1).eq(u(1)), u(FLAG_NINF), u(FLAG_PINF))
    return [
        let(f"{p}_b", bits & 0xFFFF),
        let(f"{p}_e", (b >> 10) & 0x1F),
        let(f"{p}_neg", (b >> 15) & 1),
        let(f"{p}_flags", Expr.select(special, Expr.select(frac.eq(u(0)), inf_flag, u(FLAG_NAN)), u(0))),
        # value = m * 2**(max(e,1) - 25) = m * 2**(s - 149)  =>  s = max(e,1) + 124
        let(f"{p}_m", Expr.select(special, u(0), Expr.select(e.eq(u(0)), frac, frac | 0x400))),
        let(f"{p}_s", e.max(u(1)) + 124),
    ]


def decode_bf16(bits: Expr, p: str) -> list[Node]:
    """As `decode_f32`, for bf16 bits in the low half of a u32 (S28: subnormals flush)."""
    return decode_f32((bits & 0xFFFF) << 16, p)


DECODE = {DataType.F32: decode_f32, DataType.F16: decode_f16, DataType.BF16: decode_bf16}


def product(x: str, y: str, p: str) -> list[Node]:
    """The exact product of two decoded values ``x`` and ``y`` (`decode_f32` prefixes):
    ``{p}_flags``, ``{p}_neg``, the 48-bit mantissa as ``{p}_lo``/``{p}_hi`` and ``{p}_s``
    (above 2**-298). inf * 0 is NaN; a zero times a finite value is an exact zero."""
    fx, fy = v(f"{x}_flags"), v(f"{y}_flags")
    mx, my = v(f"{x}_m"), v(f"{y}_m")
    neg = v(f"{x}_neg") ^ v(f"{y}_neg")
    any_nan = ((fx | fy) & FLAG_NAN).ne(u(0))
    x_inf, y_inf = (fx & (FLAG_PINF | FLAG_NINF)).ne(u(0)), (fy & (FLAG_PINF | FLAG_NINF)).ne(u(0))
    x_zero = mx.eq(u(0)).and_(fx.eq(u(0)))
    y_zero = my.eq(u(0)).and_(fy.eq(u(0)))
    inf_flag = Expr.select(neg.eq(u(1)), u(FLAG_NINF), u(FLAG_PINF))
    flags = Expr.select(any_nan.or_(x_inf.and_(y_zero)).or_(y_inf.and_(x_zero)), u(FLAG_NAN),
                        Expr.select(x_inf.or_(y_inf), inf_flag, u(0)))
    return [
        let(f"{p}_flags", flags),
        let(f"{p}_neg", neg),
        let(f"{p}_lo", Expr.select(v(f"{p}_flags").eq(u(0)), mx * my, u(0))),
        let(f"{p}_hi", Expr.select(v(f"{p}_flags").eq(u(0)), mx.mul_high(my), u(0))),
        let(f"{p}_s", v(f"{x}_s") + v(f"{y}_s")),
    ]


def _chunks(lo: Expr, hi: Expr, s: Expr, p: str, count: int) -> list[Node]:
    """``{p}_d`` (the first digit) and ``{p}_c0..`` (u32 chunks < 2**16) of ``(hi:lo) << s``."""
    o = v(f"{p}_o")
    sl, sh = v(f"{p}_sl"), v(f"{p}_sh")
    nodes = [let(f"{p}_d", s >> 4), let(f"{p}_o", s & 15), let(f"{p}_sl", lo << o),
             # (lo >> 1) >> (31 - o): lo's bits that cross into the high word (0 when o = 0)
             let(f"{p}_sh", (hi << o) | ((lo >> 1) >> (u(31) - o)))]
    parts = [sl & DIGIT_MASK, sl >> 16, sh & DIGIT_MASK, sh >> 16]
    return nodes + [let(f"{p}_c{j}", parts[j]) for j in range(count)]


def add_local(acc: str, lo: Expr, hi: Expr, s: Expr, neg: Expr, p: str, layout: Layout) -> list[Node]:
    """Add ``±(hi:lo) * 2**s`` to the local i32 digit array ``acc`` (no carries: see
    `LOCAL_HEADROOM`)."""
    out = _chunks(lo, hi, s, p, layout.chunks)
    d = v(f"{p}_d")
    for j in range(layout.chunks):
        c = as_i32(v(f"{p}_c{j}"))
        delta = Expr.select(neg.eq(u(1)), -c, c)
        out.append(Node.store(acc, d + j, Expr.load(acc, d + j) + delta))
    return out


def add_digits_local(acc: str, load_digit, digits: int) -> list[Node]:
    """Add a digit vector (``load_digit(k)`` an i32 expression) into ``acc`` digit by digit."""
    return [Node.store(acc, u(k), Expr.load(acc, u(k)) + load_digit(k)) for k in range(digits)]


def normalise(acc: str, digits: int, p: str = "nrm", looped: bool = False) -> list[Node]:
    """Carry every digit of ``acc`` (i32) into [0, 2**16); the signed rest stays on top.
    ``looped``: the same steps as one loop instead of unrolled (smaller code, for code
    that runs once per element, such as a final rounding)."""
    out: list[Node] = [let(f"{p}_carry", i(0))]
    carry = v(f"{p}_carry")
    if looped:
        k, cur = v(f"{p}_k"), v(f"{p}_cur")
        return out + [
            Node.loop(f"{p}_k", u(0), u(digits - 1), [
                let(f"{p}_cur", Expr.load(acc, k) + carry),
                Node.assign(f"{p}_carry", cur >> 16),   # arithmetic: floor
                Node.store(acc, k, cur & DIGIT_MASK)]),
            Node.store(acc, u(digits - 1), Expr.load(acc, u(digits - 1)) + carry)]
    for k in range(digits - 1):
        cur = Expr.load(acc, u(k)) + carry
        out += [Node.store(acc, u(k), cur),
                Node.assign(f"{p}_carry", Expr.load(acc, u(k)) >> 16),   # arithmetic: floor
                Node.store(acc, u(k), Expr.load(acc, u(k)) & DIGIT_MASK)]
    out.append(Node.store(acc, u(digits - 1), Expr.load(acc, u(digits - 1)) + carry))
    return out


def local_decls(acc: str, layout: Layout) -> list[BufferDecl]:
    """The local digit array an accumulating invocation needs (two spare digits: a value's
    chunks may reach past the top digit it can be carried into)."""
    return [BufferDecl.local(acc, layout.digits + 2, I)]


# ---- the global (atomic) accumulator -------------------------------------------------------
def slot_words(layout: Layout) -> int:
    """u32 words per global accumulator slot: positive digits, negative digits (each with two
    carry words) and the flags word."""
    return 2 * (layout.digits + 2) + 1


def atomic_add_value(buf: str, base: Expr, lo: Expr, hi: Expr, s: Expr, neg: Expr, flags: Expr,
                     p: str, layout: Layout) -> list[Node]:
    """Add one decoded value to the global accumulator slot starting at word ``base`` of the
    u32 buffer ``buf`` with integer atomics (carries follow a wrap: see the module doc)."""
    span = layout.digits + 2
    out = _chunks(lo, hi, s, p, layout.chunks)
    side = Expr.select(neg.eq(u(1)), u(span), u(0))
    out += [let(f"{p}_side", base + side),
            Node.if_(flags.ne(u(0)), [Node.expr(Expr.atomic(AtomicOp.OR, buf, base + 2 * span, flags))])]
    for j in range(layout.chunks):
        c = v(f"{p}_c{j}")
        word = v(f"{p}_side") + v(f"{p}_d") + j
        k, old = f"{p}_k{j}", f"{p}_old{j}"
        out.append(Node.if_(c.ne(u(0)), [
            let(old, Expr.atomic(AtomicOp.ADD, buf, word, c)),
            Node.if_(v(old).gt(u(0xFFFFFFFF) - c), [
                let(k, word + 2),
                Node.while_(Expr.atomic(AtomicOp.ADD, buf, v(k), u(1)).eq(u(0xFFFFFFFF)),
                            [Node.assign(k, v(k) + 2)], span),
            ]),
        ]))
    return out


def load_slot(acc: str, buf: str, base: Expr, layout: Layout, p: str = "ld",
              looped: bool = False) -> list[Node]:
    """Read a global slot (u32 positive and negative words) into the local i32 digit array
    ``acc`` (radix 2**16, each digit below 2**18 in magnitude), then normalise it; also sets
    ``{p}_flags``. ``looped``: as loops (see `normalise`)."""
    span = layout.digits + 2
    out: list[Node] = [let(f"{p}_flags", Expr.load(buf, base + 2 * span))]
    if looped:
        k, pos, neg, high = v(f"{p}_k"), v(f"{p}_pos"), v(f"{p}_neg"), v(f"{p}_high")
        return out + [
            let(f"{p}_high", i(0)),   # the previous words' high halves, positive minus negative
            Node.loop(f"{p}_k", u(0), u(span), [
                let(f"{p}_pos", Expr.load(buf, base + k)), let(f"{p}_neg", Expr.load(buf, base + span + k)),
                Node.store(acc, k, as_i32(pos & DIGIT_MASK) - as_i32(neg & DIGIT_MASK) + high),
                Node.assign(f"{p}_high", as_i32(pos >> 16) - as_i32(neg >> 16))]),
        ] + normalise(acc, span, f"{p}n", True)
    for k in range(span):
        pos, neg = Expr.load(buf, base + k), Expr.load(buf, base + span + k)
        digit = as_i32(pos & DIGIT_MASK) - as_i32(neg & DIGIT_MASK)
        if k:
            ppos, pneg = Expr.load(buf, base + k - 1), Expr.load(buf, base + span + k - 1)
            digit = digit + as_i32(ppos >> 16) - as_i32(pneg >> 16)
        out.append(Node.store(acc, u(k), digit))
    # the top word's high half (weight 2**(16*span)) cannot be set: totals stay far below it
    return out + normalise(acc, span, f"{p}n")


# ---- rounding the exact total once ---------------------------------------------------------
def round_digits(acc: str, digits: int, flags: Expr, layout: Layout, fmt: Format, out: str,
                 p: str = "rnd", looped: bool = False) -> list[Node]:
    """Set the u32 variable ``out`` to the bits of the normalised digits in ``acc`` (i32,
    ``digits`` long, modified) rounded once to ``fmt``; the specials in ``flags`` win.
    ``looped``: the negation as loops (see `normalise`)."""
    top = Expr.load(acc, u(digits - 1))
    neg = v(f"{p}_neg")
    k, hi = v(f"{p}_k"), v(f"{p}_hi")
    P, L = v(f"{p}_P"), v(f"{p}_L")
    sign = Expr.select(neg.eq(u(1)), u(1 << (fmt.dtype.bits - 1)), u(0))
    inf_bits = (fmt.max_biased << (fmt.precision - 1))
    window = v(f"{p}_win")

    def bits_from(pos: Expr, name: str) -> list[Node]:
        """``name`` = the 32 bits of the total from bit ``pos`` (>= 0) up."""
        q, r = v(f"{name}_q"), v(f"{name}_r")
        d0, d1, d2 = (as_u32(Expr.load(acc, q + j)) for j in range(3))
        return [let(f"{name}_q", pos >> 4), let(f"{name}_r", pos & 15),
                let(name, (d0 >> r) | (d1 << (u(16) - r)) | ((d2 << 1) << (u(31) - r)))]

    body: list[Node] = [
        let(f"{p}_neg", Expr.select(top.lt(i(0)), u(1), u(0))),
        Node.if_(neg.eq(u(1)), ([Node.loop(f"{p}_m", u(0), u(digits), [
            Node.store(acc, v(f"{p}_m"), -Expr.load(acc, v(f"{p}_m")))])] if looped else
            [Node.store(acc, u(j), -Expr.load(acc, u(j))) for j in range(digits)])
            + normalise(acc, digits, f"{p}n", looped)),
        # the highest non-zero digit and the position P of the total's leading bit
        let(f"{p}_k", i(-1)),
        Node.loop(f"{p}_j", u(0), u(digits), [
            Node.if_(Expr.load(acc, v(f"{p}_j")).ne(i(0)), [Node.assign(f"{p}_k", as_i32(v(f"{p}_j")))])]),
        let(out, u(0)),
        Node.if_(k.ge(i(0)), [
            let(f"{p}_hi", as_u32(Expr.load(acc, as_u32(k)))),
            let(f"{p}_P", as_i32(as_u32(k) * 16 + (u(31) - hi.clz()))),
            # the kept lsb: precision bits below the leading one, never below the format's
            # smallest subnormal (gradual underflow), as a position in the fixed point
            let(f"{p}_lsbexp", (P + layout.base - (fmt.precision - 1)).max(i(fmt.emin - (fmt.precision - 1)))),
            let(f"{p}_L", v(f"{p}_lsbexp") - layout.base),
            let(f"{p}_mant", u(0)), let(f"{p}_up", u(0)),
            Node.if_(L.le(i(0)), [
                # exact: every bit fits (shift the low bits up)
                *bits_from(u(0), f"{p}_win"),
                Node.assign(f"{p}_mant", window << as_u32(-L)),
            ], [
                *bits_from(as_u32(L), f"{p}_win"),
                Node.assign(f"{p}_mant", window & u((1 << fmt.precision) - 1)),
                *bits_from(as_u32(L - 1), f"{p}_rw"),
                let(f"{p}_round", v(f"{p}_rw") & 1),
                # sticky: any bit below L-1
                let(f"{p}_sticky", u(0)),
                let(f"{p}_sq", as_u32(L - 1) >> 4),
                Node.loop(f"{p}_t", u(0), u(digits), [
                    Node.if_(v(f"{p}_t").lt(v(f"{p}_sq")), [
                        Node.assign(f"{p}_sticky", v(f"{p}_sticky") | as_u32(Expr.load(acc, v(f"{p}_t"))))])]),
                Node.assign(f"{p}_sticky", v(f"{p}_sticky") | (as_u32(Expr.load(acc, v(f"{p}_sq")))
                                                                & ((u(1) << (as_u32(L - 1) & 15)) - 1))),
                Node.if_(v(f"{p}_round").eq(u(1)).and_(v(f"{p}_sticky").ne(u(0)).or_((v(f"{p}_mant") & 1).eq(u(1)))),
                         [Node.assign(f"{p}_mant", v(f"{p}_mant") + 1)]),
            ]),
            Node.if_(v(f"{p}_mant").eq(u(1 << fmt.precision)), [
                Node.assign(f"{p}_mant", v(f"{p}_mant") >> 1),
                Node.assign(f"{p}_lsbexp", v(f"{p}_lsbexp") + 1)]),
            # biased exponent of a normal result (mant has its hidden bit), else subnormal
            let(f"{p}_be", v(f"{p}_lsbexp") + (fmt.precision - 1) + fmt.bias),
            Node.if_(v(f"{p}_mant").ge(u(1 << (fmt.precision - 1))), [
                Node.if_(v(f"{p}_be").ge(i(fmt.max_biased)), [Node.assign(out, sign | inf_bits)], [
                    Node.assign(out, sign | (as_u32(v(f"{p}_be")) << (fmt.precision - 1))
                                | (v(f"{p}_mant") & ((1 << (fmt.precision - 1)) - 1)))]),
            ], [Node.assign(out, sign | (u(0) if fmt.flush else v(f"{p}_mant")))]),
        ]),
        Node.if_((flags & (FLAG_PINF | FLAG_NINF)).eq(u(FLAG_PINF)), [Node.assign(out, u(inf_bits))]),
        Node.if_((flags & (FLAG_PINF | FLAG_NINF)).eq(u(FLAG_NINF)),
                 [Node.assign(out, u(inf_bits | (1 << (fmt.dtype.bits - 1))))]),
        Node.if_((flags & FLAG_NAN).ne(u(0)).or_((flags & (FLAG_PINF | FLAG_NINF)).eq(u(FLAG_PINF | FLAG_NINF))),
                 [Node.assign(out, u(fmt.nan_bits))]),
    ]
    return body


__all__ = ["BF16", "DECODE", "DOT", "F16", "F32", "FLAG_NAN", "FLAG_NINF", "FLAG_PINF", "FORMATS",
           "LOCAL_HEADROOM", "SUM", "Format", "Layout", "add_digits_local", "add_local",
           "atomic_add_value", "decode_bf16", "decode_f16", "decode_f32", "load_slot",
           "local_decls", "normalise", "product", "round_digits", "slot_words"]
