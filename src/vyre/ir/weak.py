"""Weak Python literals (NEP 50): a bare ``int`` or ``float`` operand takes the type its
context gives it, when the Program is built.

`resolve(program)` returns the body and functions with every `WeakLit` replaced by a typed
`Lit`. The context of a weak literal, in order: the other operand of a binary operator (the
left one for a shift amount), the other arm of a `select`, the buffer a value is stored to,
the variable assigned, the parameter a call passes, the index position (u32), a condition
(bool). With no context (``let x = 1``, ``Expr.add(1, 2)``) an ``int`` becomes U32 (I32
when negative, U64/I64 past 32 bits) and a ``float`` F32.

A literal that its context's type cannot hold — ``-1`` for a u32, ``300`` for an operand
whose type is i32 is fine but ``2**40`` is not, ``0.5`` for an integer — is refused here
with a `VyreError` and a Fix, as NumPy refuses ``np.uint8(1) + 300``.
"""

from __future__ import annotations

from typing import Any

from . import expr as E
from . import node as N
from .errors import VyreError
from .kinds import ARGS, EXPR, NODE_KINDS, NODE_MAP, OPT, kind_of
from .typecheck import CONTEXT, PEEK, TypeFault, infer
from .types import DataType

B, U = DataType.BOOL, DataType.U32


def literal_for(value: int | float, t: DataType | None) -> E.Lit:
    """The literal weak ``value`` becomes in a context of type ``t`` (None: no context)."""
    if t is None or t is B or t.storage_only:
        return E.default_literal(value)
    if isinstance(value, float) and not t.is_float:
        raise VyreError(f"the float literal {value!r} is used where a {t.value} is expected.",
                        f"write an integer, or cast: Expr.cast(DataType.{t.name}, {value!r}) "
                        "or make the other operand a float.")
    try:
        return E.Expr.lit(t, value)
    except VyreError as err:
        raise VyreError(f"the literal {value!r} takes the type {t.value} from its context, and "
                        f"does not fit it ({err.message})",
                        f"use a value that fits {t.value}, or give the literal its own type "
                        "(Expr.u64(...), Expr.i32(...)) and cast the other operand.") from None


class Resolver:
    """Resolves weak literals through a program: each kind's rules (the type its own parts
    give it, `PEEK`; the type it asks of its operands, `CONTEXT`) are typing rules of that kind,
    in `vyre.ir.typecheck`; the statements' are below."""

    literal = staticmethod(literal_for)

    def __init__(self, program: Any) -> None:
        self.p = program

    # ---- types -----------------------------------------------------------------------
    def peek(self, e: E.Expr, scope: dict[str, DataType]) -> DataType | None:
        """The type of ``e`` as far as its non-weak parts decide it (None: only weak
        literals decide it, or it does not type-check)."""
        if not getattr(e, "_w", False):
            try:
                return infer(e, scope, self.p)
            except (TypeFault, RecursionError):
                return None
        rule = PEEK.get(type(e))
        return None if rule is None else rule(self, e, scope)

    # ---- expressions -----------------------------------------------------------------
    def expr(self, e: E.Expr, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
        if not getattr(e, "_w", False):
            return e
        rule = CONTEXT.get(type(e))
        if rule is None:
            kind_of(e)      # a leaf holds no weak literal: kept (anything else raises)
            return e
        return rule(self, e, want, scope)

    # ---- statements ------------------------------------------------------------------
    def body(self, nodes: Any, scope: dict[str, DataType]) -> Any:
        if not isinstance(nodes, tuple | list):
            return nodes
        scope = dict(scope)
        return tuple(self.stmt(n, scope) for n in nodes)

    def _typed(self, e: E.Expr, scope: dict[str, DataType]) -> DataType:
        try:
            return infer(e, scope, self.p)
        except (TypeFault, RecursionError):
            return U

    def stmt(self, n: N.Node, scope: dict[str, DataType]) -> N.Node:
        if type(n) is N.Let:   # declares: its type enters the scope even without weak literals
            v = self.expr(n.value, None, scope)
            scope[n.name] = self._typed(v, scope)
            return n if v is n.value else N.Let(n.name, v)
        if not getattr(n, "_w", False):
            return n
        rule = _STMT.get(type(n))
        if rule is not None:
            return rule(self, n, scope)
        mapper = NODE_MAP.get(type(n))
        if mapper is None:
            kind_of(n)   # no expressions, no bodies (anything else raises)
            return n
        # expressions with no context, bodies in this scope (`STMT_EXEMPT`)
        return mapper(n, lambda e: self.expr(e, None, scope), lambda b: self.body(b, scope))

    def _assign(self, n: N.Assign, scope: dict[str, DataType]) -> N.Node:
        return N.Assign(n.name, self.expr(n.value, scope.get(n.name), scope))

    def _store(self, n: N.Store, scope: dict[str, DataType]) -> N.Node:
        decl = self.p.buffer(n.buffer)
        return N.Store(n.buffer, self.expr(n.index, U, scope),
                       self.expr(n.value, None if decl is None else decl.dtype.value_type, scope))

    def _tile(self, n: N.LoadTile, scope: dict[str, DataType]) -> N.Node:
        x = self.expr
        return N.LoadTile(n.dst, n.src, x(n.offset, U, scope), x(n.stride, U, scope), n.rows, n.cols,
                          x(n.rows_in, U, scope), x(n.cols_in, U, scope))

    def _if(self, n: N.If, scope: dict[str, DataType]) -> N.Node:
        return N.If(self.expr(n.cond, B, scope), self.body(n.then, scope), self.body(n.otherwise, scope))

    def _loop(self, n: N.Loop, scope: dict[str, DataType]) -> N.Node:
        x = self.expr
        t = self.peek(n.from_, scope) or self.peek(n.to, scope)
        lo, hi = x(n.from_, t, scope), x(n.to, t, scope)
        inner = dict(scope)
        inner[n.var] = self._typed(lo, scope)
        return N.Loop(n.var, lo, hi, self.body(n.body, inner))

    def _while(self, n: N.While, scope: dict[str, DataType]) -> N.Node:
        return N.While(self.expr(n.cond, B, scope), self.body(n.body, scope), n.max_iterations)


R = Resolver
# statements whose expressions have a context (the rest: none; Let: `Resolver.stmt`)
_STMT = {N.Assign: R._assign, N.Store: R._store, N.If: R._if, N.Loop: R._loop, N.While: R._while,
         N.LoadTile: R._tile}
# (exempt: Let, `Resolver.stmt`; Eval, an expression with no context; and every kind with no
# expression of its own (bodies at most: they are walked in this scope): nothing to type)
STMT_EXEMPT = frozenset({N.Let, N.Eval} | {k.cls for k in NODE_KINDS if not k.roles(EXPR, OPT, ARGS)})


def resolve(program: Any) -> tuple[tuple[N.Node, ...], tuple[Any, ...]]:
    """(body, functions) of ``program`` with every weak literal typed."""
    from .program import Function

    r = Resolver(program)
    functions = []
    for f in program.functions:
        if isinstance(f, Function) and isinstance(f.params, tuple) and isinstance(f.body, tuple):
            params = {p[0]: p[1] for p in f.params if isinstance(p, tuple) and len(p) == 2}
            body = r.body(f.body, params)
            result = f.result
            if result is not None and getattr(result, "_w", False):
                from .typecheck import body_scope

                result = r.expr(result, None, body_scope(body, params, program))
            f = Function(f.name, f.params, body, result)
        functions.append(f)
    return r.body(program.body, {}), tuple(functions)
