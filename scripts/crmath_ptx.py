"""A GPU speed proxy without a GPU: the PTX NVRTC makes of each correctly rounded function.

For this tree and an earlier git revision (``--rev``), prints a CUDA kernel ``o[i] =
vym_<f>(x[i])`` with the CUDA driver's header and the crmath prelude, compiles it with NVRTC
for sm_90 with the options vyre's CUDA driver uses (`vyre.drivers.cuda.compiler.OPTIONS`:
no FMA contraction), and counts the PTX instructions by opcode: all of them, the float64
ones (``add/sub/mul/fma/div/rcp/sqrt .f64``), conversions, 64-bit integer multiplies,
loads from the tables and branches. These are static counts, compared old against new: over
the whole function (the rare paths included), and over the kernel's own body (the inlined
common path; the out-of-line ``VYM_COLD`` functions it calls rarely are left out); device time
is measured by benchmarks/cuda_math.py on the H100.

    python scripts/crmath_ptx.py [--rev main] [--functions sin,exp] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

# run with a tree's src on the path: the PTX of one kernel per function, as JSON
_PTX = r"""
import json, sys
from vyre.drivers.cuda.codegen import HEADER
from vyre.drivers.cuda.compiler import compile_ptx
from vyre.ir.types import UnOp
from vyre.lower import crmath
out = {}
for f in sys.argv[1].split(","):
    op = UnOp(f)
    src = (HEADER + crmath.prelude({op}) + 'extern "C" __global__ void k(const float* x, float* o) {'
           ' uint i = blockIdx.x * blockDim.x + threadIdx.x; o[i] = ' + crmath.HELPER[op] + '(x[i]); }')
    out[f] = compile_ptx(src, "sm_90")
print(json.dumps(out))
"""

GROUPS = {
    "f64_add_sub": r"(add|sub)(\.rn)?\.f64", "f64_mul": r"mul(\.rn)?\.f64", "f64_fma": r"fma\.rn\.f64",
    "f64_div_rcp_sqrt": r"(div|rcp|sqrt)[.\w]*\.f64", "cvt": r"cvt\.", "int64_mul": r"mul\.(lo|hi|wide)\.[us]64",
    "loads_global_const": r"ld\.(global|const)", "branches": r"bra", "setp": r"setp\.",
}


def ptx(rev: str | None, functions: str, tmp: pathlib.Path) -> dict[str, str]:
    src = ROOT / "src"
    if rev is not None:
        d = tmp / "old"
        d.mkdir(exist_ok=True)
        tar = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(d)], input=tar, check=True)
        src = d / "src"
    out = subprocess.run([sys.executable, "-c", _PTX, functions], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(src)}).stdout
    return json.loads(out)


def counts(text: str) -> dict[str, int]:
    """Instruction counts of a PTX text: total, by group (`GROUPS`)."""
    ops = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".", "{", "}", "$")) or s.endswith(":") or s == "ret;":
            continue
        if s.startswith("@"):
            s = s.split(None, 1)[1]
        ops.append(s.split()[0].rstrip(";"))
    c = collections.Counter(ops)
    res = {"total": len(ops)}
    for g, pat in GROUPS.items():
        res[g] = sum(n for op, n in c.items() if re.match(pat, op))
    return res


def entry(text: str) -> str:
    """The kernel's own body: the inlined common path, without the out-of-line (``VYM_COLD``)
    functions it calls on the rare path (separate ``.func`` bodies in the PTX)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if ".entry" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("}"))
    return "\n".join(lines[start:end + 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default="main")
    ap.add_argument("--functions", default="exp,exp2,expm1,log,sin,cos,tan,tanh,sinh,cosh")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        old, new = ptx(args.rev, args.functions, pathlib.Path(t)), ptx(None, args.functions, pathlib.Path(t))
    names = args.functions.split(",")
    res = {f: {"old": counts(old[f]), "new": counts(new[f])} for f in names}
    hot = {f: {"old": counts(entry(old[f])), "new": counts(entry(new[f]))} for f in names}
    keys = ["total", *GROUPS]
    for title, table in (("whole (rare paths included)", res), ("kernel body (out-of-line functions excluded)", hot)):
        print(title)
        print(f"{'':8}" + "".join(f"{k[:16]:>18}" for k in keys))
        for f, r in table.items():
            print(f"{f:8}" + "".join(f"{str(r['old'][k]) + ' -> ' + str(r['new'][k]):>18}" for k in keys))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"rev": args.rev, "arch": "sm_90", "static_counts": res,
                                                       "kernel_body_counts": hot}, indent=1) + "\n")


if __name__ == "__main__":
    main()
