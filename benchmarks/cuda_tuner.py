"""Workgroup-size tuning on the H100: device time with the program's own workgroup size vs
the tuner's pick, for a few elementwise shapes, one run."""

from __future__ import annotations

import os
import tempfile

import numpy as np

import vyre.driver as d
from vyre.driver import DispatchConfig, tuner
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from _common import args, emit

GX = Expr.gid_x()
F = DataType.F32


def program(wg: int, heavy: bool) -> Program:
    v = Expr.var("v")
    body = [Node.let_bind("v", Expr.load("x", GX))]
    if heavy:
        body.append(Node.loop("i", Expr.u32(0), Expr.u32(64), [Node.assign("v", Expr.fma(v, v, Expr.f32(0.25)).sin())]))
    body.append(Node.store("o", GX, v * Expr.load("y", GX) + v))
    return Program.wrapped([BufferDecl.read("x", 0, F), BufferDecl.read("y", 1, F), BufferDecl.output("o", 2, F)], wg, body)


def median_device_ns(b, prog, ins, cfg, reps=10) -> float:
    b.dispatch(prog, ins, cfg)
    return float(np.median([b.dispatch_borrowed_timed(prog, ins, cfg).device_ns for _ in range(reps)]))


def main() -> None:
    a = args(__doc__)
    os.environ["VYRE_CACHE_DIR"] = tempfile.mkdtemp()
    b = d.acquire("cuda")
    res: dict[str, object] = {}
    rng = np.random.default_rng(0)
    for n, heavy, wg in ((1 << 16, False, 32), (1 << 22, False, 32), (1 << 24, False, 1024), (1 << 20, True, 32)):
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        prog = program(wg, heavy)
        r = tuner.tune(b, prog, [x, y], repeats=5)
        tag = f"{'heavy' if heavy else 'elementwise'}_n{n}_wg{wg}"
        default = median_device_ns(b, prog, [x, y], None)
        tuned = median_device_ns(b, prog, [x, y], DispatchConfig(workgroup_override=r.best))
        assert b.dispatch(prog, [x, y]) == b.dispatch(prog, [x, y], DispatchConfig(workgroup_override=r.best))
        res[tag] = {"default_us": default / 1e3, "tuned_us": tuned / 1e3, "tuned_wg": r.best[0],
                    "speedup": default / tuned}
    emit("cuda_tuner", res, a.json)


if __name__ == "__main__":
    main()
