"""S13: every f32 transcendental is correctly rounded (then flushed, S9) and so identical on
every backend. Each (function x backend) cell: every known hard case, every special value and
2^16 random inputs, byte for byte; the oracle is mpmath, used here directly (`_oracle`, not
vyre's reference code) on the special values, a subsample of the random inputs and of the
hard cases; the reference, checked against it, covers the rest."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from vyre import reference
from vyre.ir import DataType, Expr
from vyre.ir.types import TRANSCENDENTAL, BinOp, UnOp
from vyre.lower import crmath as lower_crmath

from helpers import map_program

OPS = sorted((o for o in TRANSCENDENTAL if isinstance(o, UnOp)), key=lambda o: o.value)
INF, NAN = math.inf, math.nan
_MP = {UnOp.EXP: mpmath.exp, UnOp.EXP2: lambda v: mpmath.power(2, v), UnOp.LOG: mpmath.log,
       UnOp.LOG2: lambda v: mpmath.log(v, 2), UnOp.SIN: mpmath.sin, UnOp.COS: mpmath.cos,
       UnOp.TAN: mpmath.tan, UnOp.TANH: mpmath.tanh, UnOp.SINH: mpmath.sinh, UnOp.COSH: mpmath.cosh,
       UnOp.EXPM1: mpmath.expm1, UnOp.LOG1P: mpmath.log1p, UnOp.ATAN: mpmath.atan,
       UnOp.ASIN: mpmath.asin, UnOp.ACOS: mpmath.acos,
       UnOp.CBRT: lambda v: mpmath.cbrt(v) if v >= 0 else -mpmath.cbrt(-v), UnOp.ERF: mpmath.erf}


def _f32_bits(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


def _oracle(op: UnOp, xb: int) -> int:
    """Correctly rounded, flushed f32 bits of op at finite, normal, non-special input bits,
    with mpmath only: 24-bit rounding, then the f32 range (overflow, S9 flush)."""
    x = float(np.uint32(xb).view(np.float32))
    with mpmath.workprec(300):
        return _round24(_MP[op](mpmath.mpf(x)))


def _round24(v: mpmath.mpf) -> int:
    """f32 bits of v: rounded to 24 bits (nearest even), then the f32 range and S9's flush."""
    with mpmath.workprec(300):
        with mpmath.workprec(24):
            r = +v                                    # rounded to 24 bits, nearest even
        a = abs(r)
        if a >= mpmath.mpf(2) ** 128:
            out = INF
        elif a < mpmath.mpf(2) ** -126:               # f32 grid there is 2^-149: flush (S9)
            out = 2.0 ** -126 if abs(v) >= mpmath.mpf(2) ** -126 - mpmath.mpf(2) ** -150 else 0.0
        else:
            out = float(a)
        return _f32_bits(-out if v < 0 else out)


# special values (IEEE 754-2019 9.2; inputs as f32 bits; NaN results are 0x7FC00000)
SUB, NSUB = 0x00000001, 0x807FFFFF
_SPECIAL: dict[UnOp, list[tuple[float | int, float]]] = {
    UnOp.EXP: [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (SUB, 1.0), (NSUB, 1.0),
               (89.0, INF), (-104.0, 0.0), (88.72283935546875, INF)],
    UnOp.EXP2: [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (SUB, 1.0), (128.0, INF),
                (-126.0, 2.0 ** -126), (-127.0, 0.0), (-150.0, 0.0), (3.0, 8.0), (-1.0, 0.5)],
    UnOp.LOG: [(0.0, -INF), (-0.0, -INF), (SUB, -INF), (NSUB, -INF), (-1.0, NAN), (INF, INF),
               (-INF, NAN), (NAN, NAN), (1.0, 0.0)],
    UnOp.LOG2: [(0.0, -INF), (-0.0, -INF), (SUB, -INF), (-1.0, NAN), (INF, INF), (-INF, NAN),
                (NAN, NAN), (1.0, 0.0), (8.0, 3.0), (2.0 ** -126, -126.0), (2.0 ** 127, 127.0)],
    UnOp.SIN: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (SUB, 0.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    UnOp.COS: [(0.0, 1.0), (-0.0, 1.0), (SUB, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    UnOp.TAN: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN)],
    UnOp.TANH: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN),
                (20.0, 1.0), (-20.0, -1.0)],
    UnOp.SINH: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN),
                (90.0, INF), (-90.0, -INF)],
    UnOp.COSH: [(0.0, 1.0), (-0.0, 1.0), (NSUB, 1.0), (INF, INF), (-INF, INF), (NAN, NAN), (-90.0, INF)],
    UnOp.EXPM1: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (INF, INF), (-INF, -1.0), (NAN, NAN),
                 (89.0, INF), (-120.0, -1.0)],
    UnOp.LOG1P: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (-1.0, -INF), (-2.0, NAN), (INF, INF),
                 (-INF, NAN), (NAN, NAN)],
    UnOp.ATAN: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (INF, 1.5707963705062866),
                (-INF, -1.5707963705062866), (NAN, NAN), (1.0, 0.7853981852531433)],
    UnOp.ASIN: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (1.0, 1.5707963705062866),
                (-1.0, -1.5707963705062866), (1.0000001192092896, NAN), (INF, NAN), (NAN, NAN)],
    UnOp.ACOS: [(1.0, 0.0), (-1.0, 3.1415927410125732), (0.0, 1.5707963705062866),
                (-0.0, 1.5707963705062866), (-1.0000001192092896, NAN), (-INF, NAN), (NAN, NAN)],
    UnOp.CBRT: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN),
                (27.0, 3.0), (-8.0, -2.0), (2.0 ** -126, 2.0 ** -42)],
    UnOp.ERF: [(0.0, 0.0), (-0.0, -0.0), (NSUB, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN),
               (4.0, 1.0), (-10.0, -1.0)],
}


def _bits(v: float | int) -> int:
    return v if isinstance(v, int) else _f32_bits(v)


def _special(op: UnOp) -> tuple[np.ndarray, np.ndarray]:
    xs = np.array([_bits(x) for x, _ in _SPECIAL[op]], np.uint32)
    ys = np.array([0x7FC00000 if math.isnan(y) else _f32_bits(y) for _, y in _SPECIAL[op]], np.uint32)
    return xs, ys


def _random(n: int, seed: int) -> np.ndarray:
    """Random f32 bits: half uniform over all bit patterns, half over |x| in [2^-30, 2^30]."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, n // 2, dtype=np.uint64).astype(np.uint32)
    mag = np.exp2(rng.uniform(-30, 30, n - n // 2)) * rng.choice([-1.0, 1.0], n - n // 2)
    return np.concatenate([a, mag.astype(np.float32).view(np.uint32)])


def _hard(op: UnOp) -> tuple[np.ndarray, np.ndarray]:
    cases = lower_crmath.hard_cases()[op.value]
    return np.array([a for a, _ in cases], np.uint32), np.array([b for _, b in cases], np.uint32)


def _program(op: UnOp):
    return map_program([DataType.F32], DataType.F32, lambda v: Expr.un(op, v), wg=64)


@pytest.fixture
def wgpu():
    from conftest import get_backend

    return get_backend("wgpu")


def _dispatch(backend, program, inputs):
    """The backend's outputs; a refusal fails the test (conftest would skip a wgpu refusal)."""
    from vyre.driver import UnsupportedFeature

    try:
        return backend.dispatch(program, inputs)
    except UnsupportedFeature as exc:
        pytest.fail(f"{backend.id()} refused a correctly rounded function: {exc}")


def _run(backend, op: UnOp, xb: np.ndarray) -> np.ndarray:
    if backend is None:
        out = reference.run(_program(op), [xb.view(np.float32)])
    else:
        out = _dispatch(backend, _program(op), [xb.view(np.float32)])
    return np.frombuffer(out[0], np.uint32)


def _first_bad(xb, got, want) -> str:
    bad = np.flatnonzero(got != want)
    return ", ".join(f"x=0x{xb[i]:08x}: got 0x{got[i]:08x} want 0x{want[i]:08x}" for i in bad[:6])


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.value)
def test_hard_case_table_agrees_with_mpmath(op):
    """The committed hard cases (scripts/crmath_hard_cases.py) hold the mpmath results: every
    entry of a sample, checked with this file's own oracle."""
    xs, ys = _hard(op)
    assert xs.size > 0 and np.all(np.diff(xs.astype(np.int64)) > 0)
    for i in np.random.default_rng(1).choice(xs.size, min(40, xs.size), replace=False):
        assert _oracle(op, int(xs[i])) == int(ys[i]), hex(xs[i])


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.value)
def test_reference_is_correctly_rounded(op):
    """vyre's reference against mpmath directly: special values, random inputs, hard cases."""
    xs, ys = _special(op)
    got = _run(None, op, xs)
    assert np.array_equal(got, ys), _first_bad(xs, got, ys)
    r = _random(400, 7)
    r = r[np.isfinite(r.view(np.float32)) & ((r & 0x7F800000) != 0)]
    if op in (UnOp.LOG, UnOp.LOG2):
        r = r & np.uint32(0x7FFFFFFF)
    if op in (UnOp.ASIN, UnOp.ACOS):
        r = np.random.default_rng(8).uniform(-1, 1, r.size).astype(np.float32).view(np.uint32)
    if op is UnOp.LOG1P:
        r = r[r.view(np.float32) >= -1]
    want = np.array([_oracle(op, int(x)) for x in r], np.uint32)
    got = _run(None, op, r)
    assert np.array_equal(got, want), _first_bad(r, got, want)
    hx, hy = _hard(op)
    got = _run(None, op, hx)
    assert np.array_equal(got, hy), _first_bad(hx, got, hy)


def _cases(op: UnOp) -> tuple[np.ndarray, np.ndarray]:
    """Every hard case and special value with its mpmath answer, plus 2^16 random inputs with
    the reference's answer (itself checked against mpmath above)."""
    hx, hy = _hard(op)
    sx, sy = _special(op)
    r = _random(1 << 16, 11)
    return np.concatenate([hx, sx, r]), np.concatenate([hy, sy, _run(None, op, r)])


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.value)
def test_opencl_is_byte_identical(opencl, op):
    xs, want = _cases(op)
    got = _run(opencl, op, xs)
    assert np.array_equal(got, want), _first_bad(xs, got, want)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.value)
def test_wgpu_is_byte_identical(wgpu, op):
    """WGSL has no f64: the same algorithm runs on software float64 (vyre.lower.crmath.soft)."""
    xs, want = _cases(op)
    got = _run(wgpu, op, xs)
    assert np.array_equal(got, want), _first_bad(xs, got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.value)
def test_cuda_is_byte_identical(cuda, op):
    xs, want = _cases(op)
    got = _run(cuda, op, xs)
    assert np.array_equal(got, want), _first_bad(xs, got, want)


def test_cuda_source_of_every_function_compiles_with_nvrtc():
    """Without a GPU, NVRTC still compiles one kernel using every helper (sm_90)."""
    try:
        from vyre.drivers.cuda import compiler
        compiler.nvrtc_version()
    except Exception as exc:
        pytest.skip(f"NVRTC unavailable: {exc}")
    from vyre.drivers.cuda.codegen import generate

    def all_ops(v):
        acc = v
        for op in OPS:
            acc = acc + Expr.un(op, v)
        return acc + Expr.bin(BinOp.HYPOT, v, acc) + Expr.bin(BinOp.POW, acc, v) + Expr.bin(BinOp.ATAN2, v, acc)

    _, source = generate(map_program([DataType.F32], DataType.F32, all_ops, wg=64))
    for op in [*OPS, BinOp.HYPOT, BinOp.POW, BinOp.ATAN2]:
        assert f"{lower_crmath.HELPER[op]}(" in source
    assert compiler.compile_cubin(source, "sm_90")


@pytest.mark.parametrize("t", [DataType.F16, DataType.BF16], ids=lambda t: t.value)
@pytest.mark.parametrize("backend_id", ["opencl", "wgpu"])
def test_half_forms_round_the_f32_result_once(backend_id, t):
    """S27: f16/bf16 exp/sin are the correctly rounded f32 result rounded once (numpy's
    float16 conversion for f16; bf16 by round-to-nearest-even on the top 16 bits)."""
    from conftest import get_backend

    backend = get_backend(backend_id)
    rng = np.random.default_rng(3)
    hb = rng.integers(0, 1 << 16, 4096, dtype=np.uint32).astype(np.uint16)
    for op in (UnOp.EXP, UnOp.SIN):
        prog = map_program([t], t, lambda v, op=op: Expr.un(op, v), wg=64)
        want = reference.run(prog, [hb])[0]
        got = _dispatch(backend, prog, [hb])[0]
        assert got == want
        wide = hb.view(np.float16).astype(np.float32) if t is DataType.F16 else \
            (hb.astype(np.uint32) << 16).view(np.float32)
        f32 = _run(None, op, np.ascontiguousarray(wide).view(np.uint32)).view(np.float32)
        w = np.frombuffer(want, np.uint16)
        ok = ~np.isnan(f32)
        if t is DataType.F16:
            with np.errstate(over="ignore"):
                exp16 = f32.astype(np.float16).view(np.uint16)
        else:
            b = f32.view(np.uint32).astype(np.uint64)
            exp16 = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
        assert np.array_equal(w[ok], exp16[ok])


def test_sin_cos_polynomials_are_the_fit_they_claim():
    """The sine's and cosine's coefficients are the Chebyshev fit `sincos_fit` recomputes, and
    the polynomials with those doubles lie within 2^-55 |sin r| and 2^-51.5 |cos r| of mpmath's
    sin and cos on |r| <= pi/4 (1 + 2^-30) (the reduced argument's range)."""
    from vyre.lower.crmath import functions as fn

    s, c, _, _ = fn.sincos_fit()
    assert (s, c) == (fn._SIN_C, fn._COS_C)
    with mpmath.workprec(200):
        top = mpmath.pi / 4 * (1 + mpmath.mpf(2) ** -30)
        worst_s = worst_c = mpmath.mpf(0)
        for k in range(1, 1201):
            r = top * k / 1200
            z = r * r
            ps = sum(mpmath.mpf(v) * z ** i for i, v in enumerate(fn._SIN_C))
            pc = sum(mpmath.mpf(v) * z ** i for i, v in enumerate(fn._COS_C))
            worst_s = max(worst_s, abs((r + r * z * ps) / mpmath.sin(r) - 1))
            worst_c = max(worst_c, abs((1 + z * pc) / mpmath.cos(r) - 1))
    assert worst_s < mpmath.mpf(2) ** -55 and worst_c < mpmath.mpf(2) ** -51.5, (float(worst_s), float(worst_c))


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.value)
def test_device_double_is_within_its_error_bound(opencl, op):
    """The hard-case tables are complete only if every helper's double lies within
    DEVICE_EPS of the exact value: measured on PoCL (same doubles as CUDA: basic IEEE
    operations only) against numpy's float64 functions on 2^16 inputs, with a margin of 2."""
    cl = pytest.importorskip("pyopencl")
    from vyre.drivers.opencl.codegen import HEADER
    from vyre.lower.cfamily import PRELUDE
    from vyre.reference import crmath as ref_crmath

    rng = np.random.default_rng(int(op.value.encode().hex(), 16) % 2**32)
    n = 1 << 16
    dom = {UnOp.EXP: (-104, 89), UnOp.EXP2: (-150, 128), UnOp.TANH: (-10, 10), UnOp.SINH: (-89, 89),
           UnOp.COSH: (-89, 89), UnOp.EXPM1: (-100, 88), UnOp.ASIN: (-1, 1), UnOp.ACOS: (-1, 1),
           UnOp.LOG1P: (-1, 100), UnOp.ERF: (-6, 6)}
    if op in dom:
        lo, hi = dom[op]
        x = rng.uniform(lo, hi, n).astype(np.float32)
        top = 3 if hi > 1 else -0.01
        x[: n // 4] = (np.exp2(rng.uniform(-30, top, n // 4)) * rng.choice([-1, 1], n // 4)).astype(np.float32)
        x = x[x >= lo]
    else:
        b = _random(n, 5)
        b = b[((b & 0x7F800000) != 0) & ((b & 0x7F800000) != 0x7F800000)]
        if op in (UnOp.LOG, UnOp.LOG2):
            b = b & np.uint32(0x7FFFFFFF)
        x = np.concatenate([b.view(np.float32), (1 + rng.uniform(-2**-6, 2**-6, 4096)).astype(np.float32)])
    src = HEADER + PRELUDE + lower_crmath.prelude({op}) + (
        "__kernel void k(__global const float* xs, __global double* ys) {"
        f" float x = xs[get_global_id(0)]; ys[get_global_id(0)] = {lower_crmath.DOUBLE[op]}; }}")
    ctx = cl.Context([opencl.device.rt.device])    # the device the opencl backend runs on
    queue = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, src).build(options=["-cl-std=CL1.2"])
    mf = cl.mem_flags
    xb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(ctx, mf.WRITE_ONLY, x.size * 8)
    prg.k(queue, (x.size,), None, xb, yb)
    y = np.empty(x.size)
    cl.enqueue_copy(queue, y, yb)
    with np.errstate(all="ignore"):
        want = ref_crmath.F64[op](x.astype(np.float64))
    ok = np.isfinite(want) & (np.abs(want) > 2.0 ** -1000)
    rel = np.abs(y[ok] - want[ok]) / np.abs(want[ok])
    assert rel.max() <= lower_crmath.DEVICE_EPS / 2, (op, np.log2(rel.max()), x[ok][np.argmax(rel)])


def _hypot_cases() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, want) f32 bits: special values, exact and exact-midpoint results (Pythagorean
    triples with a 25-bit odd hypotenuse: ties to even), overflow and range edges, and 2^16
    random pairs; want from mpmath (this file's oracle) on all but the random pairs' bulk,
    which the reference answers (checked against mpmath on a sample below)."""
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    pairs = [(inf, nan, inf), (nan, -inf, inf), (nan, 1.0, nan), (0.0, -0.0, 0.0), (-0.0, -0.0, 0.0),
             (3.0, 4.0, 5.0), (-3.0, 4.0, 5.0), (3e38, 3e38, inf), (2.0 ** -126, 0.0, 2.0 ** -126),
             (np.uint32(0x00000005).view(np.float32), 1.0, 1.0)]
    rng = np.random.default_rng(4)
    xs, ys = [], []
    while len(xs) < 200:
        u, v = (int(t) for t in rng.integers(2000, 4096, 2))
        if (u + v) % 2 == 0 or u <= v:
            continue
        a, b, m = u * u - v * v, 2 * u * v, u * u + v * v
        if not (1 << 24) < m < (1 << 25) or float(np.float32(a)) != a or float(np.float32(b)) != b:
            continue
        k = int(rng.integers(-60, 60))
        xs.append(np.float32(a * 2.0 ** k))
        ys.append(np.float32(b * 2.0 ** k))
    sx = np.array([_f32_bits(float(p[0])) for p in pairs] + [_f32_bits(float(v)) for v in xs], np.uint32)
    sy = np.array([_f32_bits(float(p[1])) for p in pairs] + [_f32_bits(float(v)) for v in ys], np.uint32)
    want = [_f32_bits(float(p[2])) for p in pairs]
    with mpmath.workprec(300):
        for a, b in zip(xs, ys):
            want.append(_round24(mpmath.sqrt(mpmath.mpf(float(a)) ** 2 + mpmath.mpf(float(b)) ** 2)))
    rx, ry = _random(1 << 16, 21), _random(1 << 16, 22)
    rw = _run_bin(None, rx, ry)
    return np.concatenate([sx, rx]), np.concatenate([sy, ry]), np.concatenate([np.array(want, np.uint32), rw])


def _run_bin(backend, xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
    prog = map_program([DataType.F32, DataType.F32], DataType.F32, lambda a, b: Expr.bin(BinOp.HYPOT, a, b), wg=64)
    ins = [xb.view(np.float32), yb.view(np.float32)]
    out = reference.run(prog, ins) if backend is None else _dispatch(backend, prog, ins)
    return np.frombuffer(out[0], np.uint32)


def test_hypot_reference_against_mpmath():
    """Random pairs (a sample) and the exact / tie cases, with mpmath directly."""
    xs, ys, want = _hypot_cases()
    got = _run_bin(None, xs, ys)
    n = xs.size - (1 << 16)
    assert np.array_equal(got[:n], want[:n]), _first_bad(xs[:n], got[:n], want[:n])
    idx = np.random.default_rng(2).choice(np.arange(n, xs.size), 300, replace=False)
    idx = idx[np.isfinite(xs[idx].view(np.float32)) & np.isfinite(ys[idx].view(np.float32))]
    with mpmath.workprec(300):
        oracle = np.array([_round24(mpmath.sqrt(mpmath.mpf(float(xs[i].view(np.float32))) ** 2
                                                + mpmath.mpf(float(ys[i].view(np.float32))) ** 2))
                           if (xs[i] & 0x7F800000) and (ys[i] & 0x7F800000) else got[i] for i in idx], np.uint32)
    assert np.array_equal(got[idx], oracle), _first_bad(xs[idx], got[idx], oracle)


def test_hypot_opencl_is_byte_identical(opencl):
    xs, ys, want = _hypot_cases()
    got = _run_bin(opencl, xs, ys)
    assert np.array_equal(got, want), _first_bad(xs, got, want)


def test_hypot_wgpu_is_byte_identical(wgpu):
    xs, ys, want = _hypot_cases()
    got = _run_bin(wgpu, xs, ys)
    assert np.array_equal(got, want), _first_bad(xs, got, want)


@pytest.mark.gpu
def test_hypot_cuda_is_byte_identical(cuda):
    xs, ys, want = _hypot_cases()
    got = _run_bin(cuda, xs, ys)
    assert np.array_equal(got, want), _first_bad(xs, got, want)


def test_wgpu_runs_the_exp_family_together_in_one_kernel(wgpu):
    """exp, tanh and expm1 in one WGSL module share one 128-entry family (one vym_scale, one
    table each: five copies of the family once printed vym_exp_ta twice and naga refused the
    module). Their sum gives the reference's bytes on each function's hard cases."""
    ops = [UnOp.EXP, UnOp.TANH, UnOp.EXPM1]
    xs = np.concatenate([_cases(op)[0] for op in ops]).astype(np.float32)
    prog = map_program([DataType.F32], DataType.F32,
                       lambda v: Expr.un(UnOp.EXP, v) + Expr.un(UnOp.TANH, v) + Expr.un(UnOp.EXPM1, v), wg=64)
    assert _dispatch(wgpu, prog, [xs]) == reference.run(prog, [xs])
