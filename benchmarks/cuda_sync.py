"""Synchronous dispatch with 4 KiB in and 4 KiB out (upload + launch + readback): vyre's
cached pipeline vs CuPy doing the same and vs a handwritten pinned-memory cuda.core path."""

from __future__ import annotations

import ctypes
import os

import numpy as np

import vyre.driver as d
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit, interleaved_median_us

N = 1024  # 4 KiB of u32
SRC = r'''extern "C" __global__ void k(const unsigned int* a, unsigned int* o, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = a[i] * 3u + 1u;
}'''


def main() -> None:
    a = args(__doc__)
    reps = 200 if a.quick else 2000
    res: dict[str, float] = {}
    host = np.arange(N, dtype=np.uint32)
    b = d.acquire("cuda")
    gx = Expr.gid_x()
    prog = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("o", 1, DataType.U32)], 128,
                           [Node.store("o", gx, Expr.load("a", gx) * 3 + 1)])
    pipe = P.compile(b, prog)
    want = (host * 3 + 1).tobytes()
    assert pipe.dispatch([host])[0] == want
    variants = {"vyre_pipeline_dispatch_us": lambda: pipe.dispatch([host]),
                "vyre_backend_dispatch_us": lambda: b.dispatch(prog, [host])}

    import cuda.core as cc
    dev = cc.Device(0)
    s = b.device.rt.stream
    obj = cc.Program(SRC, "c++", options=cc.ProgramOptions(arch=f"sm_{''.join(map(str, dev.compute_capability))}")).compile("cubin")
    k = obj.get_kernel("k")
    mr = cc.LegacyPinnedMemoryResource()
    pin_in, pin_out = mr.allocate(N * 4), mr.allocate(N * 4)
    view_in = np.frombuffer((ctypes.c_uint32 * N).from_address(int(pin_in.handle)), np.uint32)
    view_out = np.frombuffer((ctypes.c_uint32 * N).from_address(int(pin_out.handle)), np.uint32)
    d_in, d_out = dev.allocate(N * 4, stream=s), dev.allocate(N * 4, stream=s)
    cfg = cc.LaunchConfig(grid=(N // 128,), block=(128,))
    n32 = np.uint32(N)

    def handwritten() -> bytes:
        np.copyto(view_in, host)
        d_in.copy_from(pin_in, stream=s)
        cc.launch(s, cfg, k, d_in, d_out, n32)
        pin_out.copy_from(d_out, stream=s)
        s.sync()
        return view_out.tobytes()

    assert handwritten() == want
    variants["handwritten_pinned_us"] = handwritten
    try:
        import cupy as cp
        ck = cp.RawKernel(SRC, "k")

        def with_cupy() -> bytes:
            da = cp.asarray(host)
            do = cp.empty_like(da)
            ck((N // 128,), (128,), (da, do, n32))
            return do.get().tobytes()

        assert with_cupy() == want
        variants["cupy_us"] = with_cupy
    except Exception as exc:
        res["cupy_error"] = str(exc)
    res.update(interleaved_median_us(variants, rounds=10, per_round=max(20, reps // 10)))
    if "cupy_us" in res:
        res["ratio_vyre_vs_cupy"] = res["vyre_pipeline_dispatch_us"] / res["cupy_us"]
    if a.json and os.environ.get("VYRE_BENCH_PROFILE") == "1":
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            pipe.dispatch([host])
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        a.json.with_suffix(".profile.txt").write_text(text.getvalue())
    res["ratio_vyre_vs_handwritten"] = res["vyre_pipeline_dispatch_us"] / res["handwritten_pinned_us"]
    emit("cuda_sync", res, a.json)


if __name__ == "__main__":
    main()
