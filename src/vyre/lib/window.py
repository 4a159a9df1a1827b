"""f32 scatter-add on serial backends through one 64-bit window per slot.

`vyre.lib.scatter`'s serial 64-bit path keeps 16 u64 words (128 bytes) per slot in a global
buffer and rounds every slot from all 16 in a second dispatch; on PoCL the passes waited on
memory (the slot words are fresh pages every call: page faults) and on the rounding (a
20-digit normalise and search per slot). Here a slot holds its exact total as
``acc * 2**(E - 150)``: one i64 ``acc`` (``|acc| < 2**62``) and the bit position ``E`` of its
bit 0 (bit 0 at 2**-150 as in `vyre.lib.columns`, so an f32's mantissa ``m`` sits at its
biased exponent ``e``: the term is ``±m * 2**(e - 150)``), beside a u32 of ``E`` and the
slot's special flags: 12 bytes, in workgroup memory (no global scratch at all).

Adding ``±m`` at ``e`` is exact, or it *spills*:

* ``0 <= e - E <= WINDOW_REACH``: ``acc += ±m << (e - E)`` (the common case, no branch taken;
  an empty window sits at the call's ``E0``, `first_window`);
* ``acc == 0`` (an empty slot, or one whose terms cancelled): the window moves to
  ``E = max(e, 13) - WINDOW_LOW`` (room for values below the first one);
* ``e < E``: ``acc`` shifts up by ``E - e`` when that keeps ``|acc| < 2**62``, and ``E = e``;
* ``e > E + WINDOW_REACH``: ``acc`` shifts down by ``k = e - E - WINDOW_REACH`` when its low
  ``k`` bits are zeros, and ``E += k``;
* otherwise, or when a sum leaves ``[-2**62, 2**62)``: a spill.

The window a slot ends with depends on the order of its terms, its value ``acc * 2**(E-150)``
never does: it is their exact sum. Rounding it once (`round_window`) is the i64 -> f32
conversion (S28: rounded once to nearest even) with ``E - 150`` added to the exponent field,
plus the two cases where that is not S34's gradual-underflow rounding followed by S9's flush
(results below 2**-126). A call that spills anywhere sets a flag word's `SPILL` bit and its
caller runs the 16-word path instead: a slot whose terms span more than about 2**35 (or
whose total overflows), which costs that call the window pass too.

One dispatch, no barrier (`window_scatter_program`): invocation ``g`` (one a workgroup, one
per range) owns the slots ``[g * PER, (g + 1) * PER)``. It reads the contributions a chunk at
a time, lists the ones of its range branch-free (a random half of them, whose test a branch
would mispredict about every other time), adds those to their windows, then rounds its
slots with their initial values.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir import superacc as sa

from .kernels import EXTRA, GID, index_ok

U, I, I64 = DataType.U32, DataType.I32, DataType.I64
WINDOW_LOW = 12     # an empty slot's window starts this many bits below its first value's bit 0
WINDOW_REACH = 38   # a value at most this far above the window's bit 0 adds in place (< 2**62)
WINDOW_TOP = 254 - WINDOW_REACH   # the highest bit 0 a window takes: an exponent of 255 never adds in place
EMPTY = 256         # the meta word holds E + EMPTY in its low 9 bits; 0 (a zeroed slot) is the call's E0
SAMPLE = 64         # values `first_window` looks at
BAD, SPILL = 1, 2   # bits of the flag word: a bad index, a spill
CHUNK_LOG = 12      # contributions a range lists at a time (`window_scatter_program`; 16 KiB)
CHUNK = 1 << CHUNK_LOG


def see(p: str, b: Expr, slow: list[Node] | None = None) -> list[Node]:
    """Add the f32 of bits ``b`` to the window in the variables ``{p}_acc`` (i64) and
    ``{p}_E`` (i32): in place when its exponent ``e`` is at most `WINDOW_REACH` above ``E``
    (never for a zero, a subnormal or a special: ``1 <= E <= WINDOW_TOP``), else moving the
    window (see the module doc); a zero or a subnormal adds
    nothing (S9), a special ORs its flag into the u32 variable ``{p}_fl``; a spill sets the
    u32 variable ``spill`` to 1. ``slow`` runs after any step that was not in place (it may
    have changed ``E`` or the flags)."""
    acc, E = Expr.var(f"{p}_acc"), Expr.var(f"{p}_E")
    e, sm, d, s = Expr.var(f"{p}_e"), Expr.var(f"{p}_sm"), Expr.var(f"{p}_d"), Expr.var(f"{p}_s")
    m = Expr.cast(I64, (b & 0x7FFFFF) | 0x800000)
    frac = b & 0x7FFFFF
    flag = Expr.select(frac.ne(Expr.u32(0)), Expr.u32(sa.FLAG_NAN),
                       Expr.select((b >> 31).eq(Expr.u32(1)), Expr.u32(sa.FLAG_NINF), Expr.u32(sa.FLAG_PINF)))
    spill = [Node.assign("spill", Expr.u32(1))]
    move = [
        Node.if_(acc.eq(Expr.i64(0)), [
            Node.assign(f"{p}_E", (e.max(Expr.i32(WINDOW_LOW + 1)) - WINDOW_LOW).min(Expr.i32(WINDOW_TOP))),
            Node.assign(f"{p}_acc", sm << (e - E))], [
            Node.if_(d.lt(Expr.i32(0)), [
                Node.let_bind(f"{p}_s", E - e),
                Node.if_(fits_shift(acc, s), [Node.assign(f"{p}_acc", (acc << s) + sm), Node.assign(f"{p}_E", e)],
                         spill)], [
                # above the window: it moves up when the bits it drops are zeros
                Node.let_bind(f"{p}_s", d - WINDOW_REACH),
                Node.if_(Expr.bitcast(U, Expr.cast(U, Expr.bitcast(DataType.U64, acc).ctz())).ge(Expr.bitcast(U, s)), [
                    Node.assign(f"{p}_acc", (acc >> s) + (sm << WINDOW_REACH)), Node.assign(f"{p}_E", E + s)],
                    spill)])])]
    return [
        Node.let_bind(f"{p}_e", Expr.bitcast(I, (b >> 23) & 0xFF)),
        Node.let_bind(f"{p}_sm", Expr.select((b >> 31).eq(Expr.u32(1)), Expr.i64(0) - m, m)),
        Node.let_bind(f"{p}_d", e - E),
        Node.if_(Expr.bitcast(U, d).le(Expr.u32(WINDOW_REACH)), [Node.assign(f"{p}_acc", acc + (sm << d))], [
            Node.if_(Expr.bitcast(U, e - 1).lt(Expr.u32(254)), move, [
                Node.if_(e.eq(Expr.i32(255)), [Node.assign(f"{p}_fl", Expr.var(f"{p}_fl") | flag)])]),
            *(slow or [])]),
        # acc stays in [-2**62, 2**62)
        Node.assign("spill", Expr.var("spill") | Expr.select(
            (Expr.bitcast(DataType.U64, acc) + Expr.u64(1 << 62)).lt(Expr.u64(1 << 63)), Expr.u32(0), Expr.u32(1))),
    ]


def round_window(p: str, out: str) -> list[Node]:
    """The u32 variable ``out`` = the f32 bits of ``{p}_acc * 2**({p}_E - 150)`` rounded once
    (S34: to nearest even with gradual underflow, then S9's flush; an exact zero is +0),
    unless the flags ``{p}_fl`` say NaN or an infinity."""
    acc, E, fl = Expr.var(f"{p}_acc"), Expr.var(f"{p}_E"), Expr.var(f"{p}_fl")
    fb, ex, sign = Expr.var(f"{p}_fb"), Expr.var(f"{p}_ex"), Expr.var(f"{p}_sign")
    inf, ninf = sa.FLAG_PINF, sa.FLAG_NINF
    return [
        Node.let_bind(out, Expr.u32(0)),
        Node.if_(acc.ne(Expr.i64(0)), [
            # |acc| >= 1: the conversion is a normal f32, acc rounded to 24 bits (S28)
            Node.let_bind(f"{p}_fb", Expr.bitcast(U, Expr.cast(DataType.F32, acc))),
            Node.let_bind(f"{p}_sign", fb & 0x80000000),
            Node.let_bind(f"{p}_ex", Expr.bitcast(I, (fb >> 23) & 0xFF) + (E - 150)),
            Node.if_(ex.ge(Expr.i32(255)), [Node.assign(out, sign | 0x7F800000)], [
                Node.if_(ex.ge(Expr.i32(1)), [
                    Node.assign(out, Expr.bitcast(U, Expr.bitcast(I, fb) + (E - 150) * (1 << 23)))], [
                    # below 2**-126: gradual underflow rounds up to 2**-126 from at least
                    # 2**-126 - 2**-150, whose 24-bit rounding is (2**24 - 1) * 2**-150; all
                    # else is subnormal, a zero of its sign (S9)
                    Node.if_(ex.eq(Expr.i32(0)).and_((fb & 0x7FFFFF).eq(Expr.u32(0x7FFFFF))),
                             [Node.assign(out, sign | 0x00800000)], [Node.assign(out, sign)])])])]),
        Node.if_((fl & (inf | ninf)).eq(Expr.u32(inf)), [Node.assign(out, Expr.u32(0x7F800000))]),
        Node.if_((fl & (inf | ninf)).eq(Expr.u32(ninf)), [Node.assign(out, Expr.u32(0xFF800000))]),
        Node.if_((fl & sa.FLAG_NAN).ne(Expr.u32(0)).or_((fl & (inf | ninf)).eq(Expr.u32(inf | ninf))),
                 [Node.assign(out, Expr.u32(sa.F32.nan_bits))]),
    ]


def first_window(values: Any) -> int:
    """``E0``, the bit 0 of every empty window: `WINDOW_REACH` - `WINDOW_LOW` below the
    largest exponent among the first `SAMPLE` finite non-zero values (host f32 values; else,
    or none, 1), within ``[1, WINDOW_TOP]``. Values from ``E0`` to ``E0 + WINDOW_REACH`` then
    add in place from the first one on (no branch taken for a slot's first value); any other
    moves the window. It changes no bit of a result, only which steps run."""
    if not isinstance(values, np.ndarray) or values.dtype != np.float32:
        return 1
    e = (values[:SAMPLE].view(np.uint32) >> 23) & 0xFF
    e = e[(e > 0) & (e < 255)]
    top = int(e.max()) if e.size else 1 + WINDOW_REACH - WINDOW_LOW
    return min(max(top - (WINDOW_REACH - WINDOW_LOW), 1), WINDOW_TOP)


def capacity(per: int) -> int:
    """The window count a `window_scatter_program` is built for to hold ``per`` slots a
    range: the next power of two (at least 64), so that a few programs serve every size."""
    return max(64, 1 << (max(per, 1) - 1).bit_length())


def fits_shift(acc: Expr, s: Expr) -> Expr:
    """Whether ``acc << s`` (i64, ``s >= 0`` an i32) stays in ``[-2**62, 2**62)``: ``s <= 61``
    and ``acc >> (62 - s)`` is 0 or -1."""
    top = acc >> (Expr.i32(62) - s)
    return s.le(Expr.i32(61)).and_(top.eq(Expr.i64(0)).or_(top.eq(Expr.i64(-1))))


def _slot_state(p: str, at: Expr) -> list[Node]:
    """``{p}_acc``, ``{p}_E`` and ``{p}_fl`` of the window at ``at`` (a zeroed one: empty,
    ``E = -EMPTY``)."""
    meta = Expr.var(f"{p}_meta")
    low = Expr.bitcast(I, meta & 0x1FF)
    return [Node.let_bind(f"{p}_acc", Expr.bitcast(I64, Expr.load("accs", at))),
            Node.let_bind(f"{p}_meta", Expr.load("meta", at)),
            Node.let_bind(f"{p}_E", Expr.select(low.eq(Expr.i32(0)), Expr.bitcast(I, Expr.load("prm", 1)), low - EMPTY)),
            Node.let_bind(f"{p}_fl", meta >> 9)]


@functools.cache
def window_scatter_program(index_t: DataType, cap: int) -> Program:
    """The whole f32 ``index_add`` on a serial backend (see the module doc) for at most
    ``cap`` slots a range: invocation ``g`` (one a workgroup) owns the slots ``[g * PER,
    min((g + 1) * PER, S))`` and keeps their windows in workgroup memory (``accs``,
    ``meta``). ``out`` gets every slot's rounded total; ``flag[0]``: `BAD` for an index
    outside ``[0, S)``, `SPILL` when a slot's terms did not fit its window (then ``out`` is
    not the result). ``prm``: (PER, E0, 0, S), E0 every empty window's bit 0
    (`first_window`)."""
    SPER = Expr.load("prm", 0)
    i, s, lo, q, cnt = Expr.var("i"), Expr.var("s"), Expr.var("lo"), Expr.var("q"), Expr.var("cnt")
    raw, at, c0 = Expr.var("raw"), Expr.var("at"), Expr.var("c0")
    n = Expr.buf_len("index")
    ok = index_ok(index_t, raw)
    # a chunk's contributions of this range, listed branch-free (each is stored at the end
    # of the list, which grows by one where it is this range's: a random half, which a
    # branch would mispredict), then added one after the other
    scan = [Node.let_bind("raw", Expr.load("index", i)),
            Node.assign("bad", Expr.var("bad") | Expr.select(ok, Expr.u32(0), Expr.u32(BAD))),
            Node.store("list", cnt, i),
            Node.assign("cnt", cnt + Expr.select(ok.and_((Expr.cast(U, raw) - lo).lt(Expr.var("hi") - lo)),
                                                 Expr.u32(1), Expr.u32(0)))]
    add = [Node.let_bind("j", Expr.load("list", q)),
           Node.let_bind("at", Expr.cast(U, Expr.load("index", Expr.var("j"))) - lo),
           *_slot_state("w", at),
           *see("w", Expr.bitcast(U, Expr.load("values", Expr.var("j"))), [
               Node.store("meta", at, (Expr.var("w_fl") << 9) | Expr.bitcast(U, Expr.var("w_E") + EMPTY))]),
           Node.store("accs", at, Expr.bitcast(DataType.U64, Expr.var("w_acc")))]
    chunks = Node.loop("ch", Expr.u32(0), (n >> CHUNK_LOG) + 1, [
        Node.let_bind("c0", Expr.var("ch") << CHUNK_LOG), Node.let_bind("cnt", Expr.u32(0)),
        Node.loop("i", c0, Expr.min(c0 + CHUNK, n), scan),
        Node.loop("q", Expr.u32(0), cnt, add)])
    finish = [*_slot_state("f", s - lo),
              *see("f", Expr.bitcast(U, Expr.load("target", s))),
              *round_window("f", "bits"),
              Node.store("out", s, Expr.bitcast(DataType.F32, Expr.var("bits")))]
    body = [Node.let_bind("lo", GID * SPER), Node.let_bind("hi", Expr.min(lo + SPER, EXTRA)),
            Node.let_bind("spill", Expr.u32(0)), Node.let_bind("bad", Expr.u32(0)),
            chunks,
            Node.loop("s", lo, Expr.var("hi"), finish),
            Node.if_((Expr.var("bad") | Expr.var("spill")).ne(Expr.u32(0)), [
                Node.expr(Expr.atomic(AtomicOp.OR, "flag", Expr.u32(0), Expr.var("bad") | (Expr.var("spill") * SPILL)))])]
    return Program.wrapped([BufferDecl.read("values", 0, DataType.F32), BufferDecl.read("index", 1, index_t),
                            BufferDecl.read("prm", 2, U, 4), BufferDecl.read("target", 3, DataType.F32),
                            BufferDecl.output("out", 4, DataType.F32), BufferDecl.output("flag", 5, U, 1),
                            BufferDecl.workgroup("accs", cap, DataType.U64),
                            BufferDecl.workgroup("meta", cap, U), BufferDecl.workgroup("list", CHUNK, U)], 1, body)


__all__ = ["BAD", "CHUNK", "CHUNK_LOG", "EMPTY", "SAMPLE", "SPILL", "WINDOW_LOW", "WINDOW_REACH", "WINDOW_TOP", "capacity", "first_window", "fits_shift", "round_window", "see",
           "window_scatter_program"]
