"""Histograms: ``bincount`` (integer bins) and ``histogram`` (float bins given by edges).

One grid-stride pass. With at most `PRIVATE_BINS` bins each workgroup counts into workgroup
memory and adds its counts to the global bins once per bin; with more, every element adds to
the global bins directly. On serial backends (`vyre.lib.runner.serial`, a CPU device: PoCL) each invocation
counts its own run of consecutive elements into its own row of workgroup counters with plain
adds (a CPU's atomic costs many adds), and the rows are summed per bin at the end. Counts are
u32 and exact (integer atomics: the final memory does not depend on the order).

* ``bincount(x, bins)``: ``out[b] = #{i : x[i] == b}`` for ``b`` in ``[0, bins)``; values
  outside are not counted.
* ``histogram(x, edges)``: numpy's rule for explicit edges: bin ``b`` holds
  ``edges[b] <= x < edges[b+1]``, the last bin also ``x == edges[-1]``; NaN and values
  outside are not counted. Comparisons follow S11 (a subnormal compares as zero, S9).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

from .arrays import Arr, as_arr, require, to_kind
from .errors import LibError
from .kernels import EXTRA, LID, element, f16_to_f32_bits, grid_stride, prm, runs, storage
from .runner import Runner, params

U = DataType.U32
PRIVATE_BINS = 2048
INT_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64)
FLOAT_TYPES = (DataType.F32, DataType.F16, DataType.BF16)


def _count(private: int, b: Expr, rows: bool) -> Node:
    if rows:   # this invocation's own row: a plain add
        k = LID * private + b
        return Node.store("local", k, Expr.load("local", k) + 1)
    return Node.expr(Expr.atomic(AtomicOp.ADD, "local" if private else "out", b, Expr.u32(1)))


def _flush(private: int, wg: int, rows: bool) -> list[Node]:
    """Workgroup counts into the global bins (one atomic per non-zero bin; ``rows``: a bin's
    count is the sum of its column)."""
    if not private:
        return []
    b = Expr.var("bin")
    if rows:
        total = [Node.let_bind("cnt", Expr.u32(0)), Node.loop("r", Expr.u32(0), Expr.u32(wg), [
            Node.assign("cnt", Expr.var("cnt") + Expr.load("local", Expr.var("r") * private + b))])]
    else:
        total = [Node.let_bind("cnt", Expr.load("local", b))]
    return [Node.barrier(), Node.loop("q", Expr.u32(0), Expr.u32(-(-private // wg)), [
        Node.let_bind("bin", Expr.var("q") * wg + LID),
        Node.if_(b.lt(EXTRA), [*total, Node.if_(Expr.var("cnt").ne(Expr.u32(0)), [
            Node.expr(Expr.atomic(AtomicOp.ADD, "out", b, Expr.var("cnt")))])])])]


def _decls(private: int, wg: int, rows: bool) -> list[BufferDecl]:
    return [BufferDecl.workgroup("local", private * wg if rows else private, U)] if private else []


def _pass(take: Any, private: int, wg: int, rows: bool) -> list[Node]:
    """Every element of this invocation's share (its run on serial backends), then the flush."""
    return (runs(take) if rows else grid_stride(take)) + _flush(private, wg, rows)


def _private(bins: int) -> int:
    """Workgroup-memory bins for ``bins`` (a power of two, so few Programs), or 0: global."""
    if bins > PRIVATE_BINS:
        return 0
    return 1 << (bins - 1).bit_length()


@functools.cache
def bincount_program(dtype: DataType, wg: int, private: int, rows: bool = False) -> Program:
    """Counts of ``x`` in ``[0, prm[3])`` (``rows``: the serial form, see the module)."""
    def take(i: Expr) -> list[Node]:
        v = Expr.var("v")   # loaded once
        if dtype is U:
            ok = v.lt(EXTRA)
        elif dtype is DataType.I32:
            ok = v.ge(Expr.i32(0)).and_(Expr.bitcast(U, v).lt(EXTRA))
        else:
            ok = v.ge(Expr.lit(dtype, 0)).and_(v.lt(Expr.cast(dtype, EXTRA)))
        return [Node.let_bind("v", Expr.load("x", i)), Node.if_(ok, [_count(private, Expr.cast(U, v), rows)])]

    return Program.wrapped([BufferDecl.read("x", 0, dtype), prm(1), BufferDecl.output("out", 2, U),
                            *_decls(private, wg, rows)], wg, _pass(take, private, wg, rows))


@functools.cache
def edges_program(dtype: DataType, wg: int, private: int, rows: bool = False) -> Program:
    """Counts of ``x`` in the bins between ``edges`` (f32, ``prm[3] + 1`` of them): a binary
    search per element (``rows``: the serial form, see the module)."""
    def take(i: Expr) -> list[Node]:
        if dtype is DataType.F32:
            x = Expr.load("x", i)
        elif dtype is DataType.BF16:
            x = Expr.bitcast(DataType.F32, element("x", dtype, i) << 16)
        else:
            x = Expr.bitcast(DataType.F32, f16_to_f32_bits(element("x", dtype, i)))
        lo, hi = Expr.var("lo"), Expr.var("hi")
        mid = (lo + hi) >> 1
        return [Node.let_bind("xv", x),
                Node.if_(Expr.var("xv").ge(Expr.load("edges", Expr.u32(0))).and_(
                    Expr.var("xv").le(Expr.load("edges", EXTRA))), [
                    Node.let_bind("lo", Expr.u32(0)), Node.let_bind("hi", EXTRA),
                    Node.loop("t", Expr.u32(0), Expr.u32(32), [Node.if_((hi - lo).gt(Expr.u32(1)), [
                        Node.let_bind("mid", mid),
                        Node.if_(Expr.load("edges", Expr.var("mid")).le(Expr.var("xv")),
                                 [Node.assign("lo", Expr.var("mid"))], [Node.assign("hi", Expr.var("mid"))])])]),
                    _count(private, lo, rows)])]

    return Program.wrapped([BufferDecl.read("x", 0, storage(dtype)), BufferDecl.read("edges", 1, DataType.F32),
                            prm(2), BufferDecl.output("out", 3, U), *_decls(private, wg, rows)], wg,
                           _pass(take, private, wg, rows))


def _src(a: Arr) -> Any:
    return a.source()


def _counts(r: Runner, make: Any, inputs: list, n: int, bins: int, like: Arr) -> Any:
    """Run ``make(wg, private, rows)`` over ``n`` elements into ``bins`` counts."""
    private = _private(bins)
    rows = r.serial and private > 0
    # serial: rows of counters that fit workgroup memory, and long runs (the flush is per group)
    wg = r.fit(4 * private, r.serial_wg) if rows else r.wg
    g = r.groups(n, per_min=16, per_max=1 << 20 if rows else 1 << 14, wg=wg)
    T = g * wg
    out = r.run(make(wg, private, rows), [*inputs, params(n, T, -(-n // T), bins)], g, bins,
                keep=like.on_device)[0]
    if isinstance(out, np.ndarray):
        return to_kind(out[:bins].copy(), like, U)
    from .arrays import device_like

    return device_like(out, like, U)[:bins]


def bincount(x: Any, bins: int, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """u32 counts of each integer value in ``[0, bins)`` (others are not counted)."""
    a = as_arr(x, "x")
    require(a, INT_TYPES, "vyre.lib.bincount")
    if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or not 1 <= int(bins) < 2**31:
        raise LibError("L005", f"vyre.lib.bincount: bins={bins!r} is not a count in 1..2**31-1.",
                       "pass the number of bins as a positive int.")
    bins = int(bins)
    r = Runner(backend, workgroup_size)
    if a.n == 0:
        return to_kind(np.zeros(bins, np.uint32), a, U)
    return _counts(r, functools.partial(bincount_program, a.dtype), [_src(a)], a.n, bins, a)


def histogram(x: Any, edges: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """u32 counts of ``x`` (f32, f16, bf16) in the bins between ascending f32 ``edges``
    (numpy's rule for explicit edges; NaN and values outside are not counted)."""
    a, e = as_arr(x, "x"), as_arr(edges, "edges")
    require(a, FLOAT_TYPES, "vyre.lib.histogram")
    require(e, (DataType.F32,), "vyre.lib.histogram's edges")
    if e.n < 2:
        raise LibError("L002", f"vyre.lib.histogram: {e.n} edge(s) make no bin.",
                       "pass at least two ascending edges (bins = len(edges) - 1).")
    host_edges = e.host()
    if np.isnan(host_edges).any() or (np.diff(host_edges) < 0).any():
        raise LibError("L004", "vyre.lib.histogram: the edges are not ascending (or hold a NaN).",
                       "pass np.sort(edges) without NaNs.")
    bins = e.n - 1
    r = Runner(backend, workgroup_size)
    if a.n == 0:
        return to_kind(np.zeros(bins, np.uint32), a, U)
    return _counts(r, functools.partial(edges_program, a.dtype), [_src(a), e.data], a.n, bins, a)


__all__ = ["bincount", "bincount_program", "edges_program", "histogram"]
