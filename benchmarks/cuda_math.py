"""Correctly rounded transcendentals on CUDA (vyre.lower.crmath) against CUDA's own expf /
logf / sinf / tanhf (not correctly rounded) in a CuPy ElementwiseKernel, side by side in one
run on one device. Device time from CUDA events / vyre's resident timed dispatch, median.

- memory-bound: out[i] = f(x[i]) over 2^28 f32 (targets: vyre <= 1.25x CuPy)
- compute-bound: each thread sums f(x[i] + j/1024) for j < 64 over 2^22 threads (<= 3x)
"""

from __future__ import annotations

import numpy as np

import vyre.driver as d
from vyre.driver import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, UnOp

from _common import args, emit

REPS = 15
FUNCS = {"exp": ("expf", (-80.0, 80.0)), "log": ("logf", (1e-3, 1e6)),
         "sin": ("sinf", (-1e4, 1e4)), "tanh": ("tanhf", (-10.0, 10.0))}
GX = Expr.gid_x()


def _map(op: UnOp) -> Program:
    return Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)],
                           256, [Node.store("o", GX, Expr.un(op, Expr.load("x", GX)))])


def _loop64(op: UnOp) -> Program:
    x = Expr.load("x", GX)
    j = Expr.cast(DataType.F32, Expr.var("j")) * Expr.f32(1 / 1024)
    body = [Node.let_bind("acc", Expr.f32(0.0)),
            Node.loop("j", Expr.u32(0), Expr.u32(64), [Node.assign("acc", Expr.var("acc") + Expr.un(op, x + j))]),
            Node.store("o", GX, Expr.var("acc"))]
    return Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)],
                           256, body)


def _cupy_ms(fn, cp) -> float:
    fn()
    cp.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(REPS):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(times))


def _vyre_ms(b, program: Program, host: np.ndarray) -> float:
    rx = b.allocate_resident(host.nbytes)
    b.upload_resident(rx, host)
    ro = b.allocate_resident(host.nbytes)
    pipe = d.pipeline.compile(b, program, DispatchConfig())
    pipe.dispatch_resident_timed([rx, ro])
    times = [pipe.dispatch_resident_timed([rx, ro]).device_ns for _ in range(REPS)]
    b.free_resident(rx)
    b.free_resident(ro)
    return float(np.median(times)) / 1e6


def main() -> None:
    a = args(__doc__)
    import cupy as cp

    b = d.acquire("cuda")
    n_mem = 1 << (24 if a.quick else 28)
    n_cmp = 1 << 22
    rng = np.random.default_rng(0)
    res: dict[str, float] = {"elements_memory_bound": n_mem, "threads_compute_bound": n_cmp}
    for name, (cname, (lo, hi)) in FUNCS.items():
        op = UnOp(name)
        host = rng.uniform(lo, hi, n_mem).astype(np.float32)
        x = cp.asarray(host)
        ek = cp.ElementwiseKernel("float32 x", "float32 o", f"o = {cname}(x)", f"ek_{name}")
        out = cp.empty_like(x)
        res[f"{name}_memory_cupy_ms"] = _cupy_ms(lambda ek=ek, x=x, out=out: ek(x, out), cp)
        res[f"{name}_memory_vyre_ms"] = _vyre_ms(b, _map(op), host)
        res[f"{name}_memory_ratio"] = res[f"{name}_memory_vyre_ms"] / res[f"{name}_memory_cupy_ms"]
        del x, out
        hs = host[:n_cmp].copy()
        xs = cp.asarray(hs)
        ek64 = cp.ElementwiseKernel(
            "float32 x", "float32 o",
            f"float acc = 0.0f; for (int j = 0; j < 64; j++) acc = __fadd_rn(acc, {cname}(__fadd_rn(x, __fmul_rn((float)j, 0.0009765625f)))); o = acc;",
            f"ek64_{name}")
        os_ = cp.empty_like(xs)
        res[f"{name}_compute_cupy_ms"] = _cupy_ms(lambda ek=ek64, x=xs, o=os_: ek(x, o), cp)
        res[f"{name}_compute_vyre_ms"] = _vyre_ms(b, _loop64(op), hs)
        res[f"{name}_compute_ratio"] = res[f"{name}_compute_vyre_ms"] / res[f"{name}_compute_cupy_ms"]
        # how often CUDA's own function differs from the correctly rounded result (vyre)
        want = np.frombuffer(b.dispatch(_map(op), [host[: 1 << 20]])[0], np.uint32)
        got = ek(cp.asarray(host[: 1 << 20])).get().view(np.uint32)
        res[f"{name}_cuda_differs_per_million"] = float(np.count_nonzero(got != want))
        del xs, os_
        cp.get_default_memory_pool().free_all_blocks()
    emit("cuda_math", res, a.json)


if __name__ == "__main__":
    main()
