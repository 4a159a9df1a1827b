"""Stable operation identifiers (OpIds) for every node and expression kind.

An OpId is a dotted string: ``vyre.node.store``, ``vyre.expr.load``, ``vyre.bin_op.add``,
``vyre.un_op.sqrt``, ``vyre.atomic.add``, ``vyre.dtype.f32``. Backends report the set they
execute; `core_supported_ops()` is what the reference executes.
"""

from __future__ import annotations

from collections.abc import Iterator

from . import expr as E
from . import node as N
from .kinds import OP_IDS, kind_of, kind_op_ids
from .types import DataType, MemoryOrdering

OpId = str


def barrier_op(ordering: MemoryOrdering) -> OpId:
    return OP_IDS[N.Barrier](N.Barrier(ordering))[0]


def node_op(node: N.Node) -> OpId:
    """The OpId of a statement (from the one list of kinds, `vyre.ir.kinds`)."""
    get = OP_IDS.get(type(node))
    return get(node)[0] if get is not None else kind_of(node).ops[0]  # raises: not a kind


def expr_ops(expr: E.Expr) -> tuple[OpId, ...]:
    """The OpIds an expression node uses (an atomic: the kind and its operation)."""
    get = OP_IDS.get(type(expr))
    return get(expr) if get is not None else kind_of(expr).ops   # raises: not a kind


def all_op_ids() -> frozenset[OpId]:
    """Every OpId the IR defines: those of every kind, every type and the scratch memories."""
    ids = set(kind_op_ids())
    ids |= {f"vyre.dtype.{d.value}" for d in DataType}
    ids |= {"vyre.buffer.workgroup", "vyre.buffer.local"}
    return frozenset(ids)


def program_ops(program) -> Iterator[OpId]:  # program: Program
    """Yield each OpId the program uses, once, in first-use order (a fact of the program:
    `vyre.ir.facts`)."""
    from .facts import facts_of

    return iter(facts_of(program).ops)
