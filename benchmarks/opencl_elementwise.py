"""OpenCL on PoCL: 16M-element u32 and f32 elementwise programs vs the same computation in
numpy, dispatch round-trip latency (4 KiB in/out) vs a raw PyOpenCL enqueue of a handwritten
kernel doing the same work, and the cost of each program-build path."""

from __future__ import annotations

import time

import numpy as np
import pyopencl as cl

import vyre.driver as d
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit, interleaved_median_us, median_ns

GX = Expr.gid_x()
SRC = """__kernel void k(__global const uint* a, __global uint* o, uint n) {
    uint i = get_global_id(0);
    if (i < n) o[i] = a[i] * 3u + 1u;
}"""


def main() -> None:
    a_ = args(__doc__)
    n = 1 << (22 if a_.quick else 24)
    res: dict[str, float] = {"elements": n}
    b = d.acquire("opencl")
    rng = np.random.default_rng(0)
    for name, dt, npdt in (("u32", DataType.U32, np.uint32), ("f32", DataType.F32, np.float32)):
        prog = Program.wrapped([BufferDecl.read("x", 0, dt), BufferDecl.read("y", 1, dt), BufferDecl.output("o", 2, dt)],
                               256, [Node.store("o", GX, Expr.load("x", GX) * Expr.load("y", GX) + Expr.load("x", GX))])
        x = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) if dt is DataType.U32
             else rng.standard_normal(n).astype(np.float32))
        y = x[::-1].copy()
        pipe = P.compile(b, prog)
        out = np.frombuffer(pipe.dispatch([x, y])[0], npdt)
        with np.errstate(over="ignore"):
            want = x * y + x
        assert np.array_equal(out, want)
        res[f"vyre_{name}_ms"] = median_ns(lambda pipe=pipe, x=x, y=y: pipe.dispatch([x, y]), 5, 1) / 1e6
        res[f"vyre_{name}_device_ms"] = pipe.dispatch_timed([x, y]).device_ns / 1e6
        with np.errstate(over="ignore"):
            res[f"numpy_{name}_ms"] = median_ns(lambda x=x, y=y: x * y + x, 5, 1) / 1e6
        res[f"ratio_numpy_over_vyre_{name}"] = res[f"numpy_{name}_ms"] / res[f"vyre_{name}_ms"]

    # dispatch round trip: 4 KiB in, 4 KiB out
    m = 1024
    host = np.arange(m, dtype=np.uint32)
    prog = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 64,
                           [Node.store("o", GX, Expr.load("a", GX) * 3 + 1)])
    pipe = P.compile(b, prog)
    ctx, q = b.device.rt.context, b.device.rt.queue
    k = cl.Program(ctx, SRC).build().k
    ba, bo = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, m * 4), cl.Buffer(ctx, cl.mem_flags.READ_WRITE, m * 4)
    out = np.empty(m, np.uint32)
    nm = np.uint32(m)

    def raw() -> bytes:
        cl.enqueue_copy(q, ba, host, is_blocking=False)
        k(q, (m,), (64,), ba, bo, nm)
        cl.enqueue_copy(q, out, bo, is_blocking=True)
        return out.tobytes()

    assert raw() == pipe.dispatch([host])[0]
    res.update(interleaved_median_us({"vyre_roundtrip_us": lambda: pipe.dispatch([host]),
                                      "raw_pyopencl_roundtrip_us": raw}, rounds=6, per_round=200))
    res["ratio_vyre_vs_raw"] = res["vyre_roundtrip_us"] / res["raw_pyopencl_roundtrip_us"]

    # build paths (a fresh source each time so no cache answers)
    opts = b.device.rt.options
    def fresh(i: int) -> str:
        return b.generated_source(Program.wrapped(prog.buffers, 64, [Node.store("o", GX, Expr.load("a", GX) * (1000 + i))]))
    t = time.perf_counter()
    cl.Program(ctx, fresh(int(time.time()))).build(options=opts)  # PyOpenCL's own binary cache on
    res["pyopencl_cached_build_cold_ms"] = (time.perf_counter() - t) * 1e3
    src = fresh(int(time.time()) + 1)
    t = time.perf_counter()
    prg = cl.Program(ctx, src).build(options=opts, cache_dir=False)
    res["plain_build_ms"] = (time.perf_counter() - t) * 1e3
    binary = prg.binaries[0]
    t = time.perf_counter()
    cl.Program(ctx, [b.device.rt.device], [binary]).build(options=opts)
    res["build_from_vyre_disk_binary_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    cl.Program(ctx, src).build(options=opts)
    res["pyopencl_cached_build_warm_ms"] = (time.perf_counter() - t) * 1e3
    emit("opencl_elementwise", res, a_.json)


if __name__ == "__main__":
    main()
