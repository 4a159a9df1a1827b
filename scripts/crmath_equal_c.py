"""Proof that the C printed from vyre's math language computes what an earlier, proven C did.

The C of ``src/vyre/lower/crmath`` at a git revision (``--rev``, ``main`` by default: hand-written
C in ``crmath.py`` before the language existed, printed C after) was proven over every f32
input on the H100 (benchmarks/results/exhaustive_math.json). This script compiles that old C
and the C printed from this tree, both as host C with gcc (``-O2 -ffp-contract=off``, no
fast-math: IEEE binary64 on SSE2), and compares, for every unary function on every f32 input
(raw bit patterns, subnormals and NaNs included), the two f32 results and the bits of the two
doubles they round (each module's ``DOUBLE`` expression; not for NaN inputs, which never reach
it), and hypot's results on random pairs. Equal results on every input carry the old proof over
to the printed C (and, since the WGSL prints the same operations, to WGSL; where the C uses the
language's ``fma`` the WGSL prints it unfused, the doubles of the C before fma existed).

A changed algorithm (a faster reduction, a shorter polynomial) rounds different doubles: with
``--results-only`` only the f32 results are computed and compared (half the work), which
carries the proof over just the same. ``--time`` adds host timings of old and
new over the input ranges the CUDA benchmark uses (`RANGES`): a speed proxy, not a GPU figure.

    python scripts/crmath_equal_c.py [--rev main] [--functions exp,log] [--log2n 32]
        [--pairs-log2n 28] [--results-only] [--jobs 2] [--time]
        [--out benchmarks/results/crmath_equal_c.json]

Each function is ``--jobs`` runs of the compiled checker on parts of the inputs; results are
written after each function, so an interrupted run keeps what it finished. With
``--log2n k < 32`` every 2^(32-k)-th input (a varying low part) is checked.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
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
void old_only(int f, const uint* x, uint n, uint* out);
void new_only(int f, const uint* x, uint n, uint* out);
void old_hypot(const uint* x, const uint* y, uint n, uint* out);
void new_hypot(const uint* x, const uint* y, uint n, uint* out);
static uint64_t mix(uint64_t z) {   /* splitmix64 */
    z += 0x9E3779B97F4A7C15ull; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull; return z ^ (z >> 31);
}
int main(int argc, char** argv) {
    int f = atoi(argv[1]);           /* -1: hypot on random pairs */
    int log2n = atoi(argv[2]);
    int results_only = argc > 3 ? atoi(argv[3]) : 0;   /* 1: compare the f32 results only */
    uint64_t first = argc > 5 ? strtoull(argv[4], 0, 0) : 0;   /* this part of the inputs */
    const uint chunk = 1u << 20;
    uint* x = malloc(4ull * chunk); uint* y = malloc(4ull * chunk);
    uint* a = malloc(4ull * chunk); uint* b = malloc(4ull * chunk);
    uint64_t* da = malloc(8ull * chunk); uint64_t* db = malloc(8ull * chunk);
    uint64_t total = argc > 5 ? strtoull(argv[5], 0, 0) : 1ull << log2n, bad = 0, checked = 0, dbl = 0;
    int shift = 32 - log2n;
    printf("{\"mismatches_first\": [");
    for (uint64_t s = first; s < total; s += chunk) {
        uint n = (uint)((total - s) < chunk ? (total - s) : chunk);
        for (uint i = 0; i < n; i++) {
            uint64_t k = s + i;
            if (f < 0) { uint64_t r = mix(k); x[i] = (uint)r; y[i] = (uint)(r >> 32); }
            else x[i] = shift == 0 ? (uint)k : (uint)((k << shift) | (mix(k) & ((1ull << shift) - 1)));
        }
        if (f < 0) { old_hypot(x, y, n, a); new_hypot(x, y, n, b); }
        else if (results_only) { old_only(f, x, n, a); new_only(f, x, n, b); }   /* no doubles: half the work */
        else { old_run(f, x, n, a, da); new_run(f, x, n, b, db); }
        if (f >= 0 && !results_only) for (uint i = 0; i < n; i++) dbl += da[i] != db[i];
        for (uint i = 0; i < n; i++) if (a[i] != b[i] || (f >= 0 && !results_only && da[i] != db[i])) {
            if (bad < 10 && f < 0) printf("%s\"x=%08x y=%08x old=%08x new=%08x\"", bad ? ", " : "", x[i], y[i], a[i], b[i]);
            else if (bad < 10) printf("%s\"x=%08x old=%08x new=%08x double old=%016llx new=%016llx\"", bad ? ", " : "",
                                      x[i], a[i], b[i], (unsigned long long)da[i], (unsigned long long)db[i]);
            bad++;
        }
        checked += n;
    }
    printf("], \"checked\": %llu, \"mismatches\": %llu, \"doubles_differ\": %llu}\n", (unsigned long long)checked,
           (unsigned long long)bad, (unsigned long long)dbl);
    return 0;
}
"""

UNARY = ["exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "sinh", "cosh", "expm1", "log1p",
         "atan", "asin", "acos", "cbrt", "erf"]

# prints the C of a source tree's vyre.lower.crmath (a module with hand-written C, or the
# package printing the language): its prelude and the DOUBLE expressions, as JSON
_PRINT = ("import json; from vyre.lower import crmath as m; "
          "print(json.dumps([m.prelude(set(m.HELPER)), {op.value: t for op, t in m.DOUBLE.items()}]))")

TIMER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef unsigned int uint;
void old_only(int f, const uint* x, uint n, uint* out);
void new_only(int f, const uint* x, uint n, uint* out);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }
int main(int argc, char** argv) {   /* f lo hi n reps: median ns per call, old then new, interleaved */
    int f = atoi(argv[1]); float lo = strtof(argv[2], 0), hi = strtof(argv[3], 0);
    uint n = (uint)atoi(argv[4]); int reps = atoi(argv[5]);
    uint* x = malloc(4ull * n); uint* o = malloc(4ull * n);
    unsigned long long z = 88172645463325252ull;
    for (uint i = 0; i < n; i++) {   /* uniform in [lo, hi) as f32 (xorshift) */
        z ^= z << 13; z ^= z >> 7; z ^= z << 17;
        float v = lo + (hi - lo) * (float)((z >> 40) * (1.0 / 16777216.0));
        __builtin_memcpy(&x[i], &v, 4);
    }
    double* t[2] = {malloc(8 * reps), malloc(8 * reps)};
    for (int r = 0; r < reps; r++) for (int w = 0; w < 2; w++) {
        double t0 = now();
        if (w == 0) old_only(f, x, n, o); else new_only(f, x, n, o);
        t[w][r] = (now() - t0) * 1e9 / n;
    }
    qsort(t[0], reps, 8, cmp); qsort(t[1], reps, 8, cmp);
    printf("{\"old_ns\": %.3f, \"new_ns\": %.3f}\n", t[0][reps / 2], t[1][reps / 2]);
    return 0;
}
"""


def printed(rev: str | None, tmp: pathlib.Path) -> tuple[str, dict]:
    """The C prelude and DOUBLE expressions of ``src/vyre/lower/crmath`` at git revision ``rev``
    (hand-written C before the language existed, printed C after), or of this tree (None)."""
    src = ROOT / "src"
    if rev is not None:
        d = tmp / f"tree-{rev.replace('/', '_')}"
        d.mkdir()
        tar = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(d)], input=tar, check=True)
        src = d / "src"
    out = subprocess.run([sys.executable, "-c", _PRINT], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(src)}).stdout
    prelude, double = json.loads(out)
    return prelude, double


def _unit(prefix: str, prelude: str, double: dict) -> str:
    """One translation unit: the prelude and a runner giving each input's f32 result and the
    bits of the double it rounds (``double``: the module's DOUBLE expressions of ``x``)."""
    cases = "\n".join(
        f"    case {k}: for (uint i = 0; i < n; i++) {{ float x = VY_U2F(xs[i]); out[i] = VY_F2U(vym_{f}(x)); "
        f"double d = vy_isnan(x) ? 0.0 : {double[f]}; __builtin_memcpy(&dbl[i], &d, 8); }} break;"
        for k, f in enumerate(UNARY))
    only = "\n".join(f"    case {k}: for (uint i = 0; i < n; i++) out[i] = VY_F2U(vym_{f}(VY_U2F(xs[i]))); break;"
                     for k, f in enumerate(UNARY))
    return (HEADER + prelude + f"""
void {prefix}_run(int f, const uint* xs, uint n, uint* out, unsigned long long* dbl) {{
    switch (f) {{
{cases}
    }}
}}
void {prefix}_only(int f, const uint* xs, uint n, uint* out) {{
    switch (f) {{
{only}
    }}
}}
void {prefix}_hypot(const uint* x, const uint* y, uint n, uint* out) {{
    for (uint i = 0; i < n; i++) out[i] = VY_F2U(vym_hypot(VY_U2F(x[i]), VY_U2F(y[i])));
}}
""")


FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=gnu11", "-w"]


def build(rev: str, tmp: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The checker and the timer, old (``rev``) against this tree."""
    (tmp / "old.c").write_text(_unit("old", *printed(rev, tmp)))
    (tmp / "new.c").write_text(_unit("new", *printed(None, tmp)))
    (tmp / "main.c").write_text(MAIN)
    (tmp / "timer.c").write_text(TIMER)
    objs = []
    for u in ("old", "new"):
        subprocess.run(["gcc", *FLAGS, "-c", "-o", str(tmp / f"{u}.o"), str(tmp / f"{u}.c")], check=True)
        objs.append(str(tmp / f"{u}.o"))
    exe, timer = tmp / "check", tmp / "timer"
    subprocess.run(["gcc", *FLAGS, "-o", str(exe), *objs, str(tmp / "main.c"), "-lm"], check=True)
    subprocess.run(["gcc", *FLAGS, "-o", str(timer), *objs, str(tmp / "timer.c"), "-lm"], check=True)
    return exe, timer


def check(exe: pathlib.Path, code: int, log2n: int, results_only: bool, jobs: int) -> dict:
    """One function over its inputs, split in ``jobs`` parts run at once; the parts' counts summed."""
    total = 1 << log2n
    bounds = [total * j // jobs for j in range(jobs + 1)]
    procs = [subprocess.Popen([str(exe), str(code), str(log2n), str(int(results_only)), str(a), str(b)],
                              stdout=subprocess.PIPE, text=True) for a, b in itertools.pairwise(bounds)]
    recs = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"checker failed ({p.returncode})")
        recs.append(json.loads(out))
    return {"mismatches_first": [m for r in recs for m in r["mismatches_first"]][:10],
            **{k: sum(r[k] for r in recs) for k in ("checked", "mismatches", "doubles_differ")}}


# the ranges benchmarks/cuda_math.py draws from, and like ones for the functions built on them
RANGES = {"exp": (-80.0, 80.0), "exp2": (-120.0, 120.0), "expm1": (-80.0, 80.0), "log": (1e-3, 1e6),
          "log2": (1e-3, 1e6), "log1p": (-0.999, 1e6), "sin": (-1e4, 1e4), "cos": (-1e4, 1e4),
          "tan": (-1e4, 1e4), "tanh": (-10.0, 10.0), "sinh": (-80.0, 80.0), "cosh": (-80.0, 80.0),
          "atan": (-1e4, 1e4), "asin": (-1.0, 1.0), "acos": (-1.0, 1.0), "cbrt": (-1e4, 1e4),
          "erf": (-5.0, 5.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default="main")
    ap.add_argument("--functions", default=",".join([*UNARY, "hypot"]))
    ap.add_argument("--log2n", type=int, default=32)
    ap.add_argument("--pairs-log2n", type=int, default=28)
    ap.add_argument("--results-only", action="store_true",
                    help="compare the f32 results only (the doubles of a changed algorithm differ; "
                    "they are not computed: doubles_differ is null)")
    ap.add_argument("--jobs", type=int, default=1, help="processes per function (each a part of the inputs)")
    ap.add_argument("--time", action="store_true",
                    help="also time old and new (median ns per call over RANGES, interleaved repeats)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/crmath_equal_c.json"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    result = json.loads(out.read_text()) if out.exists() else {}
    result.setdefault("functions", {})
    what = "f32 results" if args.results_only else "f32 results and the doubles they round"
    rev = subprocess.run(["git", "rev-parse", "--short", args.rev], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    result.update({"what": f"{what}: C of git {args.rev} ({rev}) vs C printed from this tree's vyre.lower.crmath, "
                   "host gcc -O2 -ffp-contract=off", "compiler": subprocess.run(
                       ["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]})
    with tempfile.TemporaryDirectory() as t:
        new_prelude = printed(None, pathlib.Path(t))[0]
        result["new_prelude_sha256"] = hashlib.sha256(new_prelude.encode()).hexdigest()
        exe, timer = build(args.rev, pathlib.Path(t))
        for f in args.functions.split(","):
            t0 = time.time()
            if f == "hypot":
                rec = check(exe, -1, args.pairs_log2n, False, args.jobs)
            else:
                rec = check(exe, UNARY.index(f), args.log2n, args.results_only, args.jobs)
            if args.results_only and f != "hypot":
                rec["doubles_differ"] = None                 # not computed
            rec.update({"inputs": "random pairs" if f == "hypot" else ("every f32" if args.log2n == 32 else f"2^{args.log2n} spread"),
                        "compared": "results" if args.results_only and f != "hypot" else "results and doubles",
                        "seconds": round(time.time() - t0, 1), "jobs": args.jobs})
            if args.time and f != "hypot":
                lo, hi = RANGES[f]
                run = subprocess.run([str(timer), str(UNARY.index(f)), repr(lo), repr(hi), str(1 << 22), "9"],
                                     check=True, capture_output=True, text=True)
                rec["host_ns_per_call"] = {**json.loads(run.stdout), "range": [lo, hi], "calls": 1 << 22,
                                           "repeats": 9, "statistic": "median"}
            result["functions"][f] = rec
            out.write_text(json.dumps(result, indent=1) + "\n")
            print(f, rec["checked"], "mismatches:", rec["mismatches"], f"doubles differ: {rec['doubles_differ']}",
                  f"{rec['seconds']}s", rec.get("host_ns_per_call", ""), flush=True)
    os.sync()


if __name__ == "__main__":
    main()
