"""A bandwidth-bound producer -> consumer pair (t = x*2+1; o = t*t+3) over 2^26 f32, as two
dispatches vs fused into one (vyre.driver.fusion): device time from CUDA events, one run."""

from __future__ import annotations

import numpy as np

import vyre.driver as d
from vyre.driver.fusion import FusionCaps, fuse
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit

GX = Expr.gid_x()
F = DataType.F32


def main() -> None:
    a = args(__doc__)
    n = 1 << (24 if a.quick else 26)
    reps = 15
    b = d.acquire("cuda")
    prod = Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.output("t", 1, F)], 256,
                           [Node.store("t", GX, Expr.load("x", GX) * 2.0 + 1.0)])
    cons = Program.wrapped([BufferDecl.read("t", 0, F), BufferDecl.output("o", 1, F)], 256,
                           [Node.store("o", GX, Expr.load("t", GX) * Expr.load("t", GX) + 3.0)])
    f = fuse(prod, cons, FusionCaps.of(b))
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    rx, rt, ro, rf = (b.allocate_resident(4 * n) for _ in range(4))
    b.upload_resident(rx, x)
    two, one = [], []
    for _ in range(reps):
        two.append(b.dispatch_resident_timed(prod, [rx, rt]).device_ns + b.dispatch_resident_timed(cons, [rt, ro]).device_ns)
        one.append(b.dispatch_resident_timed(f.program, [rx, rf]).device_ns)
    assert b.read_resident(ro) == b.read_resident(rf)
    res = {"elements": n, "two_dispatches_ms": float(np.median(two)) / 1e6, "fused_ms": float(np.median(one)) / 1e6}
    res["speedup"] = res["two_dispatches_ms"] / res["fused_ms"]
    res["fused_tbps"] = 2 * 4 * n / (res["fused_ms"] * 1e-3) / 1e12
    emit("cuda_fusion", res, a.json)


if __name__ == "__main__":
    main()
