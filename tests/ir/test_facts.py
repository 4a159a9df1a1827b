"""ProgramFacts (vyre.ir.facts): every fact equals a plain recomputation over the corpus and
random programs, and is computed once per Program."""

from __future__ import annotations

import pytest

from vyre.conform.corpus import corpus
from vyre.conform.generator import random_program
from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.ops import expr_ops, node_op
from vyre.ir.types import TRANSCENDENTAL, BinOp, MemoryOrdering


def _programs():
    yield from (e.program for e in corpus())
    for seed in range(120):
        yield random_program(seed)[0]


def _all_exprs(p):
    yield from N.program_exprs(p)


def _all_nodes(p):
    for body in N.program_bodies(p):
        yield from N.walk_nodes(body)


def _ops_oracle(p) -> set[str]:
    ops = {f"vyre.dtype.{b.dtype.value}" for b in p.buffers}
    ops |= {"vyre.buffer.workgroup" for b in p.buffers if b.is_workgroup}
    ops |= {"vyre.buffer.local" for b in p.buffers if b.is_local}
    ops |= {node_op(n) for n in _all_nodes(p)}
    ops |= {f"vyre.dtype.{t.value}" for f in p.functions for _, t in f.params}
    for e in _all_exprs(p):
        ops |= set(expr_ops(e))
        if isinstance(e, E.Lit | E.Cast | E.Bitcast):
            ops.add(f"vyre.dtype.{e.dtype.value}")
    return ops


@pytest.mark.parametrize("p", list(_programs()), ids=lambda p: p.fingerprint().hex()[:10])
def test_facts_equal_a_plain_recomputation(p):
    f = p.facts
    assert f is p.facts                                  # computed once, cached on the program
    assert [b.name for b in f.bound] == [b.name for b in sorted(
        (b for b in p.buffers if b.access.value in ("read", "read_write", "output")),
        key=lambda b: b.binding)]
    assert f.workgroup_bytes == sum(b.count * b.dtype.size for b in p.buffers if b.is_workgroup)
    assert f.local_bytes == sum(b.count * b.dtype.size for b in p.buffers if b.is_local)
    assert set(f.ops) == _ops_oracle(p) and len(f.ops) == len(set(f.ops))
    exprs = list(_all_exprs(p))
    nodes = list(_all_nodes(p))
    assert f.atomic_buffers == {e.buffer for e in exprs if isinstance(e, E.Atomic)}
    assert f.read == {e.buffer for e in exprs if isinstance(e, E.Atomic | E.Load)} \
        | {n.src for n in nodes if isinstance(n, N.LoadTile)}
    assert f.tile_loads == any(isinstance(n, N.LoadTile) for n in nodes)
    assert f.division == any(isinstance(e, E.Bin) and e.op in (BinOp.DIV, BinOp.MOD) for e in exprs)
    assert f.transcendental == any(isinstance(e, E.Un | E.Bin) and e.op in TRANSCENDENTAL for e in exprs)
    assert f.subgroup_ops == {e.op for e in exprs if isinstance(e, E.Subgroup)}
    assert f.barrier == any(isinstance(n, N.Barrier) and n.ordering is MemoryOrdering.SEQ_CST for n in nodes)
    assert f.grid_sync == any(isinstance(n, N.Barrier) and n.ordering is MemoryOrdering.GRID_SYNC for n in nodes)
    assert f.loops == any(isinstance(n, N.Loop | N.While) for n in nodes)
    assert f.while_loop == any(isinstance(n, N.While) for n in nodes)
    assert f.returns == any(isinstance(n, N.Return) for n in nodes)
    assert dict(f.specs).keys() == {e.name for e in exprs if isinstance(e, E.Spec)}
    assert f.types == ({b.dtype for b in p.buffers} | {t for fn in p.functions for _, t in fn.params}
                       | {e.dtype for e in exprs if isinstance(e, E.Lit | E.Cast | E.Bitcast | E.Spec)})
    assert f.wide_atomics == any(isinstance(e, E.Atomic) and p.buffer(e.buffer).dtype.is_wide for e in exprs)
    assert f.fully_written == _fully_written_oracle(p)


def _fully_written_oracle(p) -> frozenset[str]:
    """OUTPUT buffers stored at gid.x by a top-level statement before the first top-level
    statement holding a return, and never loaded nor touched by an atomic."""
    out = set()
    read = {e.buffer for e in _all_exprs(p) if isinstance(e, E.Atomic | E.Load)} \
        | {n.src for n in _all_nodes(p) if isinstance(n, N.LoadTile)}
    for n in p.body:
        if any(isinstance(s, N.Return) for s in N.walk_nodes((n,))):
            break
        if isinstance(n, N.Store) and n.index == E.Expr.gid_x() and p.buffer(n.buffer).access.value == "output" \
                and n.buffer not in read:
            out.add(n.buffer)
    return frozenset(out)


def test_fully_written_outputs():
    from vyre.ir.program import BufferDecl, Program
    from vyre.ir.types import AtomicOp, DataType

    U, gx = DataType.U32, E.Expr.gid_x()

    def written(*body) -> frozenset[str]:
        return Program.wrapped([BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U),
                                BufferDecl.read_write("rw", 2, U)], 4, list(body)).facts.fully_written

    assert written(N.Node.store("o", gx, E.Expr.load("a", gx))) == {"o"}
    assert written(N.Node.store("rw", gx, 1)) == frozenset()                                # read_write
    assert written(N.Node.if_(gx.lt(3), [N.Node.store("o", gx, 1)])) == frozenset()          # conditional
    assert written(N.Node.store("o", gx + 1, 1)) == frozenset()                              # not gid.x
    assert written(N.Node.if_(gx.eq(0), [N.Node.return_()]), N.Node.store("o", gx, 1)) == frozenset()
    assert written(N.Node.store("o", gx, 1), N.Node.if_(gx.eq(0), [N.Node.return_()])) == {"o"}
    assert written(N.Node.store("o", gx, 1),
                   N.Node.expr(E.Expr.atomic(AtomicOp.ADD, "o", E.Expr.u32(0), E.Expr.u32(1)))) == frozenset()
