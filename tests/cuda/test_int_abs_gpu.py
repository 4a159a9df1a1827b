"""Signed integer abs at INT_MIN on the GPU: |INT_MIN| is INT_MIN (S1 wraps), and whatever
tests the result's sign must see it negative. ptxas took abs.s64 as non-negative and folded
`saturating_add(abs(INT64_MIN), INT64_MIN)` to INT64_MAX (conform random/7001179, the
program below); the reference and OpenCL gave INT64_MIN's saturation."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import reference
from vyre.ir import BinOp, BufferDecl, DataType, Expr, Node, Program, UnOp

pytestmark = pytest.mark.gpu


def _values(t: DataType) -> np.ndarray:
    info = np.iinfo(t.host)
    return np.array([info.min, info.min + 1, -2, -1, 0, 1, 2, info.max - 1, info.max], t.host)


@pytest.mark.parametrize("t", [DataType.I32, DataType.I64], ids=lambda t: t.value)
def test_abs_of_int_min_keeps_its_sign_on_cuda(cuda, t):
    g = Expr.gid_x()
    x = Expr.load("x", g)
    a = Expr.un(UnOp.ABS, x)
    zero = Expr.lit(t, 0)
    body = [Node.store("sat", g, Expr.bin(BinOp.SATURATING_ADD, a, x)),
            Node.store("neg", g, Expr.select(a.lt(zero), Expr.lit(t, 1), zero)),
            Node.store("mx", g, Expr.bin(BinOp.MAX, Expr.bin(BinOp.SATURATING_ADD, a, x),
                                         Expr.bin(BinOp.ABS_DIFF, x ^ Expr.load("x", Expr.u32(4)), x)))]
    prog = Program.wrapped([BufferDecl.read("x", 0, t), BufferDecl.output("sat", 1, t),
                            BufferDecl.output("neg", 2, t), BufferDecl.output("mx", 3, t)], 32, body)
    xs = _values(t)
    want = reference.run(prog, [xs])
    got = cuda.dispatch(prog, [xs])
    assert [bytes(w) for w in got] == [bytes(w) for w in want]
    info = np.iinfo(t.host)
    assert np.frombuffer(want[0], t.host)[0] == info.min       # abs(MIN) + MIN saturates low
    assert np.frombuffer(want[1], t.host)[0] == 1              # abs(MIN) is negative
