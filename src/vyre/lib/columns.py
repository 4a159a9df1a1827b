"""Exact sums in workgroup memory: one superaccumulator digit column per invocation.

Owns where an invocation keeps its running exact sum while it reads many values, and how a
workgroup's columns become one digit vector. The digits are those of `vyre.ir.superacc`
(radix 2**16, i32, normalised by `superacc.normalise`, rounded once by
`superacc.round_digits`); only their place differs. A private digit array indexed by a
value's exponent is not in registers on a GPU (a run-time index sends it to local memory,
and the lanes of a warp then touch as many cache lines as they have different exponents).
Here digit ``k`` of invocation ``lid`` is word ``k * wg + lid`` of a workgroup array: the
lanes of a warp always hit different banks, whatever their exponents.

`LAYOUT` puts bit 0 at 2**-150, so an f32 value's mantissa sits at its biased exponent
(``m * 2**(e - 150)``): no arithmetic on the exponent. Adding ``±m * 2**s`` (``m < 2**24``)
adds three signed chunks of the two's-complement bits of ``±m << (s & 15)``: the low two
16-bit halves (each in ``[0, 2**16)``) and the signed rest (in ``[-2**8, 2**8)``), at digits
``s >> 4`` and the two above. No digit moves by ``2**16`` or more per value, so an
invocation may add `superacc.LOCAL_HEADROOM` values before `settle` carries its column.

f32 and bf16 specials cost two integer maxima per value instead of a flags word (`Specials`):
their bits are added like any others (the flags decide the result whatever the digits hold).

On serial backends (a CPU device, `vyre.lib.runner.serial`) an invocation first adds each f32
to one private i64 bin per sign and biased exponent (`bin_f32_bits`: one add of the mantissa,
where the column takes three; consecutive values to `SETS` interleaved sets of bins, so that
equal exponents do not make each add wait on the previous one), and adds the bins to its
column once at the end (`flush_bins`): an exact regrouping of the same terms.
"""

from __future__ import annotations

from vyre.ir import BufferDecl, DataType, Expr, Node
from vyre.ir import superacc as sa

from .kernels import LID

U, I = DataType.U32, DataType.I32
# bit 0 at 2**-150: an f32 mantissa at its biased exponent; 20 digits hold 2**32 of the
# largest values (bits up to 277 + 32) and the sign
LAYOUT = sa.Layout(base=-150, digits=20, mantissa_bits=24)
BYTES = 4 * LAYOUT.digits   # workgroup memory per invocation


def decl(name: str, wg: int) -> BufferDecl:
    """The workgroup array of `LAYOUT`'s digit columns for ``wg`` invocations."""
    return BufferDecl.workgroup(name, LAYOUT.digits * wg, I)


def add_signed(col: str, wg: int, sm: Expr, s: Expr, p: str) -> list[Node]:
    """Add ``sm * 2**s`` (i32 ``|sm| < 2**24``; ``s`` the position of its bit 0, provably at
    most 255 to range analysis, which then drops the bounds checks) to this invocation's
    column of ``col``. ``p`` prefixes the locals it binds."""
    o, at = Expr.var(f"{p}_o"), Expr.var(f"{p}_at")
    v, lo = Expr.var(f"{p}_v"), Expr.var(f"{p}_lo")
    return [
        Node.let_bind(f"{p}_v", sm),
        Node.let_bind(f"{p}_o", s & 15),
        Node.let_bind(f"{p}_at", (s >> 4) * wg + LID),
        # the bits of v * 2**o are (hi:lo) with hi = floor(v * 2**o / 2**32)
        Node.let_bind(f"{p}_lo", sa.as_u32(v << o)),
        Node.store(col, at, Expr.load(col, at) + sa.as_i32(lo & 0xFFFF)),
        Node.store(col, at + wg, Expr.load(col, at + wg) + sa.as_i32(lo >> 16)),
        # (v >> 1) >> (31 - o): an arithmetic shift by 32 - o, also for o = 0
        Node.store(col, at + 2 * wg, Expr.load(col, at + 2 * wg) + ((v >> 1) >> (Expr.u32(31) - o))),
    ]


class Specials:
    """NaN and infinities among f32 bit patterns, from two maxima: the largest bits of a
    non-negative value as i32 (``> 0x7F800000``: a NaN; ``== 0x7F800000``: +inf) and the
    largest bits of all as u32 (``> 0xFF800000``: a NaN; ``== 0xFF800000``: -inf)."""

    POS, ANY = "sp_pos", "sp_any"

    @classmethod
    def init(cls) -> list[Node]:
        return [Node.let_bind(cls.POS, Expr.i32(-(2**31))), Node.let_bind(cls.ANY, Expr.u32(0))]

    @classmethod
    def see(cls, bits: Expr) -> list[Node]:
        return [Node.assign(cls.POS, Expr.var(cls.POS).max(sa.as_i32(bits))),
                Node.assign(cls.ANY, Expr.var(cls.ANY).max(bits))]

    @classmethod
    def flags(cls) -> Expr:
        """The `superacc` flags word of what was seen."""
        pos, anyb = Expr.var(cls.POS), Expr.var(cls.ANY)
        nan = pos.gt(Expr.i32(0x7F800000)).or_(anyb.gt(Expr.u32(0xFF800000)))
        return (Expr.select(nan, Expr.u32(sa.FLAG_NAN), Expr.u32(0))
                | Expr.select(pos.eq(Expr.i32(0x7F800000)), Expr.u32(sa.FLAG_PINF), Expr.u32(0))
                | Expr.select(anyb.eq(Expr.u32(0xFF800000)), Expr.u32(sa.FLAG_NINF), Expr.u32(0)))


def add_f32_bits(col: str, wg: int, bits: Expr, p: str) -> list[Node]:
    """Add the f32 whose bits are the u32 ``bits`` (a subnormal counts as zero, S9; a special
    is seen by `Specials`, which the caller has set up)."""
    b, e = Expr.var(f"{p}_b"), Expr.var(f"{p}_e")
    m = Expr.select(e.eq(Expr.u32(0)), Expr.u32(0), (b & 0x7FFFFF) | 0x800000)
    return [Node.let_bind(f"{p}_b", bits), Node.let_bind(f"{p}_e", (b >> 23) & 0xFF),
            *add_signed(col, wg, sa.as_i32(Expr.select(sa.as_i32(b).lt(Expr.i32(0)), -m, m)), e, p),
            *Specials.see(b)]


BINS = 512           # one i64 bin per f32 sign and biased exponent (the top 9 bits)
SETS = 4             # interleaved bin sets: value u of a block of SETS goes to set u
BIN_VALUES = 1 << 23  # values an invocation may add to its bins (each sign's sum < 2**47: `flush_bins`)


def bins_decl(name: str) -> BufferDecl:
    """The private bins of `bin_f32_bits`: `SETS` sets of `BINS`."""
    return BufferDecl.local(name, BINS * SETS, DataType.I64)


def bins_init(name: str) -> list[Node]:
    return [Node.loop(f"{name}_k", Expr.u32(0), Expr.u32(BINS * SETS), [Node.store(name, Expr.var(f"{name}_k"), Expr.i64(0))])]


def bin_f32_bits(bins: str, bits: Expr, p: str, bin_set: int = 0) -> list[Node]:
    """Add the f32 whose bits are the u32 ``bits`` to bin ``bits >> 23`` (its sign and
    biased exponent) of set ``bin_set`` as its mantissa ``m`` (the term is ``±m * 2**(e -
    150)``): three integer operations and one private add, no select. The bins of exponent 0
    (zeros and subnormals, which count as zero, S9) are never read; those of exponent 255
    only say whether a special was added (`specials_binned`). Consecutive values going to
    different sets (the caller's blocks) do not wait on each other's bin when their exponents
    match."""
    b = Expr.var(f"{p}_b")
    return [Node.let_bind(f"{p}_b", bits),
            Node.let_bind(f"{p}_k", (b >> 23) + BINS * bin_set),
            Node.store(bins, Expr.var(f"{p}_k"), Expr.load(bins, Expr.var(f"{p}_k"))
                       + Expr.cast(DataType.I64, (b & 0x7FFFFF) | 0x800000))]


def specials_binned(bins: str) -> Expr:
    """Whether `bin_f32_bits` added a NaN or an infinity (each adds ``m >= 2**23`` to a bin of
    exponent 255, whose sum of at most `BIN_VALUES` such terms cannot wrap): only then need
    the caller read its values again for `Specials`, which the bins cannot tell apart."""
    seen: Expr | None = None
    for k in range(SETS):
        for key in (BINS // 2 - 1, BINS - 1):
            hit = Expr.load(bins, Expr.u32(BINS * k + key)).ne(Expr.i64(0))
            seen = hit if seen is None else seen.or_(hit)
    assert seen is not None
    return seen


def flush_bins(bins: str, col: str, wg: int) -> list[Node]:
    """Add the finite bins (exponents 1..254) to this invocation's column: per exponent
    ``e`` the positive bins of every set minus the negative ones (at most `BIN_VALUES`
    mantissas in all, so ``|v| < 2**47``) as its low 24 bits at ``e`` and the signed rest at
    ``e + 24`` (two `add_signed` terms each: at most 508 in all, within the column's
    `superacc.LOCAL_HEADROOM`)."""
    e, v = Expr.var("bin_e"), Expr.var("bin_v")
    half = BINS // 2
    total: Expr = Expr.load(bins, e) - Expr.load(bins, e + half)
    for k in range(1, SETS):
        total = total + (Expr.load(bins, e + BINS * k) - Expr.load(bins, e + (BINS * k + half)))
    low = Expr.cast(I, v & Expr.i64(0xFFFFFF))
    high = Expr.cast(I, v >> Expr.i64(24))
    return [Node.loop("bin_e", Expr.u32(1), Expr.u32(half - 1), [
        Node.let_bind("bin_v", total),
        Node.if_(v.ne(Expr.i64(0)), [*add_signed(col, wg, low, e, "bl"), *add_signed(col, wg, high, e + 24, "bh")])])]


def add_f16_bits(col: str, wg: int, bits: Expr, p: str) -> list[Node]:
    """Add the f16 whose bits are the low half of the u32 ``bits``; its flags are ORed into
    the u32 variable ``fl``."""
    s149 = Expr.var(f"{p}_s")
    m, neg = Expr.var(f"{p}_m"), Expr.var(f"{p}_neg")
    return [*sa.decode_f16(bits, p),
            *add_signed(col, wg, sa.as_i32(Expr.select(neg.eq(Expr.u32(1)), -m, m)), s149 + 1, f"{p}c"),
            Node.assign("fl", Expr.var("fl") | Expr.var(f"{p}_flags"))]


def settle(col: str, wg: int, local: str) -> list[Node]:
    """Carry every invocation's column (through the private array ``local``, at least
    `LAYOUT.digits` long), then add the columns pairwise into column 0: its digits are then
    the workgroup's total, each below ``wg * 2**16`` in magnitude (`load_total` normalises
    them). Every invocation must reach it (it has barriers)."""
    K = LAYOUT.digits
    out: list[Node] = [Node.store(local, Expr.u32(k), Expr.load(col, Expr.u32(k * wg) + LID)) for k in range(K)]
    out += sa.normalise(local, K, f"{col}_n")
    out += [Node.store(col, Expr.u32(k * wg) + LID, Expr.load(local, Expr.u32(k))) for k in range(K)]
    out.append(Node.barrier())
    h = 1
    while h * 2 < wg:
        h *= 2
    while h >= 1:
        partner = LID + h
        out += [Node.if_(LID.lt(h).and_(partner.lt(wg)), [
            Node.store(col, Expr.u32(k * wg) + LID,
                       Expr.load(col, Expr.u32(k * wg) + LID) + Expr.load(col, Expr.u32(k * wg) + partner))
            for k in range(K)]), Node.barrier()]
        h //= 2
    return out


def load_total(col: str, wg: int, local: str) -> list[Node]:
    """Column 0 (the workgroup's total after `settle`) into ``local``, normalised."""
    K = LAYOUT.digits
    return [*[Node.store(local, Expr.u32(k), Expr.load(col, Expr.u32(k * wg))) for k in range(K)],
            *sa.normalise(local, K, f"{col}_t")]


__all__ = ["BINS", "BIN_VALUES", "BYTES", "LAYOUT", "SETS", "Specials", "add_f16_bits", "add_f32_bits", "add_signed",
           "bin_f32_bits", "bins_decl", "bins_init", "decl", "flush_bins", "load_total", "settle",
           "specials_binned"]
