"""Fusion: decisions name their reason; fused programs give exactly the consumer outputs of
running the producer then the consumer, on every backend (including out-of-bounds reads and
sizes that differ between the two programs)."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import reference
from vyre.driver import InvalidProgram
from vyre.driver.fusion import FusionCaps, FusionReject, decide, fuse, run_pair
from vyre.ir import AtomicOp, BufferDecl, DataType, Expr, Node, Program, validate

from helpers import GX

U, F = DataType.U32, DataType.F32
CAPS = FusionCaps(1024, 48 * 1024)


def producer(dt=F, wg=64) -> Program:
    return Program.wrapped([BufferDecl.read("x", 0, dt), BufferDecl.read("y", 1, dt), BufferDecl.output("t", 2, dt)], wg,
                           [Node.let_bind("s", Expr.load("x", GX) * Expr.load("y", GX)),
                            Node.store("t", GX, Expr.var("s") + 1.0 if dt is F else Expr.var("s") + 1)])


def consumer(dt=F, wg=64, n_out=0) -> Program:
    body = [Node.let_bind("s", Expr.load("t", GX)),
            Node.if_(Expr.var("s").gt(Expr.load("z", GX)), [Node.store("o", GX, Expr.var("s").sqrt() if dt is F else Expr.var("s") ^ 7)],
                     [Node.store("o", GX, Expr.load("z", GX))])]
    return Program.wrapped([BufferDecl.read("z", 0, dt), BufferDecl.read("t", 1, dt), BufferDecl.output("o", 2, dt, n_out)],
                           wg, body)


def two_step(p, c, p_in, c_in):
    t = reference.run(p, p_in)[0]
    return reference.run(c, [c_in[0], t])


@pytest.mark.parametrize("dt", [U, F], ids=["u32", "f32"])
@pytest.mark.parametrize(("n", "n_out"), [(1000, 0), (37, 0), (20, 50), (100, 30)])
def test_fused_program_equals_two_dispatches(backend, dt, n, n_out):
    rng = np.random.default_rng(n)
    x, y = (rng.standard_normal(n).astype(np.float32) if dt is F else rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
            for _ in range(2))
    z = (rng.standard_normal(max(n, n_out or n)).astype(np.float32) if dt is F
         else rng.integers(0, 2**32, max(n, n_out or n), dtype=np.uint64).astype(np.uint32))
    p, c = producer(dt), consumer(dt, n_out=n_out)
    f = fuse(p, c, CAPS)
    assert validate(f.program) == []
    assert [b.name for b in f.program.buffers if b.name.endswith("t")] == []  # the intermediate is gone
    got = f.consumer_results(backend.dispatch(f.program, f.inputs([x, y], [z, None])))
    want = two_step(p, c, [x, y], [z])
    assert got == want


def test_run_pair_fuses_when_legal_and_falls_back_otherwise(opencl):
    x = np.arange(64, dtype=np.float32)
    outs, d = run_pair(opencl, producer(), consumer(), [x, x], [x, None])
    assert d.accepted and outs == two_step(producer(), consumer(), [x, x], [x])
    outs, d = run_pair(opencl, producer(wg=32), consumer(), [x, x], [x, None])
    assert not d.accepted and d.reason is FusionReject.WORKGROUP_MISMATCH
    assert outs == two_step(producer(wg=32), consumer(), [x, x], [x])


def test_rejections_name_their_reason():
    p, c = producer(), consumer()
    assert decide(p, c, CAPS).accepted
    assert decide(p, consumer(wg=128), CAPS).reason is FusionReject.WORKGROUP_MISMATCH
    assert decide(p, c, FusionCaps(32, 1 << 16)).reason is FusionReject.INVOCATION_CAP
    assert decide(p, c, CAPS, consumed_elsewhere=frozenset({"t"})).reason is FusionReject.OUTPUT_CONSUMED_ELSEWHERE
    assert decide(p, c, CAPS, link={"z": "nope"}).reason is FusionReject.NO_FLOW
    unrelated = Program.wrapped([BufferDecl.read("q", 0, F), BufferDecl.output("o", 1, F)], 64,
                                [Node.store("o", GX, Expr.load("q", GX))])
    assert decide(p, unrelated, CAPS).reason is FusionReject.NO_FLOW
    shared = Program.wrapped([*c.buffers, BufferDecl.workgroup("w", 1 << 14, U)], 64, c.body)
    assert decide(p, shared, CAPS).reason is FusionReject.SHARED_MEMORY_BUDGET
    shifted = Program.wrapped(c.buffers, 64, [Node.store("o", GX, Expr.load("t", GX + 1))])
    assert decide(p, shifted, CAPS).reason is FusionReject.NOT_ELEMENTWISE
    atomic = Program.wrapped([*p.buffers, BufferDecl.read_write("h", 3, U, 1)], 64,
                             [*p.body, Node.expr(Expr.atomic(AtomicOp.ADD, "h", 0, 1))])
    assert decide(atomic, c, CAPS).reason is FusionReject.NOT_ELEMENTWISE
    with pytest.raises(InvalidProgram, match="Fix:"):
        fuse(p, consumer(wg=128), CAPS)
