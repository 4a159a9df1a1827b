"""Proof that the C printed from vyre's math language computes what the hand-written C did.

Until the language (`vyre.lower.crmath.dsl`) existed, each correctly rounded function was C
text in ``src/vyre/lower/crmath.py``; that C was proven over every f32 input on the H100
(benchmarks/results/exhaustive_math.json). This script compiles that old C (from a git
revision, ``main`` by default) and the C printed now, both as host C with gcc (``-O2
-ffp-contract=off``, no fast-math: IEEE binary64 on SSE2), and compares, for every unary function on every f32 input (raw bit patterns, subnormals and
NaNs included), the two f32 results and the bits of the two doubles they round (each
module's ``DOUBLE`` expression; not for NaN inputs, which never reach it), and hypot's results on random pairs. Equal results on every input carry the old proof over to the
printed C (and, since the WGSL prints the same operations, to WGSL).

    python scripts/crmath_equal_c.py [--rev main] [--functions exp,log] [--log2n 32]
        [--pairs-log2n 28] [--out benchmarks/results/crmath_equal_c.json]

Each function is one run of the compiled checker; results are written after each function, so
an interrupted run keeps what it finished. With ``--log2n k < 32`` every 2^(32-k)-th input (a
varying low part) is checked.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

HEADER = r"""
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
typedef unsigned int uint;
typedef unsigned long long vy_u64;
typedef long long vy_i64;
#define VY_FN static inline
#define VY_CLZ(x) ((x) == 0u ? 32 : __builtin_clz(x))
#define VY_CLZ64(x) ((x) == 0ull ? 64 : __builtin_clzll(x))
#define VY_UMULHI64(a, b) ((vy_u64)(((unsigned __int128)(vy_u64)(a) * (vy_u64)(b)) >> 64))
static inline uint vy_f2bits(float x) { uint u; __builtin_memcpy(&u, &x, 4); return u; }
static inline float vy_bits2f(uint u) { float x; __builtin_memcpy(&x, &u, 4); return x; }
#define VY_F2U(x) vy_f2bits(x)
#define VY_U2F(x) vy_bits2f(x)
#define VY_NAN_BITS 0x7FC00000u
VY_FN bool vy_isnan(float x) { return (VY_F2U(x) & 0x7FFFFFFFu) > 0x7F800000u; }
VY_FN bool vy_isinf(float x) { return (VY_F2U(x) & 0x7FFFFFFFu) == 0x7F800000u; }
"""

MAIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef unsigned int uint;
void old_run(int f, const uint* x, uint n, uint* out, uint64_t* dbl);
void new_run(int f, const uint* x, uint n, uint* out, uint64_t* dbl);
void old_hypot(const uint* x, const uint* y, uint n, uint* out);
void new_hypot(const uint* x, const uint* y, uint n, uint* out);
static uint64_t mix(uint64_t z) {   /* splitmix64 */
    z += 0x9E3779B97F4A7C15ull; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull; return z ^ (z >> 31);
}
int main(int argc, char** argv) {
    int f = atoi(argv[1]);           /* -1: hypot on random pairs */
    int log2n = atoi(argv[2]);
    const uint chunk = 1u << 20;
    uint* x = malloc(4ull * chunk); uint* y = malloc(4ull * chunk);
    uint* a = malloc(4ull * chunk); uint* b = malloc(4ull * chunk);
    uint64_t* da = malloc(8ull * chunk); uint64_t* db = malloc(8ull * chunk);
    uint64_t total = 1ull << log2n, bad = 0, checked = 0;   /* f32 result or core double differ */
    int shift = 32 - log2n;
    printf("{\"mismatches_first\": [");
    for (uint64_t s = 0; s < total; s += chunk) {
        uint n = (uint)((total - s) < chunk ? (total - s) : chunk);
        for (uint i = 0; i < n; i++) {
            uint64_t k = s + i;
            if (f < 0) { uint64_t r = mix(k); x[i] = (uint)r; y[i] = (uint)(r >> 32); }
            else x[i] = shift == 0 ? (uint)k : (uint)((k << shift) | (mix(k) & ((1ull << shift) - 1)));
        }
        if (f < 0) { old_hypot(x, y, n, a); new_hypot(x, y, n, b); }
        else { old_run(f, x, n, a, da); new_run(f, x, n, b, db); }
        for (uint i = 0; i < n; i++) if (a[i] != b[i] || (f >= 0 && da[i] != db[i])) {
            if (bad < 10 && f < 0) printf("%s\"x=%08x y=%08x old=%08x new=%08x\"", bad ? ", " : "", x[i], y[i], a[i], b[i]);
            else if (bad < 10) printf("%s\"x=%08x old=%08x new=%08x double old=%016llx new=%016llx\"", bad ? ", " : "",
                                      x[i], a[i], b[i], (unsigned long long)da[i], (unsigned long long)db[i]);
            bad++;
        }
        checked += n;
    }
    printf("], \"checked\": %llu, \"mismatches\": %llu}\n", (unsigned long long)checked, (unsigned long long)bad);
    return 0;
}
"""

UNARY = ["exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "sinh", "cosh", "expm1", "log1p",
         "atan", "asin", "acos", "cbrt", "erf"]


def _old_prelude(rev: str, tmp: pathlib.Path) -> tuple[str, dict]:
    """The hand-written C of revision ``rev`` (its crmath.py and hard-case table)."""
    d = tmp / "old"
    d.mkdir()
    for name in ("crmath.py", "crmath_hard_cases.json"):
        text = subprocess.run(["git", "show", f"{rev}:src/vyre/lower/{name}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        (d / name).write_text(text)
    spec = importlib.util.spec_from_file_location("old_crmath", d / "crmath.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.prelude(set(mod.HELPER)), {op.value: text for op, text in mod.DOUBLE.items()}


def _unit(prefix: str, prelude: str, double: dict) -> str:
    """One translation unit: the prelude and a runner giving each input's f32 result and the
    bits of the double it rounds (``double``: the module's DOUBLE expressions of ``x``)."""
    cases = "\n".join(
        f"    case {k}: for (uint i = 0; i < n; i++) {{ float x = VY_U2F(xs[i]); out[i] = VY_F2U(vym_{f}(x)); "
        f"double d = vy_isnan(x) ? 0.0 : {double[f]}; __builtin_memcpy(&dbl[i], &d, 8); }} break;"
        for k, f in enumerate(UNARY))
    return (HEADER + prelude + f"""
void {prefix}_run(int f, const uint* xs, uint n, uint* out, unsigned long long* dbl) {{
    switch (f) {{
{cases}
    }}
}}
void {prefix}_hypot(const uint* x, const uint* y, uint n, uint* out) {{
    for (uint i = 0; i < n; i++) out[i] = VY_F2U(vym_hypot(VY_U2F(x[i]), VY_U2F(y[i])));
}}
""")


def build(rev: str, tmp: pathlib.Path) -> pathlib.Path:
    from vyre.lower import crmath

    (tmp / "old.c").write_text(_unit("old", *_old_prelude(rev, tmp)))
    (tmp / "new.c").write_text(_unit("new", crmath.prelude(set(crmath.HELPER)),
                                     {op.value: text for op, text in crmath.DOUBLE.items()}))
    (tmp / "main.c").write_text(MAIN)
    exe = tmp / "check"
    flags = ["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=gnu11", "-w"]
    subprocess.run(["gcc", *flags, "-o", str(exe), str(tmp / "old.c"), str(tmp / "new.c"), str(tmp / "main.c"), "-lm"],
                   check=True)
    return exe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default="main")
    ap.add_argument("--functions", default=",".join([*UNARY, "hypot"]))
    ap.add_argument("--log2n", type=int, default=32)
    ap.add_argument("--pairs-log2n", type=int, default=28)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/crmath_equal_c.json"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    result = json.loads(out.read_text()) if out.exists() else {}
    result.setdefault("functions", {})
    result.update({"what": "old hand-written C (git " + args.rev + ") vs C printed from vyre.lower.crmath.dsl, "
                   "host gcc -O2 -ffp-contract=off", "compiler": subprocess.run(
                       ["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]})
    from vyre.lower import crmath

    result["new_prelude_sha256"] = hashlib.sha256(crmath.prelude(set(crmath.HELPER)).encode()).hexdigest()
    with tempfile.TemporaryDirectory() as t:
        exe = build(args.rev, pathlib.Path(t))
        for f in args.functions.split(","):
            code, log2n = (-1, args.pairs_log2n) if f == "hypot" else (UNARY.index(f), args.log2n)
            t0 = time.time()
            run = subprocess.run([str(exe), str(code), str(log2n)], check=True, capture_output=True, text=True)
            rec = json.loads(run.stdout)
            rec.update({"inputs": "random pairs" if f == "hypot" else ("every f32" if log2n == 32 else f"2^{log2n} spread"),
                        "seconds": round(time.time() - t0, 1)})
            result["functions"][f] = rec
            out.write_text(json.dumps(result, indent=1) + "\n")
            print(f, rec["checked"], "mismatches:", rec["mismatches"], f"{rec['seconds']}s", flush=True)
    os.sync()


if __name__ == "__main__":
    main()
