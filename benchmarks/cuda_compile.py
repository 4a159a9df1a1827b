"""Compile cost: cold (NVRTC), warm in-process pipeline-cache hit, and on-disk cubin hit in a
fresh process, for one small program; the CUDA context's start (import, context) apart from
it; SHA-256 (722 statements) from compile to first result in a fresh process, cold and from
the disk cache, with the time of each step, and a second program in the same process; and
conformance throughput (corpus + random programs, fresh cache: the programs are
compiled in parallel first, `VyreBackend.precompile`), in new programs per second."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from _common import TRACE, args, emit, median_ns, traced_from

CHILD = r"""
import time, sys
t0 = time.perf_counter()
import vyre.driver as d
from vyre.driver import pipeline as P
from vyre.ir import *
gx = Expr.gid_x()
p = Program.wrapped([BufferDecl.read('a',0,DataType.F32), BufferDecl.output('o',1,DataType.F32)], 128,
    [Node.store('o', gx, (Expr.load('a', gx) * 1.5 + %SALT%).sqrt())])
ti = time.perf_counter()
b = d.acquire('cuda')
t1 = time.perf_counter()
pipe = P.compile(b, p)
t2 = time.perf_counter()
print(pipe.compiled.built_from, (t2 - t1) * 1e3, (ti - t0) * 1e3, (t1 - ti) * 1e3)
"""

# SHA-256 (722 statements) from compile to first result in a fresh process, then a second
# program in the same process; with the wall time of each step (issue 24: a disk hit should
# cost little beyond loading the cubin). Run twice on one cache: cold, then disk hits.
SHA = TRACE + r"""
import time
import numpy as np
import vyre.driver as d
from vyre import examples as X
trace("vyre.driver.engine.core.identity", "vyre.driver.engine.artifacts.source_fingerprint",
      "vyre.driver.engine.artifacts.ArtifactCache.get", "vyre.driver.engine.artifacts.ArtifactCache.put",
      "vyre.drivers.cuda.backend.CudaDevice.compile", "vyre.drivers.cuda.backend.CudaDevice.load",
      "vyre.drivers.cuda.runtime.Runtime.load", "vyre.ir.facts._compute",
      "vyre.driver.engine.core.EngineBackend._make_prepared", "vyre.driver.engine.core.EngineBackend._enqueue",
      "vyre.driver.engine.core.EngineBackend._complete", "vyre.drivers.cuda.backend.CudaDevice.host_alloc",
      "vyre.drivers.cuda.backend.CudaDevice.ctl_alloc", "vyre.drivers.cuda.backend.CudaDevice.alloc",
      "vyre.drivers.cuda.backend.CudaDevice.launch", "vyre.drivers.cuda.backend.CudaDevice.finish")
b = d.acquire("cuda")
msgs = X.random_messages(64)
blocks = X.pad_messages(msgs)
p = X.sha256_blocks()
t0 = time.perf_counter()
pipe = b.compile_native(p)
t1 = time.perf_counter()
out = pipe.dispatch([blocks], X.sha256_config(64))
t2 = time.perf_counter()
assert np.array_equal(np.frombuffer(out[0], np.uint32), X.digests_expected(msgs))
print_traced()
q = X.scan_workgroup()
data = np.arange(4096, dtype=np.uint32)
t3 = time.perf_counter()
pipe2 = b.compile_native(q)
t4 = time.perf_counter()
out2 = pipe2.dispatch([data])
t5 = time.perf_counter()
assert np.array_equal(np.frombuffer(out2[0], np.uint32), X.scan_expected(data))
print("RESULT", pipe.built_from, (t1 - t0) * 1e3, (t2 - t0) * 1e3, (t4 - t3) * 1e3, (t5 - t3) * 1e3)
"""

CONFORM = r"""
import time, sys
from vyre.driver import acquire
from vyre.conform.runner import run_backend
b = acquire('cuda')
t = time.perf_counter()
rep = run_backend(b, random=int(sys.argv[1]), seed=11, minimise_budget=0.0)
dt = time.perf_counter() - t
print(len(rep.results), dt, rep.count('fail') + rep.count('error'), b.device.rt.cubins.compiled)
"""


def main() -> None:
    a = args(__doc__)
    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, VYRE_CACHE_DIR=cache)
        code = CHILD.replace("%SALT%", repr(float(time.time() % 1000)))
        cold = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
        disk = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
        res["cold_how"], res["cold_ms"] = cold[0], float(cold[1])
        res["import_ms"], res["cuda_context_ms"] = float(cold[2]), float(cold[3])
        res["disk_how"], res["disk_hit_ms"] = disk[0], float(disk[1])
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, VYRE_CACHE_DIR=cache)
        for run in ("cold", "disk_hit"):
            done = subprocess.run([sys.executable, "-c", SHA], env=env, capture_output=True, text=True, check=True)
            line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT")).split()
            res[f"sha256_{run}_how"] = line[1]
            res[f"sha256_{run}_compile_ms"], res[f"sha256_{run}_first_dispatch_ms"] = float(line[2]), float(line[3])
            res[f"second_program_{run}_compile_ms"] = float(line[4])
            res[f"second_program_{run}_first_dispatch_ms"] = float(line[5])
            res[f"sha256_{run}_steps_ms"] = traced_from(done.stdout)
    with tempfile.TemporaryDirectory() as cache:
        n_random = 100 if a.quick else 500
        out = subprocess.run([sys.executable, "-c", CONFORM, str(n_random)], capture_output=True, text=True,
                             check=True, env=dict(os.environ, VYRE_CACHE_DIR=cache)).stdout.split()
        programs, seconds = int(out[0]), float(out[1])
        res["conform_programs"], res["conform_s"] = programs, seconds
        res["conform_programs_per_s"] = programs / seconds
        res["conform_failures"], res["conform_compiled"] = int(out[2]), int(out[3])
    with tempfile.TemporaryDirectory() as cache:
        os.environ["VYRE_CACHE_DIR"] = cache
        import vyre.driver as d
        from vyre.driver import pipeline as P
        from vyre.ir import BufferDecl, DataType, Expr, Node, Program

        gx = Expr.gid_x()
        p = Program.wrapped([BufferDecl.read("a", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)], 128,
                            [Node.store("o", gx, Expr.load("a", gx) + 2.0)])
        b = d.acquire("cuda")
        P.compile(b, p)
        res["warm_hit_us"] = median_ns(lambda: P.compile(b, p), 2000) / 1e3
    emit("cuda_compile", res, a.json)


if __name__ == "__main__":
    main()
