"""Inlining (`vyre.ir.inline`): a program inlined once and given new functions (a target's
legalize step adds helper functions, float atomics inline first) inlines again without
reusing a local name: once two locals of one kernel shared ``__vy18_ret`` and the WGSL did not
compile (hypothesis seed 649 of tests/test_differential.py on wgpu)."""

from __future__ import annotations

from vyre.ir import BufferDecl, DataType, Expr, Function, Node, Program
from vyre.ir import node as N
from vyre.ir.inline import inline

U = DataType.U32
GX = Expr.gid_x()


def _declared(program: Program) -> list[str]:
    names = []
    for n in N.walk_nodes(program.body):
        if isinstance(n, N.Let):
            names.append(n.name)
        elif isinstance(n, N.Loop):
            names.append(n.var)
    return names


def test_a_second_inlining_counts_on_from_the_first():
    twice = Function.define("twice", [("x", U)], [Node.let_bind("t", Expr.var("x") * 2)], Expr.var("t"))
    bufs = [BufferDecl.read("a", 0, U), BufferDecl.output("o", 1, U)]
    p = Program.wrapped(bufs, 64, [Node.store("o", GX, Expr.call("twice", Expr.load("a", GX)) +
                                              Expr.call("twice", GX))], [twice])
    once = inline(p)
    again = Program(once.buffers, once.workgroup_size,
                    once.body + (Node.store("o", GX, Expr.call("twice", Expr.load("o", GX))),), (twice,))
    flat = inline(again)     # (neither is a user program: their __vy names are refused by V025)
    names = _declared(flat)
    assert len(names) == len(set(names)) == 9, names
