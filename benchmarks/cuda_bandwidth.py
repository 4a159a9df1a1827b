"""Bandwidth of 2^28-element u32 and f32 elementwise adds (vyre, resident buffers, device
time from CUDA events) vs a device-to-device copy (the ceiling) and Triton, one run."""

from __future__ import annotations

import numpy as np

import vyre.driver as d
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit


def main() -> None:
    a = args(__doc__)
    n = 1 << (26 if a.quick else 28)
    reps = 20
    res: dict[str, float] = {"elements": n}
    b = d.acquire("cuda")
    import cupy as cp
    import torch

    def events_ms(fn) -> float:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        return float(np.median(times))

    x = cp.arange(n, dtype=cp.uint32)
    y = cp.empty_like(x)
    copy_ms = events_ms(lambda: y.__setitem__(slice(None), x))
    res["d2d_copy_tbps"] = 2 * 4 * n / (copy_ms * 1e-3) / 1e12
    gx = Expr.gid_x()
    for name, dt in (("u32", DataType.U32), ("f32", DataType.F32)):
        prog = Program.wrapped([BufferDecl.read("a", 0, dt), BufferDecl.read("b", 1, dt), BufferDecl.output("o", 2, dt)],
                               256, [Node.store("o", gx, Expr.load("a", gx) + Expr.load("b", gx))])
        rs = [b.allocate_resident(4 * n) for _ in range(3)]
        rng = np.random.default_rng(0)
        host = rng.integers(0, 2**31, n, dtype=np.uint32) if dt is DataType.U32 else rng.standard_normal(n).astype(np.float32)
        b.upload_resident(rs[0], host)
        b.upload_resident(rs[1], host)
        timed = [b.dispatch_resident_timed(prog, rs).device_ns for _ in range(reps)]
        ms = float(np.median(timed)) / 1e6
        res[f"vyre_{name}_ms"] = ms
        res[f"vyre_{name}_tbps"] = 3 * 4 * n / (ms * 1e-3) / 1e12
        out = np.frombuffer(b.read_resident(rs[2]), dtype=host.dtype)
        assert np.array_equal(out[:1000], (host[:1000] + host[:1000]))
        for r in rs:
            b.free_resident(r)
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def add(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(o_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m), mask=m)

        for name, tdt in (("u32", torch.int32), ("f32", torch.float32)):
            ta = torch.ones(n, dtype=tdt, device="cuda")
            tb = torch.ones(n, dtype=tdt, device="cuda")
            to = torch.empty_like(ta)
            ms = events_ms(lambda: add[(triton.cdiv(n, 1024),)](ta, tb, to, n, BLOCK=1024))
            res[f"triton_{name}_tbps"] = 3 * 4 * n / (ms * 1e-3) / 1e12
    except Exception as exc:
        res["triton_error"] = str(exc)
    for name in ("u32", "f32"):
        res[f"ratio_vyre_{name}_vs_copy"] = res[f"vyre_{name}_tbps"] / res["d2d_copy_tbps"]
        if f"triton_{name}_tbps" in res:
            res[f"ratio_vyre_{name}_vs_triton"] = res[f"vyre_{name}_tbps"] / res[f"triton_{name}_tbps"]
    emit("cuda_bandwidth", res, a.json)


if __name__ == "__main__":
    main()
