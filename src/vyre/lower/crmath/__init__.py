"""Correctly rounded f32 transcendentals for every generated target (S13).

One algorithm per function, written once in a small typed language (`vyre.lower.crmath.dsl`;
the functions: `vyre.lower.crmath.functions`) and printed for each target:

* C family (CUDA C, OpenCL C with fp64, host C): `prelude` (`vyre.lower.crmath.c`), native
  float64 and 64-bit integers;
* WGSL: `wgsl_prelude` (`vyre.lower.crmath.wgsl`), where each float64 and 64-bit integer
  operation is a software helper on u32 words (`vyre.lower.crmath.soft`, written in the
  same language, IEEE round-to-nearest-even), so WGSL performs the same double operations
  on the same values and gets the same bits; the one exception is the language's ``fma``
  (fused in C, a product then a sum in WGSL), where both doubles are within DEVICE_EPS of the
  exact value and so round to the same f32 (`vyre.lower.crmath.dsl.fma`).

Printers call an op's function by `HELPER`; its argument is the canonical (S9) f32 operand.
"""

from __future__ import annotations

import functools

from vyre.ir.types import BinOp, UnOp

from . import c as _c
from .binary import vym_atan2, vym_pow
from .functions import DEVICE_EPS, ENTRY, HARD_CASES, LANE, hard_cases, vym_hypot

__all__ = ["DEVICE_EPS", "DOUBLE", "HARD_CASES", "HELPER", "LANE_HELPER", "hard_cases", "lane_prelude",
           "prelude", "roots", "shared_tables", "wgsl_prelude"]

# the functions of two operands (pow and atan2: vyre.lower.crmath.binary)
BINARY = {BinOp.HYPOT: vym_hypot, BinOp.POW: vym_pow, BinOp.ATAN2: vym_atan2}
# the device function each correctly rounded op is printed as
HELPER: dict[UnOp | BinOp, str] = {
    **{UnOp(name): fn.name for name, fn in ENTRY.items()},
    **{op: fn.name for op, fn in BINARY.items()},
}
# the ops whose entry has a branch-free common path (`vyre.lower.crmath.functions.LANE`): the
# entry's name -> its lane function's
LANE_HELPER: dict[UnOp, tuple[str, str]] = {UnOp(name): (ENTRY[name].name, fn.name) for name, fn in LANE.items()}
# the double each helper rounds, as a C expression of the f32 ``x`` (tests measure its error
# against DEVICE_EPS)
DOUBLE: dict[UnOp, str] = {
    UnOp.EXP: "vym_exp_d((double)x)", UnOp.EXP2: "vym_exp2_d((double)x)", UnOp.LOG: "vym_log_d(x)",
    UnOp.LOG2: "vym_log2_d(x)",
    **{UnOp(name): f"vym_{name}_y(x)" for name in ENTRY if name not in ("exp", "exp2", "log", "log2")},
}


def roots(ops: frozenset[UnOp | BinOp] | set[UnOp | BinOp]) -> list:
    """The entry functions of the correctly rounded ops among ``ops`` (in `HELPER` order)."""
    return [BINARY[op] if isinstance(op, BinOp) else ENTRY[op.value] for op in HELPER if op in ops]


def prelude(ops: frozenset[UnOp | BinOp] | set[UnOp | BinOp]) -> str:
    """C source of the helpers (and their tables) for the given ops; '' when none."""
    fns = roots(ops)
    return _c.source(fns) if fns else ""


def lane_prelude(ops: frozenset[UnOp | BinOp] | set[UnOp | BinOp]) -> str:
    """`prelude` of ``ops`` plus the lane functions of those in `LANE_HELPER` (C family)."""
    fns = roots(ops) + [LANE[op.value] for op in LANE_HELPER if op in ops]
    return _c.source(fns) if fns else ""


@functools.cache
def shared_tables(ops: frozenset[UnOp | BinOp]) -> tuple[tuple[str, str, int], ...]:
    """(name, C type, entries) of each table the helpers of ``ops`` read once per evaluation
    (`vyre.lower.crmath.dsl.Table.shared`): a CUDA kernel that evaluates them in a loop copies
    these into shared memory first and defines VYM_SHARED_TABLES (`prelude`'s reads then go
    there)."""
    return tuple((t.name, _c.CT[t.ty], len(t.values)) for t in _c.shared_tables(roots(ops)))


def wgsl_prelude(ops: frozenset[UnOp | BinOp] | set[UnOp | BinOp]) -> str:
    """WGSL source of the helpers for the given ops (f32 values as their u32 bits); '' when none."""
    from . import wgsl as _wgsl

    fns = roots(ops)
    return _wgsl.source(fns) if fns else ""
