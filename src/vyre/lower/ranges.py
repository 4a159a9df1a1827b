"""Range analysis over u32 index expressions, so that bounds checks the program provably
never fails are not generated.

Semantics row S6 makes every load and store bounds-checked (an out-of-range load gives zero,
an out-of-range store does nothing). A check can go only when the index is provably below
the buffer's element count, which is known before launch for workgroup buffers and for
buffers declared with a static count (an input must then be passed with exactly that count).

`Ranges` computes a conservative interval ``[lo, hi]`` for u32 expressions from literals,
local ids (below the workgroup size), loop variables (inside ``[from, to)``, and below a
buffer's count, whatever it is, when ``to`` is that buffer's length), locals bound once,
and arithmetic that cannot wrap (add, mul, shifts, masks, or/xor, modulo and division by
literals, min/max, select). Anything it cannot bound is ``[0, 2**32 - 1]``: the check stays.
"""

from __future__ import annotations

from vyre.ir import expr as E
from vyre.ir.program import Program
from vyre.ir.types import BinOp, Builtin, DataType

U32_MAX = 0xFFFFFFFF
FULL = (0, U32_MAX)


def _fit(lo: int, hi: int) -> tuple[int, int]:
    return (lo, hi) if 0 <= lo <= hi <= U32_MAX else FULL


class Ranges:
    """Intervals of u32 expressions of one program. ``bind``/``unbind`` scope loop variables
    and single-assignment locals as the emitter walks the body."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.env: dict[str, tuple[int, int]] = {}
        self.assigned = program.facts.assigned   # the plan's program: inlined, no functions
        # loop variables of ``loop(v, from, buf_len(b))``: v < b's count, whatever the count
        # (set by the emitter when it enters each loop, so a reused name is overwritten)
        self.below: dict[str, str | None] = {}

    def bind(self, name: str, value: tuple[int, int] | None) -> None:
        if value is None or name in self.assigned:
            self.env.pop(name, None)
        else:
            self.env[name] = value

    def unbind(self, name: str) -> None:
        self.env.pop(name, None)

    def loop(self, var: str, lo: E.Expr, hi: E.Expr) -> tuple[int, int] | None:
        """The range of a loop variable over ``[lo, hi)`` (None when the loop may not run)."""
        a, b = self.of(lo), self.of(hi)
        if b[1] == 0:
            return None
        return (a[0], max(a[0], b[1] - 1)) if a[0] <= b[1] - 1 else None

    def of(self, e: E.Expr) -> tuple[int, int]:
        if isinstance(e, E.Lit):
            return (e.bits, e.bits) if e.dtype is DataType.U32 else FULL
        if isinstance(e, E.Var):
            return self.env.get(e.name, FULL)
        if isinstance(e, E.Id):
            if e.kind is Builtin.LID and isinstance(e.axis, int) and 0 <= e.axis < 3:
                return (0, self.program.workgroup_size[e.axis] - 1)
            return FULL
        if isinstance(e, E.BufLen):
            decl = self.program.buffer(e.buffer)
            if decl is not None and decl.count:
                return (decl.count, decl.count)
            return FULL
        if isinstance(e, E.Select):
            a, b = self.of(e.if_true), self.of(e.if_false)
            return (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(e, E.Bin):
            return self._bin(e)
        return FULL

    def _bin(self, e: E.Bin) -> tuple[int, int]:
        a, b = self.of(e.left), self.of(e.right)
        op = e.op
        if op is BinOp.ADD:
            return _fit(a[0] + b[0], a[1] + b[1])
        if op is BinOp.MUL:
            return _fit(a[0] * b[0], a[1] * b[1])
        if op is BinOp.SUB:
            return _fit(a[0] - b[1], a[1] - b[0])
        if op is BinOp.BITAND:
            return (0, min(a[1], b[1]))
        if op is BinOp.BITOR or op is BinOp.BITXOR:   # no bit above the operands' highest
            return (0, (1 << max(a[1], b[1]).bit_length()) - 1)
        if op is BinOp.MOD and b[0] > 0:
            return (0, min(a[1], b[1] - 1))
        if op is BinOp.DIV and b[0] > 0:
            return (a[0] // b[1], a[1] // b[0])
        if op is BinOp.SHR and b[0] == b[1] and b[0] < 32:
            return (a[0] >> b[0], a[1] >> b[0])
        if op is BinOp.SHL and b[0] == b[1] and b[0] < 32:
            return _fit(a[0] << b[0], a[1] << b[0])
        if op is BinOp.MIN:
            return (min(a[0], b[0]), min(a[1], b[1]))
        if op is BinOp.MAX:
            return (max(a[0], b[0]), max(a[1], b[1]))
        return FULL

    def in_bounds(self, buffer: str, index: E.Expr) -> bool:
        """True when ``index`` is provably below ``buffer``'s element count."""
        if isinstance(index, E.Var) and self.below.get(index.name) == buffer:
            return True
        decl = self.program.buffer(buffer)
        if decl is None or not decl.count:
            return False
        return self.of(index)[1] < decl.count
