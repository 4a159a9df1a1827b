"""Check vyre.lower.crmath.soft (the software float64 that vyre's math runs on under WGSL)
against the hardware on many operands: each float64 helper through its host-C print (gcc)
and its WGSL print (wgpu: lavapipe here, or any adapter), against numpy's float64.

    python scripts/crmath_soft_check.py [--c-log2n 24] [--wgsl-log2n 20] [--seed 1]

Operands: tests/lower/crmath_soft_cases.py's (all pairs of edge values, raw random bits,
moderate values, short significands, subnormals, values next to overflow, cancelling pairs,
half-ulp ties). Prints one line per helper and target; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "tests" / "lower")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c-log2n", type=int, default=24)
    ap.add_argument("--wgsl-log2n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from crmath_soft_cases import HostC, f64_pairs, f64_values, wgsl

    from vyre.lower.crmath import soft

    host = HostC()
    bad = 0

    def check(name: str, target: str, got: np.ndarray, want: np.ndarray, t0: float) -> None:
        nonlocal bad
        g, w = got.view(np.float64), want.view(np.float64)
        diff = ~((got == want) | (np.isnan(g) & np.isnan(w)))
        bad += int(diff.sum())
        first = ", ".join(f"{int(x):#018x}" for x in np.flatnonzero(diff)[:3])
        print(f"{name:8s} {target:5s} {got.size:>10d} operands  differences {int(diff.sum())}"
              f"{'  at ' + first if first else ''}  ({time.time() - t0:.1f}s)", flush=True)

    for target, log2n, run in (("C", args.c_log2n, host), ("WGSL", args.wgsl_log2n, wgsl)):
        n = 1 << log2n
        for op in ("add", "sub", "mul", "div"):
            t0 = time.time()
            a, c = f64_pairs(n, args.seed + len(op))
            x, y = a.view(np.float64), c.view(np.float64)
            with np.errstate(all="ignore"):
                want = {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y}[op].view(np.uint64)
            fn = getattr(soft, f"vyd_{op}")
            got = np.concatenate([run(fn, a[k:k + (1 << 20)], c[k:k + (1 << 20)]) for k in range(0, a.size, 1 << 20)])
            check(op, target, got, want, t0)
        t0 = time.time()
        a = f64_values(n, np.random.default_rng(args.seed))
        with np.errstate(all="ignore"):
            want = np.sqrt(a.view(np.float64)).view(np.uint64)
        got = np.concatenate([run(soft.vyd_sqrt, a[k:k + (1 << 20)]) for k in range(0, a.size, 1 << 20)])
        check("sqrt", target, got, want, t0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
