"""Canonical form: the representative every construction-order variant of a Program maps to.

Rules: non-workgroup buffers keep their declaration order (it decides which input feeds which
buffer, the order of the outputs and of resident resources, so it is part of what a program
means); workgroup buffers and local arrays, whose order nothing can observe, go last sorted by name;
functions are sorted by name; operands of commutative
operators put in a canonical order (by their encoding) unless an operand has an atomic side
effect; regions become blocks (their names are only for diagnostics); empty blocks vanish and
blocks that declare no local are spliced into their parent. f32 literals are canonical already
(see `Expr.f32`).
"""

from __future__ import annotations

from . import expr as E
from . import node as N
from .program import Function, Program
from .rewrite import map_expr, map_node
from .types import COMMUTATIVE


def canonicalize(program: Program) -> Program:
    from .wire import encode_expr, encode_expr_from

    # sort keys of already-canonical subtrees, by identity: the rewrite is bottom-up, so each
    # subtree is encoded once instead of once per commutative ancestor, and operators are
    # encoded from their operands' cached bytes
    # (each entry keeps its expression alive, so no id is reused while the table lives)
    keys: dict[int, tuple[bytes, bool, E.Expr]] = {}

    def key(e: E.Expr) -> tuple[bytes, bool, E.Expr]:
        k = keys.get(id(e))
        if k is None:
            kids = [key(c) for c in E.children(e)]
            atomic = isinstance(e, E.Atomic) or any(a for _, a, _ in kids)
            enc = encode_expr_from(e, [b for b, _, _ in kids])
            k = keys[id(e)] = (encode_expr(e) if enc is None else enc, atomic, e)
        return k

    def order(e: E.Expr) -> E.Expr:
        if isinstance(e, E.Bin) and e.op in COMMUTATIVE:
            (lk, la, _), (rk, ra, _) = key(e.left), key(e.right)
            if not la and not ra and rk < lk:
                e = E.Bin(e.op, e.right, e.left)
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

    bound = tuple(b for b in program.buffers if b.is_bound)
    scratch = tuple(sorted((b for b in program.buffers if not b.is_bound),
                           key=lambda b: (b.access.value, str(b.name))))
    functions = tuple(sorted((Function(f.name, f.params, cbody(f.body),
                                       None if f.result is None else map_expr(f.result, order))
                              for f in program.functions), key=lambda f: str(f.name)))
    return Program(bound + scratch, program.workgroup_size, cbody(program.body), functions)
