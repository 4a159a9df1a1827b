"""Every f32 input of every correctly rounded function: one backend against another, by digests.

The backend under test (wgpu through Vulkan, say) is compared with one already proven over
all 2^32 inputs (cuda: benchmarks/results/exhaustive_math.json, 0 mismatches against an
independent oracle), without moving 16 GB of results per function: one vyre Program computes
f(x) for x = every input of a chunk and folds each workgroup's 256 (x, f(x)) pairs into two
32-bit digests on the device (atomic add of a mixed hash, atomic xor of a second one). The same Program runs on both
backends; equal digests in every slot mean equal results unless a difference leaves both
digests of its slot unchanged (a single wrong f(x) changes the xor digest for certain; several
in one slot would have to cancel in the sum of a multiplicative hash of (x, f(x)) and in the
xor at once). A slot whose digests differ is re-run input by input on
both backends and its differing inputs are listed.

    python benchmarks/exhaustive_math_digest.py --backend wgpu --against cuda --json out.json
    python benchmarks/exhaustive_math_digest.py --backend wgpu --against opencl --count 0x1000000
    python benchmarks/exhaustive_math_digest.py --backend wgpu --against opencl --count 0x4000000 --stride 64

Output: per function, inputs checked, slots and inputs that differ (must be 0), seconds on
each backend.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

FUNCS = ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "sinh", "cosh", "expm1", "log1p",
         "atan", "asin", "acos", "cbrt", "erf")
WG = 256


def digest_program(name: str, slots: int):
    """x = base + gid * stride (as f32 bits; base and stride from the input), y = f(x); slot
    gid / 256 gets h(x, y) added and g(x, y) xored."""
    from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, UnOp

    U, F = DataType.U32, DataType.F32
    g = Expr.gid_x()
    xb = Expr.load("base", Expr.u32(0)) + g * Expr.load("base", Expr.u32(1))
    yb = Expr.bitcast(U, Expr.un(UnOp(name), Expr.bitcast(F, xb)))

    def u(v: int):
        return Expr.u32(v)

    h = yb * u(0x9E3779B1) + xb
    body = [Node.let_bind("h0", h),
            Node.let_bind("h1", (Expr.var("h0") ^ (Expr.var("h0") >> u(15))) * u(0x85EBCA77)),
            Node.let_bind("h2", (Expr.var("h1") ^ (Expr.var("h1") >> u(13))) * u(0xC2B2AE3D)),
            Node.let_bind("y", yb),
            Node.expr(Expr.atomic(AtomicOp.ADD, "dadd", g >> u(8), Expr.var("h2") ^ (Expr.var("h2") >> u(16)))),
            Node.expr(Expr.atomic(AtomicOp.XOR, "dxor", g >> u(8),
                                  Expr.var("y") ^ ((xb * u(0x2545F491)) >> u(7)) ^ (xb << u(11))))]
    bufs = [BufferDecl.read("base", 0, U, 2), BufferDecl.output("dadd", 1, U, slots),
            BufferDecl.output("dxor", 2, U, slots)]
    return Program.wrapped(bufs, WG, body)


def values_program(name: str):
    """y = f(x) for x = base + gid * stride, stored (to list the inputs of a differing slot)."""
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program, UnOp

    U, F = DataType.U32, DataType.F32
    g = Expr.gid_x()
    xb = Expr.load("base", Expr.u32(0)) + g * Expr.load("base", Expr.u32(1))
    return Program.wrapped([BufferDecl.read("base", 0, U, 2), BufferDecl.output("y", 1, U, WG)], WG,
                           [Node.store("y", g, Expr.bitcast(U, Expr.un(UnOp(name), Expr.bitcast(F, xb))))])


def run_digest(backend, prog, base: int, slots: int, stride: int = 1):
    from vyre.driver import DispatchConfig

    out = backend.dispatch(prog, [np.array([base, stride], np.uint32)], DispatchConfig(grid_override=(slots, 1, 1)))
    return np.frombuffer(out[0], np.uint32), np.frombuffer(out[1], np.uint32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="wgpu")
    ap.add_argument("--against", default="cuda")
    ap.add_argument("--functions", default=",".join(FUNCS))
    ap.add_argument("--start", type=lambda s: int(s, 0), default=0)
    ap.add_argument("--count", type=lambda s: int(s, 0), default=1 << 32)
    ap.add_argument("--stride", type=lambda s: int(s, 0), default=1,
                    help="check every stride-th input from --start (a sample spread over the range)")
    ap.add_argument("--chunk-log2", type=int, default=26)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    from vyre.driver import acquire

    test, ref = acquire(a.backend), acquire(a.against)
    chunk = 1 << a.chunk_log2
    start = a.start - a.start % WG
    # the k-th input checked is start + k stride, for k below count and inside the f32 range
    end = start + min(a.count, ((1 << 32) - start + a.stride - 1) // a.stride)
    report: dict = {"backend": test.id(), "against": ref.id(), "start": start, "stride": a.stride,
                    "inputs": end - start,
                    "method": "per-workgroup digests of (x, f(x)) over 256 inputs, compared slot by slot",
                    "functions": {}}
    total = 0
    for name in a.functions.split(","):
        secs = {"test": 0.0, "ref": 0.0}
        bad_slots, bad_inputs, first = 0, 0, []
        for s in range(start, end, chunk):
            n = min(chunk, end - s)
            slots = (n + WG - 1) // WG
            prog = digest_program(name, slots)
            t0 = time.perf_counter()
            base = (start + (s - start) * a.stride) & 0xFFFFFFFF
            da, dx = run_digest(test, prog, base, slots, a.stride)
            t1 = time.perf_counter()
            ra, rx = run_digest(ref, prog, base, slots, a.stride)
            t2 = time.perf_counter()
            secs["test"] += t1 - t0
            secs["ref"] += t2 - t1
            diff = np.flatnonzero((da != ra) | (dx != rx))
            bad_slots += int(diff.size)
            for k in diff[:16].tolist():   # list the inputs of the first differing slots
                vp = values_program(name)
                b0 = (base + k * WG * a.stride) & 0xFFFFFFFF
                arg = np.array([b0, a.stride], np.uint32)
                got = np.frombuffer(test.dispatch(vp, [arg])[0], np.uint32)
                want = np.frombuffer(ref.dispatch(vp, [arg])[0], np.uint32)
                for i in np.flatnonzero(got != want).tolist():
                    bad_inputs += 1
                    if len(first) < 8:
                        first.append({"x": f"0x{(b0 + i * a.stride) & 0xFFFFFFFF:08x}", a.backend: f"0x{int(got[i]):08x}",
                                      a.against: f"0x{int(want[i]):08x}"})
        total += bad_slots
        report["functions"][name] = {"inputs": end - start, "slots_differing": bad_slots,
                                     "inputs_differing_in_first_16_slots": bad_inputs, "first": first,
                                     f"seconds_{a.backend}": round(secs["test"], 2),
                                     f"seconds_{a.against}": round(secs["ref"], 2)}
        print(f"{name}: {end - start} inputs, {bad_slots} slots differ {first[:3]}  "
              f"({a.backend} {secs['test']:.1f} s, {a.against} {secs['ref']:.1f} s)", flush=True)
        if a.json:   # after every function: a run cut short keeps what it finished
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps(report | {"slots_differing": total}, indent=1) + "\n")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
