"""Batches replay recorded resident dispatches with the bytes of running them one by one:
item by item where a backend has no native replay, as one CUDA graph on CUDA."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.driver import Batch, InvalidProgram
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import GX, as_u32

U = DataType.U32


def _inc() -> Program:
    return Program.wrapped([BufferDecl.read_write("x", 0, U)], 64, [Node.store("x", GX, Expr.load("x", GX) + 1)])


def _scale() -> Program:
    return Program.wrapped([BufferDecl.read("x", 0, U), BufferDecl.output("o", 1, U)], 64,
                           [Node.store("o", GX, Expr.load("x", GX) * 3)])


def _run(backend, n: int) -> tuple[np.ndarray, np.ndarray, bool]:
    x = np.arange(300, dtype=np.uint32)
    rx, ro = backend.allocate_resident(x.nbytes), backend.allocate_resident(x.nbytes)
    backend.upload_resident(rx, x)
    batch = Batch(backend)
    for _ in range(n):
        batch.add(_inc(), [rx]).add(_scale(), [rx, ro])
    batch.run()
    batch.run()
    out = as_u32(backend.read_resident(rx)), as_u32(backend.read_resident(ro))
    with pytest.raises(InvalidProgram):
        batch.add(_inc(), [rx])
    return (*out, batch.native)


def test_batch_replays_in_order_on_opencl(opencl):
    x, o, native = _run(opencl, 5)
    assert not native
    assert np.array_equal(x, np.arange(300) + 10) and np.array_equal(o, (np.arange(300) + 10) * 3)


@pytest.mark.gpu
def test_batch_is_a_cuda_graph_with_identical_bytes(cuda):
    x, o, native = _run(cuda, 50)
    assert native
    assert np.array_equal(x, np.arange(300) + 100) and np.array_equal(o, (np.arange(300) + 100) * 3)


@pytest.mark.gpu
def test_cuda_graph_batch_reports_i32_division_errors(cuda):
    from vyre.driver import DispatchFailed

    div = Program.wrapped([BufferDecl.read("d", 0, DataType.I32), BufferDecl.output("o", 1, DataType.I32)], 4,
                          [Node.store("o", GX, Expr.i32(7) / Expr.load("d", GX))])
    rd, ro = cuda.allocate_resident(16), cuda.allocate_resident(16)
    cuda.upload_resident(rd, np.array([1, 0, 1, 1], np.int32))
    batch = Batch(cuda).add(div, [rd, ro]).add(_inc(), [ro])
    with pytest.raises(DispatchFailed, match="division"):
        batch.run()
