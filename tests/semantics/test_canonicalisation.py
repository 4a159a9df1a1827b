"""S9 where generated code canonicalises only where it is observable (vyre.lower.floats):
NaN payloads and subnormals as inputs and as results, raw bits moved unchanged, locals that
mix raw and computed values, the underflow boundary where a result rounds up to the smallest
normal (hardware flush-to-zero must not flush it), on every backend against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import GX, run_checked

F, U = DataType.F32, DataType.U32
NANS = [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7FC00123]
SUBS = [0x00000001, 0x807FFFFF, 0x00400000, 0x80000001, 0x007FFFFF]
EDGE = NANS + SUBS + [0x00000000, 0x80000000, 0x00800000, 0x80800000, 0x3F800000, 0xBF800000,
                      0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x34000000, 0x33800000]


def _f(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    e = np.asarray(EDGE, np.uint32)
    a, b = np.meshgrid(e, e)
    return _f(a.ravel()), _f(b.ravel())


def _boundary(n: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Products whose exact value is below 2**-126 yet rounds to 2**-126 (a normal): a flush
    that detects tininess before rounding would give zero."""
    rng = np.random.default_rng(7)
    a = rng.uniform(0.5, 1.0, n * 64).astype(np.float32)   # b = 2**-126/a stays normal
    b = (np.float64(2.0**-126) / a.astype(np.float64) * (1 - rng.uniform(0, 2**-23, a.size))).astype(np.float32)
    exact = a.astype(np.float64) * b.astype(np.float64)
    with np.errstate(under="ignore"):
        prod = a * b
    keep = (exact < 2.0**-126) & (prod == np.float32(2.0**-126))
    return a[keep][:n], b[keep][:n]


def _binary(op) -> Program:
    return Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.read("b", 1, F), BufferDecl.output("o", 2, F)], 64,
                           [Node.store("o", GX, op(Expr.load("a", GX), Expr.load("b", GX)))])


@pytest.mark.parametrize("name,op", [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                                     ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b),
                                     ("min", lambda a, b: a.min(b)), ("max", lambda a, b: a.max(b)),
                                     ("abs_diff", lambda a, b: a.abs_diff(b)),
                                     ("fma", lambda a, b: Expr.fma(a, b, a)), ("mod", lambda a, b: a % b)])
def test_S9_binary_operations_on_nan_payloads_and_subnormals(backend, name, op):
    run_checked(backend, _binary(op), list(_pairs()))


@pytest.mark.parametrize("name,op", [("mul", lambda a, b: a * b), ("div", lambda a, b: a / (Expr.f32(1.0) / b)),
                                     ("fma", lambda a, b: Expr.fma(a, b, Expr.f32(0.0)))])
def test_S9_results_that_round_up_to_the_smallest_normal_are_not_flushed(backend, name, op):
    a, b = _boundary()
    assert a.size > 100
    out = run_checked(backend, _binary(op), [a, b])
    if name == "mul":
        assert (np.frombuffer(out[0], np.uint32) == 0x00800000).all()


@pytest.mark.parametrize("op", ["negate", "abs", "sqrt", "floor", "ceil", "trunc", "round", "sign", "reciprocal"])
def test_S9_unary_operations_flush_subnormal_operands(backend, op):
    p = Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.output("o", 1, F)], 64,
                        [Node.store("o", GX, getattr(Expr.load("a", GX), op)())])
    run_checked(backend, p, [_f(EDGE * 4)])


def test_S9_raw_bits_move_unchanged_and_results_are_canonical(backend):
    """Loads, stores, select, same-type casts and locals keep raw bits; the results of
    arithmetic (also behind a select, a bitcast or a local) are canonical."""
    a = Expr.load("a", GX)
    body = [Node.let_bind("raw", a),
            Node.let_bind("mixed", a),
            Node.if_(Expr.load("c", GX).gt(2), [Node.assign("mixed", a * 1.0)]),
            Node.let_bind("acc", Expr.f32(0.0)),
            Node.loop("i", Expr.u32(0), Expr.u32(3), [Node.assign("acc", Expr.var("acc") + a)]),
            Node.store("o", GX * 6, Expr.var("raw")),
            Node.store("o", GX * 6 + 1, Expr.var("mixed")),
            Node.store("o", GX * 6 + 2, Expr.var("acc")),
            Node.store("o", GX * 6 + 3, Expr.select(Expr.load("c", GX).gt(5), a, a - a)),
            Node.store("o", GX * 6 + 4, Expr.cast(F, a)),
            Node.store("u", GX, Expr.bitcast(U, a * 2.0) ^ Expr.bitcast(U, a))]
    p = Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.read("c", 1, U), BufferDecl.output("o", 2, F),
                         BufferDecl.output("u", 3, U)], 32, body)
    n = len(EDGE) * 2
    c = np.arange(n, dtype=np.uint32) % 9
    cfg = None
    from vyre.driver import DispatchConfig

    cfg = DispatchConfig(dispatch_elements=n * 6)
    run_checked(backend, Program.wrapped(p.buffers[:2] + (BufferDecl.output("o", 2, F, n * 6),
                                                          BufferDecl.output("u", 3, U, n)), 32, body),
                [_f(EDGE * 2), c], cfg)


def test_S9_comparisons_and_bool_casts_see_subnormals_as_zero(backend):
    a, b = Expr.load("a", GX), Expr.load("b", GX)
    p = Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.read("b", 1, F), BufferDecl.output("o", 2, U)], 64,
                        [Node.store("o", GX, Expr.cast(U, a.lt(b)) | (Expr.cast(U, a.eq(b)) << 1)
                                    | (Expr.cast(U, Expr.cast(DataType.BOOL, a)) << 2) | (Expr.cast(U, a) << 3))])
    run_checked(backend, p, list(_pairs()))


def test_S9_workgroup_memory_flushed_early_only_where_its_bits_are_never_seen(backend):
    """Values staged in f32 workgroup memory are flushed when stored only if every load of
    that memory is a numeric operand; one shared load node that is also stored keeps the
    buffer raw (its bits are observed)."""
    lid = Expr.lid_x()
    w = Expr.load("w", lid)
    numeric = [Node.store("w", lid, Expr.load("a", GX)), Node.barrier(), Node.store("o", GX, w * 3.0 + w)]
    observed = [Node.store("w", lid, Expr.load("a", GX)), Node.barrier(),
                Node.store("o", GX, w), Node.store("p", GX, w * 2.0)]
    for body in (numeric, observed):
        p = Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.output("o", 1, F), BufferDecl.output("p", 2, F),
                             BufferDecl.workgroup("w", 32, F)], 32, body)
        run_checked(backend, p, [_f(EDGE * 4)])


@pytest.mark.parametrize("name,op", [("neg_neg", lambda x: x.negate().negate()),
                                     ("abs_neg", lambda x: x.negate().abs()),
                                     ("plus_zero", lambda x: x + 0.0), ("minus_zero", lambda x: x - 0.0),
                                     ("zero_minus", lambda x: Expr.f32(-0.0) - x),
                                     ("abs_diff_zero", lambda x: x.abs_diff(Expr.f32(0.0)))])
def test_S9_identities_a_compiler_may_fold_still_flush(backend, name, op):
    """-(-x), |-x|, x + 0, x - 0, -0 - x: compilers fold them to x or -x (sign-bit operations
    that never flush), so a subnormal x must be flushed in code (found on the H100)."""
    p = Program.wrapped([BufferDecl.read("a", 0, F), BufferDecl.output("o", 1, F)], 8,
                        [Node.store("o", GX, op(Expr.load("a", GX)))])
    out = run_checked(backend, p, [_f(EDGE * 4)])
    sub = np.frombuffer(out[0], np.uint32)
    assert not (((sub & 0x7F800000) == 0) & ((sub & 0x007FFFFF) != 0)).any()
