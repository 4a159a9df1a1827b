"""Integer matrix multiply: ``matmul(a, b)``, exact and wrapping mod 2**32 (S37), on every
backend; on CUDA sm_80+ it runs on the tensor cores (IMMA).

Two passes, each one Program for every backend:

* `transpose_program`: ``bt`` (N x K) = ``b`` (K x N) transposed, so that the columns of b are
  rows, k contiguous, as matmul_acc (``d += a · btᵀ``) and the tensor cores read them. Each
  workgroup copies a TR x (TR + 16 bytes) tile of b with `Node.load_tile` (16 bytes more than
  it writes: whole 16-byte chunks, which CUDA copies asynchronously, and a row pitch that
  spreads a warp's column reads over 8 bank runs) and writes it out transposed, k
  consecutive across the invocations.
* `program`: one workgroup per BM x BN tile of the output. Its k loop is exactly two
  load_tile statements (a's BM x BK tile and bt's BN x BK tile, zero past the matrix edges,
  so every shape is exact) and one `Node.matmul_acc` into the workgroup's i32/u32 tile,
  which is written out at the end.

On CUDA that loop is what `vyre.drivers.cuda.tiles` runs as a pipeline: the tiles of the next
``stages - 1`` slices of k are copied by ``cp.async`` while the tensor cores work on this one,
and `vyre.drivers.cuda.imma` keeps the accumulators in registers for the whole loop. The byte
tile is 128 x 256 x 128 with 256 threads: eight warps of 64 x 64 outputs, ``wd`` 128 KiB and
two stages of 48 KiB in dynamic shared memory (benchmarks/cuda_imma.py times others beside it). Elsewhere the tiles are
small (32 x 32 x 32) so the workgroup arrays fit every device; load_tile is then a scalar
copy and matmul_acc scalar loops. Neither changes a bit of the result.
"""

from __future__ import annotations

import functools
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
    """One workgroup's output tile (bm x bn), the k slice (bk) and the workgroup size."""

    bm: int
    bn: int
    bk: int
    threads: int


CUDA_BYTES = Tiles(128, 256, 128, 256)
CUDA_WORDS = Tiles(64, 64, 32, 128)
SMALL = Tiles(32, 32, 32, 64)
# the transpose's tile (TR x TR outputs per workgroup) and workgroup size
TR, TR_THREADS = 64, 256
# no tile is larger than this in any dimension (the u32 index limit of `matmul` allows for it)
LARGEST = 256


# CUDA byte tiles for devices with less shared memory per block than CUDA_BYTES takes with
# two stages (an A100 opts in to 163 KiB), largest first
CUDA_BYTES_SMALLER = (Tiles(128, 128, 128, 256), Tiles(128, 128, 64, 256))
H100_SHARED = 227 * 1024


def two_stage_bytes(t: Tiles, words: bool) -> int:
    """Workgroup memory of the tiled product with two stages of its operand tiles."""
    size = 4 if words else 1
    return 4 * t.bm * t.bn + 2 * size * (t.bm + t.bn) * t.bk


def tiles(backend_id: str, words: bool, shared: int = H100_SHARED) -> Tiles:
    """The tiles `matmul` uses on a backend, for 32-bit (``words``) or 8-bit matrices;
    ``shared``: the workgroup memory a block may have there (CUDA: the largest byte tile
    that takes two pipeline stages within it)."""
    if backend_id != "cuda":
        return SMALL
    if words:
        return CUDA_WORDS
    return next((t for t in (CUDA_BYTES, *CUDA_BYTES_SMALLER) if two_stage_bytes(t, False) <= shared),
                CUDA_BYTES_SMALLER[-1])


def _loop(count: int, threads: int, tag: str, body) -> Node:
    """``body(e)`` for this invocation's slots ``e = lid + q * threads`` below ``count``."""
    e = Expr.var(f"{tag}e")
    return Node.loop(f"{tag}q", Expr.u32(0), Expr.u32(-(-count // threads)), [
        Node.let_bind(f"{tag}e", Expr.var(f"{tag}q") * threads + LID),
        Node.if_(e.lt(Expr.u32(count)), body(e))])


def _rows(rows: int, cols: int, threads: int, tag: str, body) -> list[Node]:
    """``body(r, c)`` for every element (r, c) of a rows x cols tile, by ``threads``
    invocations: consecutive invocations take consecutive columns (coalesced), each its own
    column ``c`` for every row it visits, so the column's tests and offsets are computed once.
    Needs ``threads`` a multiple of ``cols`` and ``rows`` a multiple of ``threads / cols``."""
    per = threads // cols   # rows one step covers
    c, r0 = Expr.var(f"{tag}c"), Expr.var(f"{tag}r0")
    return [Node.let_bind(f"{tag}c", LID % cols), Node.let_bind(f"{tag}r0", LID / cols),
            Node.loop(f"{tag}q", Expr.u32(0), Expr.u32(rows // per),
                      body(Expr.var(f"{tag}q") * per + r0, c))]


def _shape() -> list[Node]:
    return [Node.let_bind(v, Expr.load("prm", Expr.u32(i))) for i, v in enumerate(("pm", "pn", "pk", "ptn"))]


@functools.cache
def transpose_program(t: DataType) -> Program:
    """``bt[n*K + k] = b[k*N + n]`` for the K x N matrix ``b`` (``prm = [K, N, 0, tiles along
    N]``): one workgroup per TR x TR tile (module docstring)."""
    k0, n0 = Expr.var("k0"), Expr.var("n0")
    # here pm = K (rows of b), pn = N (its columns); the tile's rows are 16 bytes longer than
    # the TR columns written (whole 16-byte chunks: cp.async on CUDA)
    pitch = TR + 16 // t.size

    def put(nl: Expr, kl: Expr) -> list[Node]:   # consecutive invocations: consecutive k, one n
        return [Node.if_(Expr.var("kok").and_((n0 + nl).lt(N_)),
                         [Node.store("bt", (n0 + nl) * M_ + k0 + kl, Expr.load("w", kl * pitch + nl))])]

    body = [*_shape(),
            Node.let_bind("k0", (WGID / TILES_N) * TR),
            Node.let_bind("n0", (WGID % TILES_N) * TR),
            Node.load_tile("w", "b", k0 * N_ + n0, N_, TR, pitch, M_ - k0, N_ - n0),
            Node.let_bind("kok", (k0 + LID % TR).lt(M_)),
            *_rows(TR, TR, TR_THREADS, "o", put)]
    bufs = [BufferDecl.read("b", 0, t), BufferDecl.read("prm", 1, U, 4), BufferDecl.output("bt", 2, t),
            BufferDecl.workgroup("w", TR * pitch, t)]
    return Program.wrapped(bufs, TR_THREADS, body)


@functools.cache
def program(ta: DataType, tb: DataType, t: Tiles) -> Program:
    """The tiled matmul of an ``ta`` (M x K, row-major) matrix ``a`` and the transpose ``bt``
    (N x K) of a ``tb`` (K x N) matrix. Shapes come from ``prm = [M, N, K, tiles along N]``."""
    td = I if ta in BYTES else ta
    bm, bn, bk, T = t.bm, t.bn, t.bk, t.threads
    row0, col0, kt = Expr.var("row0"), Expr.var("col0"), Expr.var("kt")

    def store_out(e: Expr) -> list[Node]:
        r, c = e / bn, e % bn
        return [Node.if_((row0 + r).lt(M_).and_((col0 + c).lt(N_)),
                         [Node.store("out", (row0 + r) * N_ + col0 + c, Expr.load("wd", e))])]

    def store_row(r: Expr, c: Expr) -> list[Node]:
        return [Node.if_(Expr.var("cok").and_((row0 + r).lt(M_)),
                         [Node.store("out", (row0 + r) * N_ + col0 + c, Expr.load("wd", r * bn + c))])]

    # the output tile: each invocation its own column where a block step covers whole rows
    rowwise = T % bn == 0 and bm % (T // bn) == 0
    out = [Node.let_bind("cok", (col0 + LID % bn).lt(N_)), *_rows(bm, bn, T, "o", store_row)] if rowwise \
        else [_loop(bm * bn, T, "o", store_out)]

    k0 = kt * bk
    body = [
        *_shape(),
        Node.let_bind("row0", (WGID / TILES_N) * bm),
        Node.let_bind("col0", (WGID % TILES_N) * bn),
        Node.loop("kt", Expr.u32(0), (K_ + (bk - 1)) / bk, [
            Node.load_tile("wa", "a", row0 * K_ + k0, K_, bm, bk, M_ - row0, K_ - k0),
            Node.load_tile("wb", "bt", col0 * K_ + k0, K_, bn, bk, N_ - col0, K_ - k0),
            Node.matmul_acc("wd", "wa", "wb", bm, bn, bk)]),
        *out,
    ]
    bufs = [BufferDecl.read("a", 0, ta), BufferDecl.read("bt", 1, tb),
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

    def flat(self) -> Any:
        """The elements in row order."""
        x = self.data
        if self.kind == "numpy":
            x = np.ascontiguousarray(x).astype(x.dtype.newbyteorder("<"), copy=False)
        return x.reshape(-1)


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
    if max((m + LARGEST) * (k + LARGEST), (k + LARGEST) * (n + LARGEST), m * n) >= 2**32:
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
    t = tiles(r.id, words, r.backend.device_profile().max_shared_memory_bytes)
    device = r.device and (x.on_device or y.on_device)
    tn = -(-n // TR)
    bt = r.run(transpose_program(y.dtype), [_source(y, device), params(k, n, 0, tn)], -(-k // TR) * tn,
               k * n, keep=True, wait=False)[0]
    tiles_n = -(-n // t.bn)
    groups = -(-m // t.bm) * tiles_n
    ins = [_source(x, device), bt, params(m, n, k, tiles_n)]
    out = r.run(program(x.dtype, y.dtype, t), ins, groups, m * n, keep=device)[0]
    if isinstance(out, np.ndarray):
        return _shaped(to_kind(out[:m * n].view(td.host).copy(), like, td), (m, n))
    return _shaped(device_like(out, like, td)[:m * n], (m, n))


def _source(x: _Matrix, device: bool) -> Any:
    """What the dispatch reads: the matrix in row order (on the device where the backend
    reads device arrays, else a host copy)."""
    if x.on_device and not device:
        host = x.original.detach().cpu().numpy() if x.kind == "torch" else x.original.get()
        return _matrix(np.ascontiguousarray(host), "a").flat()
    return x.flat()


def _shaped(v: Any, shape: tuple[int, int]) -> Any:
    return v.reshape(shape)


__all__ = ["CUDA_BYTES", "CUDA_WORDS", "SMALL", "Tiles", "matmul", "program", "tiles", "transpose_program"]
