"""The small builder the legalization rewrites write their IR helpers with.

A helper is a `Function` over u32 bit patterns whose body is straight-line code (plus the
odd loop): `Body` hands out fresh ``let`` names so the Python that builds a helper reads like
the algorithm. `f32_parts` and friends are the bit-level vocabulary every float helper shares
(S9's flush of subnormal operands, NaN tests, the canonical NaN).
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import Function
from vyre.ir.types import BinOp, DataType, UnOp

U = DataType.U32
I = DataType.I32
SIGN = 0x80000000
ABS = 0x7FFFFFFF
INF = 0x7F800000
NAN = E.CANONICAL_NAN_BITS
HIDDEN = 0x00800000
FRAC = 0x007FFFFF


def u(v: int) -> E.Lit:
    """A u32 literal."""
    return E.Expr.u32(v & 0xFFFFFFFF)


def sel(cond: E.Expr, if_true: E.Expr | int, if_false: E.Expr | int) -> E.Expr:
    """``if_true`` where ``cond`` holds (u32 ints become literals)."""
    t = u(if_true) if isinstance(if_true, int) else if_true
    f = u(if_false) if isinstance(if_false, int) else if_false
    return E.Select(cond, t, f)


def b2u(cond: E.Expr) -> E.Expr:
    """A bool as the u32 0 or 1."""
    return E.Cast(U, cond)


class Body:
    """Statements of one helper under construction; `let` returns the new local's Var."""

    def __init__(self, params: tuple[tuple[str, DataType], ...]) -> None:
        self.params = params
        self.nodes: list[N.Node] = []
        self.k = 0

    def arg(self, i: int) -> E.Var:
        return E.Var(self.params[i][0])

    def let(self, value: E.Expr, hint: str = "t") -> E.Var:
        self.k += 1
        name = f"{hint}{self.k}"
        self.nodes.append(N.Let(name, value))
        return E.Var(name)

    def var(self, value: E.Expr, hint: str = "v") -> E.Var:
        """A local that later statements `set` (a ``let`` as well: IR locals are mutable)."""
        return self.let(value, hint)

    def set(self, var: E.Var, value: E.Expr) -> None:
        self.nodes.append(N.Assign(var.name, value))

    def add(self, node: N.Node) -> None:
        self.nodes.append(node)

    def sub(self) -> Body:
        """A nested body (for an ``if`` or a loop) sharing this one's name counter."""
        inner = Body(self.params)
        inner.k = self.k + 1000 * (len(self.nodes) + 1)
        return inner

    def function(self, name: str, result: E.Expr) -> Function:
        return Function(name, self.params, tuple(self.nodes), result)


def flush(b: Body, bits: E.Expr) -> E.Var:
    """S9: a subnormal operand becomes the zero of its sign (other bits unchanged)."""
    return b.let(sel((bits & INF).ne(u(0)), bits, bits & SIGN), "f")


def is_nan(mag: E.Expr) -> E.Expr:
    """Whether the magnitude bits (sign cleared) are a NaN."""
    return mag.gt(u(INF))


def any_(*conds: E.Expr) -> E.Expr:
    """Logical OR of bools."""
    out = conds[0]
    for c in conds[1:]:
        out = E.Bin(BinOp.OR, out, c)
    return out


def all_(*conds: E.Expr) -> E.Expr:
    """Logical AND of bools."""
    out = conds[0]
    for c in conds[1:]:
        out = E.Bin(BinOp.AND, out, c)
    return out


def not_(cond: E.Expr) -> E.Expr:
    return E.Un(UnOp.LOGICAL_NOT, cond)
