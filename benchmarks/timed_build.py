"""What bounding a build by ``DispatchConfig.timeout`` costs (vyre.driver.engine.timed_build):
the first build of a fresh small program (8 stores, a salt no compiler cache has seen) on each
backend here, three ways, interleaved: in the calling thread (no timeout: `compile_native`
without a config), in a helper thread (a timeout, the default for programs under
`OUT_OF_PROCESS_STATEMENTS`), and in a worker process (a timeout, the threshold lowered to 1:
what a large program pays on a device with a compiler). Medians in ms."""

from __future__ import annotations

import random
import statistics
import time

import vyre.driver as d
from vyre.driver import DispatchConfig
from vyre.driver.engine import timed_build
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit

GX = Expr.gid_x()
U = DataType.U32


def _fresh() -> Program:
    salt = random.randrange(1 << 30)
    body = [Node.store("o", GX * 8 + i, Expr.load("a", GX) * 3 + (salt + i)) for i in range(8)]
    return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U, 512)], 64, body)


def _ms(b, config: DispatchConfig | None, worker: bool) -> float:
    p = _fresh()
    b.refuse(p)   # target checks (and wgpu's printing) before the clock
    saved = timed_build.OUT_OF_PROCESS_STATEMENTS
    timed_build.OUT_OF_PROCESS_STATEMENTS = 1 if worker else saved
    try:
        t = time.perf_counter()
        b.compile_native(p, config)
        return (time.perf_counter() - t) * 1e3
    finally:
        timed_build.OUT_OF_PROCESS_STATEMENTS = saved


def main() -> None:
    a = args(__doc__)
    reps = 3 if a.quick else 7
    res: dict[str, object] = {}
    for backend_id in ("reference", "opencl", "cuda", "wgpu"):
        try:
            b = d.acquire(backend_id)
        except d.BackendError:
            continue
        ways = {"in_thread_ms": (None, False), "helper_thread_ms": (DispatchConfig(timeout=600), False)}
        if b.device.compiler() is not None:
            ways["worker_process_ms"] = (DispatchConfig(timeout=600), True)
        _ms(b, None, False)   # the compiler's first build in this process, not counted
        samples: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(reps):
            for name, (config, worker) in ways.items():
                samples[name].append(_ms(b, config, worker))
        res[backend_id] = {k: round(statistics.median(v), 2) for k, v in samples.items()} | {"reps": reps}
    emit("timed_build", res, a.json)


if __name__ == "__main__":
    main()
