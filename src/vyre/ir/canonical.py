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
from .types import COMMUTATIVE


def canonicalize(program: Program) -> Program:
    from .wire import encode_expr

    def cexpr(e: E.Expr) -> E.Expr:
        if isinstance(e, E.Bin):
            left, right = cexpr(e.left), cexpr(e.right)
            if e.op in COMMUTATIVE and not _has_atomic(left) and not _has_atomic(right) \
                    and encode_expr(right) < encode_expr(left):
                left, right = right, left
            return E.Bin(e.op, left, right)
        if isinstance(e, E.Un):
            return E.Un(e.op, cexpr(e.operand))
        if isinstance(e, E.Load):
            return E.Load(e.buffer, cexpr(e.index))
        if isinstance(e, E.Select):
            return E.Select(cexpr(e.cond), cexpr(e.if_true), cexpr(e.if_false))
        if isinstance(e, E.Cast):
            return E.Cast(e.dtype, cexpr(e.value))
        if isinstance(e, E.Bitcast):
            return E.Bitcast(e.dtype, cexpr(e.value))
        if isinstance(e, E.Fma):
            return E.Fma(cexpr(e.a), cexpr(e.b), cexpr(e.c))
        if isinstance(e, E.Subgroup):
            return E.Subgroup(e.op, None if e.value is None else cexpr(e.value),
                              None if e.lane is None else cexpr(e.lane))
        if isinstance(e, E.Atomic):
            return E.Atomic(e.op, e.buffer, cexpr(e.index), cexpr(e.value),
                            None if e.expected is None else cexpr(e.expected))
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
            elif isinstance(n, N.Let):
                out.append(N.Let(n.name, cexpr(n.value)))
            elif isinstance(n, N.Assign):
                out.append(N.Assign(n.name, cexpr(n.value)))
            elif isinstance(n, N.Store):
                out.append(N.Store(n.buffer, cexpr(n.index), cexpr(n.value)))
            elif isinstance(n, N.If):
                out.append(N.If(cexpr(n.cond), cbody(n.then), cbody(n.otherwise)))
            elif isinstance(n, N.Loop):
                out.append(N.Loop(n.var, cexpr(n.from_), cexpr(n.to), cbody(n.body)))
            elif isinstance(n, N.Eval):
                out.append(N.Eval(cexpr(n.value)))
            else:
                out.append(n)
        return tuple(out)

    buffers = tuple(sorted(program.buffers, key=lambda b: (b.binding is None, b.binding or 0, b.name)))
    return Program(buffers, program.workgroup_size, cbody(program.body))


def _has_atomic(e: E.Expr) -> bool:
    return any(isinstance(s, E.Atomic) for s in E.walk(e))
