"""`dispatch_device(wait=False)` on CUDA: a warm call returns once enqueued; its outputs say
which stream still writes them; the next wait of the thread covers it (values, staging, and
its control-block error, raised there); a call that is not warm waits as always."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vyre import reference
from vyre.driver import DispatchFailed
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

pytestmark = pytest.mark.gpu

I, U = DataType.I32, DataType.U32
GX = Expr.gid_x()


def _div() -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, I), BufferDecl.read("d", 1, I, 1), BufferDecl.output("o", 2, I)],
                           64, [Node.store("o", GX, Expr.load("a", GX) // Expr.load("d", 0))])


def _inc() -> Program:
    return Program.wrapped([BufferDecl.read("x", 0, U), BufferDecl.output("o", 1, U)], 64,
                           [Node.store("o", GX, Expr.load("x", GX) * Expr.u32(3) + Expr.u32(1))])


def test_chained_passes_without_waits_give_the_waited_bytes(cuda):
    x = np.arange(10_001, dtype=np.uint32)
    want = np.frombuffer(reference.run(_inc(), [np.frombuffer(reference.run(_inc(), [x])[0], np.uint32)])[0], np.uint32)
    for _ in range(3):   # warm both signatures (host input, then a device output as input)
        a = cuda.dispatch_device(_inc(), [x], wait=False)[0]
        b = cuda.dispatch_device(_inc(), [a], wait=False)[0]
        cuda.wait_deferred()
    a = cuda.dispatch_device(_inc(), [x], wait=False)[0]
    b = cuda.dispatch_device(_inc(), [a], wait=False)[0]
    assert b.__cuda_array_interface__["stream"] == cuda.device.stream_handle()   # still being written
    got = cuda.read_output(b, 0, b.nbytes).view(np.uint32)   # a wait: covers both
    assert np.array_equal(got, want)
    assert not getattr(cuda._later, "items", None)       # settled: staging given back
    waited = cuda.dispatch_device(_inc(), [x])[0]
    assert waited.__cuda_array_interface__["stream"] is None


def test_the_error_of_a_pass_not_waited_for_is_raised_at_the_next_wait(cuda):
    a = np.arange(256, dtype=np.int32)
    for _ in range(2):
        cuda.dispatch_device(_div(), [a, np.array([3], np.int32)], wait=False)
        cuda.wait_deferred()
    cuda.dispatch_device(_div(), [a, np.array([0], np.int32)], wait=False)   # i32 division by 0
    with pytest.raises(DispatchFailed):
        cuda.dispatch_device(_inc(), [np.arange(64, dtype=np.uint32)])        # the next wait
    assert not getattr(cuda._later, "items", None)
    got = cuda.dispatch_device(_div(), [a, np.array([3], np.int32)])[0]       # and the backend goes on
    assert np.array_equal(cuda.read_output(got, 0, got.nbytes).view(np.int32), a // 3)


def test_deferred_calls_belong_to_their_thread(cuda):
    x = np.arange(4096, dtype=np.uint32)
    for _ in range(2):
        cuda.dispatch_device(_inc(), [x], wait=False)
        cuda.wait_deferred()
    cuda.dispatch_device(_inc(), [x], wait=False)
    seen = []
    t = threading.Thread(target=lambda: seen.append(getattr(cuda._later, "items", None)))
    t.start()
    t.join()
    assert seen == [None] and len(cuda._later.items) == 1
    cuda.wait_deferred()
    assert not cuda._later.items


def test_cupy_reads_a_deferred_output_after_it_is_written(cuda):
    cp = pytest.importorskip("cupy")
    x = np.arange(1 << 20, dtype=np.uint32)
    for _ in range(2):
        cuda.dispatch_device(_inc(), [x], wait=False)
        cuda.wait_deferred()
    out = cuda.dispatch_device(_inc(), [x], wait=False)[0]
    got = cp.asarray(out).get()          # CuPy orders itself after the stream the output names
    assert np.array_equal(got, x * np.uint32(3) + np.uint32(1))
    cuda.wait_deferred()
