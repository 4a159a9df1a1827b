"""S13 for pow, atan2 and hypot on a large random sample of f32 pairs (2^64 pairs cannot be
enumerated): vyre's backend against an oracle that shares no code with vyre's implementation
or reference.

Oracle: the function in float64 (CuPy, i.e. CUDA's libdevice ``pow``/``atan2``, on the cuda
backend; numpy's on others), rounded to f32 and flushed (S9), with a rounding test: where the
float64 value widened by 2^-46 relative error may round to two f32 values, the pair is
recomputed on the host with mpmath at 300 bits, and where even that does not decide (exact
midpoints) with Python fractions (pow: x^p against the candidate boundary B^q for y = p/q;
hypot: a^2 + b^2 against the midpoint squared).
For the pairs built to be exact (x = r^(2^k) 2^(j 2^k), y = n / 2^k: x^y = r^n 2^(j n)) the
oracle rounds that exact value directly. Operands are canonicalised first (S9), as vyre's are;
the IEEE special values come from the float64 functions (C99 Annex F = IEEE 754-2019 9.2).

Pair kinds per function: uniform bit patterns; log-uniform magnitudes over the whole range
(pow: y chosen so that y log2|x| covers [-160, 140]); x next to 1 with large |y|; integer,
eighth-integer and exact exponents; the overflow and flush edges; atan2: ratios 2^+-60, |y|
next to |x|, results next to the flush threshold, ratios 2^+-160; hypot: ratios 2^+-13 (both terms count), |a| next to
|b|, the overflow edge (|a|, |b| near 2^128 / sqrt 2), results near the flush threshold, ratios
2^+-40 (the smaller term decides the last bits), zeros and infinities against NaN.

    python benchmarks/random_pairs_math.py --json out.json                 # cuda, 2^28 pairs each
    python benchmarks/random_pairs_math.py --backend opencl --count 0x40000

Output: per function, pairs checked, mismatches (must be 0), the first mismatching pairs, the
pairs sent to mpmath and to fractions, and seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np

FUNCS = ("pow", "atan2", "hypot")
EPS = 2.0 ** -46
KINDS = 8


def _canon_bits(xp, b):
    """S9 on f32 bits: NaN -> 0x7FC00000, subnormal -> signed zero."""
    e = b & xp.uint32(0x7F800000)
    nan = (e == 0x7F800000) & ((b & xp.uint32(0x007FFFFF)) != 0)
    return xp.where(nan, xp.uint32(0x7FC00000), xp.where(e == 0, b & xp.uint32(0x80000000), b))


def _round_bits(xp, y):
    return _canon_bits(xp, y.astype(xp.float32).view(xp.uint32))


def _f32(xp, v):
    return _canon_bits(xp, xp.asarray(v, xp.float64).astype(xp.float32).view(xp.uint32))


def _ipow(xp, r, m):
    """r^m for small integer-valued float64 r and m (m <= 15) by repeated multiplication: exact
    while the result stays under 2^53."""
    out = xp.ones_like(r)
    for i in range(int(m.max()) if m.size else 0):
        out = xp.where(i < m, out * r, out)
    return out


def pairs(xp, name: str, n: int, seed: int):
    """(a bits, b bits, exact float64 value or NaN where unknown) for n pairs: KINDS kinds."""
    rs = xp.random.RandomState(seed)
    k = n // KINDS
    sign = lambda m: xp.where(rs.random_sample(m) < 0.5, -1.0, 1.0)   # noqa: E731
    exact = xp.full(n, xp.nan)
    a_parts, b_parts = [], []

    def add(a, b):
        a_parts.append(_f32(xp, a))
        b_parts.append(_f32(xp, b))

    for parts in (a_parts, b_parts):                               # uniform bit patterns
        hi, lo = (rs.randint(0, 2 ** 16, size=k).astype(xp.uint32) for _ in range(2))
        parts.append(hi << 16 | lo)
    if name == "pow":
        for _ in range(3):
            x = xp.exp2(rs.uniform(-126, 128, k)) * sign(k)
            add(x, rs.uniform(-160, 140, k) / xp.log2(xp.abs(_f32(xp, x).view(xp.float32).astype(xp.float64))))
        x = 1 + rs.uniform(-1, 1, k) * xp.exp2(-rs.randint(1, 24, k).astype(xp.float64))
        add(x, rs.uniform(-150, 130, k) / xp.log2(_f32(xp, x).view(xp.float32).astype(xp.float64)))
        add(xp.exp2(rs.uniform(-40, 40, k)) * sign(k), rs.randint(-64, 65, k).astype(xp.float64))
        edge = xp.asarray([128.0, -126.0, -127.0, -150.0])[rs.randint(0, 4, k)] + rs.uniform(-1, 1, k) * 2.0 ** -18
        x = xp.exp2(rs.uniform(-126, 128, k))
        add(x, edge / xp.log2(_f32(xp, x).view(xp.float32).astype(xp.float64)))
        # exact: x = r^(2^e2) 2^(j 2^e2), y = m / 2^e2, x^y = r^m 2^(j m) (m odd for e2 > 0)
        e2 = rs.randint(0, 4, k)
        p2 = xp.exp2(e2.astype(xp.float64))
        m = rs.randint(1, 16, k).astype(xp.float64)
        m = xp.where((e2 > 0) & (m % 2 == 0), m - 1, m)
        r = xp.floor(xp.exp2(rs.uniform(20, 26, k) / m))           # r^m of 20 to 26 bits
        r = xp.maximum(2 * xp.floor(r / 2) + 1, 3.0)
        j = xp.floor(rs.uniform(-100, 100, k) / (p2 * m))
        ok = (r ** p2 < 2 ** 24) & (r ** m < 2 ** 26)
        r, m, j = xp.where(ok, r, 3.0), xp.where(ok, m, 1.0), xp.where(ok, j, 0.0)
        # powers by repeated multiplication and scaling by ldexp: both exact in float64 (a GPU's
        # double pow and exp2 need not be: CUDA's pow(11, 7) is not 11^7, which made the oracle
        # wrong on 169,629 exact ties on the H100)
        add(xp.ldexp(_ipow(xp, r, p2), (j * p2).astype(xp.int32)), m / p2)
        exact[(KINDS - 1) * k:] = xp.ldexp(_ipow(xp, r, m), (j * m).astype(xp.int32))
    elif name == "hypot":
        for _ in range(2):
            x = xp.exp2(rs.uniform(-126, 128, k)) * sign(k)
            add(x, x * xp.exp2(rs.uniform(-13, 13, k)) * sign(k))
        x = xp.exp2(rs.uniform(-100, 100, k)) * sign(k)
        add(x, x * (1 + rs.uniform(-2 ** -10, 2 ** -10, k)) * sign(k))
        x = xp.exp2(127.5 + rs.uniform(-1, 0.5, k)) * sign(k)          # the overflow edge
        add(x, x * rs.uniform(0, 1, k) * sign(k))
        x = xp.exp2(-126 + rs.uniform(-1, 2, k)) * sign(k)             # results near 2^-126
        add(x, x * rs.uniform(0, 1, k) * sign(k))
        x = xp.exp2(rs.uniform(-80, 120, k)) * sign(k)
        add(x, x * xp.exp2(rs.uniform(-40, -10, k)) * sign(k))
        sp = xp.asarray([0.0, -0.0, xp.inf, -xp.inf, xp.nan, 1.0, 2.0 ** -126, 2.0 ** 127])
        other = xp.where(rs.random_sample(k) < 0.5, sp[rs.randint(0, 8, k)],
                         xp.exp2(rs.uniform(-126, 128, k)) * sign(k))
        add(sp[rs.randint(0, 8, k)], other)
    else:
        for _ in range(3):
            y = xp.exp2(rs.uniform(-126, 128, k)) * sign(k)
            add(y, y * xp.exp2(rs.uniform(-60, 60, k)) * sign(k))
        y = xp.exp2(rs.uniform(-100, 100, k)) * sign(k)
        add(y, y * (1 + rs.uniform(-2 ** -10, 2 ** -10, k)) * sign(k))
        x = xp.exp2(rs.uniform(0, 128, k)) * sign(k)
        add(x * xp.exp2(rs.uniform(-130, -118, k)) * sign(k), x)
        for _ in range(2):
            y = xp.exp2(rs.uniform(-126, 128, k)) * sign(k)
            add(y, y * xp.exp2(rs.uniform(-160, 160, k)) * sign(k))
    a = xp.concatenate(a_parts)
    b = xp.concatenate(b_parts)
    return _canon_bits(xp, a), _canon_bits(xp, b), exact[: a.size]


def _mp_bits(name: str, a: float, b: float) -> int | None:
    """Correctly rounded, flushed f32 bits with mpmath at 300 bits; None if undecided."""
    with mpmath.workprec(300):
        if name == "pow":
            odd = b == math.floor(b) and abs(b) < 2 ** 24 and int(b) % 2 == 1
            v = mpmath.power(abs(mpmath.mpf(a)), mpmath.mpf(b)) * (-1 if a < 0 and odd else 1)
        elif name == "hypot":
            v = mpmath.hypot(mpmath.mpf(a), mpmath.mpf(b))
        else:
            v = mpmath.atan2(mpmath.mpf(a), mpmath.mpf(b))
        d = abs(v) * mpmath.mpf(2) ** -280
        lo, hi = _round24(v - d), _round24(v + d)
    return lo if lo == hi else None


def _round24(v) -> int:
    with mpmath.workprec(300):
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


def _fraction_bits(a: float, b: float) -> int | None:
    """pow's exact case: x^y (y = p/q) equals a rounding boundary B iff B^q = x^p (fractions);
    the tie then rounds to even. None when y's numerator or denominator is too large."""
    p, q = b.as_integer_ratio()
    if q > 64 or abs(p) > 256:
        return None
    with mpmath.workprec(300):
        v = mpmath.power(abs(mpmath.mpf(a)), mpmath.mpf(b))
        f = float(v)
    lo = np.float32(f)
    cand = [float(lo), float(np.nextafter(lo, np.float32(np.inf))), float(np.nextafter(lo, np.float32(0)))]
    xp_ = Fraction(abs(a)) ** p
    for u, w in ((cand[0], cand[1]), (cand[2], cand[0])):
        mid = (Fraction(u) + Fraction(w)) / 2
        if mid ** q == xp_:
            even = u if int(np.float32(u).view(np.uint32)) % 2 == 0 else w
            neg = a < 0 and b == math.floor(b) and int(b) % 2 == 1
            return int(np.float32(-even if neg else even).view(np.uint32))
    return None


def _hypot_tie_bits(a: float, b: float) -> int | None:
    """hypot where mpmath cannot decide: sqrt(a^2 + b^2) is exactly a midpoint M of two f32
    neighbours iff M^2 == a^2 + b^2 (fractions); the tie then rounds to even. None otherwise
    (and for results outside the normal range, which the flush rules decide)."""
    s2 = Fraction(a) ** 2 + Fraction(b) ** 2
    g = np.float32(math.hypot(a, b))
    if not np.isfinite(g) or abs(float(g)) < 2.0 ** -126:
        return None
    below, above = np.nextafter(g, np.float32(0)), np.nextafter(g, np.float32(np.inf))
    for u, w in ((below, g), (g, above)):
        mid = (Fraction(float(u)) + Fraction(float(w))) / 2
        if mid * mid == s2:
            return int(min((u, w), key=lambda t: int(t.view(np.uint32)) % 2).view(np.uint32))
    return None


def oracle(xp, name: str, ab, bb, exact):
    """Expected bits of every pair, and how many went to mpmath and to fractions."""
    a = ab.view(xp.float32).astype(xp.float64)
    b = bb.view(xp.float32).astype(xp.float64)
    with np.errstate(all="ignore"):
        y = {"pow": xp.power, "atan2": xp.arctan2, "hypot": xp.hypot}[name](a, b)
        want = _round_bits(xp, y)
        d = xp.abs(y) * EPS
        hard = (_round_bits(xp, y - d) != _round_bits(xp, y + d)) & xp.isfinite(y) & (y != 0)
        # just under 2^-126 a GPU's f32 cast flushes before rounding (tininess before rounding),
        # where S9 rounds first: from the midpoint M = (1 - 2^-24) 2^-126 up, the result is
        # 2^-126 (0.99999995 * 2^-126 is). Values within d of M go to mpmath.
        m = (1.0 - 2.0 ** -24) * 2.0 ** -126
        ay = xp.abs(y)
        up = (ay > m + d) & (ay < 2.0 ** -126)
        want = xp.where(up, (y < 0).astype(xp.uint32) << 31 | xp.uint32(0x00800000), want)
        hard |= (xp.abs(ay - m) <= d) & xp.isfinite(y)
    known = ~xp.isnan(exact)
    sgn = xp.where((a < 0) & (b == xp.floor(b)) & (xp.fmod(b, 2.0) != 0), -1.0, 1.0)
    want = xp.where(known, _round_bits(xp, exact * sgn), want)
    hard &= ~known
    idx = xp.flatnonzero(hard)
    n_mp = n_fr = 0
    if idx.size:
        ha = (ab[idx] if xp is np else ab[idx].get()).view(np.float32).astype(np.float64)
        hb = (bb[idx] if xp is np else bb[idx].get()).view(np.float32).astype(np.float64)
        host = []
        for u, v in zip(ha.tolist(), hb.tolist()):
            n_mp += 1
            r = _mp_bits(name, u, v)
            if r is None:
                n_fr += 1
                r = {"pow": _fraction_bits, "hypot": _hypot_tie_bits}.get(name, lambda u, v: None)(u, v)
            host.append(0xFFFFFFFF if r is None else r)   # undecided: never equal to a result
        want[idx] = xp.asarray(np.array(host, np.uint32))
    return want, n_mp, n_fr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--functions", default=",".join(FUNCS))
    ap.add_argument("--count", type=lambda s: int(s, 0), default=1 << 28)
    ap.add_argument("--chunk-log2", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    import vyre  # noqa: F401
    from vyre.driver import acquire
    from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program

    b = acquire(a.backend)
    cuda = a.backend == "cuda"
    if cuda:
        import cupy as xp
    else:
        xp = np
    gx = Expr.gid_x()
    chunk = min(1 << a.chunk_log2, a.count)
    report: dict = {"backend": b.id(), "pairs_per_function": a.count, "seed": a.seed, "functions": {}}
    total_bad = 0
    for name in a.functions.split(","):
        prog = Program.wrapped([BufferDecl.read("a", 0, DataType.F32), BufferDecl.read("b", 1, DataType.F32),
                                BufferDecl.output("o", 2, DataType.F32)], 256,
                               [Node.store("o", gx, Expr.bin(BinOp(name), Expr.load("a", gx), Expr.load("b", gx)))])
        t0 = time.perf_counter()
        bad, first, n_mp, n_fr, done = 0, [], 0, 0, 0
        for c in range(0, a.count, chunk):
            ab, bb, exact = pairs(xp, name, chunk, a.seed * 1000003 + c // chunk)
            ins = [ab.view(xp.float32), bb.view(xp.float32)]
            if cuda:
                got = xp.asarray(b.dispatch_device(prog, ins)[0]).view(xp.uint32)
            else:
                got = np.frombuffer(b.dispatch(prog, ins)[0], np.uint32)
            want, m, f = oracle(xp, name, ab, bb, exact)
            n_mp, n_fr, done = n_mp + m, n_fr + f, done + ab.size
            wrong = xp.flatnonzero(got != want)
            bad += int(wrong.size)
            for i in (wrong[:8].get() if cuda else wrong[:8]).tolist():
                if len(first) < 8:
                    first.append({"a": f"0x{int(ab[i]):08x}", "b": f"0x{int(bb[i]):08x}",
                                  "got": f"0x{int(got[i]):08x}", "want": f"0x{int(want[i]):08x}"})
            del got, want, ab, bb
        dt = time.perf_counter() - t0
        report["functions"][name] = {"pairs": done, "mismatches": bad, "first": first, "mpmath_pairs": n_mp,
                                     "fraction_pairs": n_fr, "seconds": round(dt, 2)}
        total_bad += bad
        print(f"{name}: {done} pairs, {bad} mismatches, {n_mp} to mpmath ({n_fr} to fractions), {dt:.1f} s "
              f"{first[:3]}", flush=True)
    report["mismatches"] = total_bad
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
