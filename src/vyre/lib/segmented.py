"""Segmented reductions: ``segment_sum/min/max(x, offsets)`` over CSR offsets, and
``reduce_by_key(keys, values)`` over runs of equal consecutive keys.

Segment ``s`` is ``x[offsets[s]:offsets[s+1]]``; one invocation reduces one segment (simple
and exact; very uneven segments leave invocations idle). Sums follow `vyre.lib.reduce`:
integers wrap, floats are the exact sum rounded once (S34, a local superaccumulator
normalised every 2**14 elements). Min and max follow S10; an empty segment gives the
identity (0 for sums, the type's largest value or +inf for min, its smallest or -inf for
max). Offsets must be non-decreasing and within ``x`` (L004, checked on the device).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import AtomicOp, BinOp, BufferDecl, DataType, Expr, Node, Program
from vyre.ir import superacc as sa

from .arrays import NUMERIC, Arr, as_arr, device_like, require, result, to_kind
from .errors import LibError
from .kernels import GID, N, element, prm, storage
from .reduce import _half_bits, _half_key, _identity
from .runner import Runner, params

U = DataType.U32
CHUNK = sa.LOCAL_HEADROOM


@functools.cache
def segment_program(dtype: DataType, op: BinOp, wg: int) -> Program:
    """``out[s]`` = the reduction of segment ``s`` (``N`` segments; ``prm[1]`` elements)."""
    s = GID
    start, end = Expr.var("start"), Expr.var("end")
    check = [Node.let_bind("start", Expr.load("offsets", s)), Node.let_bind("end", Expr.load("offsets", s + 1)),
             Node.if_(start.gt(end).or_(end.gt(Expr.load("prm", 1))),
                      [Node.expr(Expr.atomic(AtomicOp.OR, "err", Expr.u32(0), Expr.u32(1))),
                       Node.assign("end", start)])]
    half = dtype.is_half
    if op is BinOp.ADD and dtype.is_float:
        fmt = sa.FORMATS[dtype]
        j = Expr.var("j")
        bits = Expr.bitcast(U, Expr.load("x", j)) if dtype is DataType.F32 else element("x", dtype, j)
        body = [*check, Node.let_bind("fl", Expr.u32(0)),
                Node.loop("c", Expr.u32(0), (end - start + (CHUNK - 1)) >> 14, [
                    Node.loop("j", start + Expr.var("c") * CHUNK, (start + Expr.var("c") * CHUNK + CHUNK).min(end), [
                        *sa.DECODE[dtype](bits, "a"),
                        *sa.add_local("acc", Expr.var("a_m"), Expr.u32(0), Expr.var("a_s"), Expr.var("a_neg"), "c", sa.SUM),
                        Node.assign("fl", Expr.var("fl") | Expr.var("a_flags"))]),
                    *sa.normalise("acc", sa.SUM.digits)]),
                *sa.normalise("acc", sa.SUM.digits, "f"),
                *sa.round_digits("acc", sa.SUM.digits, Expr.var("fl"), sa.SUM, fmt, "bits"),
                Node.store("out", s, Expr.bitcast(DataType.F32, Expr.var("bits")) if dtype is DataType.F32
                           else Expr.var("bits"))]
        extra = sa.local_decls("acc", sa.SUM)
        out_t = DataType.F32 if dtype is DataType.F32 else U
    else:
        acc_t = U if half else dtype
        ident = Expr.u32(0xFFFFFFFF if op is BinOp.MIN else 0) if half else _identity(dtype, op)
        val = element("x", dtype, Expr.var("j"))
        if half:
            val = _half_key(val, dtype, op)
        result = Expr.var("acc")
        if half:
            # an empty segment of 16-bit floats: the identity (+inf for min, -inf for max)
            inf = 0x7C00 if dtype is DataType.F16 else 0x7F80
            empty = Expr.u32(inf if op is BinOp.MIN else inf | 0x8000)
            result = Expr.select(end.eq(start), empty, _half_bits(result, dtype, op))
        body = [*check, Node.let_bind("acc", ident),
                Node.loop("j", start, end, [Node.assign("acc", Expr.bin(op, Expr.var("acc"), val))]),
                Node.store("out", s, result)]
        extra = []
        out_t = acc_t
    return Program.wrapped([BufferDecl.read("x", 0, storage(dtype)), BufferDecl.read("offsets", 1, U), prm(2),
                            BufferDecl.output("out", 3, out_t), BufferDecl.output("err", 4, U, 1), *extra], wg,
                           [Node.if_(s.lt(N), body)])


def _offsets(offsets: Any, n: int) -> Arr:
    o = as_arr(offsets, "offsets")
    require(o, (DataType.U32, DataType.I32, DataType.U64, DataType.I64), "offsets")
    if o.n < 1:
        raise LibError("L002", "offsets is empty.", "pass CSR offsets: len(segments) + 1 values, the first 0.")
    if not o.on_device and o.dtype is not U:
        x = o.data
        if x.min() < 0 or x.max() > n:
            raise LibError("L004", f"an offset is outside [0, {n}].", "pass offsets within the data.")
        o = Arr(o.kind, U, o.n, x.astype(np.uint32), False, o.original)
    require(o, (U,), "offsets on the device")
    return o


def _segment(x: Any, offsets: Any, op: BinOp, name: str, backend: Any, workgroup_size: int | None) -> Any:
    a = as_arr(x, "x")
    require(a, NUMERIC, f"vyre.lib.{name}")
    o = _offsets(offsets, a.n)
    S = o.n - 1
    if S == 0:
        return to_kind(np.zeros(0, a.dtype.storage if a.dtype.is_half else a.dtype.host), a, a.dtype)
    r = Runner(backend, workgroup_size)
    src = a.source()
    out, err = r.run(segment_program(a.dtype, op, r.wg), [src, o.data, params(S, a.n)], -(-S // r.wg), S,
                     keep=a.on_device)
    if r.read_u32(err, 0):
        raise LibError("L004", f"vyre.lib.{name}: the offsets decrease or pass the end of x ({a.n}).",
                       "pass non-decreasing CSR offsets within the data.")
    return result(out, a, a.dtype, S)


def segment_sum(x: Any, offsets: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """Per CSR segment ``x[offsets[s]:offsets[s+1]]``: its sum (floats exact, rounded once)."""
    return _segment(x, offsets, BinOp.ADD, "segment_sum", backend, workgroup_size)


def segment_min(x: Any, offsets: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """Per CSR segment: its smallest element (S10; an empty segment: the identity)."""
    return _segment(x, offsets, BinOp.MIN, "segment_min", backend, workgroup_size)


def segment_max(x: Any, offsets: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """Per CSR segment: its largest element (S10; an empty segment: the identity)."""
    return _segment(x, offsets, BinOp.MAX, "segment_max", backend, workgroup_size)


_OPS = {"sum": BinOp.ADD, "min": BinOp.MIN, "max": BinOp.MAX}


def reduce_by_key(keys: Any, values: Any, op: str = "sum", *, backend: Any = None,
                  workgroup_size: int | None = None) -> tuple[Any, Any]:
    """``(run_keys, reduced)``: one entry per run of equal consecutive keys, its values
    reduced with ``op`` ("sum", "min" or "max"; float sums exact)."""
    from .compaction import ELEMENT_TYPES, _runs

    if op not in _OPS:
        raise LibError("L005", f"vyre.lib.reduce_by_key: op={op!r}.", "pass op='sum', 'min' or 'max'.")
    k, v = as_arr(keys, "keys"), as_arr(values, "values")
    require(k, ELEMENT_TYPES, "vyre.lib.reduce_by_key's keys")
    require(v, NUMERIC, "vyre.lib.reduce_by_key's values")
    if k.n != v.n:
        raise LibError("L002", f"vyre.lib.reduce_by_key: {k.n} keys for {v.n} values.", "pass one key per value.")
    if k.n == 0:
        return (to_kind(np.zeros(0, k.dtype.host), k, k.dtype),
                to_kind(np.zeros(0, v.dtype.storage if v.dtype.is_half else v.dtype.host), v, v.dtype))
    r = Runner(backend, workgroup_size)
    starts, count = _runs(r, k.data, k.dtype, k.n)
    from .scatter import gather_program

    g = -(-count // r.wg)
    run_keys = r.run(gather_program(k.dtype, U, r.wg), [k.data, starts, params(count, 0, 0, k.n)], g, count,
                     keep=k.on_device)[0]
    offs = np.empty(count + 1, np.uint32)
    if isinstance(starts, np.ndarray):
        offs[:count] = starts[:count]
    else:   # device run starts: read back once (the segmented pass takes host offsets)
        offs[:count] = np.frombuffer(r.backend.dispatch(_copy_program(), [starts, params(count)],
                                                        _cfg(count))[0], np.uint32)[:count]
    offs[count] = k.n
    reduced = _segment(values, offs, _OPS[op], "reduce_by_key", backend=r.backend, workgroup_size=r.wg)
    if isinstance(run_keys, np.ndarray):
        return to_kind(run_keys[:count].copy(), k, k.dtype), reduced
    return device_like(run_keys, k, k.dtype)[:count], reduced


@functools.cache
def _copy_program() -> Program:
    i = GID
    return Program.wrapped([BufferDecl.read("x", 0, U), prm(1), BufferDecl.output("out", 2, U)], 64,
                           [Node.if_(i.lt(N), [Node.store("out", i, Expr.load("x", i))])])


def _cfg(count: int) -> Any:
    from vyre.driver import DispatchConfig

    return DispatchConfig(grid_override=(-(-count // 64), 1, 1), dispatch_elements=count)


__all__ = ["reduce_by_key", "segment_max", "segment_min", "segment_program", "segment_sum"]
