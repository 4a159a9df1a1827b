"""64-bit loop variables and unspecialized 64-bit / 16-bit float specialization constants on
wgpu (`vyre.lower.legalize.int64`, `.half`): the reference's bytes, and routing accepts them.
The trip counts are also checked against Python ints."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_backend
from vyre import reference
from vyre.driver import DispatchConfig
from vyre.ir import BufferDecl, DataType, Expr, Node, Program

from helpers import typed

U64, I64 = DataType.U64, DataType.I64
# from, trips (u64 bounds stay below 2^63: see the report on the reference's u64 loop bounds)
STARTS = {U64: [0, 5, 0xFFFFFFFE, (1 << 40) - 3, 7, 2**32 - 3, 100, (1 << 62) - 2],
          I64: [0, 5, 0xFFFFFFFE, (1 << 40) - 3, 7, 2**32 - 3, 2**64 - 100, 2**64 - 4]}
TRIPS = [10, 0, 9, 8, -5, 20, 37, 6]


@pytest.fixture
def wgpu():
    return get_backend("wgpu")


def _program(t: DataType) -> Program:
    """Per invocation: a sum over v in [lo, hi) skipping lo+5 (continue), with a 64-bit and an
    f16 specialization constant, and the number of trips run."""
    gx, v = Expr.gid_x(), Expr.var("v")
    body = [Node.let_bind("acc", Expr.lit(t, 0)), Node.let_bind("n", Expr.u32(0)),
            Node.loop("v", Expr.load("lo", gx), Expr.load("hi", gx), [
                Node.if_(v.eq(Expr.load("lo", gx) + Expr.lit(t, 5)), [Node.continue_()]),
                Node.assign("acc", Expr.var("acc") + (v * Expr.spec("m", t, 3) ^ (v >> 7))),
                Node.assign("n", Expr.var("n") + 1)]),
            Node.store("o", gx, Expr.var("acc")),
            Node.store("c", gx, Expr.var("n") + Expr.cast(DataType.U32, Expr.spec("h", DataType.F16, 2.5)))]
    return Program.wrapped([BufferDecl.read("lo", 0, t), BufferDecl.read("hi", 1, t), BufferDecl.output("o", 2, t),
                            BufferDecl.output("c", 3, DataType.U32)], 4, body)


@pytest.mark.parametrize("t", [U64, I64], ids=lambda t: t.value)
def test_64_bit_loops_and_spec_constants_match_the_reference(wgpu, t):
    p = _program(t)
    lo = np.array(STARTS[t], np.uint64)
    hi = (lo + np.array(TRIPS, np.int64).view(np.uint64))
    ins = typed(p, [lo, hi])
    wgpu.refuse(p)     # routing accepts it as it is (unspecialized)
    for cfg in (None, DispatchConfig(specialization={"m": Expr.lit(t, 5)})):
        want = reference.run(p, ins, cfg)
        assert wgpu.dispatch(p, ins, cfg) == want
    trips = [max(k, 0) - (1 if k > 5 else 0) for k in TRIPS]
    assert np.frombuffer(want[1], np.uint32).tolist() == [k + 2 for k in trips]    # + cast(2.5) = 2


def test_too_many_64_bit_operations_are_refused_with_a_fix(wgpu):
    """The one 64-bit limit left (docs/wgpu.md): refused before compiling, by routing too,
    with a Fix naming backends that run it."""
    from vyre.driver import UnsupportedFeature
    from vyre.lower.legalize.int64 import MAX_SLOTS

    gx, acc = Expr.gid_x(), Expr.var("acc")
    steps = [Node.assign("acc", acc * acc) for _ in range(MAX_SLOTS + 1)]   # one 64-bit multiply each
    p = Program.wrapped([BufferDecl.read("x", 0, U64), BufferDecl.output("o", 1, U64)], 4,
                        [Node.let_bind("acc", Expr.load("x", gx)), *steps, Node.store("o", gx, acc)])
    for call in (lambda: wgpu.refuse(p), lambda: wgpu.dispatch(p, [np.ones(4, np.uint64)])):
        with pytest.raises(UnsupportedFeature, match="64-bit operations in one program") as err:
            call()
        assert "opencl" in str(err.value) and "Fix:" in str(err.value)
