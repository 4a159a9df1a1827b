"""matmul_acc as plain scalar loops: the form every target prints (CUDA prints the tensor-core
form instead where `vyre.drivers.cuda.imma` can, sm_80 and newer).

``matmul_acc(d, a, b, m, n, k)`` becomes a workgroup barrier, then each invocation (linear
local id ``l`` of ``W``) computing the outputs ``e = l, l + W, ...`` below ``m*n``::

    acc = d[e]
    for p in [0, k): acc = acc + a[i*k + p'] * b[j*k + p']   (i = e / n, j = e % n)
    d[e] = acc

with ``p' = (p + l) mod k``: each invocation starts at its own k, so neighbouring invocations
read different workgroup-memory banks (the rows of a and b are k apart: in k order they
would all hit one bank). The sum is in u32 arithmetic, wrapping: the residue mod 2**32 of the
exact sum, whatever the order. Then a barrier again. Loads of i8 and i32 elements are cast to u32 (sign-extended bits, the same
residue). Each output is written by exactly one invocation, between the two barriers, so the
result is the reference's (S37) on any workgroup size. The locals are named ``__vymm<c>_...``,
a prefix programs may not use (V025).
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.program import Program
from vyre.ir.types import DataType

from .walk import expand_statements, workgroup_slots

U = DataType.U32
Keep = Callable[[Program, N.MatMulAcc], bool]


def _u32(e: E.Expr, t: DataType) -> E.Expr:
    """An element's value as u32 bits (narrow loads widen first: i8 sign-extends)."""
    vt = t.value_type
    return e if vt is U else E.Bitcast(U, e)


def scalar_loops(program: Program, n: N.MatMulAcc, c: int) -> list[N.Node]:
    """The statements that do ``n`` with scalar loops (module docstring); ``c`` makes the
    local names unique."""
    d, a, b = (program.buffer(x) for x in (n.d, n.a, n.b))
    prefix = f"__vymm{c}_"
    v = {s: f"{prefix}{s}" for s in ("l", "e", "i", "j", "acc", "p", "r", "pp")}
    var = {s: E.Var(name) for s, name in v.items()}
    k = E.Expr.u32(n.k)
    acc = var["acc"]
    pp = var["pp"]
    product = _u32(E.Load(n.a, var["i"] * k + pp), a.dtype) * \
        _u32(E.Load(n.b, var["j"] * k + pp), b.dtype)
    stored = acc if d.dtype is U else E.Bitcast(d.dtype, acc)
    output = [
        N.Let(v["i"], var["e"] / E.Expr.u32(n.n)),
        N.Let(v["j"], var["e"] % E.Expr.u32(n.n)),
        N.Let(v["acc"], _u32(E.Load(n.d, var["e"]), d.dtype)),
        N.Loop(v["p"], E.Expr.u32(0), k, (
            N.Let(v["pp"], var["p"] + var["r"]),
            N.Assign(v["pp"], E.Select(pp.ge(k), pp - k, pp)),
            N.Assign(v["acc"], acc + product))),
        N.Store(n.d, var["e"], stored),
    ]
    return workgroup_slots(program, prefix, n.m * n.n, [N.Let(v["r"], var["l"] % k)], output)


def expand_matmul(program: Program, keep: Keep | None = None) -> Program:
    """``program`` with every matmul_acc that ``keep`` does not claim as scalar loops; the same
    object when there is none to expand. A matmul_acc is only in the program body (V035)."""
    if not program.facts.matmul:
        return program
    return expand_statements(program, N.MatMulAcc, scalar_loops, keep)
