"""Find every f32 input that the reference's rounding test flags, for each transcendental.

Runs `vyre.reference.crmath.flagged` (the float64 value widened by EPS relative error)
over every f32 input whose result is not trivially far from a rounding boundary, and
writes, per function, the flagged inputs and their correctly rounded results (mpmath) to
`src/vyre/lower/crmath_hard_cases.json`. The generated device code looks its hard cases up
in that table (vyre.lower.crmath); tests check every entry on every backend.

Skipped ranges, by analysis: NaN and infinities (special values); exp/exp2 with
|x| < 2^-27 (result 1 +- less than a quarter ULP) or |x| >= 256 (overflow, or below
2^-150); sin/cos/tan/tanh with |x| < 2^-14 (x or 1 within 2^-28 relative, far from a
midpoint); tanh with |x| >= 16 (+-1); log/log2 of non-positive x; sinh/cosh with |x| < 2^-14
or >= 128; expm1 with |x| < 2^-26 (x within 2^-27 relative) or >= 128; log1p with
|x| < 2^-26 or x < -1; atan with |x| < 2^-14 or >= 2^32 (pi/2 - 1/x stays 2^-26 from a
midpoint); asin/acos outside [-1, 1] (NaN), asin with |x| < 2^-14, acos with |x| < 2^-30; erf with |x| >= 4 (+-1; 2/sqrt(pi) x
is anywhere on the grid, so every smaller x is searched).

    python scripts/crmath_hard_cases.py [--functions exp,log] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pathlib
import sys

import numpy as np

from vyre.ir.types import UnOp
from vyre.reference import crmath as C

OUT = pathlib.Path(__file__).resolve().parents[1] / "src/vyre/lower/crmath_hard_cases.json"
CHUNK = 1 << 22


def _exps(lo: int, hi: int) -> list[tuple[int, int]]:
    """Bit ranges [start, end) of positive and negative f32 with biased exponent lo..hi-1."""
    pos = (lo << 23, hi << 23)
    return [pos, (pos[0] | 0x80000000, pos[1] | 0x80000000)]


DOMAINS: dict[UnOp, list[tuple[int, int]]] = {
    UnOp.EXP: _exps(127 - 27, 127 + 8), UnOp.EXP2: _exps(127 - 27, 127 + 8),
    UnOp.LOG: [(0x00800000, 0x7F800000)], UnOp.LOG2: [(0x00800000, 0x7F800000)],
    UnOp.SIN: _exps(127 - 14, 255), UnOp.COS: _exps(127 - 14, 255),
    UnOp.TAN: _exps(127 - 14, 255), UnOp.TANH: _exps(127 - 14, 127 + 4),
    UnOp.SINH: _exps(127 - 14, 127 + 7), UnOp.COSH: _exps(127 - 14, 127 + 7),
    UnOp.EXPM1: _exps(127 - 26, 127 + 7),
    UnOp.LOG1P: [((127 - 26) << 23, 0x7F800000), (0x80000000 | ((127 - 26) << 23), 0xBF800001)],
    UnOp.ATAN: _exps(127 - 14, 127 + 32), UnOp.ASIN: [(s, e) for s, e in _exps(127 - 14, 127)]
    + [(0x3F800000, 0x3F800001), (0xBF800000, 0xBF800001)],
    UnOp.ACOS: [(s, e) for s, e in _exps(127 - 30, 127)] + [(0x3F800000, 0x3F800001), (0xBF800000, 0xBF800001)],
    UnOp.CBRT: _exps(1, 255), UnOp.ERF: _exps(1, 127 + 2),
}


def _chunk(job: tuple[str, int, int]) -> list[tuple[int, int]]:
    name, start, end = job
    op = UnOp(name)
    bits = np.arange(start, end, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        y = C.F64[op](x)
    # quick superset: f64 low 29 bits near the half-way pattern, or near a range edge
    u = y.view(np.uint64) & np.uint64((1 << 29) - 1)
    near = np.abs(u.astype(np.int64) - (1 << 28)) <= 512
    a = np.abs(y)
    edge = (a < 2.0 ** -125) | (a > 2.0 ** 127)
    cand = np.flatnonzero(near | edge)
    hard = cand[C.flagged(y[cand])]
    return [(int(bits[i]), int(np.float32(C.exact_f32(op, float(x[i]))).view(np.uint32)))
            for i in hard]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", default=",".join(op.value for op in DOMAINS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    table = json.loads(out.read_text()) if out.exists() else {}
    with multiprocessing.Pool(args.jobs) as pool:
        for name in args.functions.split(","):
            op = UnOp(name)
            jobs = [(name, s, min(s + CHUNK, e)) for s, e in DOMAINS[op] for s in range(s, e, CHUNK)]
            found = sorted(p for part in pool.imap_unordered(_chunk, jobs) for p in part)
            table[name] = [f"{xb:08x}:{yb:08x}" for xb, yb in found]
            print(f"{name}: {len(found)} hard cases over {sum(e - s for s, e in DOMAINS[op])} inputs",
                  flush=True)
            out.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
