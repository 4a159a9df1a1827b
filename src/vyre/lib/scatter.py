"""Scatter-add (``index_add``) and ``gather``.

``index_add(target, index, values)`` returns ``target`` with ``values[i]`` added at
``index[i]``. Integer targets wrap (S1) through integer atomics; float targets (f32, f16,
bf16) get, per slot, the exact sum of its initial value and every contribution, rounded once
(S34): each contribution goes into the slot's global superaccumulator with integer atomics
(one 64-bit atomic per value where the backend has them and there are at most `WIDE_MAX`
values; else `vyre.ir.superacc.atomic_add_value`'s u32 chunks) and a second pass rounds
every slot (on serial backends, a CPU device, the 64-bit path takes no atomics: each of a
few invocations owns a range of slots and adds its contributions with plain adds,
`serial_wide_scatter_program`; an f32 target there first takes `vyre.lib.window`'s one
dispatch with a 12-byte window per slot in workgroup memory, and these paths only when a
slot's terms do not fit its window). The order of
``index`` and the workgroup size change nothing. An index outside ``[0, len(target))`` is an
`LibError` L004 (the pass flags it; nothing is written). ``gather(x, index)`` is
``x[index]`` with the same index rule.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.driver.runnable import refusals
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir import superacc as sa

from . import columns, window
from .arrays import NUMERIC, Arr, as_arr, require, result, to_kind
from .errors import LibError
from .kernels import EXTRA, GID, PER, element, grid_stride, index_ok, prm, storage
from .runner import Runner, params

U, I = DataType.U32, DataType.I32
INDEX_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64)


def _slot(index_t: DataType, i: Expr) -> list[Node]:
    """``slot`` (u32) and ``ok`` (bool) of ``index[i]`` against ``S = prm[3]``."""
    raw = Expr.load("index", i)
    return [Node.let_bind("raw", raw), Node.let_bind("ok", index_ok(index_t, raw)),
            Node.let_bind("slot", Expr.cast(U, Expr.var("raw")))]


@functools.cache
def scatter_program(dtype: DataType, index_t: DataType, wg: int) -> Program:
    """Pass 1: every contribution into its slot. Integers: ``acc[slot] += value`` (atomic,
    wrapping), ``acc`` as long as the target plus one error word. Floats: into the slot's
    superaccumulator (`slot_words` u32 words per slot), then the error word."""
    flt = dtype.is_float
    W = sa.slot_words(sa.SUM) if flt else 1

    def take(i: Expr) -> list[Node]:
        valid: list[Node]
        if flt:
            bits = Expr.bitcast(U, Expr.load("values", i)) if dtype is DataType.F32 else element("values", dtype, i)
            valid = [*sa.DECODE[dtype](bits, "a"),
                     *sa.atomic_add_value("acc", Expr.var("slot") * W, Expr.var("a_m"), Expr.u32(0),
                                          Expr.var("a_s"), Expr.var("a_neg"), Expr.var("a_flags"), "c", sa.SUM)]
        else:
            valid = [Node.expr(Expr.atomic(AtomicOp.ADD, "acc", Expr.var("slot"), Expr.load("values", i)))]
        return [*_slot(index_t, i), Node.if_(Expr.var("ok"), valid, [
            Node.expr(Expr.atomic(AtomicOp.OR, "err", Expr.u32(0), Expr.u32(1)))])]

    acc_t = U if flt else dtype
    return Program.wrapped([BufferDecl.read("values", 0, storage(dtype)), BufferDecl.read("index", 1, index_t),
                            prm(2), BufferDecl.output("acc", 3, acc_t), BufferDecl.output("err", 4, U, 1)],
                           wg, grid_stride(take))


@functools.cache
def finish_program(dtype: DataType, wg: int) -> Program:
    """Pass 2 (floats): slot ``gid`` = its initial value plus its accumulator, rounded once
    (f32: the f32 bits; 16-bit floats: their bits in a u32 word)."""
    W = sa.slot_words(sa.SUM)
    span = sa.SUM.digits + 2
    s = GID
    bits = Expr.bitcast(U, Expr.load("target", s)) if dtype is DataType.F32 else element("target", dtype, s)
    body = [Node.if_(s.lt(EXTRA), [
        *sa.load_slot("acc", "slots", s * W, sa.SUM, "ld"),
        *sa.DECODE[dtype](bits, "t"),
        *sa.add_local("acc", Expr.var("t_m"), Expr.u32(0), Expr.var("t_s"), Expr.var("t_neg"), "c", sa.SUM),
        *sa.normalise("acc", span, "n2"),
        *sa.round_digits("acc", span, Expr.var("ld_flags") | Expr.var("t_flags"), sa.SUM, sa.FORMATS[dtype], "bits"),
        Node.store("out", s, Expr.bitcast(DataType.F32, Expr.var("bits")) if dtype is DataType.F32 else Expr.var("bits")),
    ])]
    out_t = DataType.F32 if dtype is DataType.F32 else U
    return Program.wrapped([BufferDecl.read("target", 0, storage(dtype)), BufferDecl.read("slots", 1, U),
                            prm(2), BufferDecl.output("out", 3, out_t),
                            BufferDecl.local("acc", span, DataType.I32)], wg, body)


# ---- floats through 64-bit atomics --------------------------------------------------------
# With 64-bit integer atomics each contribution is ONE atomic: slot word d (weight 2**(16 d),
# bit 0 at 2**-150 as in `vyre.lib.columns`) takes the signed ``±m << (e & 15)`` (|.| < 2**39)
# of a value with biased exponent e and d = e >> 4, added in two's complement. Up to
# `WIDE_MAX` contributions cannot overflow a word (2**24 * 2**39 = 2**63), so no carries are
# needed and the final words are the same whatever the order of the atomics.
WIDE_WORDS = 16          # digit words per slot (e >> 4 < 16)
WIDE_MAX = 1 << 24       # contributions a call may make through the 64-bit path


def _wide_value(dtype: DataType, i: Expr) -> list[Node]:
    """``pos`` (the biased exponent: the bit position of the mantissa, bit 0 at 2**-150),
    ``mag`` (the mantissa; 0 for a zero, a subnormal (S9) or a special), ``neg`` and
    ``flags`` of ``values[i]``, and ``v``: the signed u64 ``±mag << (pos & 15)`` that goes
    into slot word ``pos >> 4``."""
    if dtype is DataType.F16:
        bits = element("values", dtype, i)
        value = [*sa.decode_f16(bits, "a"),
                 Node.let_bind("pos", Expr.var("a_s") + 1),        # bit 0 at 2**-150
                 Node.let_bind("mag", Expr.var("a_m")), Node.let_bind("neg", Expr.var("a_neg")),
                 Node.let_bind("flags", Expr.var("a_flags"))]
    else:
        bits = Expr.bitcast(U, Expr.load("values", i)) if dtype is DataType.F32 \
            else element("values", dtype, i) << 16
        b, e = Expr.var("b"), Expr.var("pos")
        frac = b & 0x7FFFFF
        value = [Node.let_bind("b", bits), Node.let_bind("pos", (b >> 23) & 0xFF),
                 # a zero or a subnormal adds nothing (S9); a special only sets its flag
                 Node.let_bind("mag", Expr.select(e.eq(Expr.u32(0)).or_(e.eq(Expr.u32(255))), Expr.u32(0),
                                                  frac | 0x800000)),
                 Node.let_bind("neg", b >> 31),
                 Node.let_bind("flags", Expr.select(e.eq(Expr.u32(255)), Expr.select(
                     frac.eq(Expr.u32(0)), Expr.select(Expr.var("neg").eq(Expr.u32(1)), Expr.u32(sa.FLAG_NINF),
                                                       Expr.u32(sa.FLAG_PINF)), Expr.u32(sa.FLAG_NAN)), Expr.u32(0)))]
    pos = Expr.var("pos")
    v = Expr.cast(DataType.U64, Expr.var("mag")) << (pos & 15)
    return [*value, Node.let_bind("v", Expr.select(Expr.var("neg").eq(Expr.u32(1)), Expr.u64(0) - v, v))]


@functools.cache
def wide_scatter_program(dtype: DataType, index_t: DataType, wg: int) -> Program:
    """Pass 1 through 64-bit atomics: every contribution into its slot's `WIDE_WORDS` words
    (``acc``, u64), specials into the slot's flags (``fl``, u32), a bad index into ``err``."""
    W = WIDE_WORDS
    U64 = DataType.U64

    def take(i: Expr) -> list[Node]:
        slot = Expr.var("slot")
        pos = Expr.var("pos")
        add = [*_wide_value(dtype, i),
               Node.if_(Expr.var("mag").ne(Expr.u32(0)), [
                   Node.expr(Expr.atomic(AtomicOp.ADD, "acc", slot * W + (pos >> 4), Expr.var("v")))]),
               Node.if_(Expr.var("flags").ne(Expr.u32(0)), [
                   Node.expr(Expr.atomic(AtomicOp.OR, "fl", slot, Expr.var("flags")))])]
        return [*_slot(index_t, i), Node.if_(Expr.var("ok"), add, [
            Node.expr(Expr.atomic(AtomicOp.OR, "err", Expr.u32(0), Expr.u32(1)))])]

    return Program.wrapped([BufferDecl.read("values", 0, storage(dtype)), BufferDecl.read("index", 1, index_t),
                            prm(2), BufferDecl.output("acc", 3, U64), BufferDecl.output("fl", 4, U),
                            BufferDecl.output("err", 5, U, 1)], wg, grid_stride(take))


@functools.cache
def serial_wide_scatter_program(dtype: DataType, index_t: DataType) -> Program:
    """`wide_scatter_program` for serial backends (`vyre.lib.runner.serial`: a CPU device),
    with no atomics: invocation ``gid`` owns the slots ``[gid * PER, (gid + 1) * PER)`` and
    reads every contribution, adding those of its slots with plain loads and stores (no two
    invocations touch one word; a bad index still sets ``err``). One invocation a
    workgroup, `SERIAL_RANGES` of them: each reads the whole index."""
    W = WIDE_WORDS
    i, slot, pos = Expr.var("i"), Expr.var("slot"), Expr.var("pos")
    word = Expr.var("word")
    mine = slot.ge(Expr.var("lo")).and_(slot.lt(Expr.var("hi")))
    add = [*_wide_value(dtype, i),
           Node.if_(Expr.var("mag").ne(Expr.u32(0)), [
               Node.let_bind("word", slot * W + (pos >> 4)),
               Node.store("acc", word, Expr.load("acc", word) + Expr.var("v"))]),
           Node.if_(Expr.var("flags").ne(Expr.u32(0)), [
               Node.store("fl", slot, Expr.load("fl", slot) | Expr.var("flags"))])]
    body = [Node.let_bind("lo", GID * PER), Node.let_bind("hi", Expr.var("lo") + PER),
            Node.loop("i", Expr.u32(0), Expr.buf_len("index"), [
                *_slot(index_t, i),
                Node.if_(Expr.var("ok"), [Node.if_(mine, add)],
                         [Node.expr(Expr.atomic(AtomicOp.OR, "err", Expr.u32(0), Expr.u32(1)))])])]
    return Program.wrapped([BufferDecl.read("values", 0, storage(dtype)), BufferDecl.read("index", 1, index_t),
                            prm(2), BufferDecl.output("acc", 3, DataType.U64), BufferDecl.output("fl", 4, U),
                            BufferDecl.output("err", 5, U, 1)], 1, body)


SERIAL_RANGES = 2   # slot ranges of `serial_wide_scatter_program` (each reads the whole index; more
# ranges only read it more often: the pass waits on cache misses into the 128-byte slots)


@functools.cache
def wide_finish_program(dtype: DataType, wg: int) -> Program:
    """Pass 2 after `wide_scatter_program`: slot ``gid``'s words as radix-2**16 digits (each
    word split into its low 16 bits and the signed rest one digit up, so no i64 sum can
    overflow), plus the slot's initial value, rounded once."""
    W, K = WIDE_WORDS, columns.LAYOUT.digits
    I64 = DataType.I64
    s = GID
    bits = Expr.bitcast(U, Expr.load("target", s)) if dtype is DataType.F32 else element("target", dtype, s)
    c, up = Expr.var("c"), Expr.var("up")
    digits: list[Node] = [Node.let_bind("c", Expr.i64(0)), Node.let_bind("up", Expr.i64(0))]
    for k in range(K):
        w = Expr.bitcast(I64, Expr.load("slots", s * W + k)) if k < W else Expr.i64(0)
        t = Expr.var(f"t{k}")
        digits += [Node.let_bind(f"w{k}", w),
                   Node.let_bind(f"t{k}", (Expr.var(f"w{k}") & 0xFFFF) + up + c),
                   Node.store("acc", Expr.u32(k), Expr.cast(I, t if k == K - 1 else t & 0xFFFF)),
                   Node.assign("c", t >> 16), Node.assign("up", Expr.var(f"w{k}") >> 16)]
    body = [Node.if_(s.lt(EXTRA), [
        *digits,
        *sa.DECODE[dtype](bits, "t"),
        # superacc positions are above 2**-149; the columns layout's bit 0 is 2**-150
        *sa.add_local("acc", Expr.var("t_m"), Expr.u32(0), Expr.var("t_s") + 1, Expr.var("t_neg"), "c",
                      columns.LAYOUT),
        *sa.normalise("acc", K, "n2"),
        *sa.round_digits("acc", K, Expr.load("fl", s) | Expr.var("t_flags"), columns.LAYOUT, sa.FORMATS[dtype],
                         "bits"),
        Node.store("out", s, Expr.bitcast(DataType.F32, Expr.var("bits")) if dtype is DataType.F32 else Expr.var("bits")),
    ])]
    out_t = DataType.F32 if dtype is DataType.F32 else U
    return Program.wrapped([BufferDecl.read("target", 0, storage(dtype)), BufferDecl.read("slots", 1, DataType.U64),
                            BufferDecl.read("fl", 2, U), prm(3), BufferDecl.output("out", 4, out_t),
                            *sa.local_decls("acc", columns.LAYOUT)], wg, body)


def _wide(r: Runner, dtype: DataType, index_t: DataType, n: int, slots: int) -> bool:
    """Whether this call takes the 64-bit path: few enough contributions, word indices
    within u32, and a backend that runs 64-bit atomics."""
    return n <= WIDE_MAX and slots * WIDE_WORDS < 2**32 and _runs_wide(r.backend, dtype, index_t, r.wg)


@functools.lru_cache(maxsize=64)
def _runs_wide(backend: Any, dtype: DataType, index_t: DataType, wg: int) -> bool:
    return not refusals(wide_scatter_program(dtype, index_t, wg), backend)


@functools.lru_cache(maxsize=64)
def _runs_window(backend: Any, index_t: DataType, cap: int) -> bool:
    return not refusals(window.window_scatter_program(index_t, cap), backend)


@functools.cache
def gather_program(dtype: DataType, index_t: DataType, wg: int) -> Program:
    """``out[i] = x[index[i]]`` (16-bit floats: their bits in a u32 word each)."""
    i = GID

    def src(j: Expr) -> Expr:
        return element("x", dtype, j)

    body = [Node.if_(i.lt(Expr.load("prm", 0)), [
        *_slot(index_t, i),
        Node.if_(Expr.var("ok"), [Node.store("out", i, src(Expr.var("slot")))],
                 [Node.expr(Expr.atomic(AtomicOp.OR, "err", Expr.u32(0), Expr.u32(1)))]),
    ])]
    out_t = U if dtype.is_half else dtype
    return Program.wrapped([BufferDecl.read("x", 0, storage(dtype)), BufferDecl.read("index", 1, index_t),
                            prm(2), BufferDecl.output("out", 3, out_t), BufferDecl.output("err", 4, U, 1)],
                           wg, body)


def _data(a: Arr) -> Any:
    return a.source()


def _narrow(i: Arr, length: int) -> Arr:
    """Host 64-bit indices as u32 (an index out of range becomes 2**32-1, which the pass
    reports), so backends without 64-bit integers take them."""
    if i.on_device or i.dtype not in (DataType.U64, DataType.I64):
        return i
    x = i.data
    bad = (x >= length) if i.dtype is DataType.U64 else ((x < 0) | (x >= length))
    words = np.where(bad, np.uint64(0xFFFFFFFF), x.astype(np.uint64)).astype(np.uint32)
    return Arr(i.kind, U, i.n, words, False, i.original)


def _check_index(i: Arr, length: int, what: str) -> None:
    require(i, INDEX_TYPES, f"{what}'s index")


def _bad_index(what: str, length: int) -> LibError:
    return LibError("L004", f"{what}: an index is outside [0, {length}).",
                    "pass indices in range (numpy: np.clip, or check index.min() and index.max()).")


def index_add(target: Any, index: Any, values: Any, *, backend: Any = None,
              workgroup_size: int | None = None) -> Any:
    """``target`` with ``values[i]`` added at ``index[i]`` (a new array; ``target`` is not
    changed). Floats: each slot the exact sum of its initial value and its contributions,
    rounded once (S34), whatever the order. Integers wrap (S1)."""
    t, i, v = as_arr(target, "target"), as_arr(index, "index"), as_arr(values, "values")
    require(t, NUMERIC, "vyre.lib.index_add")
    _check_index(i, t.n, "vyre.lib.index_add")
    i = _narrow(i, t.n)
    if v.dtype is not t.dtype:
        raise LibError("L001", f"vyre.lib.index_add: values are {v.dtype.value}, target is {t.dtype.value}.",
                       "pass values of the target's dtype (values.astype(target.dtype)).")
    if i.n != v.n:
        raise LibError("L002", f"vyre.lib.index_add: {i.n} indices for {v.n} values.",
                       "pass one index per value.")
    if t.n == 0 and i.n:
        raise _bad_index("vyre.lib.index_add", 0)
    if i.n == 0 and (t.n == 0 or not t.dtype.is_float):
        # (floats still run: S34 rounds each slot's initial value, as it does with contributions)
        if t.on_device:
            return t.original.clone() if t.kind == "torch" else t.original.copy()
        return to_kind(t.host().copy(), t, t.dtype)
    r = Runner(backend, workgroup_size)
    g = r.groups(i.n)
    T = g * r.wg
    if not t.dtype.is_float:
        # integers: the target itself accumulates (a read-write copy), one pass
        prog = _int_program(t.dtype, i.dtype, r.wg)
        outs = r.run(prog, [_data(v), _data(i), params(i.n, T, -(-i.n // T), t.n), _data(t)], g, t.n,
                     keep=t.on_device)
        if r.read_u32(outs[1], 0):
            raise _bad_index("vyre.lib.index_add", t.n)
        return result(outs[0], t, t.dtype, t.n)
    cap = window.capacity(-(-t.n // SERIAL_RANGES))
    if r.serial and t.dtype is DataType.F32 and _runs_window(r.backend, i.dtype, cap):
        # one dispatch, a window per slot in workgroup memory (`vyre.lib.window`); a spill
        # (terms of one slot too far apart for its window) takes the paths below
        ranges = min(SERIAL_RANGES, t.n)
        out, flag = r.run(window.window_scatter_program(i.dtype, cap),
                          [_data(v), _data(i), params(-(-t.n // ranges), window.first_window(v.data), 0, t.n), _data(t)],
                          ranges, t.n, keep=t.on_device)
        word = r.read_u32(flag, 0)
        if word & window.BAD:
            raise _bad_index("vyre.lib.index_add", t.n)
        if not word & window.SPILL:
            return result(out, t, t.dtype, t.n)
    if _wide(r, t.dtype, i.dtype, i.n, t.n):
        if r.serial:
            ranges = min(SERIAL_RANGES, t.n)
            slots, fl, err = r.run(serial_wide_scatter_program(t.dtype, i.dtype),
                                   [_data(v), _data(i), params(i.n, ranges, -(-t.n // ranges), t.n)], ranges,
                                   t.n * WIDE_WORDS)
        else:
            slots, fl, err = r.run(wide_scatter_program(t.dtype, i.dtype, r.wg),
                                   [_data(v), _data(i), params(i.n, T, -(-i.n // T), t.n)], g, t.n * WIDE_WORDS,
                                   wait=False)
        # read_u32 below waits for both passes (on CUDA the flag is read after them)
        out = r.run(wide_finish_program(t.dtype, r.wg), [_data(t), slots, fl, params(t.n, 0, 0, t.n)],
                    -(-t.n // r.wg), t.n, keep=t.on_device, wait=False)[0]
        if r.read_u32(err, 0):
            raise _bad_index("vyre.lib.index_add", t.n)
        return result(out, t, t.dtype, t.n)
    W = sa.slot_words(sa.SUM)
    slots, err = r.run(scatter_program(t.dtype, i.dtype, r.wg),
                       [_data(v), _data(i), params(i.n, T, -(-i.n // T), t.n)], g, t.n * W)
    if r.read_u32(err, 0):
        raise _bad_index("vyre.lib.index_add", t.n)
    out = r.run(finish_program(t.dtype, r.wg), [_data(t), slots, params(t.n, 0, 0, t.n)],
                -(-t.n // r.wg), t.n, keep=t.on_device)[0]
    return result(out, t, t.dtype, t.n)


@functools.cache
def _int_program(dtype: DataType, index_t: DataType, wg: int) -> Program:
    def take(i: Expr) -> list[Node]:
        return [*_slot(index_t, i), Node.if_(Expr.var("ok"), [
            Node.expr(Expr.atomic(AtomicOp.ADD, "acc", Expr.var("slot"), Expr.load("values", i)))],
            [Node.expr(Expr.atomic(AtomicOp.OR, "err", Expr.u32(0), Expr.u32(1)))])]

    return Program.wrapped([BufferDecl.read("values", 0, dtype), BufferDecl.read("index", 1, index_t),
                            prm(2), BufferDecl.read_write("acc", 3, dtype), BufferDecl.output("err", 4, U, 1)],
                           wg, grid_stride(take))


def gather(x: Any, index: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """``x[index]``: one element of ``x`` per index (L004 for an index outside ``x``)."""
    a, i = as_arr(x, "x"), as_arr(index, "index")
    require(a, NUMERIC, "vyre.lib.gather")
    _check_index(i, a.n, "vyre.lib.gather")
    i = _narrow(i, a.n)
    if i.n == 0:
        return to_kind(np.zeros(0, a.dtype.storage if a.dtype.is_half else a.dtype.host), a, a.dtype)
    if a.n == 0:
        raise _bad_index("vyre.lib.gather", 0)
    r = Runner(backend, workgroup_size)
    out, err = r.run(gather_program(a.dtype, i.dtype, r.wg), [_data(a), _data(i), params(i.n, 0, 0, a.n)],
                     -(-i.n // r.wg), i.n, keep=a.on_device)
    if r.read_u32(err, 0):
        raise _bad_index("vyre.lib.gather", a.n)
    return result(out, a, a.dtype, i.n)


__all__ = ["SERIAL_RANGES", "finish_program", "gather", "gather_program", "index_add", "scatter_program",
           "serial_wide_scatter_program"]
