"""`vyre.lower.legalize`: each rewritten Program gives the original's bytes, checked against
numpy's IEEE float32 results with S9 applied (an independent source: numpy's float32
division, sqrt, 1/x and fmod are correctly rounded or exact) and against the original
Program on the reference; the rewritten Program also runs on OpenCL (PoCL) and wgpu.
fma is checked against exact rational arithmetic (fractions) rounded once here."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from vyre import reference
from vyre.conform.witness import edges
from vyre.ir import BufferDecl, DataType, Expr, Function, Node, Program, UnOp
from vyre.lower.legalize import Feature, legalize, needs

from helpers import map_program, typed

F = DataType.F32
RNG = np.random.default_rng(2026)


def s9(x: np.ndarray) -> np.ndarray:
    """S9 on f32 bit patterns: subnormal -> signed zero, NaN -> 0x7FC00000."""
    x = np.asarray(x, np.uint32).copy()
    sub = (x & 0x7F800000) == 0
    x[sub] &= 0x80000000
    x[(x & 0x7FFFFFFF) > 0x7F800000] = 0x7FC00000
    return x


def numpy_f32(fn, *args: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        out = fn(*(s9(a).view(np.float32) for a in args))
    return s9(np.asarray(out, np.float32).view(np.uint32))


def hard_f32(n: int) -> np.ndarray:
    """Random f32 patterns: uniform bits, exponents near 1, near the subnormal boundary and
    near overflow, significands with long runs of ones or zeros."""
    parts = [RNG.integers(0, 2**32, n, dtype=np.uint32)]
    for lo, hi in ((100, 154), (1, 30), (225, 255)):
        e = RNG.integers(lo, hi, n, dtype=np.uint32)
        m = RNG.integers(0, 1 << 23, n, dtype=np.uint32)
        runs = RNG.choice(np.array([0, 0x7FFFFF, 0x400000, 0x7FFFFE, 1], np.uint32), n)
        m = np.where(RNG.random(n) < 0.2, runs, m)
        s = RNG.integers(0, 2, n, dtype=np.uint32) << 31
        parts.append(s | (e << 23) | m)
    out = np.concatenate(parts)
    return out[RNG.permutation(out.size)][:n]


def pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    e = np.array(edges(F) + [0x00800001, 0x7F7FFFFE, 0x3F800001, 0x3F7FFFFF, 0x40000000, 0x00FFFFFF], np.uint32)
    a, b = (np.array(v, np.uint32) for v in zip(*itertools.product(e, e)))
    return np.concatenate([a, hard_f32(n)]), np.concatenate([b, hard_f32(n)])


def run(program: Program, inputs, backend=None) -> np.ndarray:
    ins = typed(program, [x.view(np.float32) for x in inputs])
    out = (backend.dispatch(program, ins) if backend is not None else reference.run(program, ins))[0]
    return np.frombuffer(out, np.uint32)


def first_diff(got: np.ndarray, want: np.ndarray, inputs) -> str:
    bad = np.flatnonzero(got != want)[:5]
    return "; ".join(f"{[hex(int(x[i])) for x in inputs]}: got {got[i]:#x} want {want[i]:#x}" for i in bad)


CASES = {
    "div": (2, lambda a, b: a / b, lambda a, b: numpy_f32(np.divide, a, b)),
    "mod": (2, lambda a, b: a % b, lambda a, b: numpy_f32(np.fmod, a, b)),
    "sqrt": (1, lambda a: Expr.un(UnOp.SQRT, a), lambda a: numpy_f32(np.sqrt, a)),
    "reciprocal": (1, lambda a: Expr.un(UnOp.RECIPROCAL, a),
                   lambda a: numpy_f32(lambda x: np.float32(1) / x, a)),
}


def inputs_for(arity: int, n: int):
    if arity == 2:
        return list(pairs(n))
    e = np.array(edges(F), np.uint32)
    return [np.concatenate([e, hard_f32(n), np.arange(0x3F800000, 0x3F800000 + 4096, dtype=np.uint32)])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_rewrite_matches_numpy_and_reference(name):
    arity, make, expect = CASES[name]
    program = map_program([F] * arity, F, make, wg=64)
    new = legalize(program, set(Feature))
    assert new is not program and not needs(new)
    ins = inputs_for(arity, 1 << 20 if name == "div" else 1 << 16)
    want = expect(*ins)
    got = run(new, ins)
    assert (got == want).all(), first_diff(got, want, ins)
    assert (run(program, ins) == want).all()    # the reference agrees with numpy too


def _round_f32(v: Fraction, neg: bool) -> int:
    """Exact ``v`` rounded once to f32 bits (nearest even), with S9's flush."""
    sign = 0x80000000 if neg else 0
    if v == 0:
        return sign
    a = abs(v)
    if a < Fraction(1, 2**126):   # below the smallest normal: 2^-126 if it rounds there, else 0
        return sign | (0x00800000 if a >= Fraction(1, 2**126) - Fraction(1, 2**150) else 0)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = a / Fraction(2) ** (e - 23)             # in [2^23, 2^24)
    m = q.numerator // q.denominator
    rest = q - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m & 1):
        m += 1
    if m == 1 << 24:
        m, e = m >> 1, e + 1
    if e + 127 >= 255:
        return sign | 0x7F800000
    return sign | ((e + 127) << 23) | (m - (1 << 23))


def exact_fma(a: int, b: int, c: int) -> int:
    x, y, z = (s9(np.array([v], np.uint32)).view(np.float32)[0] for v in (a, b, c))
    if any(np.isnan(v) for v in (x, y, z)) or any(np.isinf(v) for v in (x, y, z)):
        with np.errstate(all="ignore"):
            r = np.float32(np.float64(x) * np.float64(y) + np.float64(z))  # exact specials
        return int(s9(np.array([r], np.float32).view(np.uint32))[0])
    v = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
    if v == 0:   # exact zero sum: -0 only when both addends are -0 (round to nearest)
        p_neg = (np.signbit(x) != np.signbit(y))
        return 0x80000000 if (p_neg and np.signbit(z)) else 0
    return _round_f32(v, v < 0)


def test_fma_rewrite_rounds_once():
    e = np.array(edges(F), np.uint32)
    tri = np.array(list(itertools.product(e[:10], e[:10], e[:10])), np.uint32).T
    a, b, c = hard_f32(3000), hard_f32(3000), hard_f32(3000)
    # cancellation: c = -round(a*b), and products near the subnormal boundary
    fa, fb = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        c[:1000] = (-(fa[:1000] * fb[:1000])).view(np.uint32)
    a[2000:2500] = (np.uint32(60) << 23) | (a[2000:2500] & 0x807FFFFF)
    b[2000:2500] = (np.uint32(67) << 23) | (b[2000:2500] & 0x807FFFFF)
    ins = [np.concatenate([t, r]) for t, r in zip(tri, (a, b, c))]
    program = map_program([F] * 3, F, Expr.fma, wg=64)
    new = legalize(program, {Feature.FMA})
    got = run(new, ins)
    want = np.array([exact_fma(*map(int, t)) for t in zip(*ins)], np.uint32)
    assert (got == want).all(), first_diff(got, want, ins)
    assert (run(program, ins) == want).all()


@pytest.mark.parametrize("name", ["div", "mod", "sqrt", "reciprocal", "fma"])
def test_rewritten_program_runs_on_other_backends(name, backend):
    """The rewritten Program (only u32 operations) gives the original's bytes on OpenCL and
    wgpu as on the reference."""
    if name == "fma":
        arity, make = 3, Expr.fma
    else:
        arity, make, _ = CASES[name]
    program = map_program([F] * arity, F, make, wg=64)
    new = legalize(program, set(Feature))
    ins = inputs_for(arity, 1 << 14) if arity < 3 else [hard_f32(1 << 14) for _ in range(3)]
    want = run(program, ins)
    got = run(new, ins, backend)
    assert (got == want).all(), first_diff(got, want, ins)


def test_only_f32_uses_are_rewritten_and_functions_too():
    """Integer division stays; f32 uses inside the program's own functions and in nested
    bodies are rewritten; the helpers come before the functions that call them."""
    body = [Node.let_bind("q", Expr.load("a", Expr.gid_x()) // Expr.u32(3)),
            Node.if_(Expr.var("q").gt(Expr.u32(1)),
                     [Node.store("out", Expr.gid_x(), Expr.call("half", Expr.cast(F, Expr.var("q"))))])]
    half = Function.define("half", [("v", F)], [], Expr.var("v") / Expr.f32(2.0))
    program = Program.wrapped([BufferDecl.read("a", 0, DataType.U32), BufferDecl.output("out", 1, F)], 8,
                              body, [half])
    new = legalize(program, {Feature.F32_DIV})
    assert needs(program) == {Feature.F32_DIV} and needs(new) == set()
    assert [f.name for f in new.functions] == ["vyl_f32_div", "half"]
    x = np.arange(64, dtype=np.uint32)
    assert reference.run(new, [x]) == reference.run(program, [x])
    assert legalize(program, {Feature.FMA}) is program
