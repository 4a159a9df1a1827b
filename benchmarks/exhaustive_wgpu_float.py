"""Exhaustive proof of the legalized f32 sqrt and reciprocal (`vyre.lower.legalize`, what the
wgpu backend runs) over all 2^32 inputs, on any backend.

The kernel computes its own inputs (``bits = base + gid``), runs the rewritten Program (only
u32 operations), and the host compares every output with numpy's float32 ``sqrt`` and
``1/x`` (correctly rounded IEEE) with S9 applied (subnormal operands and results become
zeros of their sign, NaNs 0x7FC00000). Prints and writes (``--json``) the mismatch count per
op (must be 0), the first mismatches, and the time. ``--chunks N`` checks only the first N
chunks and ``--every K`` every K-th (quick smoke runs); the default covers all 2^32 inputs.

On the H100: ``python benchmarks/exhaustive_wgpu_float.py --backend cuda --json $OUT/exh.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from vyre.driver import acquire
from vyre.ir import BufferDecl, DataType, Expr, Node, Program, UnOp
from vyre.lower.legalize import Feature, legalize

from _common import emit

U, F = DataType.U32, DataType.F32
OPS = {"sqrt": UnOp.SQRT, "reciprocal": UnOp.RECIPROCAL}


def s9(bits: np.ndarray) -> np.ndarray:
    bits = bits.copy()
    bits[(bits & 0x7F800000) == 0] &= np.uint32(0x80000000)
    bits[(bits & 0x7FFFFFFF) > 0x7F800000] = 0x7FC00000
    return bits


def program(op: UnOp, n: int) -> Program:
    gx = Expr.gid_x()
    x = Expr.bitcast(F, Expr.load("base", Expr.u32(0)) + gx)
    body = [Node.if_(gx.lt(Expr.u32(n)), [Node.store("out", gx, Expr.bitcast(U, Expr.un(op, x)))])]
    p = Program.wrapped([BufferDecl.read("base", 0, U, 1), BufferDecl.output("out", 1, U, n)], 256, body)
    return legalize(p, {Feature.F32_SQRT, Feature.F32_RECIPROCAL})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="wgpu")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--ops", default="sqrt,reciprocal")
    ap.add_argument("--chunk-log2", type=int, default=23, help="inputs per dispatch: 2^k (k <= 23 on wgpu)")
    ap.add_argument("--chunks", type=int, default=None, help="check only this many chunks")
    ap.add_argument("--every", type=int, default=1, help="check every k-th chunk (a spread sample)")
    a = ap.parse_args()
    be = acquire(a.backend)
    n = 1 << a.chunk_log2
    starts = list(range(0, (1 << 32) // n, a.every))[:a.chunks]
    total = len(starts)
    res: dict = {"backend": a.backend, "device": be.device_profile().device_name, "inputs_per_op": total * n}
    for name in a.ops.split(","):
        op = OPS[name]
        prog = program(op, n)
        bad = 0
        first: list[str] = []
        t0 = time.perf_counter()
        for k in starts:
            base = np.array([k * n], np.uint32)
            got = np.frombuffer(be.dispatch(prog, [base])[0], np.uint32)
            x = np.arange(k * n, k * n + n, dtype=np.uint64).astype(np.uint32)
            with np.errstate(all="ignore"):
                xf = s9(x).view(np.float32)
                want = s9((np.sqrt(xf) if op is UnOp.SQRT else np.float32(1) / xf).view(np.uint32))
            diff = np.flatnonzero(got != want)
            bad += diff.size
            first += [f"{int(x[i]):#010x}: got {int(got[i]):#010x} want {int(want[i]):#010x}"
                      for i in diff[:max(0, 8 - len(first))]]
        res[f"{name}_mismatches"] = bad
        res[f"{name}_first_mismatches"] = first
        res[f"{name}_seconds"] = time.perf_counter() - t0
        print(f"{name}: {total * n} inputs, {bad} mismatches, {res[f'{name}_seconds']:.1f} s", flush=True)
    emit("exhaustive_wgpu_float", res, a.json)
    if any(res[f"{o}_mismatches"] for o in a.ops.split(",")):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
