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
}
_EXPR_IDS = {
    E.Lit: "vyre.expr.literal", E.Var: "vyre.expr.var", E.Load: "vyre.expr.load",
    E.BufLen: "vyre.expr.buf_len", E.Id: "vyre.expr.id", E.Select: "vyre.expr.select",
    E.Cast: "vyre.expr.cast", E.Bitcast: "vyre.expr.bitcast", E.Fma: "vyre.expr.fma",
    E.Spec: "vyre.expr.spec",
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
    """Every OpId the IR defines (wave 1)."""
    ids = set(_NODE_IDS.values()) | set(_EXPR_IDS.values()) - {"vyre.expr.id"}
    ids |= {barrier_op(o) for o in MemoryOrdering}
    ids |= {"vyre.expr.gid", "vyre.expr.lid", "vyre.expr.wgid", "vyre.expr.atomic"}
    ids |= {f"vyre.bin_op.{o.value}" for o in BinOp}
    ids |= {f"vyre.un_op.{o.value}" for o in UnOp}
    ids |= {f"vyre.atomic.{o.value}" for o in AtomicOp}
    ids |= {f"vyre.dtype.{d.value}" for d in DataType}
    ids |= {"vyre.buffer.workgroup"}
    ids |= {f"vyre.subgroup.{o.value}" for o in SubgroupOp}
    return frozenset(ids)


def program_ops(program) -> Iterator[OpId]:  # program: Program
    """Yield each OpId the program uses, once, in first-use order."""
    seen: set[OpId] = set()

    def emit(op: OpId):
        if op not in seen:
            seen.add(op)
            yield op

    for b in program.buffers:
        yield from emit(f"vyre.dtype.{b.dtype.value}")
        if b.is_workgroup:
            yield from emit("vyre.buffer.workgroup")
    for node in N.walk_nodes(program.body):
        yield from emit(node_op(node))
        for root in N.node_exprs(node):
            for e in E.walk(root):
                for op in expr_ops(e):
                    yield from emit(op)
                if isinstance(e, E.Lit | E.Cast | E.Bitcast):
                    yield from emit(f"vyre.dtype.{e.dtype.value}")
