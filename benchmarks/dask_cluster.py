"""The dask backend on this machine's LocalCluster: per-dispatch overhead against the local
backend the workers use, and conformance throughput (programs per second) with 1 and 2
workers. With --gpus (a multi-GPU machine): Mandelbrot at --size² with --iters iterations on
1 GPU against 2 (and the cuda backend called directly), with the same bytes."""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from _common import emit, seconds_median


def conform_rate(workers: int, n: int) -> float:
    """Programs checked per second, cluster start-up included (the disk kernel cache is warm:
    main() runs one pass first, so neither figure pays cold compiles)."""
    from vyre.conform.distributed import run_cluster

    os.environ["VYRE_DASK_WORKERS"] = str(workers)
    t = time.perf_counter()
    reports, _ = run_cluster("local", random=n, seed=11)
    dt = time.perf_counter() - t
    assert all(r.ok for r in reports)
    return sum(len(r.results) for r in reports) / dt


def mandelbrot(workers: int, size: int, iters: int, backend_id: str):
    from vyre.driver import acquire
    from vyre.examples.kernels import mandelbrot as k

    os.environ["VYRE_DASK_WORKERS"] = str(workers)
    if workers == 0:
        b = acquire(backend_id)
    else:
        from vyre.drivers.dask.backend import DaskBackend

        b = DaskBackend()
    prog = k.program
    ins = [np.array([size], np.uint32), np.array([size], np.uint32), np.array([iters], np.uint32)]
    from vyre.driver import DispatchConfig

    cfg = DispatchConfig(dispatch_elements=size * size)
    out = b.dispatch(prog, ins, cfg)[0]
    t = time.perf_counter()
    out = b.dispatch(prog, ins, cfg)[0]
    dt = time.perf_counter() - t
    if workers:
        assert b.last_decision is not None and b.last_decision.partitionable, b.last_decision
        b.shutdown()
    return dt, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gpus", action="store_true")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=50000)
    a = ap.parse_args()
    res: dict = {}
    if a.gpus:
        t0, o0 = mandelbrot(0, a.size, a.iters, "cuda")
        t1, o1 = mandelbrot(1, a.size, a.iters, "cuda")
        t2, o2 = mandelbrot(2, a.size, a.iters, "cuda")
        res.update(mandelbrot_size=a.size, mandelbrot_iters=a.iters, local_cuda_s=t0, one_gpu_s=t1,
                   two_gpus_s=t2, speedup=t1 / t2, speedup_vs_local=t0 / t2,
                   same_bytes=str(o0 == o1 == o2))
    else:
        from vyre.cli.bench import saxpy_program
        from vyre.driver import acquire
        from vyre.drivers.dask.backend import DaskBackend

        os.environ["VYRE_DASK_WORKERS"] = "2"
        d = DaskBackend()
        local = acquire(d.workers()[0]["backend"])
        res["worker_backend"] = local.id()
        for n in (1024, 1 << 20):
            x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
            ins = [x, x[::-1].copy()]
            assert d.dispatch(saxpy_program(), ins) == local.dispatch(saxpy_program(), ins)
            res[f"saxpy_{n}_dask_ms"] = seconds_median(lambda ins=ins: d.dispatch(saxpy_program(), ins), 10) * 1e3
            res[f"saxpy_{n}_local_ms"] = seconds_median(lambda ins=ins: local.dispatch(saxpy_program(), ins), 10) * 1e3
        d.shutdown()
        n = 20 if a.quick else 60
        conform_rate(2, n)                     # warm the kernel cache
        res["conform_programs_per_s_1_worker"] = conform_rate(1, n)
        res["conform_programs_per_s_2_workers"] = conform_rate(2, n)
    emit("dask_cluster" + ("_gpus" if a.gpus else ""), res, None if a.json is None else __import__("pathlib").Path(a.json))


if __name__ == "__main__":
    main()
