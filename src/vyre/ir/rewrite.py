"""Tree rewriting: rebuild expressions and statements bottom-up through one function.

`map_expr(e, fn)` rebuilds ``e`` with every sub-expression mapped first, then applies ``fn``
to the rebuilt node. `map_body(body, fn)` does that for every expression of every statement,
nested bodies included. Canonicalisation, specialization and fusion are written on top.
"""

from __future__ import annotations

from collections.abc import Callable

from . import expr as E
from . import node as N

ExprFn = Callable[[E.Expr], E.Expr]


def with_children(e: E.Expr, kids: list[E.Expr]) -> E.Expr:
    """``e`` with its sub-expressions (in `children` order) replaced by ``kids``."""
    if isinstance(e, E.Load):
        return E.Load(e.buffer, kids[0])
    if isinstance(e, E.Bin):
        return E.Bin(e.op, kids[0], kids[1])
    if isinstance(e, E.Un):
        return E.Un(e.op, kids[0])
    if isinstance(e, E.Select):
        return E.Select(kids[0], kids[1], kids[2])
    if isinstance(e, E.Cast | E.Bitcast):
        return type(e)(e.dtype, kids[0])
    if isinstance(e, E.Fma):
        return E.Fma(kids[0], kids[1], kids[2])
    if isinstance(e, E.Atomic):
        return E.Atomic(e.op, e.buffer, kids[0], kids[1], kids[2] if e.expected is not None else None)
    if isinstance(e, E.Call):
        return E.Call(e.function, tuple(kids))
    if isinstance(e, E.Subgroup):
        it = iter(kids)
        return E.Subgroup(e.op, next(it) if e.value is not None else None, next(it) if e.lane is not None else None)
    return e


def map_expr(e: E.Expr, fn: ExprFn) -> E.Expr:
    kids = E.children(e)
    if kids:
        e = with_children(e, [map_expr(k, fn) for k in kids])
    return fn(e)


def map_node(n: N.Node, fn: ExprFn, body: Callable[[tuple[N.Node, ...]], tuple[N.Node, ...]]) -> N.Node:
    """One statement with its expressions mapped and its nested bodies passed to ``body``."""
    if isinstance(n, N.Let | N.Assign):
        return type(n)(n.name, map_expr(n.value, fn))
    if isinstance(n, N.Store):
        return N.Store(n.buffer, map_expr(n.index, fn), map_expr(n.value, fn))
    if isinstance(n, N.If):
        return N.If(map_expr(n.cond, fn), body(n.then), body(n.otherwise))
    if isinstance(n, N.Loop):
        return N.Loop(n.var, map_expr(n.from_, fn), map_expr(n.to, fn), body(n.body))
    if isinstance(n, N.While):
        return N.While(map_expr(n.cond, fn), body(n.body), n.max_iterations)
    if isinstance(n, N.Block):
        return N.Block(body(n.body))
    if isinstance(n, N.Region):
        return N.Region(n.name, body(n.body))
    if isinstance(n, N.Eval):
        return N.Eval(map_expr(n.value, fn))
    return n


def map_body(nodes: tuple[N.Node, ...], fn: ExprFn) -> tuple[N.Node, ...]:
    def body(ns: tuple[N.Node, ...]) -> tuple[N.Node, ...]:
        return tuple(map_node(n, fn, body) for n in ns)

    return body(tuple(nodes))


def map_program(program, fn: ExprFn):  # (Program, ExprFn) -> Program
    """``program`` with ``fn`` applied to every expression of its body and its functions."""
    from .program import Function, Program

    functions = tuple(Function(f.name, f.params, map_body(f.body, fn),
                               None if f.result is None else map_expr(f.result, fn))
                      for f in program.functions)
    return Program(program.buffers, program.workgroup_size, map_body(program.body, fn), functions)
