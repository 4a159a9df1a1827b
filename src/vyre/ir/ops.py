"""Stable operation identifiers (OpIds) for every node and expression kind.

An OpId is a dotted string: ``vyre.node.store``, ``vyre.expr.load``, ``vyre.bin_op.add``,
``vyre.un_op.sqrt``, ``vyre.atomic.add``, ``vyre.dtype.f32``. Backends report the set they
execute; `core_supported_ops()` is what the reference executes.
"""

from __future__ import annotations

from collections.abc import Iterator

from . import expr as E
from . import node as N
from .types import AtomicOp, BinOp, DataType, MemoryOrdering, SubgroupOp, UnOp

OpId = str

_NODE_IDS = {
    N.Let: "vyre.node.let_bind", N.Assign: "vyre.node.assign", N.Store: "vyre.node.store",
    N.If: "vyre.node.if", N.Loop: "vyre.node.loop", N.Block: "vyre.node.block",
    N.Region: "vyre.node.region", N.Return: "vyre.node.return", N.Eval: "vyre.node.eval",
    N.While: "vyre.node.while", N.Break: "vyre.node.break", N.Continue: "vyre.node.continue",
    N.IndirectDispatch: "vyre.node.indirect_dispatch",
}
_EXPR_IDS = {
    E.Lit: "vyre.expr.literal", E.Var: "vyre.expr.var", E.Load: "vyre.expr.load",
    E.BufLen: "vyre.expr.buf_len", E.Id: "vyre.expr.id", E.Select: "vyre.expr.select",
    E.Cast: "vyre.expr.cast", E.Bitcast: "vyre.expr.bitcast", E.Fma: "vyre.expr.fma",
    E.Spec: "vyre.expr.spec", E.Call: "vyre.expr.call",
}


def barrier_op(ordering: MemoryOrdering) -> OpId:
    return f"vyre.node.barrier.{ordering.value}"


def node_op(node: N.Node) -> OpId:
    if isinstance(node, N.Barrier):
        return barrier_op(node.ordering)
    return _NODE_IDS[type(node)]


def expr_ops(expr: E.Expr) -> tuple[OpId, ...]:
    if isinstance(expr, E.Bin):
        return (f"vyre.bin_op.{expr.op.value}",)
    if isinstance(expr, E.Un):
        return (f"vyre.un_op.{expr.op.value}",)
    if isinstance(expr, E.Atomic):
        return ("vyre.expr.atomic", f"vyre.atomic.{expr.op.value}")
    if isinstance(expr, E.Id):
        return (f"vyre.expr.{expr.kind.value}",)
    if isinstance(expr, E.Subgroup):
        return (f"vyre.subgroup.{expr.op.value}",)
    return (_EXPR_IDS[type(expr)],)


def all_op_ids() -> frozenset[OpId]:
    """Every OpId the IR defines."""
    ids = set(_NODE_IDS.values()) | set(_EXPR_IDS.values()) - {"vyre.expr.id"}
    ids |= {barrier_op(o) for o in MemoryOrdering}
    ids |= {"vyre.expr.gid", "vyre.expr.lid", "vyre.expr.wgid", "vyre.expr.atomic"}
    ids |= {f"vyre.bin_op.{o.value}" for o in BinOp}
    ids |= {f"vyre.un_op.{o.value}" for o in UnOp}
    ids |= {f"vyre.atomic.{o.value}" for o in AtomicOp}
    ids |= {f"vyre.dtype.{d.value}" for d in DataType}
    ids |= {"vyre.buffer.workgroup", "vyre.buffer.local"}
    ids |= {f"vyre.subgroup.{o.value}" for o in SubgroupOp}
    return frozenset(ids)


def program_ops(program) -> Iterator[OpId]:  # program: Program
    """Yield each OpId the program uses, once, in first-use order (a fact of the program:
    `vyre.ir.facts`)."""
    from .facts import facts_of

    return iter(facts_of(program).ops)
