"""Stream compaction and what is built on it: ``select`` (stable), ``partition`` (stable),
``unique``, ``run_length_encode`` and ``top_k``.

Compaction is flags, an exclusive scan of the flags (`vyre.lib.scan`) and one scatter pass:
element ``i`` with a flag goes to ``pos[i]``; ``partition`` sends the others after the
``count`` selected ones, to ``count + i - pos[i]``. Both keep the input order. Run starts
(``i == 0`` or ``x[i] != x[i-1]``, comparing bits) give ``unique`` (of the sorted input) and
``run_length_encode``; ``top_k`` is a descending stable radix sort (`vyre.lib.radix`), so ties
go to the lowest index.

Float ``unique`` (f32, f16, bf16) follows numpy's ``np.unique`` (``equal_nan=True``): one pass
(`unique_key_program`) gives every element a u32 key whose order is the numeric order, with
-0 and +0 one key and every NaN one key after +inf, and its bits with a NaN made the
canonical NaN; a stable key-value sort, run starts of the keys and a compaction of the bits
follow. So the zeros give the first zero of the input (as numpy's hash-based unique), every
NaN gives one canonical NaN at the end, and no float arithmetic runs: subnormals are kept, bit
for bit, as distinct values (S9 flushes only what arithmetic touches).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from .arrays import Arr, as_arr, host_dtype, require, result
from .errors import LibError
from .halfkeys import HALF_KEYS
from .kernels import GID, N, element, prm, storage
from .radix import KEY_TYPES, _sort, key_result, sort_keys
from .runner import Runner, params
from .scan import _int_scan
from .scatter import gather_program

U = DataType.U32
ELEMENT_TYPES = (DataType.U32, DataType.I32, DataType.U64, DataType.I64, DataType.F32)
# what select, partition and run_length_encode move (16-bit floats as their bits: packed words
# in, one u32 word each out)
MOVE_TYPES = ELEMENT_TYPES + (DataType.F16, DataType.BF16)
INT_UNIQUE = (DataType.U32, DataType.I32, DataType.U64, DataType.I64)
# float unique: (sign bit, bits of +inf, canonical NaN: S9 for f32, S27 for f16 and bf16);
# the table the key pass reads, complete over `FLOAT_UNIQUE`
_FLOAT_BITS = {DataType.F32: (0x80000000, 0x7F800000, 0x7FC00000),
               DataType.F16: (0x8000, 0x7C00, 0x7E00),
               DataType.BF16: (0x8000, 0x7F80, 0x7FC0)}
FLOAT_UNIQUE = tuple(_FLOAT_BITS)
NAN_KEY = 0xFFFFFFFF    # every NaN's key: after +inf's (the largest key of a number)


@functools.cache
def compact_program(dtype: DataType | None, wg: int, partition: bool) -> Program:
    """``out[pos[i]] = x[i]`` where ``flags[i]`` (``dtype`` None: the index ``i`` itself);
    ``partition``: the others to ``count + i - pos[i]`` (count = prm[1])."""
    i = GID
    value = element("x", dtype, i) if dtype is not None else i
    dst = Expr.select(Expr.load("flags", i).ne(Expr.u32(0)), Expr.load("pos", i),
                      Expr.load("prm", 1) + i - Expr.load("pos", i))
    store = Node.store("out", dst, value) if partition else \
        Node.if_(Expr.load("flags", i).ne(Expr.u32(0)), [Node.store("out", Expr.load("pos", i), value)])
    bufs = [BufferDecl.read("x", 0, storage(dtype))] if dtype is not None else []
    nb = len(bufs)
    bufs += [BufferDecl.read("flags", nb, U), BufferDecl.read("pos", nb + 1, U), prm(nb + 2),
             BufferDecl.output("out", nb + 3, storage(dtype) if dtype is not None else U)]
    return Program.wrapped(bufs, wg, [Node.if_(i.lt(N), [store])])


@functools.cache
def run_starts_program(dtype: DataType, wg: int) -> Program:
    """``flags[i] = 1`` where a run of equal elements (equal bits) starts."""
    i = GID
    cur, prev = element("x", dtype, i), element("x", dtype, i - 1)
    if dtype is DataType.F32:
        cur, prev = Expr.bitcast(U, cur), Expr.bitcast(U, prev)
    start = i.eq(Expr.u32(0)).or_(cur.ne(prev))
    return Program.wrapped([BufferDecl.read("x", 0, storage(dtype)), prm(1), BufferDecl.output("flags", 2, U)], wg,
                           [Node.if_(i.lt(N), [Node.store("flags", i, Expr.select(start, Expr.u32(1), Expr.u32(0)))])])


@functools.cache
def lengths_program(wg: int) -> Program:
    """``lengths[j] = starts[j+1] - starts[j]`` (the last run ends at ``prm[1]``)."""
    j = GID
    end = Expr.select((j + 1).lt(N), Expr.load("starts", j + 1), Expr.load("prm", 1))
    return Program.wrapped([BufferDecl.read("starts", 0, U), prm(1), BufferDecl.output("lengths", 2, U)], wg,
                           [Node.if_(j.lt(N), [Node.store("lengths", j, end - Expr.load("starts", j))])])


@functools.cache
def unique_key_program(dtype: DataType, wg: int) -> Program:
    """``keys[i]``: the u32 whose order is the numeric order of float ``x[i]`` (negative: its
    bits inverted; positive: the sign bit set; both zeros +0's key; every NaN `NAN_KEY`);
    ``bits[i]``: its bits (the canonical NaN for a NaN; 16-bit floats one per u32 word)."""
    sign, inf, nan = _FLOAT_BITS[dtype]
    i = GID
    b = Expr.var("b")
    mag = b & (sign - 1)
    key = Expr.select(mag.gt(inf), Expr.u32(NAN_KEY),
                      Expr.select(mag.eq(Expr.u32(0)), Expr.u32(sign),
                                  Expr.select((b & sign).ne(Expr.u32(0)), ~b & (2 * sign - 1), b | sign)))
    bits = Expr.select(mag.gt(inf), Expr.u32(nan), b)
    read = Expr.bitcast(U, Expr.load("x", i)) if dtype is DataType.F32 else element("x", dtype, i)
    out_t = DataType.F32 if dtype is DataType.F32 else U
    store_bits = Expr.bitcast(DataType.F32, bits) if dtype is DataType.F32 else bits
    return Program.wrapped([BufferDecl.read("x", 0, storage(dtype)), prm(1), BufferDecl.output("keys", 2, U),
                            BufferDecl.output("bits", 3, out_t)], wg,
                           [Node.if_(i.lt(N), [Node.let_bind("b", read), Node.store("keys", i, key),
                                               Node.store("bits", i, store_bits)])])


def _flags_of(mask: Any, n: int) -> Arr:
    m = mask
    if isinstance(m, np.ndarray) and m.dtype in (np.bool_, np.uint8, np.int8):
        m = m.astype(np.uint32)
    a = as_arr(m, "mask")
    require(a, (DataType.U32, DataType.I32), "a mask (bool, or u32/i32 words: non-zero selects)")
    if a.n != n:
        raise LibError("L002", f"the mask has {a.n} elements for {n} values.", "pass one flag per element.")
    return a


def _compact(r: Runner, x: Any, dtype: DataType | None, flags: Any, n: int, partition: bool,
             keep: bool) -> tuple[Any, int]:
    pos = _int_scan(r, flags, n, U, False, True)
    count = r.read_u32(pos, n - 1) + r.read_u32(flags, n - 1)
    ins = ([x] if dtype is not None else []) + [flags, pos, params(n, count)]
    out = r.run(compact_program(dtype, r.wg, partition), ins, -(-n // r.wg), max(1, n if partition else count),
                keep=keep)[0]
    return out, count


def select(x: Any, mask: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """``x[mask]``: the elements whose flag is set, in order (stable compaction)."""
    a = as_arr(x, "x")
    require(a, MOVE_TYPES, "vyre.lib.select")
    f = _flags_of(mask, a.n)
    if a.n == 0:
        return result(np.zeros(0, host_dtype(a.dtype)), a, a.dtype, 0)
    r = Runner(backend, workgroup_size)
    out, count = _compact(r, a.source(), a.dtype, f.data, a.n, False, a.on_device)
    return result(out, a, a.dtype, count)


def partition(x: Any, mask: Any, *, backend: Any = None, workgroup_size: int | None = None) -> tuple[Any, int]:
    """``(concatenate([x[mask], x[~mask]]), count)``: both parts in their input order."""
    a = as_arr(x, "x")
    require(a, MOVE_TYPES, "vyre.lib.partition")
    f = _flags_of(mask, a.n)
    if a.n == 0:
        return result(np.zeros(0, host_dtype(a.dtype)), a, a.dtype, 0), 0
    r = Runner(backend, workgroup_size)
    out, count = _compact(r, a.source(), a.dtype, f.data, a.n, True, a.on_device)
    return result(out, a, a.dtype, a.n), count


def _runs(r: Runner, x: Any, dtype: DataType, n: int) -> tuple[Any, int]:
    """The start index of every run of equal elements (u32), and the run count."""
    flags = r.run(run_starts_program(dtype, r.wg), [x, params(n)], -(-n // r.wg), n)[0]
    return _compact(r, None, None, flags, n, False, True)


def unique(x: Any, *, backend: Any = None, workgroup_size: int | None = None) -> Any:
    """The distinct elements in ascending order (sorted with `vyre.lib.sort`). Floats as
    ``np.unique``: -0 and +0 are one value (the first zero of the input), every NaN is one
    canonical NaN at the end, subnormals are kept."""
    a = as_arr(x, "x")
    require(a, INT_UNIQUE + FLOAT_UNIQUE, "vyre.lib.unique")
    if a.n == 0:
        return result(np.zeros(0, host_dtype(a.dtype)), a, a.dtype, 0)
    r = Runner(backend, workgroup_size)
    if a.dtype in FLOAT_UNIQUE:
        return _float_unique(r, a)
    keys, _ = _sort(r, a.data, None, a.n, a.dtype, None, True)
    flags = r.run(run_starts_program(a.dtype, r.wg), [keys, params(a.n)], -(-a.n // r.wg), a.n)[0]
    out, count = _compact(r, keys, a.dtype, flags, a.n, False, a.on_device)
    return result(out, a, a.dtype, count)


def _float_unique(r: Runner, a: Arr) -> Any:
    n = a.n
    bits_t = DataType.F32 if a.dtype is DataType.F32 else U
    keys, bits = r.run(unique_key_program(a.dtype, r.wg), [a.source(), params(n)], -(-n // r.wg), n)
    keys, bits = _sort(r, keys, bits, n, U, bits_t, True)
    flags = r.run(run_starts_program(U, r.wg), [keys, params(n)], -(-n // r.wg), n)[0]
    out, count = _compact(r, bits, bits_t, flags, n, False, a.on_device)
    return result(out, a, a.dtype, count)


def run_length_encode(x: Any, *, backend: Any = None, workgroup_size: int | None = None) -> tuple[Any, Any]:
    """``(values, lengths)`` of the runs of equal consecutive elements (lengths u32)."""
    a = as_arr(x, "x")
    require(a, MOVE_TYPES, "vyre.lib.run_length_encode")
    if a.n == 0:
        return result(np.zeros(0, host_dtype(a.dtype)), a, a.dtype, 0), result(np.zeros(0, np.uint32), a, U, 0)
    r = Runner(backend, workgroup_size)
    starts, count = _runs(r, a.source(), a.dtype, a.n)
    g = -(-count // r.wg)
    values = r.run(gather_program(a.dtype, U, r.wg), [a.source(), starts, params(count, 0, 0, a.n)], g, count,
                   keep=a.on_device)[0]
    lengths = r.run(lengths_program(r.wg), [starts, params(count, a.n)], g, count, keep=a.on_device)[0]
    return result(values, a, a.dtype, count), result(lengths, a, U, count)


def top_k(x: Any, k: int, *, backend: Any = None, workgroup_size: int | None = None) -> tuple[Any, Any]:
    """``(values, indices)`` of the ``k`` largest elements, largest first; equal elements in
    index order (the lowest index first); f32 in IEEE totalOrder. Indices are u32."""
    a = as_arr(x, "x")
    require(a, KEY_TYPES + HALF_KEYS, "vyre.lib.top_k")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= int(k) <= a.n:
        raise LibError("L005", f"vyre.lib.top_k: k={k!r} is not in 0..{a.n}.", "pass 0 <= k <= len(x).")
    k = int(k)
    if k == 0:
        return result(np.zeros(0, host_dtype(a.dtype)), a, a.dtype, 0), result(np.zeros(0, np.uint32), a, U, 0)
    r = Runner(backend, workgroup_size)
    data, key_t = sort_keys(r, a)
    keys, idx = _sort(r, data, np.arange(a.n, dtype=np.uint32), a.n, key_t, U, a.on_device or key_t is not a.dtype,
                      descending=True)
    # the indices come back to the host with host keys (the pass kept them on the device for
    # 16-bit float keys' sake, `radix.sort`)
    return key_result(r, keys, a, k), result(idx if a.on_device else r.to_host(idx, U), a, U, k)


__all__ = ["FLOAT_UNIQUE", "MOVE_TYPES", "compact_program", "lengths_program", "partition", "run_length_encode", "run_starts_program", "select",
           "top_k", "unique", "unique_key_program"]
