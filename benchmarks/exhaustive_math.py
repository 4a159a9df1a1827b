"""Exhaustive proof of S13: every f32 input of every unary transcendental, vyre's backend
against an oracle that shares no code with vyre's implementation or reference.

Oracle: the function in float64 (CuPy, i.e. CUDA's libdevice double functions, on the cuda
backend; numpy on others), rounded to f32 and flushed (S9), with a rounding test: where the
float64 value widened by 2^-46 relative error may round to two different f32 values, the
input is recomputed on the host with mpmath at 300 bits and rounded to 24 bits there. Inputs
are canonicalised first (a subnormal is zero, S9), as vyre's are.

    python benchmarks/exhaustive_math.py --json out.json                  # cuda, all 2^32
    python benchmarks/exhaustive_math.py --backend opencl --start 0x3f800000 --count 0x100000

Output: per function, inputs checked, mismatches (must be 0), the first mismatching inputs,
the inputs the rounding test sent to mpmath and seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import mpmath
import numpy as np

FUNCS = ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "sinh", "cosh", "expm1", "log1p",
         "atan", "asin", "acos", "cbrt", "erf")
_XP_NAME = {"atan": "arctan", "asin": "arcsin", "acos": "arccos"}
EPS = 2.0 ** -46
_MP = {"exp": mpmath.exp, "exp2": lambda v: mpmath.power(2, v), "log": mpmath.log,
       "log2": lambda v: mpmath.log(v, 2), "sin": mpmath.sin, "cos": mpmath.cos,
       "tan": mpmath.tan, "tanh": mpmath.tanh, "sinh": mpmath.sinh, "cosh": mpmath.cosh,
       "expm1": mpmath.expm1, "log1p": mpmath.log1p, "atan": mpmath.atan, "asin": mpmath.asin,
       "acos": mpmath.acos, "cbrt": lambda v: mpmath.cbrt(v) if v >= 0 else -mpmath.cbrt(-v),
       "erf": mpmath.erf}


def _f64(xp, name: str, x):
    if name == "exp2":   # 2^n * 2^f: exact split, so large |x| loses nothing
        x = xp.clip(x, -300.0, 300.0)
        n = xp.rint(x)
        return xp.ldexp(xp.exp2(x - n), n.astype(xp.int32))
    if name == "erf":    # CuPy: libdevice's erf; numpy has none: libm's, element by element
        if xp is np:
            return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)
        from cupyx.scipy.special import erf
        return erf(x)
    return getattr(xp, _XP_NAME.get(name, name))(x)


def _canon_bits(xp, b):
    """S9 on f32 bits: NaN -> 0x7FC00000, subnormal -> signed zero."""
    e = b & xp.uint32(0x7F800000)
    nan = (e == 0x7F800000) & ((b & xp.uint32(0x007FFFFF)) != 0)
    return xp.where(nan, xp.uint32(0x7FC00000), xp.where(e == 0, b & xp.uint32(0x80000000), b))


def _round_bits(xp, y):
    return _canon_bits(xp, y.astype(xp.float32).view(xp.uint32))


def _mp_exact(name: str, xb: int) -> int:
    """mpmath's correctly rounded, flushed f32 bits at a finite, nonzero-result input."""
    x = float(np.uint32(xb).view(np.float32))
    with mpmath.workprec(300):
        v = _MP[name](mpmath.mpf(x))
        with mpmath.workprec(24):
            r = +v
        a = abs(r)
        if a >= mpmath.mpf(2) ** 128:
            out = math.inf
        elif a < mpmath.mpf(2) ** -126:
            out = 2.0 ** -126 if abs(v) >= mpmath.mpf(2) ** -126 - mpmath.mpf(2) ** -150 else 0.0
        else:
            out = float(a)
    return int(np.float32(-out if v < 0 else out).view(np.uint32))


def oracle(xp, name: str, bits):
    """Correctly rounded, flushed f32 bits of ``name`` at every f32 input ``bits``, and how
    many inputs went to mpmath."""
    cb = _canon_bits(xp, bits)
    x = cb.view(xp.float32).astype(xp.float64)
    with np.errstate(all="ignore"):   # NaN, overflow: the special values themselves
        y = _f64(xp, name, x)
        want = _round_bits(xp, y)
        d = xp.abs(y) * EPS
        hard = (_round_bits(xp, y - d) != _round_bits(xp, y + d)) & xp.isfinite(y) & (y != 0)
    idx = xp.flatnonzero(hard)
    n = int(idx.size)
    if n:
        hb = cb[idx] if xp is np else cb[idx].get()
        host = [_mp_exact(name, int(v)) for v in hb.tolist()]
        want[idx] = xp.asarray(np.array(host, np.uint32))
    return want, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--functions", default=",".join(FUNCS))
    ap.add_argument("--start", type=lambda s: int(s, 0), default=0)
    ap.add_argument("--count", type=lambda s: int(s, 0), default=1 << 32)
    ap.add_argument("--chunk-log2", type=int, default=28)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    import vyre  # noqa: F401
    from vyre.driver import acquire
    from vyre.ir import BufferDecl, DataType, Expr, Node, Program, UnOp

    b = acquire(a.backend)
    cuda = a.backend == "cuda"
    if cuda:
        import cupy as xp
    else:
        xp = np
    gx = Expr.gid_x()
    chunk = 1 << a.chunk_log2
    end = min(a.start + a.count, 1 << 32)
    report: dict = {"backend": b.id(), "start": a.start, "end": end, "functions": {}}
    total_bad = 0
    for name in a.functions.split(","):
        prog = Program.wrapped([BufferDecl.read("x", 0, DataType.F32), BufferDecl.output("o", 1, DataType.F32)],
                               256, [Node.store("o", gx, Expr.un(UnOp(name), Expr.load("x", gx)))])
        t0 = time.perf_counter()
        bad, first, mp_n = 0, [], 0
        for s in range(a.start, end, chunk):
            n = min(chunk, end - s)
            bits = xp.arange(s, s + n, dtype=xp.uint64).astype(xp.uint32)
            if cuda:
                got = xp.asarray(b.dispatch_device(prog, [bits.view(xp.float32)])[0]).view(xp.uint32)
            else:
                got = np.frombuffer(b.dispatch(prog, [bits.view(np.float32)])[0], np.uint32)
            want, k = oracle(xp, name, bits)
            mp_n += k
            wrong = xp.flatnonzero(got != want)
            bad += int(wrong.size)
            for i in (wrong[:8].get() if cuda else wrong[:8]).tolist():
                if len(first) < 8:
                    first.append({"x": f"0x{s + i:08x}", "got": f"0x{int(got[i]):08x}",
                                  "want": f"0x{int(want[i]):08x}"})
            del got, want, bits
        dt = time.perf_counter() - t0
        report["functions"][name] = {"inputs": end - a.start, "mismatches": bad, "first": first,
                                     "mpmath_inputs": mp_n, "seconds": round(dt, 2)}
        total_bad += bad
        print(f"{name}: {end - a.start} inputs, {bad} mismatches, {mp_n} to mpmath, {dt:.1f} s {first[:3]}",
              flush=True)
    report["mismatches"] = total_bad
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
