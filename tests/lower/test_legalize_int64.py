"""`vyre.lower.legalize.int64`: every u64/i64 operator, comparison and cast, lowered to
pairs of u32 words, gives the original Program's bytes (and the same S3 division errors) on
the reference, and the wgpu backend runs 64-bit programs through it. Expected values for
the core arithmetic also come from Python integers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vyre import reference
from vyre.driver import DispatchConfig
from vyre.ir import AtomicOp, BinOp, BufferDecl, DataType, Expr, Function, Node, Program, UnOp
from vyre.ir.errors import ExecutionError
from vyre.ir.typecheck import TypeFault, bin_result, un_result
from vyre.lower.legalize.int64 import Int64Refusal, lower_int64

D = DataType
WIDE = [D.U64, D.I64]
EDGES = [0, 1, 2, 3, 31, 32, 33, 63, 64, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x100000000,
         0x123456789ABCDEF0, 0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFE,
         0xFFFFFFFFFFFFFFFF]
SHIFTS = (BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT)


def values() -> np.ndarray:
    rng = np.random.default_rng(64)
    return np.array(EDGES + list(rng.integers(0, 2**64, 14, dtype=np.uint64)), np.uint64)


def program(tin, tout, make, n: int) -> Program:
    gx = Expr.gid_x()
    bufs = [BufferDecl.read(f"x{i}", i, t, n) for i, t in enumerate(tin)]
    bufs.append(BufferDecl.output("out", len(tin), tout, n))
    return Program.wrapped(bufs, 1, [Node.store("out", gx, make(*[Expr.load(f"x{i}", gx) for i in range(len(tin))]))])


def outcome(p: Program, ins, n: int):
    try:
        return reference.run(p, ins, DispatchConfig(grid_override=(n, 1, 1)))
    except ExecutionError as err:
        return err.kind


def check(p: Program, ins) -> None:
    n = len(ins[0])
    want, got = outcome(p, ins, n), outcome(lower_int64(p), ins, n)
    assert got == want, (want if isinstance(want, str) else "bytes", got if isinstance(got, str) else "bytes")


def _bin_cells():
    for t in WIDE:
        for op in BinOp:
            for rt in (t, D.U32) if op in SHIFTS else (t,):
                try:
                    yield op, t, rt, bin_result(op, t, rt)
                except TypeFault:
                    pass


@pytest.mark.parametrize(("op", "t", "rt", "res"), list(_bin_cells()), ids=lambda v: getattr(v, "value", v))
def test_binary_operator_on_pairs_matches_reference(op, t, rt, res):
    v = values()
    a, b = (np.array(x, np.uint64) for x in zip(*itertools.product(v, v)))
    if rt is D.U32:
        b = (b & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if t is D.I64 and op in (BinOp.DIV, BinOp.MOD):    # S3 errors: checked below
        ai, bi = a.view(np.int64), b.view(np.int64)
        keep = (bi != 0) & ~((ai == -(2**63)) & (bi == -1))
        a, b = a[keep], b[keep]
    check(program([t, rt], res, lambda x, y: Expr.bin(op, x, y), len(a)), [a.view(t.numpy), b.view(rt.numpy)])


@pytest.mark.parametrize("op", [BinOp.DIV, BinOp.MOD], ids=lambda o: o.value)
@pytest.mark.parametrize("pair", [(7, 0), (-(2**63), -1)])
def test_signed_division_errors_match_reference(op, pair):
    a, b = (np.array([x], np.int64) for x in pair)
    p = program([D.I64, D.I64], D.I64, lambda x, y: Expr.bin(op, x, y), 1)
    assert outcome(lower_int64(p), [a, b], 1) == outcome(p, [a, b], 1) == "division"


@pytest.mark.parametrize("t", WIDE, ids=lambda t: t.value)
def test_unary_operators_and_casts_match_reference(t):
    v = values()
    for op in UnOp:
        try:
            res = un_result(op, t)
        except TypeFault:
            continue
        check(program([t], res, lambda x, op=op: Expr.un(op, x), len(v)), [v.view(t.numpy)])
    for dst in (D.U32, D.I32, D.F32, D.BOOL, D.U64, D.I64):
        check(program([t], dst, lambda x, dst=dst: Expr.cast(dst, x), len(v)), [v.view(t.numpy)])
    rng = np.random.default_rng(5)
    f = np.concatenate([rng.integers(0, 2**32, 3000, dtype=np.uint32),
                        np.array([0x5F000000, 0x5F7FFFFF, 0x5F800000, 0xDF000000, 0xDF000001, 0x7F800000,
                                  0xFF800000, 0x7FC00000, 0x3F000000, 0xBF7FFFFF, 0x4B800001, 0x80000000],
                                 np.uint32)])
    ints = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 12345], np.uint32)
    for src, x in ((D.F32, f.view(np.float32)), (D.U32, ints), (D.I32, ints.view(np.int32)), (D.BOOL, ints)):
        check(program([src], t, lambda y: Expr.cast(t, y), len(x)), [x])


def test_core_arithmetic_matches_python_integers():
    v = [int(x) for x in values()]
    a, b = (np.array(x, np.uint64) for x in zip(*itertools.product(v, v)))
    for op, fn in ((BinOp.ADD, lambda x, y: x + y), (BinOp.MUL, lambda x, y: x * y),
                   (BinOp.SUB, lambda x, y: x - y), (BinOp.SHR, lambda x, y: x >> (y & 63)),
                   (BinOp.DIV, lambda x, y: x // y if y else 2**64 - 1),
                   (BinOp.MUL_HIGH, lambda x, y: (x * y) >> 64)):
        p = lower_int64(program([D.U64, D.U64], D.U64, lambda x, y, op=op: Expr.bin(op, x, y), len(a)))
        got = np.frombuffer(reference.run(p, [a, b], DispatchConfig(grid_override=(len(a), 1, 1)))[0], np.uint64)
        want = np.array([fn(int(x), int(y)) % 2**64 for x, y in zip(a, b)], np.uint64)
        assert (got == want).all(), op


def test_locals_functions_selects_and_bounds():
    """64-bit locals, parameters, results, selects, buf_len and out-of-bounds loads/stores
    (S6 per element) through the pairs."""
    gx = Expr.gid_x()
    twice = Function.define("twice", [("v", D.I64)], [Node.let_bind("w", Expr.var("v") + Expr.var("v"))],
                            Expr.var("w"))
    body = [Node.let_bind("a", Expr.load("x", gx)),
            Node.let_bind("b", Expr.call("twice", Expr.var("a"))),
            Node.assign("b", Expr.select(Expr.var("b").lt(Expr.i64(0)), -Expr.var("b"), Expr.var("b") ^ Expr.var("a"))),
            Node.store("o", gx * 2, Expr.var("b") + Expr.cast(D.I64, Expr.buf_len("x"))),
            Node.store("o", gx * 2 + 1, Expr.load("x", gx + 5))]
    p = Program.wrapped([BufferDecl.read("x", 0, D.I64, 7), BufferDecl.output("o", 1, D.I64, 9)], 4, body, [twice])
    x = values()[:7].view(np.int64)
    cfg = DispatchConfig(grid_override=(2, 1, 1))
    assert reference.run(lower_int64(p), [x], cfg) == reference.run(p, [x], cfg)


def test_64_bit_atomics_are_refused_and_loop_variables_lowered():
    gx = Expr.gid_x()
    p = Program.wrapped([BufferDecl.output("o", 0, D.U64, 4)], 1,
                        [Node.expr(Expr.atomic(AtomicOp.ADD, "o", gx, Expr.u64(1)))])
    with pytest.raises(Int64Refusal, match="64-bit atomics"):
        lower_int64(p)
    q = Program.wrapped([BufferDecl.output("o", 0, D.U32, 4)], 1,
                        [Node.loop("i", Expr.u64(0xFFFFFFFE), Expr.u64(0x100000003),
                                   [Node.store("o", gx, Expr.load("o", gx) + Expr.cast(D.U32, Expr.var("i")))])])
    low = lower_int64(q)
    assert D.U64 not in low.facts.types
    assert reference.run(low, [], DispatchConfig(grid_override=(1, 1, 1))) == \
        reference.run(q, [], DispatchConfig(grid_override=(1, 1, 1)))
    assert np.frombuffer(reference.run(low, [], DispatchConfig(grid_override=(1, 1, 1)))[0], np.uint32)[0] == \
        sum(range(0xFFFFFFFE, 0x100000003)) % 2**32


def test_wgpu_runs_64_bit_programs():
    """Runtime-sized u64/i64 buffers on wgpu: the count words are scaled to words, so
    bounds and buf_len stay per element."""
    from conftest import get_backend

    be = get_backend("wgpu")
    gx = Expr.gid_x()
    p = Program.wrapped([BufferDecl.read("x", 0, D.I64), BufferDecl.read("y", 1, D.U64), BufferDecl.output("o", 2, D.I64)],
                        64, [Node.store("o", gx, Expr.load("x", gx) * Expr.bitcast(D.I64, Expr.load("y", gx + 1))
                                        + Expr.cast(D.I64, Expr.buf_len("y"))
                                        - Expr.bin(BinOp.SHR, Expr.load("x", gx), Expr.load("y", gx)))])
    v = values()
    x, y = v.view(np.int64), v[::-1].copy()
    assert be.dispatch(p, [x, y]) == reference.run(p, [x, y])
    assert "vyre.dtype.u64" in be.supported_ops() and "vyre.dtype.i64" in be.supported_ops()
