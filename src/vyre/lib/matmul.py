"""Integer matrix multiply: ``matmul(a, b)``, exact and wrapping mod 2**32 (S37), on every
backend; on CUDA sm_80+ it runs on the tensor cores (IMMA).

Owns the tiled Program: one workgroup per BM x BN tile of the output. For each BK-wide slice
of k it copies the A tile and the transposed B tile into workgroup arrays (elements past the
matrix edges as zeros, so every shape is exact) and runs `Node.matmul_acc` on them, which
accumulates into the workgroup's i32/u32 output tile; the tile is written out at the end.
8-bit matrices whose k and n are multiples of 4 are read as 32-bit words (four elements a
load). The tile sizes are CUDA's (`CUDA_BYTES`, `CUDA_WORDS`) or, elsewhere, small (32 x 32 x
32) so the workgroup arrays fit every device. Neither changes a bit of the result.

On CUDA the k loop's matmul_acc keeps its accumulators in registers for the whole loop
(`vyre.drivers.cuda.imma.resident`: nothing else in the loop touches ``wd``), so ``wd`` is read
on the first slice and written on the last, not around every slice; that makes a larger output
tile pay. The byte tile is 128 x 64 x 80 with 256 threads (8 warps of 32 x 32): ``wd`` still
takes 32 KiB of the 48 KiB of static workgroup memory, and k is an odd multiple of 16 bytes,
so that the 8 rows of an ldmatrix fall on 8 different runs of 4 banks. Words: 64 x 64 x 64 with
128 threads (256 was slower). The byte copies are unrolled: a thread's word loads of a slice
are in flight together. What bounds the byte kernel now is those copies (scalar loads, byte
stores, the transposed B), not workgroup-memory traffic of the accumulators. The earlier tiles
stay named (`CUDA_BYTES_240`, `CUDA_BYTES_160`, `CUDA_WORDS_32`); benchmarks/cuda_imma.py
times them side by side.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.driver.inputs import array_library
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from .arrays import Arr, device_like, to_kind
from .errors import LibError
from .kernels import LID, WGID
from .runner import Runner, params

U, I = DataType.U32, DataType.I32
BYTES = (DataType.I8, DataType.U8)
WORDS = (DataType.U32, DataType.I32)
_NP = {np.dtype(np.int8): DataType.I8, np.dtype(np.uint8): DataType.U8,
       np.dtype(np.int32): DataType.I32, np.dtype(np.uint32): DataType.U32}
# the shape, read once into locals (`program`): M, N, K and the number of tiles along N
M_, N_, K_, TILES_N = (Expr.var(v) for v in ("pm", "pn", "pk", "ptn"))


@dataclass(frozen=True)
class Tiles:
    """One workgroup's output tile (bm x bn), the k slice (bk) and the workgroup size.
    ``unrolled``: the copies into workgroup memory are unrolled, every global load of a
    thread before its first workgroup-memory store (all in flight together; more registers):
    always for packed 8-bit tiles, and for the others where a thread copies at most
    `BATCH_MAX` elements of each tile. Else loops of one slot (an element; a row block of A, a
    4 x 4 block of B when packed) at a time. ``prefetch`` (unrolled copies only): the loads of
    slice k+1 are issued right after the stores of slice k, before its matmul_acc, into
    locals that live across it (in flight while the tensor cores run; more registers)."""

    bm: int
    bn: int
    bk: int
    threads: int
    unrolled: bool = True
    prefetch: bool = False


CUDA_BYTES = Tiles(128, 64, 80, 256)
CUDA_WORDS = Tiles(64, 64, 64, 128)
# the byte tile before CUDA_BYTES (when the accumulators were in workgroup memory), and the
# tiles before those
CUDA_BYTES_240 = Tiles(64, 64, 240, 128)
CUDA_BYTES_160 = Tiles(64, 64, 160, 128, unrolled=False)
CUDA_WORDS_32 = Tiles(64, 64, 32, 128, unrolled=False)
# no tile is larger than this in any dimension (the u32 index limit of `matmul` allows for it)
LARGEST = Tiles(128, 128, 240, 256)


def tiles(backend_id: str, words: bool) -> Tiles:
    """The tiles `matmul` uses on a backend, for 32-bit (``words``) or 8-bit matrices."""
    if backend_id == "cuda":
        return CUDA_WORDS if words else CUDA_BYTES
    return Tiles(32, 32, 32, 64, unrolled=False)   # (scalar matmul_acc: the copies are not what bounds it)


def _copy(count: int, threads: int, tag: str, body) -> Node:
    """``body(e)`` for this invocation's slots ``e = lid + q * threads`` below ``count``."""
    e = Expr.var(f"{tag}e")
    return Node.loop(f"{tag}q", Expr.u32(0), Expr.u32(-(-count // threads)), [
        Node.let_bind(f"{tag}e", Expr.var(f"{tag}q") * threads + LID),
        Node.if_(e.lt(Expr.u32(count)), body(e))])


# at most this many elements of an unpacked tile per thread are copied unrolled (`_copy_batch`)
BATCH_MAX = 32


def _copy_batch(count: int, threads: int, tag: str, value, put) -> tuple[list[Node], list[Node]]:
    """`_copy` unrolled: (``let <tag>v<q> = value(e)`` for this invocation's every slot
    ``e = lid + q * threads``, then ``put(e, <tag>v<q>)`` where ``e < count``), so that all the
    loads are in flight before the first store."""
    loads: list[Node] = []
    stores: list[Node] = []
    for q in range(-(-count // threads)):
        e = LID + q * threads if q else LID
        loads.append(Node.let_bind(f"{tag}v{q}", value(e)))
        put_q = put(e, Expr.var(f"{tag}v{q}"))
        stores.append(put_q if (q + 1) * threads <= count else Node.if_(e.lt(Expr.u32(count)), [put_q]))
    return loads, stores


def _byte(word: Expr, j: int, t: DataType) -> Expr:
    """Byte ``j`` of a u32 word as a value storable into a ``t`` array (low bits kept)."""
    v = word >> (8 * j) if j else word
    return Expr.bitcast(I, v) if t is DataType.I8 else v


@functools.cache
def program(ta: DataType, tb: DataType, packed: bool, t: Tiles) -> Program:
    """The tiled matmul of an ``ta`` (M x K, row-major) and a ``tb`` (K x N) matrix.
    ``packed``: 8-bit matrices are read as 32-bit words (K and N multiples of 4). Shapes come
    from ``prm = [M, N, K, tiles along N]``."""
    td = I if ta in BYTES else ta
    bm, bn, bk, T = t.bm, t.bn, t.bk, t.threads
    row0, col0, k0 = Expr.var("row0"), Expr.var("col0"), Expr.var("k0")
    src_a = I if packed else ta
    src_b = I if packed else tb

    def value_a(e: Expr) -> Expr:
        """Unpacked: element e of the A tile (row e / bk, column e % bk), 0 past the edges."""
        r, c = e / bk, e % bk
        ok = (row0 + r).lt(M_).and_((k0 + c).lt(K_))
        return Expr.select(ok, Expr.load("a", (row0 + r) * K_ + k0 + c), Expr.lit(ta.value_type, 0))

    def load_a(e: Expr) -> list[Node]:
        if not packed:
            return [Node.store("wa", e, value_a(e))]
        per = bk // 4
        r, c = e / per, (e % per) * 4
        ok = (k0 + c).lt(K_)      # rows past M are past the end of `a`: they read 0 (S6)
        word = Expr.select(ok, Expr.bitcast(U, Expr.load("a", ((row0 + r) * K_ + k0 + c) >> 2)), Expr.u32(0))
        return [Node.let_bind("aw", word),
                *(Node.store("wa", r * bk + c + j, _byte(Expr.var("aw"), j, ta)) for j in range(4))]

    # packed A with the slot pattern periodic in the thread's iterations: each thread's rows
    # and word columns are computed once (before the k loop), not per word
    nk = bk // 4
    lcm = T * nk // math.gcd(T, nk)
    period, rows = lcm // T, lcm // nk
    hoist_a = packed and bm % rows == 0

    def a_bases() -> list[Node]:
        out: list[Node] = []
        for j in range(period):
            e = LID + j * T
            out += [Node.let_bind(f"aoff{j}", (row0 + e / nk) * (K_ >> 2) + e % nk),
                    Node.let_bind(f"asm{j}", (e / nk) * bk + (e % nk) * 4),
                    Node.let_bind(f"ac4{j}", (e % nk) * 4)]
        return out

    def a_block(q: Expr | int, sfx: str) -> tuple[list[Node], list[Node]]:
        """(loads, stores) of the packed A words of row block ``q`` (rows q*rows ..)."""
        first = isinstance(q, int) and q == 0
        src = (k0 >> 2) if first else (k0 >> 2) + (K_ >> 2) * (q * rows)
        loads: list[Node] = [Node.let_bind(f"ao{sfx}", src)]
        stores: list[Node] = []
        for j in range(period):
            ok = (k0 + Expr.var(f"ac4{j}")).lt(K_)   # rows past M read 0 (S6)
            word = Expr.bitcast(U, Expr.load("a", Expr.var(f"aoff{j}") + Expr.var(f"ao{sfx}")))
            loads.append(Node.let_bind(f"aw{sfx}_{j}", Expr.select(ok, word, Expr.u32(0))))
            to = Expr.var(f"asm{j}") if first else Expr.var(f"asm{j}") + q * (rows * bk)
            stores += [Node.store("wa", to + i, _byte(Expr.var(f"aw{sfx}_{j}"), i, ta)) for i in range(4)]
        return loads, stores

    def copy_a_hoisted() -> tuple[list[Node], list[Node]]:
        """The packed A copy: unrolled (every word load of the thread, then their stores) or a
        loop over the row blocks."""
        if not t.unrolled:
            got, put = a_block(Expr.var("aq"), "")
            return [], [Node.loop("aq", Expr.u32(0), Expr.u32(bm // rows), got + put)]
        blocks = [a_block(q, str(q)) for q in range(bm // rows)]
        return [n for got, _ in blocks for n in got], [n for _, put in blocks for n in put]

    def value_b(e: Expr) -> Expr:
        # B is K x N and wb its transpose (N x K). Unpacked, element by element, consecutive
        # slots walk k: the workgroup-memory writes of a warp hit distinct banks (walking n,
        # each of them would hit one bank), and the tile's rows stay in L1 for the reads.
        # Slot e is wb[e]: column (n) e / bk, row (k) e % bk of the B tile.
        kk, nn = e % bk, e / bk
        ok = (k0 + kk).lt(K_).and_((col0 + nn).lt(N_))
        return Expr.select(ok, Expr.load("b", (k0 + kk) * N_ + col0 + nn), Expr.lit(tb.value_type, 0))

    def load_b(e: Expr) -> list[Node]:
        return [Node.store("wb", e, value_b(e))]

    def copy_b_slot(e: Expr, sfx: str) -> tuple[list[Node], list[Node]]:
        # packed: a 4 x 4 block of bytes (k rows 4kq.., n columns 4nq..) per slot: four word
        # reads (a warp reads 8 consecutive words of 4 rows), written as four runs of 4 bytes,
        # one per column j of the block (byte j of each row word, row i at k offset i). Step
        # s writes column j = (s + nq / 2) & 3, a shift by 8j of the row words: a warp's 8 nq
        # then write 8 different (nq & 1, j) pairs, and with bk = 240 (60 words) these are 8
        # disjoint runs of 4 banks (16 (nq & 1) + 28 j), each taking the warp's 4 kq: no bank
        # is hit twice. (The `% (bn // 32)` changes nothing below per_b, and bounds nq where
        # the printer can see it: the stores need no range check, and the compiler joins each
        # run of 4 byte stores into one 4-byte store.) Returns (the loads, the stores).
        nk = bk // 4
        nq = (e % 8) + ((e / 8 / nk) % max(bn // 32, 1)) * 8
        kq = (e / 8) % nk
        index: list[Node] = [Node.let_bind(f"bkq{sfx}", kq * 4), Node.let_bind(f"bnq{sfx}", nq * 4),
                             Node.let_bind(f"bnh{sfx}", nq >> 1)]
        loads: list[Node] = []
        k4, n4 = Expr.var(f"bkq{sfx}"), Expr.var(f"bnq{sfx}")
        ok_n = (col0 + n4).lt(N_)
        for i in range(4):   # k rows past K are past the end of `b`: they read 0 (S6)
            word = Expr.bitcast(U, Expr.load("b", ((k0 + k4 + i) * N_ + col0 + n4) >> 2))
            loads.append(Node.let_bind(f"bw{sfx}_{i}", Expr.select(ok_n, word, Expr.u32(0))))
        stores: list[Node] = []
        for step in range(4):
            stores.append(Node.let_bind(f"bj{sfx}_{step}", (Expr.var(f"bnh{sfx}") + step) & 3))
            jj = Expr.var(f"bj{sfx}_{step}")
            stores.append(Node.let_bind(f"bb{sfx}_{step}", (n4 + jj) * bk + k4))
            for i in range(4):
                v = Expr.var(f"bw{sfx}_{i}") >> (jj * 8)
                stores.append(Node.store("wb", Expr.var(f"bb{sfx}_{step}") + i,
                                         Expr.bitcast(I, v) if tb is DataType.I8 else v))
        return index, loads, stores

    def copy_b_packed() -> tuple[list[Node], list[Node], list[Node]]:
        """The packed B copy: unrolled (the slots' indices, which k does not change; every
        slot's word loads; then their stores: the slots past per_b load what they load and
        store nothing) or a loop over the slots."""
        if not t.unrolled:
            return [], [], [_copy(per_b, T, "b", lambda e: [n for part in copy_b_slot(e, "") for n in part])]
        index: list[Node] = []
        loads: list[Node] = []
        stores: list[Node] = []
        for q in range(-(-per_b // T)):
            e = LID + q * T if q else LID
            at, got, put = copy_b_slot(e, str(q))
            index += at
            loads += got
            stores += put if (q + 1) * T <= per_b else [Node.if_(e.lt(Expr.u32(per_b)), put)]
        return index, loads, stores

    def store_out(e: Expr) -> list[Node]:
        r, c = e / bn, e % bn
        return [Node.if_((row0 + r).lt(M_).and_((col0 + c).lt(N_)),
                         [Node.store("out", (row0 + r) * N_ + col0 + c, Expr.load("wd", e))])]

    per_a = bm * bk // 4 if packed else bm * bk
    per_b = bk * bn // 16 if packed else bk * bn
    # the copies of a k slice: packed, every global load of the thread comes before the first
    # workgroup-memory store (they are all in flight together, not one slot at a time)
    batch = t.unrolled and -(-max(per_a, per_b) // T) <= BATCH_MAX
    if hoist_a:
        a_loads, a_stores = copy_a_hoisted()
    elif not packed and batch:
        a_loads, a_stores = _copy_batch(per_a, T, "a", value_a, lambda e, v: Node.store("wa", e, v))
    else:
        a_loads, a_stores = [], [_copy(per_a, T, "a", load_a)]
    b_index: list[Node] = []
    if packed:
        b_index, b_loads, b_stores = copy_b_packed()
    elif batch:
        b_loads, b_stores = _copy_batch(per_b, T, "b", value_b, lambda e, v: Node.store("wb", e, v))
    else:
        b_loads, b_stores = [], [_copy(per_b, T, "b", load_b)]
    slices = (K_ + (bk - 1)) / bk
    mma = Node.matmul_acc("wd", "wa", "wb", bm, bn, bk)
    if t.prefetch and t.unrolled and a_loads and b_loads:
        # the loads (lets) of slice 0 before the loop; in the loop, the stores of slice kt,
        # then the loads of slice kt + 1 as assignments, in flight during matmul_acc (the
        # last iteration's loads are past K: they read 0, S6, and are never stored)
        loads = a_loads + b_loads
        k_loop = [Node.let_bind("k0", Expr.u32(0)), *b_index, *loads,
                  Node.loop("kt", Expr.u32(0), slices, [
                      *a_stores, *b_stores, Node.assign("k0", k0 + bk),
                      *(Node.assign(n.name, n.value) for n in loads), mma])]
    else:
        k_loop = [*b_index, Node.loop("kt", Expr.u32(0), slices, [
            Node.let_bind("k0", Expr.var("kt") * bk), *a_loads, *b_loads, *a_stores, *b_stores, mma])]
    body = [
        *(Node.let_bind(v, Expr.load("prm", Expr.u32(i))) for i, v in enumerate(("pm", "pn", "pk", "ptn"))),
        Node.let_bind("row0", (WGID / TILES_N) * bm),
        Node.let_bind("col0", (WGID % TILES_N) * bn),
        *(a_bases() if hoist_a else []),
        *k_loop,
        _copy(bm * bn, T, "o", store_out),
    ]
    bufs = [BufferDecl.read("a", 0, src_a), BufferDecl.read("b", 1, src_b),
            BufferDecl.read("prm", 2, U, 4), BufferDecl.output("out", 3, td),
            BufferDecl.workgroup("wa", bm * bk, ta), BufferDecl.workgroup("wb", bn * bk, tb),
            BufferDecl.workgroup("wd", bm * bn, td)]
    return Program.wrapped(bufs, T, body)


@dataclass
class _Matrix:
    kind: str          # "numpy", "cupy", "torch"
    dtype: DataType
    shape: tuple[int, int]
    data: Any          # contiguous: a host numpy array or the caller's device array
    on_device: bool
    original: Any

    def flat(self, packed: bool) -> Any:
        """The elements in row order (``packed``: as int32 words of four bytes)."""
        x = self.data
        if self.kind == "numpy":
            x = np.ascontiguousarray(x).astype(x.dtype.newbyteorder("<"), copy=False)
        x = x.reshape(-1)
        if not packed:
            return x
        if self.kind == "torch" and self.on_device:
            import torch

            return x.view(torch.int32)
        return x.view("int32")   # numpy, or CuPy


def _matrix(x: Any, name: str) -> _Matrix:
    mod = array_library(x)
    if mod == "torch":
        import torch

        names = {torch.int8: DataType.I8, torch.uint8: DataType.U8, torch.int32: DataType.I32,
                 getattr(torch, "uint32", None): DataType.U32}
        dt = names.get(x.dtype)
        shape = tuple(x.shape)
        host = None if x.is_cuda else x.detach().cpu().contiguous().numpy()
        data = x.contiguous() if x.is_cuda else host
        kind, on_device = "torch", bool(x.is_cuda)
    elif mod == "cupy":
        import cupy

        dt, shape = _NP.get(np.dtype(x.dtype)), tuple(x.shape)
        data, kind, on_device = cupy.ascontiguousarray(x), "cupy", True
    elif isinstance(x, np.ndarray):
        dt, shape = _NP.get(x.dtype.newbyteorder("=")), x.shape
        data, kind, on_device = x, "numpy", False   # made contiguous when read (`flat`)
    else:
        raise LibError("L001", f"{name} is a {type(x).__name__}, not an array.",
                       "pass a 2-D numpy, CuPy or torch array.")
    if dt is None:
        raise LibError("L001", f"vyre.lib.matmul does not take {name} of {x.dtype}.",
                       "pass int8/uint8 matrices (an int32 result) or uint32/int32 matrices "
                       "(a result of their type, wrapping mod 2**32).")
    if len(shape) != 2:
        raise LibError("L002", f"{name} has shape {shape}; vyre.lib.matmul takes 2-D matrices.",
                       "pass a matrix (a.reshape(rows, cols)).")
    return _Matrix(kind, dt, (int(shape[0]), int(shape[1])), data, on_device, x)


def matmul(a: Any, b: Any, *, backend: Any = None, tensor_cores: bool | None = None) -> Any:
    """``a @ b`` of integer matrices, exact mod 2**32 (S37): int8/uint8 (any mix) give int32;
    uint32 x uint32 gives uint32 and int32 x int32 int32. numpy, CuPy or torch in, the same
    kind out (device arrays stay on the device on CUDA). On CUDA sm_80+ it runs on the tensor
    cores (IMMA; u32/i32 through byte planes); elsewhere on scalar loops, with the same bytes.
    ``tensor_cores=True`` refuses a backend that would not use them; ``False`` is not a
    request for scalar loops (set VYRE_CUDA_TENSOR_CORES=0 for that)."""
    x, y = _matrix(a, "a"), _matrix(b, "b")
    (m, k), (k2, n) = x.shape, y.shape
    if k != k2:
        raise LibError("L002", f"vyre.lib.matmul: a is {m}x{k} and b is {k2}x{n}.",
                       "pass b with as many rows as a has columns.")
    words = x.dtype in WORDS
    if (x.dtype in WORDS) != (y.dtype in WORDS) or (words and x.dtype is not y.dtype):
        raise LibError("L001", f"vyre.lib.matmul of {x.dtype.value} and {y.dtype.value}.",
                       "pass two 8-bit matrices (int8/uint8, any mix) or two matrices of one "
                       "32-bit type (cast one: the bits mod 2**32 are the same).")
    # element indices are u32, also those of the tiles hanging past the edges (`LARGEST`)
    big = LARGEST   # (a prefetching tile reads up to 2 bk past k)
    if max((m + big.bm + 1) * (k + 2 * big.bk), (k + 2 * big.bk) * (n + big.bn), m * n) >= 2**32:
        raise LibError("L004", f"vyre.lib.matmul of {m}x{k} by {k}x{n}: a matrix has 2**32 elements "
                       "or nearly.", "split the product into blocks of fewer than 2**31 elements each.")
    r = Runner(backend, None)
    if tensor_cores and not r.backend.supports_tensor_cores():
        from vyre.driver.errors import UnsupportedFeature

        raise UnsupportedFeature("tensor cores (IMMA)", r.id, "run on a CUDA GPU of compute capability "
                                 "8.0 or newer (with VYRE_CUDA_TENSOR_CORES unset), or drop "
                                 "tensor_cores=True to run the same product on scalar loops.")
    td = I if not words else x.dtype
    like = Arr(x.kind, td, m * n, None, x.on_device, x.original)
    if 0 in (m, n, k):
        return _shaped(to_kind(np.zeros(m * n, td.host), like, td), (m, n))
    t = tiles(r.id, words)
    packed = not words and k % 4 == 0 and n % 4 == 0
    prog = program(x.dtype, y.dtype, packed, t)
    tiles_n = -(-n // t.bn)
    groups = -(-m // t.bm) * tiles_n
    device = r.device and (x.on_device or y.on_device)
    ins = [_source(x, packed, device), _source(y, packed, device), params(m, n, k, tiles_n)]
    out = r.run(prog, ins, groups, m * n, keep=device)[0]
    if isinstance(out, np.ndarray):
        return _shaped(to_kind(out[:m * n].view(td.host).copy(), like, td), (m, n))
    return _shaped(device_like(out, like, td)[:m * n], (m, n))


def _source(x: _Matrix, packed: bool, device: bool) -> Any:
    """What the dispatch reads: the matrix in row order (on the device where the backend
    reads device arrays, else a host copy)."""
    if x.on_device and not device:
        host = x.original.detach().cpu().numpy() if x.kind == "torch" else x.original.get()
        return _matrix(np.ascontiguousarray(host), "a").flat(packed)
    return x.flat(packed)


def _shaped(v: Any, shape: tuple[int, int]) -> Any:
    return v.reshape(shape)


__all__ = ["CUDA_BYTES", "CUDA_BYTES_160", "CUDA_BYTES_240", "CUDA_WORDS", "CUDA_WORDS_32", "Tiles", "matmul", "program", "tiles"]
