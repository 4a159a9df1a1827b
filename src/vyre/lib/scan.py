"""Prefix sums: ``cumsum`` (inclusive) and ``exclusive_cumsum``.

Reduce-then-scan, so no pass waits on another workgroup (portable backends give no
forward-progress guarantee, so there is no decoupled look-back). Integers: chunk totals,
then each workgroup scans its chunk's tiles from its offset, the sum of the totals before
it, which it adds itself (two passes); a tile (16 consecutive elements per invocation) is loaded
and stored coalesced through workgroup memory; on serial backends (`vyre.lib.runner.serial`, a CPU device:
PoCL) each invocation sums, then scans, its own run of consecutive elements in order, with
no barrier. Integers wrap (S1). Floats: block totals, their
prefixes, each block from its offset (a block is ``items`` consecutive elements per
invocation times the workgroup). Float prefixes follow S35: prefix ``i`` is the exact sum of
elements ``0..i`` (``0..i-1`` exclusive) rounded once, so it never depends on the blocking:
block totals are superaccumulator digit vectors (`vyre.ir.superacc`), their prefixes are
summed exactly, and every element's prefix is rounded from exact digits.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import AtomicOp, BinOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir import superacc as sa

from .arrays import NUMERIC, as_arr, require, result, to_kind
from .kernels import (
    GID,
    LID,
    WGID,
    N,
    balanced,
    element,
    lane_words,
    pad32,
    ping_pong_scan,
    prm,
    rounds,
    runs,
    storage,
    tree,
)
from .runner import Runner, params

U, I = DataType.U32, DataType.I32


SCAN_ITEMS = 16   # consecutive elements per invocation in a tile
SUM_UNROLL = 8   # loads in flight per invocation while a chunk is summed
# chunks of an integer scan, at most: each workgroup of the scan pass adds the totals of the
# chunks before its own (a few loads per invocation), so no pass scans the totals (the three
# passes that did at 2**28 elements took 0.07-0.1 ms each on the H100, host-timed, for a few
# us of work). 1024 is one wave of 256-invocation workgroups on the H100 (132 x 8). Longer
# chunks cost some bandwidth there (ncu, 2**28 u32: sums 372 us at 86% of DRAM peak and scan
# 863 us at 74%, against 340 us at 94% and 711 us at 89% with one tile per chunk)
SCAN_GROUPS = 1024


def tile_words(wg: int, items: int) -> int:
    return wg * items + (wg * items >> 5)


def tile_bytes(dtype: DataType, items: int) -> int:
    """Workgroup memory per invocation of `chunk_scan_program` (tile and ping-pong scan)."""
    return dtype.size * (items + (items + 31) // 32 + 2)


@functools.cache
def chunk_sums_program(dtype: DataType, wg: int, unroll: int) -> Program:
    """``sums[w]`` = the wrapping sum of chunk ``w`` (``prm[1]`` elements from ``w * prm[1]``;
    ``prm[2]`` rounds of ``unroll`` coalesced loads per invocation)."""
    C = Expr.load("prm", 1)

    def fold(items: list[Expr]) -> list[Node]:
        return [Node.assign("acc", Expr.var("acc") + balanced(items, lambda a, b: a + b))]

    body = [Node.let_bind("acc", Expr.lit(dtype, 0)),
            *rounds(WGID * C + LID, wg, Expr.load("prm", 2), unroll, lambda i: Expr.load("x", i),
                    Expr.lit(dtype, 0), fold),
            Node.store("s", LID, Expr.var("acc")), *tree("s", wg, lambda a, b: Expr.bin(BinOp.ADD, a, b)),
            Node.if_(LID.eq(Expr.u32(0)), [Node.store("sums", WGID, Expr.load("s", Expr.u32(0)))])]
    return Program.wrapped([BufferDecl.read("x", 0, dtype), prm(1), BufferDecl.output("sums", 2, dtype),
                            BufferDecl.workgroup("s", wg, dtype)], wg, body)


@functools.cache
def chunk_scan_program(dtype: DataType, wg: int, items: int, inclusive: bool, staged: bool = True) -> Program:
    """Workgroup ``w`` scans its ``prm[1]`` tiles of ``wg * items`` elements in order, from
    the sum of ``sums[0..w)`` (the totals of the chunks before its own, added by a tree in
    workgroup memory): each invocation scans its ``items`` consecutive elements, a ping-pong scan of
    the invocations' totals gives each its offset. ``staged`` (GPUs): each tile is loaded and
    stored coalesced through workgroup memory; else (CPUs) each invocation reads and writes
    its own run directly. The loops over a tile have literal bounds (a GPU compiler unrolls
    them; CPU compilers get a small program)."""
    B = wg * items
    zero = Expr.lit(dtype, 0)
    v = Expr.var
    j, k = v("j"), v("k")
    e = v("base") + j * wg + LID
    mine = v("own_p") + k if 32 % items == 0 else pad32(LID * items + k)

    def each(var: str, body: list[Node]) -> Node:
        return Node.loop(var, Expr.u32(0), Expr.u32(items), body)

    if staged:
        # coalesced loads (independent: in flight together), into the padded tile
        load = [each("j", [Node.store("tile", pad32(j * wg + LID), Expr.select(e.lt(N), Expr.load("x", e), zero))]),
                Node.barrier()]
        value: Expr = Expr.load("tile", mine)

        def put(x: Expr) -> Node:
            return Node.store("tile", mine, x)
        store = [Node.barrier(),
                 each("j", [Node.if_(e.lt(N), [Node.store("out", e, Expr.load("tile", pad32(j * wg + LID)))])])]
    else:
        own_e = v("base") + LID * items + k
        load = []
        value = Expr.select(own_e.lt(N), Expr.load("x", own_e), zero)

        def put(x: Expr) -> Node:
            return Node.if_(own_e.lt(N), [Node.store("out", own_e, x)])
        store = []
    scan, incl, total = ping_pong_scan("s", wg, dtype)
    step = [Node.let_bind("a", value)]
    if inclusive:
        step += [Node.assign("run", v("run") + v("a")), put(v("run"))]
    else:
        step += [put(v("run")), Node.assign("run", v("run") + v("a"))]
    tile = [
        Node.let_bind("base", (WGID * Expr.load("prm", 1) + v("t")) * B),
        *load,
        Node.let_bind("tsum", zero),
        each("k", [Node.assign("tsum", v("tsum") + value)]),
        Node.store("s", LID, v("tsum")),
        *scan,
        Node.let_bind("run", v("carry") + incl - v("tsum")),
        Node.assign("carry", v("carry") + total),
        each("k", step),
        *store,
        Node.barrier(),
    ]
    ahead = v("q") * wg + LID
    offset = [Node.let_bind("before", zero),
              Node.loop("q", Expr.u32(0), Expr.bin(BinOp.DIV, WGID + (wg - 1), Expr.u32(wg)), [
                  Node.if_(ahead.lt(WGID), [Node.assign("before", v("before") + Expr.load("sums", ahead))])]),
              Node.store("s", LID, v("before")), *tree("s", wg, lambda a, b: Expr.bin(BinOp.ADD, a, b)),
              Node.let_bind("carry", Expr.load("s", Expr.u32(0))), Node.barrier()]   # read before s is reused
    body = [*lane_words(wg, items), *offset, Node.loop("t", Expr.u32(0), Expr.load("prm", 1), tile)]
    bufs = [BufferDecl.read("x", 0, dtype), BufferDecl.read("sums", 1, dtype), prm(2),
            BufferDecl.output("out", 3, dtype), BufferDecl.workgroup("s", 2 * wg, dtype)]
    if staged:
        bufs.append(BufferDecl.workgroup("tile", tile_words(wg, items), dtype))
    return Program.wrapped(bufs, wg, body)


@functools.cache
def run_sums_program(dtype: DataType, wg: int) -> Program:
    """``sums[gid]`` = the wrapping sum of this invocation's run (`runs`: ``prm[2]``
    consecutive elements from ``gid * prm[2]``)."""
    body = [Node.let_bind("acc", Expr.lit(dtype, 0)),
            *runs(lambda i: [Node.assign("acc", Expr.var("acc") + Expr.load("x", i))]),
            Node.store("sums", GID, Expr.var("acc"))]
    return Program.wrapped([BufferDecl.read("x", 0, dtype), prm(1), BufferDecl.output("sums", 2, dtype)], wg, body)


@functools.cache
def run_scan_program(dtype: DataType, wg: int, inclusive: bool) -> Program:
    """Each invocation scans its run in order from ``offs[gid]``."""
    run = Expr.var("run")

    def step(i: Expr) -> list[Node]:
        add = Node.assign("run", run + Expr.load("x", i))
        put = Node.store("out", i, run)
        return [add, put] if inclusive else [put, add]

    body = [Node.let_bind("run", Expr.load("offs", GID)), *runs(step)]
    return Program.wrapped([BufferDecl.read("x", 0, dtype), BufferDecl.read("offs", 1, dtype), prm(2),
                            BufferDecl.output("out", 3, dtype)], wg, body)


def _serial_int_scan(r: Runner, x: Any, n: int, dtype: DataType, inclusive: bool, keep: bool) -> Any:
    """`_int_scan` on serial backends (`vyre.lib.runner.serial`, a CPU device): one run of consecutive
    elements per invocation (at most `Runner.max_groups` runs unless the caller's workgroup is
    larger, at least 256 elements each; invocations past the end have none): run totals, their
    exclusive scan, each run scanned in order from its offset."""
    wg = r.serial_wg
    g = max(1, min(-(-n // (wg * 256)), -(-r.max_groups // wg)))
    T = g * wg
    per = max(256, -(-n // T))
    used = -(-n // per)          # runs holding elements (the offsets scanned: n / 256 at most)
    r.span(n, T * per, "vyre.lib.cumsum")
    prm_ = params(n, T, per)
    if used == 1:
        offs: Any = np.zeros(1, dtype.host)
    else:
        sums = r.run(run_sums_program(dtype, wg), [x, prm_], g, T)[0]
        offs = _int_scan(r, sums, used, dtype, False, True)
    return r.run(run_scan_program(dtype, wg, inclusive), [x, offs, prm_], g, n, keep=keep)[0]


def _int_scan(r: Runner, x: Any, n: int, dtype: DataType, inclusive: bool, keep: bool,
              alloc: Any = None) -> Any:
    """Reduce-then-scan in two passes: chunk totals, then each chunk scanned from the sum of
    the totals before it (at most `SCAN_GROUPS` chunks). Neither pass waits on another
    workgroup. ``alloc``: where the result is allocated (`Runner.run`)."""
    if r.serial:
        return _serial_int_scan(r, x, n, dtype, inclusive, keep)
    items = SCAN_ITEMS
    wg = r.fit(tile_bytes(dtype, items)) if r.staged else r.wg
    B = wg * items
    tiles = -(-n // B)
    per = -(-tiles // min(tiles, r.chunk_groups, SCAN_GROUPS))      # tiles per workgroup
    g = -(-tiles // per)
    r.span(n, g * per * B, "vyre.lib.cumsum")
    if g == 1:
        sums: Any = np.zeros(1, dtype.host)
    else:
        unroll = SUM_UNROLL if items % SUM_UNROLL == 0 else 1
        sums = r.run(chunk_sums_program(dtype, wg, unroll), [x, params(n, per * B, per * items // unroll)], g, g,
                     wait=False)[0]
    return r.run(chunk_scan_program(dtype, wg, items, inclusive, r.staged), [x, sums, params(n, per)], g, n,
                 keep=keep, alloc=alloc)[0]


# ---- floats: S35 ----------------------------------------------------------------------------
@functools.cache
def float_block_totals_program(dtype: DataType, wg: int, items: int) -> Program:
    """``out[b]`` = block ``b``'s exact total as a normalised digit vector (+ flags word)."""
    K = sa.SUM.digits
    stride = K + 1
    B = wg * items
    e = Expr.var("e")
    body = [Node.let_bind("fl", Expr.u32(0)),
            Node.loop("j", Expr.u32(0), Expr.u32(items), [
                Node.let_bind("e", WGID * B + Expr.var("j") * wg + LID),
                Node.if_(e.lt(N), [*_decode(dtype, e, "a"), *_add("acc", "a"),
                                   Node.assign("fl", Expr.var("fl") | Expr.var("a_flags"))])]),
            *sa.normalise("acc", K)]
    body += [Node.if_(Expr.load("acc", Expr.u32(k)).ne(Expr.i32(0)), [Node.expr(Expr.atomic(
        _ADD, "wacc", Expr.u32(k), Expr.load("acc", Expr.u32(k))))]) for k in range(K)]
    body += [Node.if_(Expr.var("fl").ne(Expr.u32(0)), [Node.expr(Expr.atomic(_OR, "wfl", Expr.u32(0), Expr.var("fl")))]),
             Node.barrier(),
             Node.if_(LID.eq(Expr.u32(0)), [
                 *[Node.store("acc", Expr.u32(k), Expr.load("wacc", Expr.u32(k))) for k in range(K)],
                 *sa.normalise("acc", K, "w"),
                 *[Node.store("out", WGID * stride + k, sa.as_u32(Expr.load("acc", Expr.u32(k)))) for k in range(K)],
                 Node.store("out", WGID * stride + K, Expr.load("wfl", Expr.u32(0)))])]
    return Program.wrapped([BufferDecl.read("x", 0, storage(dtype)), prm(1), BufferDecl.output("out", 2, U),
                            *sa.local_decls("acc", sa.SUM), BufferDecl.workgroup("wacc", K, I),
                            BufferDecl.workgroup("wfl", 1, U)], wg, body)


@functools.cache
def vector_prefix_program() -> Program:
    """One invocation: ``out[b]`` = the exact sum of digit vectors ``0..b-1`` (exclusive),
    normalised; ``N`` vectors."""
    K = sa.SUM.digits
    stride = K + 1
    b = Expr.var("b")
    body = [Node.let_bind("fl", Expr.u32(0)),
            Node.loop("b", Expr.u32(0), N, [
                *[Node.store("out", b * stride + k, sa.as_u32(Expr.load("acc", Expr.u32(k)))) for k in range(K)],
                Node.store("out", b * stride + K, Expr.var("fl")),
                *sa.add_digits_local("acc", lambda k: sa.as_i32(Expr.load("x", b * stride + k)), K),
                Node.assign("fl", Expr.var("fl") | Expr.load("x", b * stride + K)),
                *sa.normalise("acc", K)])]
    return Program.wrapped([BufferDecl.read("x", 0, U), prm(1), BufferDecl.output("out", 2, U),
                            *sa.local_decls("acc", sa.SUM)], 1, body)


@functools.cache
def float_block_scan_program(dtype: DataType, wg: int, items: int, inclusive: bool) -> Program:
    """Each invocation rounds the exact prefix of each of its ``items`` elements: its block's
    offset vector, plus the totals of the invocations before it (a Hillis-Steele scan of
    digit vectors in workgroup memory), plus its own elements so far."""
    K = sa.SUM.digits
    stride = K + 1
    fmt = sa.FORMATS[dtype]
    first = WGID * (wg * items) + LID * items
    e = Expr.var("e")

    def sh(k: int, lane: Expr) -> Expr:
        return Expr.load("s", lane * stride + k)

    body: list[Node] = [Node.let_bind("fl", Expr.u32(0)),
                        Node.loop("j", Expr.u32(0), Expr.u32(items), [
                            Node.let_bind("e", first + Expr.var("j")),
                            Node.if_(e.lt(N), [*_decode(dtype, e, "a"), *_add("acc", "a"),
                                               Node.assign("fl", Expr.var("fl") | Expr.var("a_flags"))])]),
                        *sa.normalise("acc", K)]
    body += [Node.store("s", LID * stride + k, Expr.load("acc", Expr.u32(k))) for k in range(K)]
    body.append(Node.store("s", LID * stride + K, sa.as_i32(Expr.var("fl"))))
    body.append(Node.barrier())
    h = 1
    while h < wg:
        src = LID - h
        body += [Node.let_bind(f"on{h}", LID.ge(h))]
        body += [Node.let_bind(f"v{h}_{k}", Expr.select(Expr.var(f"on{h}"), sh(k, src), Expr.i32(0)))
                 for k in range(stride)]
        body.append(Node.barrier())
        body += [Node.store("s", LID * stride + k, sh(k, LID) + Expr.var(f"v{h}_{k}")) for k in range(K)]
        body.append(Node.store("s", LID * stride + K, sh(K, LID) | Expr.var(f"v{h}_{K}")))
        body.append(Node.barrier())
        h *= 2
    # the running prefix: the block offset + the inclusive scan of earlier lanes (lane - 1)
    prev = LID - 1
    has_prev = LID.ge(1)
    body += [Node.store("acc", Expr.u32(k), sa.as_i32(Expr.load("offs", WGID * stride + k))
                        + Expr.select(has_prev, sh(k, prev), Expr.i32(0))) for k in range(K)]
    body.append(Node.assign("fl", Expr.load("offs", WGID * stride + K)
                            | sa.as_u32(Expr.select(has_prev, sh(K, prev), Expr.i32(0)))))
    body += sa.normalise("acc", K, "p")
    emit = [*[Node.store("tmp", Expr.u32(k), Expr.load("acc", Expr.u32(k))) for k in range(K)],
            *sa.normalise("tmp", K, "t"),
            *sa.round_digits("tmp", K, Expr.var("fl"), sa.SUM, fmt, "bits"),
            Node.store("out", e, _out_value(dtype, Expr.var("bits")))]
    add = [*_decode(dtype, e, "b"), *_add("acc", "b"), Node.assign("fl", Expr.var("fl") | Expr.var("b_flags"))]
    body.append(Node.loop("j2", Expr.u32(0), Expr.u32(items), [
        Node.let_bind("e", first + Expr.var("j2")),
        Node.if_(e.lt(N), ([*add, *emit] if inclusive else [*emit, *add]))]))
    out_t = DataType.F32 if dtype is DataType.F32 else U
    return Program.wrapped([BufferDecl.read("x", 0, storage(dtype)), BufferDecl.read("offs", 1, U), prm(2),
                            BufferDecl.output("out", 3, out_t), *sa.local_decls("acc", sa.SUM),
                            BufferDecl.local("tmp", K + 2, I), BufferDecl.workgroup("s", wg * stride, I)],
                           wg, body)


_ADD, _OR = AtomicOp.ADD, AtomicOp.OR


def _decode(dtype: DataType, e: Expr, p: str) -> list[Node]:
    bits = Expr.bitcast(U, Expr.load("x", e)) if dtype is DataType.F32 else element("x", dtype, e)
    return sa.DECODE[dtype](bits, p)


def _add(acc: str, p: str) -> list[Node]:
    """Add decoded value ``p`` into ``acc`` (chunks stay under the headroom: a normalisation
    follows every ``items`` <= 2**14 additions)."""
    return sa.add_local(acc, Expr.var(f"{p}_m"), Expr.u32(0), Expr.var(f"{p}_s"), Expr.var(f"{p}_neg"),
                        f"{p}c", sa.SUM)


def _out_value(dtype: DataType, bits: Expr) -> Expr:
    return Expr.bitcast(DataType.F32, bits) if dtype is DataType.F32 else bits


def _float_scan(r: Runner, x: Any, n: int, dtype: DataType, inclusive: bool, keep: bool) -> Any:
    # workgroup memory holds wg digit vectors: keep it within 16 KiB (wgpu's default limit)
    wg = r.wg
    while wg * (sa.SUM.digits + 1) * 4 > 16384:
        wg //= 2
    items = r.items
    B = wg * items
    g = -(-n // B)
    totals = r.run(float_block_totals_program(dtype, wg, items), [x, params(n)], g, g * (sa.SUM.digits + 1))[0]
    offs = r.run(vector_prefix_program(), [totals, params(g)], 1, g * (sa.SUM.digits + 1))[0]
    return r.run(float_block_scan_program(dtype, wg, items, inclusive), [x, offs, params(n)], g, n, keep=keep)[0]


def _scan(x: Any, inclusive: bool, name: str, backend: Any, workgroup_size: int | None) -> Any:
    a = as_arr(x, "x")
    require(a, NUMERIC, f"vyre.lib.{name}")
    if a.n == 0:
        return to_kind(np.zeros(0, a.dtype.storage if a.dtype.is_half else a.dtype.host), a, a.dtype)
    r = Runner(backend, workgroup_size)
    src = a.source()
    if a.dtype.is_float:
        out = _float_scan(r, src, a.n, a.dtype, inclusive, a.on_device)
    else:
        out = _int_scan(r, src, a.n, a.dtype, inclusive, a.on_device, alloc=_cupy_alloc(a))
    return result(out, a, a.dtype, a.n)


def _cupy_alloc(a: Any) -> Any:
    """For a CuPy caller, `dispatch_device`'s allocator from CuPy's pool (the result is a
    CuPy array anyway): its freed blocks are reused at once, where a fresh 1 GiB buffer of
    the CUDA device (the result of 2**28 u32) and its release took 2.5 ms on the H100 (median
    of 10), more than the scan's kernels. None otherwise."""
    if a.kind != "cupy":
        return None
    import cupy

    return lambda nbytes, dtype: cupy.empty(nbytes // dtype.size, np.dtype(dtype.host))


def cumsum(x: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """Inclusive prefix sums: ``out[i] = x[0] + ... + x[i]``. Integers wrap (S1); floats: each
    prefix the exact sum rounded once (S35)."""
    return _scan(x, True, "cumsum", backend, workgroup_size)


def exclusive_cumsum(x: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """Exclusive prefix sums: ``out[0] = 0``, ``out[i] = x[0] + ... + x[i-1]``."""
    return _scan(x, False, "exclusive_cumsum", backend, workgroup_size)


__all__ = ["chunk_scan_program", "chunk_sums_program", "cumsum", "exclusive_cumsum",
           "float_block_scan_program", "float_block_totals_program", "run_scan_program", "run_sums_program",
           "vector_prefix_program"]
