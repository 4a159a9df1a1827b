"""Dispatch overhead of a tiny program (x[i] += 1 over 1024 u32, resident buffers, cached
pipeline) vs raw cuda.core.launch of the handwritten kernel, CuPy RawKernel, a PyTorch op and
a Triton kernel, side by side in one run. Per-launch time = (N launches + one sync) / N.

`dispatch_resident_timed` waits for its dispatch and reports device time, so besides the
pipelined raw launch it is also compared with its raw twin: timing events, launch, sync."""

from __future__ import annotations

import numpy as np

import vyre.driver as d
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit, per_call_ns

N = 1024
CALLS = 2000
SRC = r'''extern "C" __global__ void inc(unsigned int* x, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + 1u;
}'''


def main() -> None:
    a = args(__doc__)
    calls = 300 if a.quick else CALLS
    res: dict[str, float] = {}
    b = d.acquire("cuda")
    gx = Expr.gid_x()
    prog = Program.wrapped([BufferDecl.read_write("x", 0, DataType.U32)], 64,
                           [Node.store("x", gx, Expr.load("x", gx) + 1)])
    r = b.allocate_resident(N * 4)
    b.upload_resident(r, np.zeros(N, np.uint32))
    bound = b.bind_resident(prog, [r])
    s = b.device.rt.stream
    res["vyre_bound_launch_us"] = per_call_ns(bound.launch, calls, s.sync) / 1e3
    res["vyre_dispatch_resident_timed_us"] = per_call_ns(lambda: b.dispatch_resident_timed(prog, [r]), calls // 4, s.sync) / 1e3

    import cuda.core as cc
    dev = cc.Device(0)
    obj = cc.Program(SRC, "c++", options=cc.ProgramOptions(arch=f"sm_{''.join(map(str, dev.compute_capability))}")).compile("cubin")
    k = obj.get_kernel("inc")
    buf = dev.allocate(N * 4, stream=s)
    cfg = cc.LaunchConfig(grid=(N // 64,), block=(64,))
    n32 = np.uint32(N)
    res["raw_cuda_core_launch_us"] = per_call_ns(lambda: cc.launch(s, cfg, k, buf, n32), calls, s.sync) / 1e3
    timing = cc.EventOptions(timing_enabled=True)

    def raw_timed() -> float:
        e0 = s.record(options=timing)
        cc.launch(s, cfg, k, buf, n32)
        e1 = s.record(options=timing)
        e1.sync()
        return e1 - e0

    res["raw_launch_timed_sync_us"] = per_call_ns(raw_timed, calls // 4, s.sync) / 1e3
    from vyre.driver import pipeline as P

    pipe = P.compile(b, prog)
    res["vyre_pipeline_resident_timed_us"] = per_call_ns(lambda: pipe.dispatch_resident_timed([r]), calls // 4, s.sync) / 1e3
    try:
        import cupy as cp
        ck = cp.RawKernel(SRC, "inc")
        cx = cp.zeros(N, dtype=cp.uint32)
        res["cupy_rawkernel_us"] = per_call_ns(lambda: ck((N // 64,), (64,), (cx, n32)), calls,
                                               cp.cuda.Device().synchronize) / 1e3
    except Exception as exc:
        res["cupy_error"] = str(exc)
    try:
        import torch
        t = torch.zeros(N, dtype=torch.int32, device="cuda")
        res["torch_add__us"] = per_call_ns(lambda: t.add_(1), calls, torch.cuda.synchronize) / 1e3
    except Exception as exc:
        res["torch_error"] = str(exc)
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def tinc(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)

        tx = torch.zeros(N, dtype=torch.int32, device="cuda")
        res["triton_launch_us"] = per_call_ns(lambda: tinc[(N // 64,)](tx, N, BLOCK=64), calls,
                                              torch.cuda.synchronize) / 1e3
    except Exception as exc:
        res["triton_error"] = str(exc)
    base = res["raw_cuda_core_launch_us"]
    res["ratio_vyre_vs_raw"] = res["vyre_bound_launch_us"] / base
    res["ratio_resident_timed_vs_raw_launch"] = res["vyre_dispatch_resident_timed_us"] / base
    res["ratio_resident_timed_vs_raw_timed_sync"] = res["vyre_dispatch_resident_timed_us"] / res["raw_launch_timed_sync_us"]
    assert np.array_equal(np.frombuffer(b.read_resident(r), np.uint32)[:4], np.frombuffer(b.read_resident(r), np.uint32)[:4])
    emit("cuda_dispatch", res, a.json)


if __name__ == "__main__":
    main()
