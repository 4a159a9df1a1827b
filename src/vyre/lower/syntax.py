"""What a target language must say for the one printer walk (`vyre.lower.printer`): the
syntax record's interface. The walk decides *what* to print (evaluation order, bounds checks,
canonicalisation, the alive scheme, loop limits); a record decides *how* it is spelled.

Records: `vyre.lower.cfamily.CSyntax` (the C family: CUDA and OpenCL are instances, a new
C-like target is one more), `vyre.lower.wgsl.WgslSyntax`. Every method here is one place
where a target's spelling is chosen; ``p`` is the printer (`Printer`) when a spelling needs
temporaries (``p.fresh``) or the program.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vyre.ir import expr as E
from vyre.ir.errors import CTL_ERRORS
from vyre.ir.types import BinOp, Builtin, DataType, UnOp

from .floats import Flags

if TYPE_CHECKING:
    from .printer import Printer

# control-block error bits, spelled once in vyre.ir.errors (a loop stopped by the device, not
# by the program, is ERR_DEVICE_LOOPS: wgpu)
ERR_DIVISION, ERR_LOOP_LIMIT, ERR_DEVICE_LOOPS = (CTL_ERRORS[k] for k in ("division", "loop_limit",
                                                                         "device_loops"))


def error_bits(prelude: str) -> str:
    """``prelude`` with its error-bit tokens (``VY_E_DIVISION``) spelled as the bits' values."""
    return prelude.replace("VY_E_DIVISION", f"{ERR_DIVISION}u")
# f32 predicates: the same on every target (the prelude defines vy_isnan and vy_isinf)
PREDICATES = {UnOp.IS_NAN: "vy_isnan({a})", UnOp.IS_INF: "vy_isinf({a})",
              UnOp.IS_FINITE: "!vy_isnan({a}) && !vy_isinf({a})"}
CMP = {BinOp.EQ: "==", BinOp.NE: "!=", BinOp.LT: "<", BinOp.GT: ">", BinOp.LE: "<=", BinOp.GE: ">="}
BOOL_SYM = {BinOp.EQ: "==", BinOp.NE: "!=", BinOp.AND: "&&", BinOp.OR: "||"}


class Syntax:
    """A target's spelling. Records override every hook the walk calls (a test checks it);
    ``p`` is the `Printer`, for spellings that need temporaries (``p.fresh``) or the plan."""

    name: str
    types: dict[DataType, str]   # value types
    hw_ftz: bool = False          # flush-to-zero forms exact for S9 (vyre.lower.floats)
    # f32 operations whose printed form never returns a subnormal (its own helper flushes), so
    # their results need no flush before a numeric use (vyre.lower.floats `flags_of`)
    flushed_results: frozenset[BinOp] = frozenset()
    # ``{x} + {a} * {b}`` on f32 in one call, giving exactly ``x + (a * b)`` with both operations
    # rounded (a target whose + and * each check their result checks both at once); '' when
    # the target prints the two operations. Needs MUL in `flushed_results`.
    f32_mul_add: str = ""
    # the prelude function that flushes a subnormal f32 to zero of its sign (S9) where a value
    # that cannot be NaN is observed or any value is consumed numerically (a NaN's payload may
    # change: it is canonicalised wherever it could be observed)
    daz: str = "vy_daz"
    vector: bool = False          # the elementwise vector form (`vector_body`)
    subgroups: bool = False       # `subgroup` spells subgroup operations
    barrier: tuple[str, ...]      # the lines of a workgroup barrier
    cancel_poll: tuple[str, ...]  # lines polling the cancel word every 1024 trips
    # lines counting ``{n}`` trips of a loop at once and polling when 1024 have accumulated,
    # for a `loop` run in chunks (`Printer.chunked`); empty: the loop polls on every trip
    chunk_poll: tuple[str, ...] = ()
    # every loop's exit is checked: a device that stops loops on its own is reported
    # (`ERR_DEVICE_LOOPS`) instead of giving short results
    checked_loops: bool = False
    unroll: int = 1   # with checked_loops: least trips per back edge of an innermost loop
    # `load` takes, for ``in_bounds``, a flag name under which the index is in bounds (the
    # check becomes ``flag || i < n``: `Printer.unswitch`); False: loads take only a bool
    unswitch_loads: bool = False

    # declarations and statements
    def var(self, name: str, type_: str, init: str | None) -> str: raise NotImplementedError  # init None: zero
    def temp(self, name: str, type_: str, value: str) -> str: raise NotImplementedError  # immutable
    def inline(self, head: str, *stmts: str) -> str: raise NotImplementedError  # `if (..)` + statements, one line
    def error(self, bit: int) -> str: raise NotImplementedError  # atomic OR into the error word
    def while_open(self, p: Printer, decls: list[str]) -> None: raise NotImplementedError  # counter, loop head
    def while_close(self, p: Printer) -> None: raise NotImplementedError

    # values; `load` gives a temporary holding the stored element (0 out of range)
    def lit(self, t: DataType, bits: int) -> str: raise NotImplementedError
    def builtin(self, kind: Builtin, axis: int) -> str: raise NotImplementedError
    def count(self, p: Printer, buffer: str) -> str: raise NotImplementedError  # a bound buffer's length
    def load(self, p: Printer, buffer: str, i: str, in_bounds: bool | str) -> str: raise NotImplementedError
    def from_word(self, p: Printer, word: str, t: DataType) -> str: raise NotImplementedError
    def to_word(self, v: str, t: DataType, stored: DataType | None = None) -> str: raise NotImplementedError
    def store(self, p: Printer, buffer: str, i: str, word: str) -> str: raise NotImplementedError
    def select(self, c: str, a: str, b: str) -> str: raise NotImplementedError
    def bitcast(self, v: str, t: DataType, d: DataType) -> str: raise NotImplementedError

    # operations: the one place each op's spelling is chosen
    def int_bin(self, op: BinOp, t: DataType, rt: DataType, a: str, b: str) -> str: raise NotImplementedError
    def int_un(self, op: UnOp, t: DataType, a: str) -> str: raise NotImplementedError
    def f32_cmp(self, op: BinOp, a: str, b: str) -> str: raise NotImplementedError
    def f32_bin(self, op: BinOp, a: str, b: str) -> str: raise NotImplementedError
    def f32_un(self, op: UnOp, a: str) -> str: raise NotImplementedError
    def cast(self, p: Printer, v: str, t: DataType, f: Flags, d: DataType) -> tuple[str, DataType, Flags]:
        raise NotImplementedError
    def fma(self, a: str, b: str, c: str) -> str: raise NotImplementedError
    def widen(self, p: Printer, v: str, t: DataType) -> tuple[str, DataType, Flags]: raise NotImplementedError
    def narrow(self, p: Printer, v: str, t: DataType) -> str: raise NotImplementedError  # f32 to f16/bf16
    def atomic(self, p: Printer, e: E.Atomic, i: str, v: str, t: DataType, x: str | None) -> str:
        raise NotImplementedError
    def subgroup(self, op: Any, ctype: str, value: str | None, lane: str | None, lin: str) -> str:
        raise NotImplementedError

    # kernels: what runs before the body, the vector form, the signature, the whole source
    def matmul(self, p: Printer, n: Any) -> None:   # a matmul_acc the plan left to the target
        raise TypeError(f"the {self.name} printer has no native matmul_acc: the plan expands it into "
                        "scalar loops (vyre.lower.legalize.matmul) unless the target claims it")

    def tile(self, p: Printer, n: Any) -> None:   # a load_tile the plan left to the target
        raise TypeError(f"the {self.name} printer has no native load_tile: the plan expands it into "
                        "a scalar copy (vyre.lower.legalize.tile) unless the target claims it")

    def prologue(self, p: Printer, index: int) -> None: raise NotImplementedError
    def vector_body(self, p: Printer, body: tuple) -> None: raise NotImplementedError
    def kernel_head(self, p: Printer, index: int) -> str: raise NotImplementedError
    def module(self, p: Printer, kernels: list[str]) -> str: raise NotImplementedError
