"""Stable LSD radix sort: ``sort(keys, values=None)`` and ``argsort(keys)``.

Keys: u32, i32, u64, i64 and f32 (IEEE totalOrder of the bits: -NaN < -inf < ... < -0 < +0
< ... < +inf < +NaN; sorting moves bits and does no arithmetic, so subnormals keep their
place and their bits). Each pass sorts by 4 bits of the order key (signed keys with the sign
bit flipped; negative floats with every bit flipped) in three steps, none waiting on another
workgroup: per-block digit counts (digit-major, so one exclusive scan gives every block's
offset for every digit), that scan (`vyre.lib.scan`), and a scatter where each invocation
places its ``items`` consecutive elements after the earlier lanes' (a Hillis-Steele scan of
the 16 digit counts across the workgroup). Equal keys keep their order (stable).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

from .arrays import Arr, as_arr, require, result, to_kind
from .errors import LibError
from .kernels import EXTRA, LID, WGID, N, prm
from .runner import Runner, params
from .scan import _int_scan

U = DataType.U32
KEY_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64, DataType.F32)
VALUE_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64, DataType.F32)
RADIX_BITS = 4
BUCKETS = 1 << RADIX_BITS


def _digit(key_t: DataType, key: Expr, shift: Expr, descending: bool = False) -> Expr:
    """Bits ``shift..shift+3`` of the order key of ``key`` (u32); inverted for a descending
    sort (equal keys still keep their order)."""
    d = _order_digit(key_t, key, shift)
    return (Expr.u32(BUCKETS - 1) - d) if descending else d


def _order_digit(key_t: DataType, key: Expr, shift: Expr) -> Expr:
    if key_t is DataType.U32:
        k = key
    elif key_t is DataType.I32:
        k = Expr.bitcast(U, key) ^ 0x80000000
    elif key_t is DataType.F32:
        b = Expr.bitcast(U, key)
        k = b ^ Expr.select((b >> 31).eq(Expr.u32(1)), Expr.u32(0xFFFFFFFF), Expr.u32(0x80000000))
    else:
        w = key if key_t is DataType.U64 else Expr.bitcast(DataType.U64, key) ^ Expr.u64(1 << 63)
        return Expr.cast(U, w >> Expr.cast(DataType.U64, shift)) & (BUCKETS - 1)
    return (k >> shift) & (BUCKETS - 1)


def _counts_per_lane(key_t: DataType, items: int, first: Expr, descending: bool) -> list[Node]:
    e = Expr.var("e")
    return [Node.loop("j", Expr.u32(0), Expr.u32(items), [
        Node.let_bind("e", first + Expr.var("j")),
        Node.if_(e.lt(N), [Node.let_bind("d", _digit(key_t, Expr.load("keys", e), EXTRA, descending)),
                           Node.store("cnt", Expr.var("d"), Expr.load("cnt", Expr.var("d")) + 1)])])]


@functools.cache
def count_program(key_t: DataType, wg: int, items: int, descending: bool = False) -> Program:
    """``counts[d * G + b]`` = elements of block ``b`` whose digit is ``d`` (G = prm[1])."""
    first = WGID * (wg * items) + LID * items
    body = [*_counts_per_lane(key_t, items, first, descending)]
    body += [Node.if_(Expr.load("cnt", Expr.u32(d)).ne(Expr.u32(0)), [Node.expr(Expr.atomic(
        AtomicOp.ADD, "wc", Expr.u32(d), Expr.load("cnt", Expr.u32(d))))]) for d in range(BUCKETS)]
    body += [Node.barrier(), Node.if_(LID.lt(BUCKETS), [
        Node.store("counts", LID * Expr.load("prm", 1) + WGID, Expr.load("wc", LID))])]
    return Program.wrapped([BufferDecl.read("keys", 0, key_t), prm(1), BufferDecl.output("counts", 2, U),
                            BufferDecl.local("cnt", BUCKETS, U), BufferDecl.workgroup("wc", BUCKETS, U)], wg, body)


@functools.cache
def scatter_program(key_t: DataType, value_t: DataType | None, wg: int, items: int,
                    descending: bool = False) -> Program:
    """Each element to ``offs[digit * G + block]`` + its stable rank within the block."""
    first = WGID * (wg * items) + LID * items
    G = Expr.load("prm", 1)
    body = [*_counts_per_lane(key_t, items, first, descending)]
    body += [Node.store("sh", Expr.u32(d * wg) + LID, Expr.load("cnt", Expr.u32(d))) for d in range(BUCKETS)]
    body.append(Node.barrier())
    h = 1
    while h < wg:
        body += [Node.let_bind(f"v{h}_{d}", Expr.select(LID.ge(h), Expr.load("sh", Expr.u32(d * wg) + LID - h),
                                                        Expr.u32(0))) for d in range(BUCKETS)]
        body.append(Node.barrier())
        body += [Node.store("sh", Expr.u32(d * wg) + LID, Expr.load("sh", Expr.u32(d * wg) + LID) + Expr.var(f"v{h}_{d}"))
                 for d in range(BUCKETS)]
        body.append(Node.barrier())
        h *= 2
    body += [Node.store("base", Expr.u32(d), Expr.load("offs", G * d + WGID) + Expr.load("sh", Expr.u32(d * wg) + LID)
                        - Expr.load("cnt", Expr.u32(d))) for d in range(BUCKETS)]
    e = Expr.var("e")
    move = [Node.store("out_keys", Expr.var("pos"), Expr.load("keys", e))]
    if value_t is not None:
        move.append(Node.store("out_values", Expr.var("pos"), Expr.load("values", e)))
    body.append(Node.loop("j2", Expr.u32(0), Expr.u32(items), [
        Node.let_bind("e", first + Expr.var("j2")),
        Node.if_(e.lt(N), [Node.let_bind("d", _digit(key_t, Expr.load("keys", e), EXTRA, descending)),
                           Node.let_bind("pos", Expr.load("base", Expr.var("d"))),
                           *move,
                           Node.store("base", Expr.var("d"), Expr.var("pos") + 1)])]))
    bufs = [BufferDecl.read("keys", 0, key_t)]
    if value_t is not None:
        bufs.append(BufferDecl.read("values", 1, value_t))
    nb = len(bufs)
    bufs += [BufferDecl.read("offs", nb, U), prm(nb + 1), BufferDecl.output("out_keys", nb + 2, key_t)]
    if value_t is not None:
        bufs.append(BufferDecl.output("out_values", nb + 3, value_t))
    bufs += [BufferDecl.local("cnt", BUCKETS, U), BufferDecl.local("base", BUCKETS, U),
             BufferDecl.workgroup("sh", BUCKETS * wg, U)]
    return Program.wrapped(bufs, wg, body)


def _sort(r: Runner, keys: Any, values: Any, n: int, key_t: DataType, value_t: DataType | None,
          keep_last: bool, descending: bool = False) -> tuple[Any, Any]:
    wg = r.wg
    while BUCKETS * wg * 4 > 16384:   # the digit counts of a workgroup fit 16 KiB (wgpu)
        wg //= 2
    items = r.items
    g = -(-n // (wg * items))
    passes = key_t.bits // RADIX_BITS
    for p in range(passes):
        shift = p * RADIX_BITS
        prm_ = params(n, g, 0, shift)
        counts = r.run(count_program(key_t, wg, items, descending), [keys, prm_], g, BUCKETS * g)[0]
        offs = _int_scan(r, counts, BUCKETS * g, U, False, True)
        ins = [keys] + ([values] if value_t is not None else []) + [offs, prm_]
        last = p == passes - 1
        outs = r.run(scatter_program(key_t, value_t, wg, items, descending), ins, g, n, keep=keep_last or not last)
        keys = outs[0]
        values = outs[1] if value_t is not None else None
    return keys, values


def _data(a: Arr) -> Any:
    return a.data


def sort(keys: Any, values: Any = None, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The keys in ascending order (stable; f32 keys in IEEE totalOrder); with ``values``,
    ``(sorted_keys, values_in_that_order)``."""
    k = as_arr(keys, "keys")
    require(k, KEY_TYPES, "vyre.lib.sort")
    v = None
    if values is not None:
        v = as_arr(values, "values")
        require(v, VALUE_TYPES, "vyre.lib.sort's values")
        if v.n != k.n:
            raise LibError("L002", f"vyre.lib.sort: {k.n} keys but {v.n} values.", "pass one value per key.")
    if k.n == 0:
        empty = to_kind(np.zeros(0, k.dtype.host), k, k.dtype)
        return empty if v is None else (empty, to_kind(np.zeros(0, v.dtype.host), v, v.dtype))
    r = Runner(backend, workgroup_size)
    ks, vs = _sort(r, _data(k), _data(v) if v is not None else None, k.n, k.dtype,
                   v.dtype if v is not None else None, k.on_device)
    sk = result(ks, k, k.dtype, k.n)
    return sk if v is None else (sk, result(vs, v, v.dtype, k.n))


def argsort(keys: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The u32 indices that sort ``keys`` stably (f32 in IEEE totalOrder)."""
    k = as_arr(keys, "keys")
    require(k, KEY_TYPES, "vyre.lib.argsort")
    if k.n >= 2**32:
        raise LibError("L002", "vyre.lib.argsort: more than 2**32-1 keys.", "sort fewer keys per call.")
    if k.n == 0:
        return to_kind(np.zeros(0, np.uint32), k, U)
    idx: Any = np.arange(k.n, dtype=np.uint32)
    if k.on_device and k.kind == "cupy":
        import cupy

        idx = cupy.arange(k.n, dtype=cupy.uint32)
    r = Runner(backend, workgroup_size)
    _, vs = _sort(r, _data(k), idx, k.n, k.dtype, U, k.on_device)
    return result(vs, k, U, k.n)


__all__ = ["argsort", "count_program", "scatter_program", "sort"]
