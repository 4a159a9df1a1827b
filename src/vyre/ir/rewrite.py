"""Tree rewriting: rebuild expressions and statements bottom-up through one function.

`map_expr(e, fn)` rebuilds ``e`` with every sub-expression mapped first, then applies ``fn``
to the rebuilt node. `map_body(body, fn)` does that for every expression of every statement,
nested bodies included. Canonicalisation, specialization and fusion are written on top. How
each kind is taken apart and rebuilt comes from the one list of kinds (`vyre.ir.kinds`).
"""

from __future__ import annotations

from collections.abc import Callable

from . import expr as E
from . import node as N
from .kinds import NODE_MAP, REBUILD, kind_of

ExprFn = Callable[[E.Expr], E.Expr]


def with_children(e: E.Expr, kids: list[E.Expr]) -> E.Expr:
    """``e`` with its sub-expressions (in `children` order) replaced by ``kids``."""
    rebuild = REBUILD.get(type(e))
    if rebuild is None:
        kind_of(e)          # a leaf kind has nothing to replace; anything else raises
        return e
    return rebuild(e, kids)


def map_expr(e: E.Expr, fn: ExprFn) -> E.Expr:
    kids = E.children(e)
    if kids:
        e = REBUILD[type(e)](e, [map_expr(k, fn) for k in kids])
    return fn(e)


def map_node(n: N.Node, fn: ExprFn, body: Callable[[tuple[N.Node, ...]], tuple[N.Node, ...]]) -> N.Node:
    """One statement with its expressions mapped and its nested bodies passed to ``body``."""
    mapper = NODE_MAP.get(type(n))
    if mapper is None:
        kind_of(n)          # a kind without expressions or bodies maps to itself
        return n
    return mapper(n, lambda e: map_expr(e, fn), body)


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
