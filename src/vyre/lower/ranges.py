"""Range analysis over u32 index expressions, so that bounds checks the program provably
never fails are not generated.

Semantics row S6 makes every load and store bounds-checked (an out-of-range load gives zero,
an out-of-range store does nothing). A check can go only when the index is provably below
the buffer's element count, which is known before launch for workgroup buffers and for
buffers declared with a static count (an input must then be passed with exactly that count).

`Ranges` computes a conservative interval ``[lo, hi]`` for u32 expressions from literals,
local ids (below the workgroup size), loop variables (inside ``[from, to)``, and below a
buffer's count, whatever it is, when ``to`` is that buffer's length or the minimum of it and
anything: `bounding_buffer`; a loop over blocks, to ``buf_len(b) >> s``, proves each
``(v << s) + k``, ``k < 2**s``, below it), locals bound once,
and arithmetic that cannot wrap (add, mul, shifts, masks, or/xor, modulo and division by
literals, min/max, select). Anything it cannot bound is ``[0, 2**32 - 1]``: the check stays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vyre.ir import expr as E
from vyre.ir.kinds import EXPR_KINDS, UnknownKind
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
        # loop variables of ``loop(v, from, buf_len(b) >> s)``: (b, s), v < b's count >> s,
        # whatever the count (set by the emitter when it enters each loop, so a reused name
        # is overwritten)
        self.below: dict[str, tuple[str, int] | None] = {}

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
        """The interval of ``e`` (one rule per kind: `RANGES`; an unknown kind raises)."""
        rule = RANGES.get(type(e))
        if rule is None:
            raise UnknownKind(e)
        return rule(self, e)

    def _lit(self, e: E.Lit) -> tuple[int, int]:
        return (e.bits, e.bits) if e.dtype is DataType.U32 else FULL

    def _var(self, e: E.Var) -> tuple[int, int]:
        return self.env.get(e.name, FULL)

    def _id(self, e: E.Id) -> tuple[int, int]:
        if e.kind is Builtin.LID and isinstance(e.axis, int) and 0 <= e.axis < 3:
            return (0, self.program.workgroup_size[e.axis] - 1)
        return FULL

    def _buf_len(self, e: E.BufLen) -> tuple[int, int]:
        decl = self.program.buffer(e.buffer)
        if decl is not None and decl.count:
            return (decl.count, decl.count)
        return FULL

    def _select(self, e: E.Select) -> tuple[int, int]:
        a, b = self.of(e.if_true), self.of(e.if_false)
        return (min(a[0], b[0]), max(a[1], b[1]))

    def _unbounded(self, e: E.Expr) -> tuple[int, int]:
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

    @staticmethod
    def bounding_buffer(to: E.Expr) -> tuple[str, int] | None:
        """The buffer whose element count a loop's variable stays below when the loop ends at
        ``to``, and the shift ``s`` of that count: ``buf_len(b)`` (s = 0) or ``buf_len(b) >>
        s`` (a loop over blocks of ``2**s`` elements), or the minimum of either and anything,
        either way round (a run clipped to a buffer's end); else None."""
        def bound(e: E.Expr) -> tuple[str, int] | None:
            if isinstance(e, E.BufLen):
                return e.buffer, 0
            if isinstance(e, E.Bin) and e.op is BinOp.SHR and isinstance(e.left, E.BufLen) \
                    and isinstance(e.right, E.Lit) and e.right.dtype is DataType.U32 and e.right.bits < 32:
                return e.left.buffer, e.right.bits
            return None

        if isinstance(to, E.Bin) and to.op is BinOp.MIN:
            return bound(to.left) or bound(to.right)
        return bound(to)

    def in_bounds(self, buffer: str, index: E.Expr) -> bool:
        """True when ``index`` is provably below ``buffer``'s element count."""
        if self._blocked(buffer, index):
            return True
        decl = self.program.buffer(buffer)
        if decl is None or not decl.count:
            return False
        return self.of(index)[1] < decl.count

    def _blocked(self, buffer: str, index: E.Expr) -> bool:
        """``index`` is ``v``, ``v << s`` or ``(v << s) + k`` (``k`` a literal below ``2**s``)
        for a loop variable ``v`` below ``buffer``'s count ``>> s`` (`bounding_buffer`): then
        ``index < ((count >> s) << s) <= count``."""
        k = 0
        if isinstance(index, E.Bin) and index.op is BinOp.ADD and isinstance(index.right, E.Lit) \
                and index.right.dtype is DataType.U32:
            k, index = index.right.bits, index.left
        s = 0
        if isinstance(index, E.Bin) and index.op is BinOp.SHL and isinstance(index.right, E.Lit) \
                and index.right.dtype is DataType.U32 and index.right.bits < 32:
            s, index = index.right.bits, index.left
        return isinstance(index, E.Var) and self.below.get(index.name) == (buffer, s) and k < (1 << s)


R = Ranges
# the kinds with a known interval: u32 literals, locals, ids, lengths, selects and u32
# arithmetic. Every other kind of `vyre.ir.kinds` (memory, other invocations, non-u32
# arithmetic, what is never printed, and a kind added later) is unbounded, which is always
# sound: it only keeps a check the interval could have dropped. No kind is skipped: a value
# that is no kind of the list raises (`Ranges.of`).
BOUNDED: dict[type, Callable[[Ranges, Any], tuple[int, int]]] = {
    E.Lit: R._lit, E.Var: R._var, E.Id: R._id, E.BufLen: R._buf_len, E.Select: R._select, E.Bin: R._bin,
}
# per expression kind, its interval (tests/ir/test_kind_tables.py: every kind is here)
RANGES: dict[type, Callable[[Ranges, Any], tuple[int, int]]] = {
    **{k.cls: R._unbounded for k in EXPR_KINDS}, **BOUNDED}
