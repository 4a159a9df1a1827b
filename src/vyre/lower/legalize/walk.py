"""The typed statement walk every legalization rewrite shares, with no per-kind code: how a
statement is taken apart and rebuilt, which local it declares and which it binds for its
bodies come from the one list of kinds (`vyre.ir.kinds`).

`walk_body(nodes, scope, rw)` rebuilds a body: each statement is first offered to
``rw.stmt(n, scope)`` (a rewrite that replaces it returns the new statements, else None);
otherwise its root expressions go through ``rw.expr(e, scope)`` (with the types of the
locals visible there) and its bodies through the walk again. A declared local (``let``)
takes the type of the statement's first expression; a bound local (a loop variable) the
type of its first expression too (the loop's start).
"""

from __future__ import annotations

from typing import Any, Protocol

from vyre.ir import node as N
from vyre.ir.kinds import NODE_MAP, Role, kind_of
from vyre.ir.program import Function, Program
from vyre.ir.typecheck import TypeFault, body_scope, infer
from vyre.ir.types import DataType

Scope = dict[str, DataType]


class Rewrite(Protocol):
    p: Program

    def expr(self, e: Any, scope: Scope) -> Any: ...

    def stmt(self, n: N.Node, scope: Scope) -> list[N.Node] | None: ...


def first_type(n: N.Node, scope: Scope, program: Program) -> DataType | None:
    exprs = N.node_exprs(n)
    if not exprs:
        return None
    try:
        return infer(exprs[0], scope, program)
    except TypeFault:
        return None


def walk_body(nodes, scope: Scope, rw: Rewrite) -> tuple[N.Node, ...]:
    scope = dict(scope)
    out: list[N.Node] = []
    for n in nodes:
        replaced = rw.stmt(n, scope)
        kind = kind_of(n)
        if replaced is not None:
            out.extend(replaced)
        else:
            inner = dict(scope)
            for name_field in kind.roles(Role.BINDS):
                t = first_type(n, scope, rw.p)
                if t is not None:
                    inner[getattr(n, name_field)] = t
            mapper = NODE_MAP.get(type(n))
            out.append(n if mapper is None else
                       mapper(n, lambda e: rw.expr(e, scope), lambda ns, inner=inner: walk_body(ns, inner, rw)))
        for name_field in kind.roles(Role.DECLARES):
            t = first_type(n, scope, rw.p)
            if t is not None:
                scope[getattr(n, name_field)] = t
    return tuple(out)


def walk_function(f: Function, rw: Rewrite, params=None, result=None) -> Function:
    """``f`` with its body walked (and its result through ``rw.expr``); ``params`` and
    ``result`` replace its parameter list and result expression when given."""
    scope = dict(f.params)
    body = walk_body(f.body, scope, rw)
    if result is None and f.result is not None:
        result = rw.expr(f.result, body_scope(f.body, scope, rw.p))
    return Function(f.name, tuple(params if params is not None else f.params), body, result)


def workgroup_slots(program: Program, prefix: str, total: int, lets: list[N.Node],
                    body: list[N.Node]) -> list[N.Node]:
    """A statement the whole workgroup executes, spread over its invocations: a barrier, then
    each invocation (``<prefix>l``, its linear local id of ``W``) binds ``lets`` and runs
    ``body`` for its slots ``<prefix>e = l, l + W, ...`` below ``total`` (loop variable
    ``<prefix>q``), then a barrier again. The scalar forms of matmul_acc and load_tile."""
    from vyre.ir.expr import Expr

    wx, wy, wz = program.workgroup_size
    w = wx * wy * wz
    lin = Expr.lid(0) + Expr.u32(wx) * (Expr.lid(1) + Expr.u32(wy) * Expr.lid(2))
    e = Expr.var(f"{prefix}e")
    return [
        N.Node.barrier(),
        N.Node.block([
            N.Node.let_bind(f"{prefix}l", lin),
            *lets,
            N.Node.loop(f"{prefix}q", Expr.u32(0), Expr.u32(-(-total // w)), [
                N.Node.let_bind(f"{prefix}e", Expr.var(f"{prefix}q") * Expr.u32(w) + Expr.var(f"{prefix}l")),
                N.Node.if_(e.lt(Expr.u32(total)), body),
            ]),
        ]),
        N.Node.barrier(),
    ]


class _Expand:
    """Replaces each statement of one kind that ``keep`` does not claim by ``rewrite``'s
    statements (`expand_statements`)."""

    def __init__(self, program: Program, kind: type, rewrite: Any, keep: Any) -> None:
        self.p, self.kind, self.rewrite, self.keep = program, kind, rewrite, keep
        self.count = 0

    def expr(self, e: Any, scope: Scope) -> Any:
        return e

    def stmt(self, n: N.Node, scope: Scope) -> list[N.Node] | None:
        if not isinstance(n, self.kind) or (self.keep is not None and self.keep(self.p, n)):
            return None
        self.count += 1
        return self.rewrite(self.p, n, self.count)


def expand_statements(program: Program, kind: type, rewrite: Any, keep: Any = None) -> Program:
    """``program`` with every statement of ``kind`` that ``keep(program, statement)`` does not
    claim replaced by ``rewrite(program, statement, c)`` (``c`` numbers them from 1, for unique
    local names); the same object when there is none to replace. Such statements are only in
    the program body (V035), which is all this walks."""
    x = _Expand(program, kind, rewrite, keep)
    body = walk_body(program.body, {}, x)
    if not x.count:
        return program
    return Program(program.buffers, program.workgroup_size, body, program.functions)
