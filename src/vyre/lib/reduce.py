"""Reductions: ``sum``, ``min``, ``max`` over every numeric type, and the f32 ``dot``.

Grid-stride passes that load several elements per invocation before combining them (loads
in flight together, `vyre.lib.kernels.strided_rounds`; on serial backends, PoCL, each
invocation's own run, one invocation a workgroup: `share_rounds`): each workgroup reduces its share into
one partial, then one workgroup reduces the partials; 32-bit integer sums instead add each
workgroup's total to the result with a wrapping atomic (one pass). Integer sums wrap in the
array's type (S1); min and max follow S10 for floats (a NaN gives NaN, -0 < +0) and refuse
empty input (L003). Float sums and dots are exact and rounded once (S34): a value sum keeps
each invocation's superaccumulator digits in its column of workgroup memory
(`vyre.lib.columns`), each partial is a normalised digit vector (`vyre.ir.superacc`), so
neither the order, the workgroup size nor the device can change a bit.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import AtomicOp, BinOp, BufferDecl, DataType, Expr, MemoryOrdering, Node, Program
from vyre.ir import superacc as sa

from . import columns
from .arrays import (
    NARROW,
    NUMERIC,
    Arr,
    as_arr,
    device_cast,
    device_half,
    device_like,
    require,
    scalar,
    to_kind,
    torch_dtype,
)
from .errors import LibError
from .kernels import (
    LID,
    WGID,
    balanced,
    binop,
    clipped_run,
    element,
    grid_stride,
    pairwise,
    prm,
    rounds_fit,
    share_rounds,
    storage,
    tree,
)
from .runner import Runner, params

U, I = DataType.U32, DataType.I32
INTS = (DataType.U32, DataType.I32, DataType.U64, DataType.I64)
FLOATS = (DataType.F32, DataType.F16, DataType.BF16)

# ---- min and max: S10 -----------------------------------------------------------------------
_HALF = {DataType.F16: (0x7C00, 0x3FF, 0x7E00), DataType.BF16: (0x7F80, 0x7F, 0x7FC0)}
_NAN_KEY = {BinOp.MIN: 0, BinOp.MAX: 0x20000}


def _identity(dtype: DataType, op: BinOp) -> Expr:
    if op is BinOp.ADD:
        return Expr.lit(dtype.value_type, 0)
    if dtype is DataType.F32:
        return Expr.f32(float("inf") if op is BinOp.MIN else float("-inf"))
    if dtype.is_integer:
        # narrow types (S26) have no literals: their bounds as the u32/i32 a load widens to
        info = np.iinfo(dtype.host)
        return Expr.lit(dtype.value_type, int(info.max) if op is BinOp.MIN else int(info.min))
    raise AssertionError(dtype)


def _half_key(bits: Expr, dtype: DataType, op: BinOp) -> Expr:
    """A u32 whose integer order is S10's order of 16-bit float bits (NaN first for min,
    last for max; bf16 subnormals flushed to their signed zero)."""
    exp, frac, _ = _HALF[dtype]
    h = bits
    if dtype is DataType.BF16:
        h = Expr.select((bits & exp).eq(Expr.u32(0)), bits & 0x8000, bits)
    nan = (h & exp).eq(Expr.u32(exp)).and_((h & frac).ne(Expr.u32(0)))
    key = Expr.select((h & 0x8000).ne(Expr.u32(0)), (~h) & 0xFFFF, h | 0x8000)
    return Expr.select(nan, Expr.u32(_NAN_KEY[op]), key + 1)


def _half_bits(key: Expr, dtype: DataType, op: BinOp) -> Expr:
    k = key - 1
    bits = Expr.select((k & 0x8000).ne(Expr.u32(0)), k & 0x7FFF, (~k) & 0xFFFF)
    return Expr.select(key.eq(Expr.u32(_NAN_KEY[op])), Expr.u32(_HALF[dtype][2]), bits)


UNROLL = 8        # items a pass loads before combining them (loads in flight per invocation)
EXACT_UNROLL = 4  # the same for exact sums (each item takes more registers)
# the same for exact sums through exponent bins (`binned`: a few scalar operations and one
# private add a value; 8 a round ran 4-8% faster than 4 on PoCL, 2-core VM)
BIN_UNROLL = 8


@functools.cache
def tree_program(dtype: DataType, op: BinOp, wg: int, first: bool, final: bool, unroll: int = UNROLL,
                 merge: bool = False, serial: bool = False) -> Program:
    """One pass of an integer/f32 reduction (or of a 16-bit float min/max on keys; 8- and
    16-bit integers accumulate in the u32/i32 their loads widen to): each
    workgroup reduces its grid-stride share of ``x`` into ``out[wgid]``, ``unroll`` loads in
    flight per invocation (`strided_rounds`). ``first``: ``x`` is the caller's data (16-bit
    floats are mapped to keys); ``final``: write the result (16-bit floats: their bits) to
    ``out[0]``; ``merge`` (32-bit integer sums): every workgroup adds its total to ``out[0]``
    with an atomic (wrapping, so the order cannot matter): one pass. ``serial``: each
    invocation reads its own run (`share_rounds`; the caller's non-16-bit data as unchecked
    `clipped_run` blocks, item u of each into its own accumulator)."""
    half = dtype.is_half
    acc_t = U if half else dtype.value_type
    src_t = storage(dtype) if first else acc_t
    ident = Expr.u32(0xFFFFFFFF if op is BinOp.MIN else 0) if half else _identity(dtype, op)
    combine = binop(op)

    def value(i: Expr) -> Expr:
        val = element("x", dtype, i) if first else Expr.load("x", i)
        return _half_key(val, dtype, op) if half and first else val

    def fold(items: list[Expr]) -> list[Node]:
        return [Node.assign("acc", combine(Expr.var("acc"), balanced(items, combine)))]

    result: Expr = Expr.load("s", Expr.u32(0))
    out_t = acc_t
    if half and final:
        result = _half_bits(result, dtype, op)
    # sums: x holds exactly N items (the caller's array, or exactly the partials), and a load
    # past the end gives 0, the identity; min and max fill with theirs
    fill = None if op is BinOp.ADD else ident
    if serial and first and not half:
        # the caller's array holds exactly N items: unchecked blocks, item u of each into its
        # own accumulator (one chain each; a block's tree would be reassociated into one chain)
        accs = [Expr.var(f"acc{u}") for u in range(unroll)]
        share = [*[Node.let_bind(f"acc{u}", ident) for u in range(unroll)],
                 *clipped_run("x", unroll, value, lambda items: [
                     Node.assign(f"acc{u}", combine(accs[u], item)) for u, item in enumerate(items)]),
                 Node.assign("acc", balanced(accs, combine))]
    else:
        share = share_rounds(serial, unroll, value, fill, fold)
    body = [Node.let_bind("acc", ident), *share,
            Node.store("s", LID, Expr.var("acc")), *tree("s", wg, combine),
            Node.if_(LID.eq(Expr.u32(0)), [Node.expr(Expr.atomic(AtomicOp.ADD, "out", Expr.u32(0), result))
                                           if merge else Node.store("out", WGID, result)])]
    return Program.wrapped([BufferDecl.read("x", 0, src_t), prm(1), BufferDecl.output("out", 2, out_t),
                            BufferDecl.workgroup("s", wg, acc_t)], wg, body)


def _carry_add(lo: Expr, hi: Expr, b_lo: Expr, b_hi: Expr) -> tuple[Expr, Expr]:
    """The two u32 words of the 64-bit sum ``(hi:lo) + (b_hi:b_lo)``, ``lo`` and ``hi`` the
    names' current values (low word first: assign the low word last)."""
    s = lo + b_lo
    return s, hi + b_hi + Expr.select(s.lt(lo), Expr.u32(1), Expr.u32(0))


@functools.cache
def wide_sum_program(dtype: DataType, wg: int, first: bool, unroll: int = UNROLL, serial: bool = False) -> Program:
    """One pass of the sum of 8- or 16-bit integers (S26 storage), as 64 bits (numpy's rule:
    ``np.sum`` of int8 is int64, of uint8 uint64), from u32 words only, so every backend runs
    it. ``first``: each invocation sums its grid-stride share of the caller's ``x`` in the
    u32/i32 its loads widen to (at most 2**14 + ``unroll`` items of at most 2**16: it cannot
    wrap), then sign-extends it; otherwise ``x`` holds the previous pass's partials, two words
    each (low, high), added with a carry. The workgroup adds its invocations' pairs with a
    carry and writes its total to ``out[2 wgid]`` (low) and ``out[2 wgid + 1]`` (high).
    ``serial``: each invocation reads its own run (`share_rounds`)."""
    lo, hi = Expr.var("lo"), Expr.var("hi")
    zero = Expr.u32(0)
    if first:
        acc = Expr.var("acc")
        body = [Node.let_bind("acc", Expr.lit(dtype.value_type, 0)),
                *share_rounds(serial, unroll, lambda i: Expr.load("x", i), None,
                                lambda items: [Node.assign("acc", acc + balanced(items, lambda a, b: a + b))]),
                Node.let_bind("lo", Expr.bitcast(U, acc)),
                Node.let_bind("hi", Expr.select(acc.lt(Expr.i32(0)), Expr.u32(0xFFFFFFFF), zero)
                              if dtype.is_signed else zero)]
        src_t = dtype
    else:
        new_lo, new_hi = _carry_add(lo, hi, Expr.var("p_lo"), Expr.var("p_hi"))
        body = [Node.let_bind("lo", zero), Node.let_bind("hi", zero),
                *grid_stride(lambda i: [Node.let_bind("p_lo", Expr.load("x", i * 2)),
                                        Node.let_bind("p_hi", Expr.load("x", i * 2 + 1)),
                                        Node.assign("hi", new_hi), Node.assign("lo", new_lo)])]
        src_t = U
    def fold(partner: Expr, h: int) -> list[Node]:
        w_lo, w_hi = _carry_add(Expr.load("s", LID), Expr.load("t", LID), Expr.load("s", partner),
                                Expr.load("t", partner))
        return [Node.let_bind(f"n_hi{h}", w_hi), Node.store("s", LID, w_lo), Node.store("t", LID, Expr.var(f"n_hi{h}"))]

    body += [Node.store("s", LID, lo), Node.store("t", LID, hi), *pairwise(wg, fold)]
    body.append(Node.if_(LID.eq(zero), [Node.store("out", WGID * 2, Expr.load("s", zero)),
                                        Node.store("out", WGID * 2 + 1, Expr.load("t", zero))]))
    return Program.wrapped([BufferDecl.read("x", 0, src_t), prm(1), BufferDecl.output("out", 2, U),
                            BufferDecl.workgroup("s", wg, U), BufferDecl.workgroup("t", wg, U)], wg, body)


def binned(source: DataType | str, serial: bool) -> bool:
    """Whether `exact_program`'s first pass adds f32/bf16 values to exponent bins first
    (`columns.bin_f32_bits`): on serial backends, where one private add a value beats the
    column's three."""
    return serial and source in (DataType.F32, DataType.BF16)


@functools.cache
def exact_program(source: DataType | str, layout: sa.Layout, fmt: sa.Format, wg: int,
                  final: bool, unroll: int = 1, serial: bool = False) -> Program:
    """One pass of an exact sum. ``source``: F32/F16/BF16 values (16-bit ones packed; read
    ``unroll`` at a time, `strided_rounds`), "dot" (two f32 inputs, their products) or
    "digits" (the partial vectors of a previous pass: ``digits + 1`` words each, the last one
    the flags). Each workgroup's total goes to ``out`` as a normalised digit vector, or
    (``final``) rounded to ``fmt`` in ``out[0]``. ``serial``: each invocation reads its own
    run of values (`share_rounds`)."""
    K = layout.digits
    stride = K + 1
    fl = Expr.var("fl")
    values = isinstance(source, DataType)

    def take(i: Expr) -> list[Node]:
        if source == "digits":
            return [*sa.add_digits_local("acc", lambda k: sa.as_i32(Expr.load("x", i * stride + k)), K),
                    Node.assign("fl", fl | Expr.load("x", i * stride + K))]
        return [*sa.decode_f32(Expr.bitcast(U, Expr.load("x", i)), "a"),
                *sa.decode_f32(Expr.bitcast(U, Expr.load("y", i)), "b"),
                *sa.product("a", "b", "p"),
                *sa.add_local("acc", Expr.var("p_lo"), Expr.var("p_hi"), Expr.var("p_s"),
                              Expr.var("p_neg"), "c", layout),
                Node.assign("fl", fl | Expr.var("p_flags"))]

    def bits(i: Expr) -> Expr:
        assert isinstance(source, DataType)
        return Expr.bitcast(U, Expr.load("x", i)) if source is DataType.F32 else element("x", source, i)

    def add_values(items: list[Expr]) -> list[Node]:
        out: list[Node] = []
        for u, b in enumerate(items):
            if source is DataType.F16:
                out += columns.add_f16_bits("col", wg, b, f"a{u}")
            else:
                out += columns.add_f32_bits("col", wg, b << 16 if source is DataType.BF16 else b, f"a{u}")
        return out

    lane0: list[Node]
    if values:
        lane0 = columns.load_total("col", wg, "acc")
    else:
        lane0 = [Node.store("acc", Expr.u32(k), Expr.load("wacc", Expr.u32(k))) for k in range(K)]
        lane0 += sa.normalise("acc", K, "w")
    if final:
        lane0 += sa.round_digits("acc", K, Expr.load("wfl", Expr.u32(0)), layout, fmt, "bits")
        lane0.append(Node.store("out", Expr.u32(0), Expr.var("bits")))
    else:
        lane0 += [Node.store("out", WGID * stride + k, sa.as_u32(Expr.load("acc", Expr.u32(k))))
                  for k in range(K)]
        lane0.append(Node.store("out", WGID * stride + K, Expr.load("wfl", Expr.u32(0))))
    flags = Node.if_(fl.ne(Expr.u32(0)), [Node.expr(Expr.atomic(AtomicOp.OR, "wfl", Expr.u32(0), fl))])
    body: list[Node] = [Node.let_bind("fl", Expr.u32(0))]
    if values:
        # each invocation's sum in its column of `col`, then the columns added pairwise
        # the caller's array holds exactly N values (16-bit ones: a zero pads the last word);
        # past the end a load gives 0, the bits of +0, which adds nothing
        if binned(source, serial):
            # one i64 bin per sign and exponent while streaming the run (one add a value;
            # value u of a round to bin set u), then the bins into the column; the caller's
            # array holds exactly N values. Specials: the run is read again for `Specials`
            # only where the bins saw one
            def run(add: Any, p: str) -> list[Node]:
                if source is DataType.F32:
                    return clipped_run("x", unroll, bits, lambda items: [
                        n for u, b in enumerate(items) for n in add(b, u)], p)
                # bf16, two a word: the rounds (a load past the end gives +0)
                return share_rounds(serial, unroll, bits, None, lambda items: [
                    n for u, b in enumerate(items) for n in add(b << 16, u)], p)

            def binit(b: Expr, u: int) -> list[Node]:
                return columns.bin_f32_bits("bins", b, f"a{u}", u % columns.SETS)

            def see(b: Expr, u: int) -> list[Node]:
                return columns.Specials.see(b)

            share = [*columns.bins_init("bins"), *run(binit, "item"),
                     Node.if_(columns.specials_binned("bins"), run(see, "sp")), *columns.flush_bins("bins", "col", wg)]
        else:
            share = share_rounds(serial, unroll, bits, None, add_values)
        body += [*columns.Specials.init(), *share,
                 Node.assign("fl", fl | columns.Specials.flags()), flags, *columns.settle("col", wg, "acc")]
    else:
        body += [*grid_stride(take), *sa.normalise("acc", K)]
        body += [Node.if_(Expr.load("acc", Expr.u32(k)).ne(Expr.i32(0)),
                          [Node.expr(Expr.atomic(AtomicOp.ADD, "wacc", Expr.u32(k), Expr.load("acc", Expr.u32(k))))])
                 for k in range(K)]
        body += [flags, Node.barrier()]
    body.append(Node.if_(LID.eq(Expr.u32(0)), lane0))
    src_t = U if source == "digits" else (DataType.F32 if source == "dot" else storage(source))
    bufs = [BufferDecl.read("x", 0, src_t)]
    if source == "dot":
        bufs.append(BufferDecl.read("y", 1, DataType.F32))
    nb = len(bufs)
    bufs += [prm(nb), BufferDecl.output("out", nb + 1, U), *sa.local_decls("acc", layout)]
    bufs += [columns.decl("col", wg)] if values else [BufferDecl.workgroup("wacc", K, I)]
    if values and binned(source, serial):
        bufs.append(columns.bins_decl("bins"))
    bufs.append(BufferDecl.workgroup("wfl", 1, U))
    return Program.wrapped(bufs, wg, body)


@functools.cache
def binned_sum_program(source: DataType, fmt: sa.Format, wg: int, unroll: int) -> Program:
    """The whole binned exact sum (`binned`: serial backends) in one dispatch: `exact_program`'s
    first pass (each workgroup's normalised digits and flags into ``out``), a grid sync, then
    invocation 0 adds every workgroup's digits, normalises them once and rounds the total to
    ``fmt`` in ``res[0]``. Where the two passes were two dispatches, the second one cost more
    host time on PoCL than its kernel (a dispatch's round trip)."""
    first = exact_program(source, columns.LAYOUT, fmt, wg, False, unroll, True)
    K = columns.LAYOUT.digits
    stride = K + 1
    p, fl = Expr.var("part"), Expr.var("fl2")
    total = [Node.let_bind("fl2", Expr.u32(0)),
             Node.loop("part", Expr.u32(0), Expr.buf_len("out") / stride, [
                 *sa.add_digits_local("acc", lambda k: sa.as_i32(Expr.load("out", p * stride + k)), K),
                 Node.assign("fl2", fl | Expr.load("out", p * stride + K))]),
             *sa.normalise("acc", K, "p2n"),
             *sa.round_digits("acc", K, fl, columns.LAYOUT, fmt, "bits", "p2r"),
             Node.store("res", Expr.u32(0), Expr.var("bits"))]
    body = [*first.body, Node.barrier(MemoryOrdering.GRID_SYNC), Node.if_(Expr.gid_x().eq(Expr.u32(0)), total)]
    res = BufferDecl.output("res", first.buffer("out").binding + 1, U, 1)
    return Program.wrapped([*first.buffers, res], wg, body)


# ---- passes ---------------------------------------------------------------------------------
def _source(a: Arr) -> Any:
    """The dispatch input of a caller's array (`Arr.source`)."""
    return a.source()


def _scalar_out(r: Runner, raw: Any, like: Arr, dtype: DataType) -> Any:
    """The final one-element output (a u32 word for 16-bit floats) as the caller's scalar."""
    if isinstance(raw, np.ndarray):
        vals = raw[:1]
        if dtype.is_half:
            vals = vals.astype(np.uint16)
        elif dtype.storage_only:
            vals = vals.astype(dtype.host)       # the u32/i32 a narrow min/max computed in
        elif dtype is DataType.F32 and vals.dtype == np.uint32:
            vals = vals.view(np.float32)
        elif dtype.is_wide and vals.dtype == np.uint32:
            vals = raw[:2].view(dtype.host)      # the two words of a narrow sum
        return scalar(to_kind(vals.copy(), like, dtype), like, dtype)
    if dtype.is_half:
        out = device_half(device_like(raw, like, DataType.U32), like, dtype)
    elif dtype.storage_only:
        out = device_cast(device_like(raw, like, dtype.value_type), like, dtype)
    elif dtype is DataType.F32 and raw.dtype is DataType.U32:
        out = _device_view(device_like(raw, like, DataType.U32), like, dtype)
    elif dtype.is_wide and raw.dtype is DataType.U32:
        out = _device_view(device_like(raw, like, DataType.U32)[:2], like, dtype)
    else:
        out = device_like(raw, like, dtype)
    return scalar(out[:1], like, dtype)


def _device_view(words: Any, like: Arr, dtype: DataType) -> Any:
    """u32 words on the device as ``dtype`` (f32, or u64/i64 from word pairs)."""
    if like.kind == "cupy":
        return words.view(dtype.host)
    import torch

    return words.view(torch.int32).view(torch_dtype(dtype))


def _two_pass(r: Runner, make: Any, inputs: list, n: int, like: Arr, dtype: DataType,
              partial_words: int, wg: int | None = None, unroll: int = 1, per_max: int = 1 << 14,
              joined: Any = None) -> Any:
    """Run ``make(first, final, wg, unroll)`` over ``n`` items (``wg`` invocations a workgroup,
    default this call's, or on serial backends `Runner.serial_wg`; ``unroll`` items a round,
    at most ``per_max`` items an invocation), then over the partials (this call's workgroup
    size, one item a round); one pass when one workgroup suffices. ``joined(wg, unroll)``:
    a program doing both passes in one dispatch (its partials first, its result second), run
    instead of the two."""
    wg = (r.serial_wg if r.serial else r.wg) if wg is None else wg
    g = r.groups(n, per_max=per_max, wg=wg)
    T = g * wg
    u = unroll if rounds_fit(n, T, unroll) else 1
    first = params(n, T, -(-n // (T * u)))
    if g == 1:
        out = r.run(make(True, True, wg, u), [*inputs, first], 1, 1, keep=like.on_device)[0]
        return _scalar_out(r, out, like, dtype)
    if joined is not None:
        outs = r.run(joined(wg, u), [*inputs, first], g, g * partial_words, keep=like.on_device)
        return _scalar_out(r, outs[1], like, dtype)
    part = r.run(make(True, False, wg, u), [*inputs, first], g, g * partial_words, wait=False)[0]
    out = r.run(make(False, True, r.wg, 1), [part, params(g, r.wg, -(-g // r.wg))], 1, 1, keep=like.on_device)[0]
    return _scalar_out(r, out, like, dtype)


def sum_type(dtype: DataType) -> DataType:
    """The type of a sum (numpy's rule on 64-bit Linux): 8- and 16-bit integers sum to i64
    (signed) or u64 (unsigned), every other type to itself."""
    if dtype.storage_only:
        return DataType.I64 if dtype.is_signed else DataType.U64
    return dtype


def _narrow_sum(r: Runner, a: Arr) -> Any:
    """The exact sum of 8- or 16-bit integers as u64/i64 (`wide_sum_program`; never wraps:
    fewer than 2**32 values of at most 16 bits)."""
    wide = sum_type(a.dtype)
    wg = r.serial_wg if r.serial else r.wg
    g = r.groups(a.n, wg=wg)
    T = g * wg
    u = UNROLL if rounds_fit(a.n, T, UNROLL) else 1
    first = [_source(a), params(a.n, T, -(-a.n // (T * u)))]
    if g == 1:
        out = r.run(wide_sum_program(a.dtype, wg, True, u, r.serial), first, 1, 2, keep=a.on_device)[0]
    else:
        part = r.run(wide_sum_program(a.dtype, wg, True, u, r.serial), first, g, 2 * g)[0]
        out = r.run(wide_sum_program(U, r.wg, False, 1), [part, params(g, r.wg, -(-g // r.wg))], 1, 2,
                    keep=a.on_device)[0]
    return _scalar_out(r, out, a, wide)


def _reduce(x: Any, op: BinOp, name: str, backend: Any, workgroup_size: int | None) -> Any:
    a = as_arr(x, "x")
    require(a, NUMERIC + NARROW, f"vyre.lib.{name}")
    if a.n == 0:
        if op is not BinOp.ADD:
            raise LibError("L003", f"vyre.lib.{name} of an empty array has no value.",
                           "check x.size before the call (min and max need at least one element).")
        t = sum_type(a.dtype)
        zero = np.zeros(1, t.storage if t.is_half else t.host)
        return scalar(to_kind(zero, a, t), a, t)
    r = Runner(backend, workgroup_size)
    if op is BinOp.ADD and a.dtype.is_float:
        fmt = sa.FORMATS[a.dtype]

        def make_sum(first: bool, final: bool, wg: int, unroll: int) -> Program:
            return exact_program(a.dtype if first else "digits", columns.LAYOUT, fmt, wg, final,
                                 unroll if first else 1, r.serial and first)

        # each invocation adds at most LOCAL_HEADROOM values to its column before it settles
        # (binned: at most BIN_VALUES to its bins, which add 508 terms to the column)
        # (binned: both passes in one dispatch, `binned_sum_program`)
        bins = binned(a.dtype, r.serial)
        unroll = BIN_UNROLL if bins else EXACT_UNROLL
        per_max = (columns.BIN_VALUES if bins else sa.LOCAL_HEADROOM) - unroll
        joined = (lambda wg, u: binned_sum_program(a.dtype, fmt, wg, u)) if bins else None
        return _two_pass(r, make_sum, [_source(a)], a.n, a, a.dtype, columns.LAYOUT.digits + 1,
                         wg=r.fit(columns.BYTES, r.serial_wg if r.serial else None), unroll=unroll,
                         per_max=per_max, joined=joined)

    if op is BinOp.ADD and a.dtype.storage_only:
        return _narrow_sum(r, a)

    if op is BinOp.ADD and a.dtype in (U, I):
        # one pass: workgroup totals meet in out[0] through a wrapping integer atomic
        wg = r.serial_wg if r.serial else r.wg
        g = r.groups(a.n, wg=wg)
        T = g * wg
        u = UNROLL if rounds_fit(a.n, T, UNROLL) else 1
        out = r.run(tree_program(a.dtype, op, wg, True, True, u, merge=True, serial=r.serial),
                    [_source(a), params(a.n, T, -(-a.n // (T * u)))], g, 1, keep=a.on_device)[0]
        return _scalar_out(r, out, a, a.dtype)

    def make(first: bool, final: bool, wg: int, unroll: int) -> Program:
        # later passes read partials of the type the first computed in (narrow: u32/i32)
        return tree_program(a.dtype if first else a.dtype.value_type, op, wg, first, final, unroll,
                            serial=r.serial and first)

    return _two_pass(r, make, [_source(a)], a.n, a, a.dtype, 1, unroll=UNROLL)


def sum(x: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The sum of a 1-D array. 32- and 64-bit integers wrap in their type (S1); 8- and
    16-bit ones sum exactly to i64/u64 (numpy's rule, `sum_type`); floats (f32, f16, bf16) are
    the exact sum rounded once to the array's type (S34: order-, workgroup- and
    device-independent; NaN if any NaN or both infinities; an exact zero is +0)."""
    return _reduce(x, BinOp.ADD, "sum", backend, workgroup_size)


def min(x: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The smallest element (floats: S10, NaN if any NaN, -0 below +0)."""
    return _reduce(x, BinOp.MIN, "min", backend, workgroup_size)


def max(x: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The largest element (floats: S10, NaN if any NaN, +0 above -0)."""
    return _reduce(x, BinOp.MAX, "max", backend, workgroup_size)


def dot(x: Any, y: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """``sum(x[i] * y[i])`` of two f32 vectors, every product and the sum exact, rounded once
    (S34)."""
    a, b = as_arr(x, "x"), as_arr(y, "y")
    require(a, (DataType.F32,), "vyre.lib.dot")
    require(b, (DataType.F32,), "vyre.lib.dot")
    if a.n != b.n:
        raise LibError("L002", f"vyre.lib.dot: x has {a.n} elements, y has {b.n}.",
                       "pass two vectors of the same length.")
    if a.n == 0:
        return scalar(to_kind(np.zeros(1, np.float32), a, a.dtype), a, a.dtype)
    r = Runner(backend, workgroup_size)

    def make(first: bool, final: bool, wg: int, unroll: int) -> Program:
        return exact_program("dot" if first else "digits", sa.DOT, sa.F32, wg, final)

    inputs = [_source(a), _source(b)]
    return _two_pass(r, make, inputs, a.n, a, DataType.F32, sa.DOT.digits + 1, wg=r.wg)


__all__ = ["binned_sum_program", "dot", "exact_program", "max", "min", "sum", "sum_type", "tree_program", "wide_sum_program"]
