"""Where f32 canonicalisation is observable, so generated code canonicalises only there.

Semantics row S9 defines the bits: every operand and result of float arithmetic is
canonical (NaN -> 0x7FC00000, subnormal -> zero of the same sign), while loads, stores,
`select`, `bitcast`, same-type casts and assignments move bits unchanged. A C-family kernel
gets those bits without canonicalising every operand and result, because:

* a NaN's payload is visible only where bits are observed — a store to a buffer, a bitcast
  to an integer, an assignment to a local that may also hold raw (loaded) bits. Arithmetic
  on a NaN gives a NaN whatever its payload, and comparisons ignore it. So NaN payloads are
  canonicalised only at those observation points, and only for values that are results of
  arithmetic (``nan`` flag), never for raw bits.
* a subnormal differs from a zero only when it is consumed numerically (arithmetic,
  comparisons, sign, rounding, conversion to bool) or observed as the result of arithmetic.
  A value that may be subnormal (``sub`` flag) is flushed where it is consumed — or not at
  all on targets whose hardware flush-to-zero gives exactly S9's flush (CUDA's ``.ftz``
  forms, `Dialect.hw_ftz`) — and, as a result of arithmetic, where it is observed.
* raw bits (``raw`` flag: loads, bitcasts to f32) are never canonicalised when observed.

`Flags` is the lattice; `FLAGS` gives, per expression kind, the flags of its value;
`var_flags` computes, by fixpoint over every assignment, what each f32 local may hold; the
printer (`vyre.lower.printer`) combines them per expression.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.kinds import UnknownKind
from vyre.ir.typecheck import infer
from vyre.ir.types import BinOp, DataType, UnOp

F = DataType.F32
# operations that consume an f32 operand only numerically: a flushed operand gives the same
# result, so a value that only ever reaches these may be flushed early
NUMERIC_BIN = frozenset({BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MOD, BinOp.MIN, BinOp.MAX,
                         BinOp.ABS_DIFF, BinOp.EQ, BinOp.NE, BinOp.LT, BinOp.GT, BinOp.LE, BinOp.GE,
                         BinOp.HYPOT, BinOp.POW, BinOp.ATAN2})

# Operations whose hardware flush-to-zero form flushes subnormal inputs and results exactly
# as S9 does (CUDA with --ftz=true: add/sub/mul/div/sqrt/fma/abs/neg/floor/ceil and every
# comparison carry .ftz in the PTX). Everything else is a software operation here.
# MUL, DIV, FMA and RECIPROCAL are not here: their .ftz forms detect tininess *before*
# rounding, so a result just below 2**-126 that rounds up to it comes out as zero. The CUDA
# printer uses the IEEE (non-ftz) instructions for them on flushed operands; their possibly
# subnormal results are flushed where consumed or observed, like any IEEE-rounded result.
# (Sums and differences are exact whenever they are subnormal, so .ftz never misrounds them.)
# Comparisons are not either: compilers propagate a constant operand into them (a local bound
# to a literal) and rewrite the comparison as integer or sign-bit tests that see a subnormal
# operand unflushed; the H100 compared -0.0 >= (subnormal) as false (conform random/11000163).
HW_FTZ_BIN = frozenset({BinOp.ADD, BinOp.SUB, BinOp.ABS_DIFF})
HW_FTZ_UN = frozenset({UnOp.SQRT, UnOp.FLOOR, UnOp.CEIL})
# NEGATE and ABS are not: compilers treat them as sign-bit operations that never flush
# (LLVM's fneg/fabs), and fold them away (-(-x) is x), so a .ftz form cannot be relied on.
# The H100 printed the subnormal bits of -(-x) (conform random/7000355 on a cluster run).
# For the same reason an operation with a float literal operand is not left to the hardware:
# the compiler knows that operand, so it may fold (x + 0 and x - 0 to x, 0 - x to -x) or
# evaluate the operation at compile time with IEEE subnormals (`hardware_bin`, `hardware_un`).

_FLOATS = (F, DataType.F16, DataType.BF16)


def _known(e: E.Expr) -> bool:
    return isinstance(e, E.Lit) and e.dtype in _FLOATS


def hardware_bin(e: E.Bin) -> bool:
    """Whether a target with flush-to-zero forms may leave ``e``'s flushes to the hardware."""
    return e.op in HW_FTZ_BIN and not (_known(e.left) or _known(e.right))


def hardware_un(e: E.Un) -> bool:
    """As `hardware_bin`, for a unary operation."""
    return e.op in HW_FTZ_UN and not _known(e.operand)
def _magnitude(e: E.Expr) -> float | None:
    """|value| of an f32 literal (NaN: None)."""
    if not (isinstance(e, E.Lit) and e.dtype is F):
        return None
    m = abs(struct.unpack("<f", struct.pack("<I", e.bits))[0])
    return None if m != m else m


_SQRT_BOUND = 2.0 ** -62   # 2**-62 / sqrt(largest f32) > 2**-126: c / sqrt(x) is never tiny


def no_subnormal(e: E.Expr) -> bool:
    """Whether the IEEE result of ``e`` can never be subnormal, whatever its other operands.
    The printers flush the operands of MUL, DIV and RECIPROCAL first, so a non-zero operand
    has magnitude at least 2**-126, and:

    * ``c * x`` (either way round) with a literal ``|c| >= 1``: ``|c x| >= |x|``, so the
      product is zero, at least 2**-126, infinite or NaN (Mandelbrot's ``2 * x * y``);
    * ``c / sqrt(x)`` with a literal ``|c| >= 2**-62``, and ``reciprocal(sqrt(x))``: a square
      root is at most 2**64 (or infinite: the quotient is then an exact zero), so the quotient
      is at least 2**-126 (n-body's ``1 / sqrt(d2)``).

    Only the exact IEEE result is reasoned about, never a hardware flush, so the rule holds on
    every target."""
    if isinstance(e, E.Bin) and e.op is BinOp.MUL:
        return any((m := _magnitude(k)) is not None and m >= 1.0 for k in (e.left, e.right))
    if isinstance(e, E.Bin) and e.op is BinOp.DIV:
        m = _magnitude(e.left)
        return m is not None and m >= _SQRT_BOUND and _is_sqrt(e.right)
    if isinstance(e, E.Un) and e.op is UnOp.RECIPROCAL:
        return _is_sqrt(e.operand)
    return False


def _is_sqrt(e: E.Expr) -> bool:
    return isinstance(e, E.Un) and e.op is UnOp.SQRT


# Operations whose result is IEEE-rounded arithmetic (so it may be subnormal without ftz).
ROUNDED_BIN = frozenset({BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MOD, BinOp.ABS_DIFF})
# Unary results that are never subnormal (a NaN passes through): TRUNC and ROUND of a
# subnormal are a signed zero, FLOOR, CEIL and SIGN see their operand flushed first.
NO_SUBNORMAL_UN = frozenset({UnOp.FLOOR, UnOp.CEIL, UnOp.TRUNC, UnOp.ROUND, UnOp.SIGN})


@dataclass(frozen=True)
class Flags:
    """What an f32 value may be. ``raw``: its bits must be kept when observed (it was
    loaded or bitcast). ``sub``: it may be subnormal. ``nan``: it may be a NaN whose payload
    is not canonical."""

    raw: bool = False
    sub: bool = False
    nan: bool = False

    def __or__(self, other: Flags) -> Flags:
        return Flags(self.raw or other.raw, self.sub or other.sub, self.nan or other.nan)


CANON = Flags()
RAW = Flags(True, True, True)


def result_flags(hw_ftz: bool, *, rounded: bool, from_operands: Flags | None = None,
                 hardware: bool = True) -> Flags:
    """Flags of an arithmetic result: a NaN payload may appear; a subnormal may appear when
    the result is IEEE-rounded without hardware flush, or when a software operation returns
    an operand's bits (``from_operands``)."""
    sub = rounded and not (hw_ftz and hardware)
    if from_operands is not None:
        sub = sub or from_operands.sub
    return Flags(False, sub, True)


FLUSHED = Flags(False, False, True)  # flushed when stored; a NaN payload is never observed


def numeric_only_buffers(program) -> frozenset[str]:
    """f32 workgroup buffers whose every load is the direct operand of a numeric operation:
    their bits are never observed (workgroup memory dies with the workgroup), so values are
    flushed once when stored instead of at every use (`FLUSHED`)."""
    f32 = {b.name for b in program.workgroup_buffers if b.dtype is F}
    if not f32:
        return frozenset()
    # nodes may be shared, so count occurrences: a load is numeric-only when every place it
    # occurs is as the direct operand of a numeric operation
    seen: Counter[int] = Counter()
    numeric_uses: Counter[int] = Counter()
    loads: dict[int, str] = {}
    for e in N.walk_exprs(program.body):
        if isinstance(e, E.Load):
            seen[id(e)] += 1
            loads[id(e)] = e.buffer
        elif (isinstance(e, E.Bin) and e.op in NUMERIC_BIN) or isinstance(e, E.Fma | E.Un) \
                or (isinstance(e, E.Cast) and e.dtype is not F):
            for k in E.children(e):
                if isinstance(k, E.Load):
                    numeric_uses[id(k)] += 1
    bad = {buf for key, buf in loads.items() if numeric_uses[key] < seen[key]}
    return frozenset(f32 - bad)


class _Env(NamedTuple):
    """What `flags_of` needs beside the expression (one walk, passed down unchanged)."""

    var: dict[str, Flags]
    hw_ftz: bool
    scope: dict[str, DataType]
    program: Any
    flushed: frozenset[str]
    flushed_ops: frozenset[BinOp]


def flags_of(e: E.Expr, var: dict[str, Flags], hw_ftz: bool, scope: dict[str, DataType], program,
             flushed: frozenset[str] = frozenset(), flushed_ops: frozenset[BinOp] = frozenset()) -> Flags:
    """Flags of an f32 expression as the emitter lowers it (non-f32 values: `CANON`); one
    rule per kind (`FLAGS`), an unknown kind or one never printed (`FLAGS_EXEMPT`) raises.
    ``flushed_ops``: f32 operations whose printed form never returns a subnormal (the
    target's `Syntax.flushed_results`)."""
    return _flags(e, _Env(var, hw_ftz, scope, program, flushed, flushed_ops))


def _flags(e: E.Expr, env: _Env) -> Flags:
    rule = FLAGS.get(type(e))
    if rule is None:
        raise UnknownKind(e)
    return rule(e, env)


def _cast(e: E.Cast, env: _Env) -> Flags:
    if e.dtype is not F:
        return CANON
    inner = infer(e.value, env.scope, env.program)
    return _flags(e.value, env) if inner is F else CANON


def _select(e: E.Select, env: _Env) -> Flags:
    a, b = _flags(e.if_true, env), _flags(e.if_false, env)
    if a.raw != b.raw:       # the non-raw arm is canonicalised first: the select is raw
        return RAW
    return a | b


def _bin(e: E.Bin, env: _Env) -> Flags:
    if e.op in (BinOp.MIN, BinOp.MAX, BinOp.HYPOT, BinOp.POW, BinOp.ATAN2):
        return CANON  # operands flushed first; a NaN operand gives the canonical NaN
    if no_subnormal(e) or e.op in env.flushed_ops:
        return Flags(False, False, True)
    return result_flags(env.hw_ftz, rounded=e.op in ROUNDED_BIN, hardware=hardware_bin(e))


def _un(e: E.Un, env: _Env) -> Flags:
    if e.op in NO_SUBNORMAL_UN or e.op is UnOp.ABS or e.op is UnOp.NEGATE or no_subnormal(e):
        return Flags(False, False, True)  # a NaN operand's payload passes through
    return result_flags(env.hw_ftz, rounded=True, hardware=hardware_un(e))


def _canon(e: E.Expr, env: _Env) -> Flags:
    return CANON


#: per expression kind, the flags of its value (tests/ir/test_kind_tables.py: every kind is
#: here or in `FLAGS_EXEMPT`)
FLAGS: dict[type, Callable[[Any, _Env], Flags]] = {
    E.Lit: _canon, E.Spec: _canon,
    # integer values (float atomics are rewritten onto u32 words first: vyre.lower.accumulate)
    E.BufLen: _canon, E.Id: _canon, E.Atomic: _canon,
    E.Var: lambda e, env: env.var.get(e.name, CANON),
    E.Load: lambda e, env: FLUSHED if e.buffer in env.flushed else RAW,
    E.Bitcast: lambda e, env: RAW if e.dtype is F else CANON,
    E.Cast: _cast,
    E.Select: _select,
    E.Subgroup: lambda e, env: _flags(e.value, env) if e.value is not None else CANON,
    E.Fma: lambda e, env: result_flags(env.hw_ftz, rounded=True, hardware=False),
    E.Bin: _bin,
    E.Un: _un,
}
# kinds a printed program never holds (as `vyre.lower.printer.NOT_PRINTED`)
FLAGS_EXEMPT = frozenset({E.Call, E.WeakLit})


def var_flags(program, hw_ftz: bool, flushed: frozenset[str] = frozenset(),
              flushed_ops: frozenset[BinOp] = frozenset()) -> dict[str, Flags]:
    """For every f32 local, the join of the flags of every value assigned to it (a fixpoint:
    ``acc = acc + x`` depends on what ``acc`` may hold)."""
    states: dict[str, Flags] = {}
    while True:
        before = dict(states)
        _visit(program.body, states, hw_ftz, {}, program, flushed, flushed_ops)
        if states == before:
            return states


def _visit(body, states: dict[str, Flags], hw_ftz: bool, scope: dict[str, DataType], program,
           flushed: frozenset[str], flushed_ops: frozenset[BinOp]) -> None:
    scope = dict(scope)
    for n in body:
        if isinstance(n, N.Let | N.Assign):
            t = infer(n.value, scope, program)
            if isinstance(n, N.Let):
                scope[n.name] = t
            if t is F:
                states[n.name] = states.get(n.name, CANON) | flags_of(n.value, states, hw_ftz, scope,
                                                                      program, flushed, flushed_ops)
        elif isinstance(n, N.Loop):
            inner = {**scope, n.var: infer(n.from_, scope, program)}
            _visit(n.body, states, hw_ftz, inner, program, flushed, flushed_ops)
        else:
            for _, sub in N.node_bodies(n):
                _visit(sub, states, hw_ftz, scope, program, flushed, flushed_ops)
