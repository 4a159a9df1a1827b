"""`vyre.lower.legalize.narrow`: u8/i8/u16/i16 buffers packed into u32 words give the
original Program's bytes (loads widen and sign-extend, out-of-bounds loads give 0 and
stores do nothing, S6/S26), neighbouring lanes storing into one word keep each other's
bytes, and wgpu runs such programs (runtime-sized buffers included)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_backend
from vyre import reference
from vyre.ir import BufferDecl, DataType, Expr, Node, Program
from vyre.lower.legalize.narrow import NARROW, lower_narrow

gx = Expr.gid_x()


def program(t: DataType, n: int, m: int, count: bool = True) -> Program:
    """out[j] = f(x[j], x[j+1], x[j*3 % 17]) for each lane j, plus a workgroup and a local
    array of the same type; some indices run past the end."""
    wide = t.value_type
    one = Expr.i32(1) if wide is DataType.I32 else Expr.u32(1)
    x = lambda i: Expr.load("x", i)  # noqa: E731
    body = [Node.store("tile", Expr.lid_x(), x(gx) + one),
            Node.barrier(),
            Node.store("loc", gx % 3, x(gx + 1)),
            Node.store("out", gx, x(gx) * Expr.load("tile", (Expr.lid_x() + 1) % 8)
                       - Expr.load("loc", gx % 3) + x((gx * 3) % 17)),
            Node.store("cnt", gx, Expr.buf_len("x") + Expr.buf_len("out"))]
    return Program.wrapped([BufferDecl.read("x", 0, t, n if count else 0),
                            BufferDecl.output("out", 1, t, m if count else 0),
                            BufferDecl.output("cnt", 2, DataType.U32, m if count else 0),
                            BufferDecl.workgroup("tile", 8, t), BufferDecl.local("loc", 3, t)], 8, body)


@pytest.mark.parametrize("t", NARROW, ids=lambda t: t.value)
@pytest.mark.parametrize(("n", "m"), [(1, 1), (5, 7), (17, 16), (64, 61)])
def test_packed_storage_matches_reference(t, n, m):
    rng = np.random.default_rng(n * 31 + m)
    x = rng.integers(0, 256 ** t.size, n, dtype=np.uint64).astype(t.storage).view(t.numpy)
    p = program(t, n, m)
    q = lower_narrow(p)
    assert not any(b.dtype in NARROW for b in q.buffers)
    raw = x.view(np.uint8)
    padded = np.concatenate([raw, np.zeros(-raw.size % 4, np.uint8)])   # whole u32 words
    want = reference.run(p, [x])
    got = reference.run(q, [padded])
    assert [g[:len(w)] for g, w in zip(got, want)] == want


@pytest.mark.parametrize("t", NARROW, ids=lambda t: t.value)
def test_wgpu_runs_narrow_storage(t):
    be = get_backend("wgpu")
    rng = np.random.default_rng(3)
    for n, m in ((5, 7), (130, 129)):
        x = rng.integers(0, 256 ** t.size, n, dtype=np.uint64).astype(t.storage).view(t.numpy)
        for count in (True, False):
            p = program(t, n, m, count)
            from vyre.driver import DispatchConfig

            cfg = None if count else DispatchConfig(dispatch_elements=m)
            assert be.dispatch(p, [x], cfg) == reference.run(p, [x], cfg)
    assert f"vyre.dtype.{t.value}" in be.supported_ops()
