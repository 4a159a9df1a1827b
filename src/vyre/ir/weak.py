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
from .typecheck import TypeFault, function_type, infer
from .types import COMPARISONS, LOGICAL, SHIFTS, DataType, UnOp

B, U = DataType.BOOL, DataType.U32
_PREDICATES = frozenset({UnOp.IS_NAN, UnOp.IS_INF, UnOp.IS_FINITE, UnOp.LOGICAL_NOT})


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
        if isinstance(e, E.WeakLit):
            return None
        if isinstance(e, E.Bin):
            if e.op in COMPARISONS or e.op in LOGICAL:
                return B
            if e.op in SHIFTS:
                return self.peek(e.left, scope)
            return self.peek(e.left, scope) or self.peek(e.right, scope)
        if isinstance(e, E.Un):
            return B if e.op in _PREDICATES else self.peek(e.operand, scope)
        if isinstance(e, E.Select):
            return self.peek(e.if_true, scope) or self.peek(e.if_false, scope)
        if isinstance(e, E.Fma):
            return self.peek(e.a, scope) or self.peek(e.b, scope) or self.peek(e.c, scope)
        if isinstance(e, E.Cast | E.Bitcast):
            return e.dtype
        if isinstance(e, E.Load | E.Atomic):
            decl = self.p.buffer(e.buffer)
            return None if decl is None else decl.dtype.value_type
        if isinstance(e, E.Call):
            fn = self.p.function(e.function)
            return None if fn is None else function_type(fn, self.p)
        if isinstance(e, E.Subgroup):
            return self.peek(e.value, scope) if e.value is not None else U
        return None

    # ---- expressions -----------------------------------------------------------------
    def expr(self, e: E.Expr, want: DataType | None, scope: dict[str, DataType]) -> E.Expr:
        if not getattr(e, "_w", False):
            return e
        if isinstance(e, E.WeakLit):
            return literal_for(e.value, want)
        x = self.expr
        if isinstance(e, E.Bin):
            if e.op in SHIFTS:
                left = x(e.left, want or self.peek(e.right, scope), scope)
                return E.Bin(e.op, left, x(e.right, self.peek(left, scope), scope))
            if e.op in LOGICAL:
                return E.Bin(e.op, x(e.left, B, scope), x(e.right, B, scope))
            t = self.peek(e.left, scope) or self.peek(e.right, scope)
            if t is None and e.op not in COMPARISONS:
                t = want
            return E.Bin(e.op, x(e.left, t, scope), x(e.right, t, scope))
        if isinstance(e, E.Un):
            t = self.peek(e.operand, scope)
            if t is None and e.op not in _PREDICATES:
                t = want
            return E.Un(e.op, x(e.operand, B if e.op is UnOp.LOGICAL_NOT else t, scope))
        if isinstance(e, E.Select):
            t = self.peek(e.if_true, scope) or self.peek(e.if_false, scope) or want
            return E.Select(x(e.cond, B, scope), x(e.if_true, t, scope), x(e.if_false, t, scope))
        if isinstance(e, E.Fma):
            t = self.peek(e, scope) or want
            return E.Fma(x(e.a, t, scope), x(e.b, t, scope), x(e.c, t, scope))
        if isinstance(e, E.Cast | E.Bitcast):
            return type(e)(e.dtype, x(e.value, None, scope))
        if isinstance(e, E.Load):
            return E.Load(e.buffer, x(e.index, U, scope))
        if isinstance(e, E.Atomic):
            decl = self.p.buffer(e.buffer)
            t = None if decl is None else decl.dtype
            return E.Atomic(e.op, e.buffer, x(e.index, U, scope), x(e.value, t, scope),
                            None if e.expected is None else x(e.expected, t, scope))
        if isinstance(e, E.Subgroup):
            return E.Subgroup(e.op, None if e.value is None else x(e.value, want, scope),
                              None if e.lane is None else x(e.lane, U, scope))
        if isinstance(e, E.Call):
            fn = self.p.function(e.function)
            params = [t for _, t in fn.params] if fn is not None and len(fn.params) == len(e.args) \
                else [None] * len(e.args)
            return E.Call(e.function, tuple(x(a, t, scope) for a, t in zip(e.args, params)))
        return e

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
        x = self.expr
        if isinstance(n, N.Let):
            v = x(n.value, None, scope)
            scope[n.name] = self._typed(v, scope)
            return n if v is n.value else N.Let(n.name, v)
        if not getattr(n, "_w", False):
            return n
        if isinstance(n, N.Assign):
            return N.Assign(n.name, x(n.value, scope.get(n.name), scope))
        if isinstance(n, N.Store):
            decl = self.p.buffer(n.buffer)
            return N.Store(n.buffer, x(n.index, U, scope),
                           x(n.value, None if decl is None else decl.dtype.value_type, scope))
        if isinstance(n, N.If):
            return N.If(x(n.cond, B, scope), self.body(n.then, scope), self.body(n.otherwise, scope))
        if isinstance(n, N.Loop):
            t = self.peek(n.from_, scope) or self.peek(n.to, scope)
            lo, hi = x(n.from_, t, scope), x(n.to, t, scope)
            inner = dict(scope)
            inner[n.var] = self._typed(lo, scope)
            return N.Loop(n.var, lo, hi, self.body(n.body, inner))
        if isinstance(n, N.While):
            return N.While(x(n.cond, B, scope), self.body(n.body, scope), n.max_iterations)
        if isinstance(n, N.Block):
            return N.Block(self.body(n.body, scope))
        if isinstance(n, N.Region):
            return N.Region(n.name, self.body(n.body, scope))
        if isinstance(n, N.Eval):
            return N.Eval(x(n.value, None, scope))
        return n


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
