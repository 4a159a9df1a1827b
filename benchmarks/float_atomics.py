"""Float atomic_add (S36: exact, order-independent) against what users call instead, on the
same data in one run: on any backend, numpy's ``np.add.at`` on the host (sequential, in
order) and `vyre.lib.index_add` (the two-pass library scatter-add); on CUDA also torch's
``index_add_`` (float atomics, order-dependent) and the same under
``torch.use_deterministic_algorithms(True)``, when torch is installed.

    python benchmarks/float_atomics.py --backend opencl --json benchmarks/results/float_atomics_pocl.json
    python benchmarks/float_atomics.py --backend cuda --json $OUT/float_atomics_cuda.json

Cases: 2^20 contributions into 2^10 slots (the issue's test) and 2^24 into 2^16. The
program is ``out[ix[i]] += x[i]`` written as one float atomic statement; vyre's result is
checked against the reference's bytes (the reference checks itself against math.fsum in
tests/semantics/test_float_atomics.py) before it is timed. Times: median of N, each a whole
dispatch (host arrays in, result back), and the device time of a resident dispatch (inputs
already on the device: zeroing the hidden accumulator, both phases).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import vyre.lib as L
from vyre import reference
from vyre.driver import acquire
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program

from _common import emit

CASES = {"1M_into_1K": (20, 10), "16M_into_64K": (24, 16)}


def program(wg: int = 256) -> Program:
    i = Expr.gid_x()
    return Program.wrapped(
        [BufferDecl.read("x", 0, DataType.F32), BufferDecl.read("ix", 1, DataType.U32),
         BufferDecl.read_write("out", 2, DataType.F32)], wg,
        [Node.if_(i.lt(Expr.buf_len("x")),
                  [Node.expr(Expr.atomic(AtomicOp.ADD, "out", Expr.load("ix", i), Expr.load("x", i)))])])


def timed(fn: Callable[[], Any], reps: int, sync: Callable[[], Any] = lambda: None) -> float:
    """Median seconds of ``reps`` calls after one warm-up call."""
    fn()
    sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def torch_cases(x: np.ndarray, ix: np.ndarray, init: np.ndarray, reps: int) -> dict[str, float]:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    tx, ti = torch.from_numpy(x).cuda(), torch.from_numpy(ix.astype(np.int64)).cuda()
    tinit = torch.from_numpy(init).cuda()
    sync = torch.cuda.synchronize
    out: dict[str, float] = {}
    out["torch.index_add_ s"] = timed(lambda: tinit.clone().index_add_(0, ti, tx), reps, sync)
    torch.use_deterministic_algorithms(True)
    try:
        out["torch.index_add_ deterministic s"] = timed(lambda: tinit.clone().index_add_(0, ti, tx), reps, sync)
    except RuntimeError as exc:   # no deterministic implementation in this torch
        print(f"torch deterministic index_add_: {exc}")
    finally:
        torch.use_deterministic_algorithms(False)
    return out


def run_case(backend: Any, log_n: int, log_slots: int, reps: int) -> dict[str, float]:
    rng = np.random.default_rng(log_n)
    n, slots = 1 << log_n, 1 << log_slots
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    ix = rng.integers(0, slots, n).astype(np.uint32)
    init = rng.standard_normal(slots).astype(np.float32)
    p = program()
    got = backend.dispatch(p, [x, ix, init])[0]
    if n <= 1 << 20:
        assert got == reference.run(p, [x, ix, init])[0], "vyre differs from the reference"
    res: dict[str, float] = {"contributions": n, "slots": slots}
    res["vyre dispatch s"] = timed(lambda: backend.dispatch(p, [x, ix, init]), reps)
    bufs = [backend.allocate_resident(a.nbytes) for a in (x, ix, init)]
    for r, a in zip(bufs, (x, ix, init)):
        backend.upload_resident(r, a)
    bound = backend.bind_resident(p, bufs)
    dev = [bound.run_timed().device_ns for _ in range(reps + 1)][1:]
    if all(d is not None for d in dev):
        res["vyre resident device s"] = statistics.median(dev) / 1e9
    bound.release()
    lib = L.index_add(init, ix, x, backend=backend)
    assert np.asarray(lib).tobytes() == got, "vyre.lib.index_add differs from the float atomics"
    res["vyre.lib.index_add s"] = timed(lambda: L.index_add(init, ix, x, backend=backend), reps)

    def add_at() -> np.ndarray:
        t = init.copy()
        np.add.at(t, ix, x)
        return t

    res["numpy.add.at s"] = timed(add_at, reps)
    if backend.id() == "cuda":
        res.update(torch_cases(x, ix, init, reps))
    base = res["vyre dispatch s"]
    for k in [k for k in res if k.endswith(" s") and k != "vyre dispatch s"]:
        res[f"{k[:-2]} / vyre dispatch"] = res[k] / base
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    backend = acquire(a.backend)
    results = {"backend": backend.id(), "device": backend.device_profile().device_name}
    for name in a.only.split(","):
        log_n, log_slots = CASES[name]
        results[name] = run_case(backend, log_n, log_slots, a.reps)
    emit("float_atomics", results, a.json)


if __name__ == "__main__":
    main()
