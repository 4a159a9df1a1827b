"""OpenCL on PoCL: a 16M-element correctly rounded f32 `exp` (and `sin`, `log`, `tanh`) against
numpy on float32 (numpy's own, not correctly rounded, SIMD functions), wall time of a host
dispatch including transfers, median; also the kernel's device time, and the floor: a
negation through the same path (`negate_*`). `dispatch` returns bytes, `*_arrays_ms` times
`dispatch_arrays`, which returns numpy arrays as numpy does; on PoCL the kernel writes a large
output in place into either (`vyre.driver.hostbytes` for the bytes): no copy."""

from __future__ import annotations

import numpy as np

import vyre.driver as d
from vyre.driver import pipeline as P
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, UnOp

from _common import args, emit, median_ns

GX = Expr.gid_x()
FUNCS = {"exp": (np.exp, (-80.0, 80.0)), "sin": (np.sin, (-1e4, 1e4)),
         "log": (np.log, (1e-3, 1e6)), "tanh": (np.tanh, (-10.0, 10.0))}


def main() -> None:
    a = args(__doc__)
    n = 1 << (22 if a.quick else 24)
    b = d.acquire("opencl")
    rng = np.random.default_rng(0)
    res: dict[str, float] = {"elements": n, "device": b.device_profile().device_name}
    # the floor: the same dispatch with out[i] = -x[i] (transfers, launch, one pass)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    copy = P.compile(b, Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)],
                                        256, [Node.store("o", GX, -Expr.load("x", GX))]))
    copy.dispatch([x])
    res["negate_vyre_ms"] = median_ns(lambda: copy.dispatch([x]), 5, 1) / 1e6
    res["negate_vyre_arrays_ms"] = median_ns(lambda: b.dispatch_arrays(copy.program, [x]), 5, 1) / 1e6
    res["negate_numpy_ms"] = median_ns(lambda: -x, 5, 1) / 1e6
    for name, (fn, (lo, hi)) in FUNCS.items():
        x = rng.uniform(lo, hi, n).astype(np.float32)
        prog = Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)],
                               256, [Node.store("o", GX, Expr.un(UnOp(name), Expr.load("x", GX)))])
        pipe = P.compile(b, prog)
        got = np.frombuffer(pipe.dispatch([x])[0], np.float32)
        res[f"{name}_numpy_differs"] = int(np.count_nonzero(got.view(np.uint32) != fn(x).view(np.uint32)))
        res[f"{name}_vyre_ms"] = median_ns(lambda pipe=pipe, x=x: pipe.dispatch([x]), 5, 1) / 1e6
        res[f"{name}_vyre_device_ms"] = pipe.dispatch_timed([x]).device_ns / 1e6
        res[f"{name}_vyre_arrays_ms"] = median_ns(lambda prog=prog, x=x: b.dispatch_arrays(prog, [x]), 5, 1) / 1e6
        res[f"{name}_numpy_ms"] = median_ns(lambda fn=fn, x=x: fn(x), 5, 1) / 1e6
        res[f"{name}_ratio_vyre_over_numpy"] = res[f"{name}_vyre_ms"] / res[f"{name}_numpy_ms"]
        res[f"{name}_ratio_arrays_over_numpy"] = res[f"{name}_vyre_arrays_ms"] / res[f"{name}_numpy_ms"]
    emit("opencl_math", res, a.json)


if __name__ == "__main__":
    main()
