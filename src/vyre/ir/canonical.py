"""Canonical form: the representative every construction-order variant of a Program maps to.

Rules: buffers sorted by binding (workgroup buffers last, by name); operands of commutative
operators put in a canonical order (by their encoding) unless an operand has an atomic side
effect; regions become blocks (their names are only for diagnostics); empty blocks vanish and
blocks that declare no local are spliced into their parent. f32 literals are canonical already
(see `Expr.f32`).
"""

from __future__ import annotations

from . import expr as E
from . import node as N
from .program import Program
from .rewrite import map_node
from .types import COMMUTATIVE


def canonicalize(program: Program) -> Program:
    from .wire import encode_expr

    def order(e: E.Expr) -> E.Expr:
        if isinstance(e, E.Bin) and e.op in COMMUTATIVE and not _has_atomic(e.left) \
                and not _has_atomic(e.right) and encode_expr(e.right) < encode_expr(e.left):
            return E.Bin(e.op, e.right, e.left)
        return e

    def cbody(body: tuple[N.Node, ...]) -> tuple[N.Node, ...]:
        out: list[N.Node] = []
        for n in body:
            if isinstance(n, N.Block | N.Region):
                inner = cbody(n.body)
                if not inner:
                    continue
                if not any(isinstance(s, N.Let) for s in inner):
                    out.extend(inner)
                else:
                    out.append(N.Block(inner))
            else:
                out.append(map_node(n, order, cbody))
        return tuple(out)

    buffers = tuple(sorted(program.buffers, key=lambda b: (b.binding is None, b.binding or 0, b.name)))
    return Program(buffers, program.workgroup_size, cbody(program.body))


def _has_atomic(e: E.Expr) -> bool:
    return any(isinstance(s, E.Atomic) for s in E.walk(e))
