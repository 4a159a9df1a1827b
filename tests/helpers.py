"""Test helpers: build tiny programs and compare a backend's bytes with the reference."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from vyre import reference
from vyre.driver import VyreBackend
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

GX = Expr.gid_x()


def words(values, dtype=np.uint32) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def as_u32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype="<u4")


def as_i32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype="<i4")


def as_f32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype="<f4")


def map_program(in_types: Sequence[DataType], out_type: DataType, make_value, wg: int = 8) -> Program:
    """out[gid] = make_value(load(x0, gid), load(x1, gid), ...)."""
    bufs = [BufferDecl.read(f"x{i}", i, t) for i, t in enumerate(in_types)]
    bufs.append(BufferDecl.output("out", len(in_types), out_type))
    args = [Expr.load(f"x{i}", GX) for i in range(len(in_types))]
    return Program.wrapped(bufs, wg, [Node.store("out", GX, make_value(*args))])


def typed(program: Program, inputs: Sequence) -> list:
    """Test data as arrays of each input buffer's declared dtype (same bits): a u32 word array
    handed to an f32 buffer is refused by every backend, as it must be."""
    from vyre.conform.witness import typed_inputs

    return typed_inputs(program, [np.asarray(x) if isinstance(x, list) else x for x in inputs])


def run_checked(backend, program: Program, inputs: Sequence, config=None) -> list[bytes]:
    """Run on ``backend``, assert byte identity with the reference, return the bytes."""
    inputs = typed(program, inputs)
    expected = reference.run(program, inputs, config)
    got = backend.dispatch(program, inputs, config)
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            x, y = as_u32(a), as_u32(b)
            bad = np.flatnonzero(x != y) if len(x) == len(y) else []
            raise AssertionError(
                f"{backend.id()} output {i} differs from the reference at elements {list(bad[:8])}: "
                f"got {[hex(v) for v in x[bad[:8]]]} expected {[hex(v) for v in y[bad[:8]]]}")
    return got


def slow_program() -> Program:
    """Each lane spins `trips` times (read from memory, so nothing folds)."""
    body = [Node.let_bind("acc", Expr.load("a", GX)),
            Node.loop("i", Expr.u32(0), Expr.load("trips", 0),
                      [Node.assign("acc", Expr.var("acc") * 1664525 + 1013904223)]),
            Node.store("out", GX, Expr.var("acc"))]
    return Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.read("trips", 1, DataType.U32, 1),
                            BufferDecl.output("out", 2, DataType.U32)], 256, body)


def spin_trips(backend) -> int:
    """Trips of `slow_program` that outlast a 0.05 s timeout on ``backend`` (the reference
    caps a loop at 2**20 trips; an H100 runs 2**20 dependent trips in a few ms)."""
    return 1 << 28 if backend.id() == "cuda" else 1 << 20


def lcg(a: np.ndarray, trips: int) -> np.ndarray:
    """`trips` steps of x -> 1664525 x + 1013904223 (mod 2^32), by squaring the affine map."""
    mul, add = 1, 0
    step_mul, step_add = 1664525, 1013904223
    n = trips
    while n:
        if n & 1:
            mul, add = (step_mul * mul) % 2**32, (step_mul * add + step_add) % 2**32
        step_mul, step_add = (step_mul * step_mul) % 2**32, (step_mul * step_add + step_add) % 2**32
        n >>= 1
    return ((a.astype(np.uint64) * mul + add) % 2**32).astype(np.uint32)


def check_lcg_closed_form():
    a = np.arange(5, dtype=np.uint64)
    acc = a.copy()
    for _ in range(37):
        acc = (acc * 1664525 + 1013904223) % 2**32
    assert np.array_equal(lcg(a, 37), acc.astype(np.uint32))




def prog() -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 4,
                           [Node.store("o", GX, Expr.load("a", GX) + 1)])


class MockBackend(VyreBackend, external=True):
    def __init__(self) -> None:
        self.calls = 0

    def id(self) -> str:
        return "mock"

    def dispatch(self, program, inputs, config=None):
        self.calls += 1
        return reference.run(program, inputs, config)




def require_cancellable(backend) -> None:
    """Skip, with the reason, on a backend whose running kernels cannot be stopped (wgpu: no
    host-visible memory while a kernel runs). There a timed-out dispatch abandons the queue,
    and every later dispatch, from any thread, raises DeviceLost until that kernel ends or
    `backend.try_recover()` runs (its documented behaviour, docs/architecture.md): a test
    that times a dispatch out while other work must go on cannot pass there."""
    import pytest

    if not getattr(backend, "device", None) or getattr(backend.device, "cancellable", True) or \
            getattr(backend.device, "synchronous", False):
        return
    pytest.skip(f"{backend.id()} cannot cancel a running kernel: after a timed-out dispatch every "
                "dispatch of every thread raises DeviceLost until that kernel ends or try_recover() "
                "runs (by design, docs/architecture.md), so timeouts cannot be isolated from other "
                "work there")


def run_threads(target, args: Sequence[tuple], timeout: float, what: str = "worker") -> None:
    """Run ``target(*a)`` for each ``a`` in ``args`` on its own daemon thread, all started
    before any is joined; join them under one shared deadline of ``timeout`` seconds and fail
    the calling test, naming the threads, if any is still running then (a hang fails the test
    instead of blocking the suite; daemon threads never keep the interpreter alive)."""
    import time

    import pytest

    threads = [threading.Thread(target=target, args=a, name=f"{what}-{i}", daemon=True)
               for i, a in enumerate(args)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    if hung:
        pytest.fail(f"{len(hung)} of {len(threads)} threads still running after {timeout:g} s "
                    f"(a hang): {', '.join(hung)}")


def nvrtc():
    """vyre's NVRTC compiler module, or a skip (a failure with VYRE_REQUIRE_NVRTC=1) where
    NVRTC is unavailable."""
    import os

    import pytest

    from vyre.driver.errors import BackendUnavailable

    try:
        from vyre.drivers.cuda import compiler

        compiler.nvrtc_version()
        return compiler
    except BackendUnavailable as err:
        if os.environ.get("VYRE_REQUIRE_NVRTC") == "1":
            pytest.fail(f"NVRTC is required here but unavailable: {err}")
        pytest.skip(f"NVRTC unavailable: {err}")
