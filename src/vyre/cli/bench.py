"""`vyre bench`: the same two programs on every available backend, side by side."""

from __future__ import annotations

import statistics
import time

import numpy as np

from vyre.driver import BackendError, acquire, registered_backends_by_precedence
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program


def tiny_program() -> Program:
    gx = Expr.gid_x()
    return Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("out", 1, DataType.U32)],
                           64, [Node.store("out", gx, Expr.load("a", gx) + 1)])


def saxpy_program() -> Program:
    gx = Expr.gid_x()
    return Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.read("y", 1, DataType.F32),
                            BufferDecl.output("out", 2, DataType.F32)], 256,
                           [Node.store("out", gx, Expr.load("x", gx) * 2.5 + Expr.load("y", gx))])


def _median_ns(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times)


def run_bench(ids: list[str], elements: int, repeats: int) -> list[dict]:
    """One row per backend. Backends named in ``ids`` must start (their error is raised);
    with no ids, every registered backend that starts is measured."""
    named = bool(ids)
    ids = ids or [r.id for r in registered_backends_by_precedence()]
    rows = []
    tiny_in = [np.arange(256, dtype=np.uint32)]
    x = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
    big_in = [x, x[::-1].copy()]
    for bid in ids:
        try:
            b = acquire(bid)
        except BackendError:
            if named:
                raise
            continue
        tiny = P.compile(b, tiny_program())
        saxpy = P.compile(b, saxpy_program())
        tiny_ns = _median_ns(lambda tiny=tiny: tiny.dispatch(tiny_in), repeats)
        big_ns = _median_ns(lambda saxpy=saxpy: saxpy.dispatch(big_in), max(3, repeats // 4))
        timed = saxpy.dispatch_timed(big_in)
        rows.append({"backend": bid, "tiny_us": tiny_ns / 1e3, "elementwise_ms": big_ns / 1e6,
                     "gbps": 3 * 4 * elements / big_ns, "device_ms": None if timed.device_ns is None
                     else timed.device_ns / 1e6})
    return rows
