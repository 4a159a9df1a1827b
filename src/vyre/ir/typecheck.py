"""Static types of expressions: the one typing rule set shared by the validator, the
reference interpreter and the lowering.

`infer(expr, scope, program)` returns the DataType or raises `TypeFault` with a message
and a fix; the validator turns faults into diagnostics.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import expr as E
from .types import (
    COMPARISONS,
    FLOAT_ONLY_UN,
    FLOAT_PREDICATES,
    INT_ONLY_BIN,
    INT_ONLY_UN,
    LOGICAL,
    SHIFTS,
    TRANSCENDENTAL,
    AtomicOp,
    BinOp,
    DataType,
    UnOp,
)

B, U, I, F = DataType.BOOL, DataType.U32, DataType.I32, DataType.F32


class TypeFault(Exception):
    def __init__(self, code: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.code, self.message, self.fix = code, message, fix


def bin_result(op: BinOp, lt: DataType, rt: DataType) -> DataType:
    if op in SHIFTS:
        if not (lt.is_integer and rt.is_integer):
            raise TypeFault("V003", f"{op.name} needs integer operands, got {lt.value} and {rt.value}.",
                            "cast the operands to u32 or i32.")
        return lt
    if lt is not rt:
        raise TypeFault("V003", f"{op.name} operands differ in type: {lt.value} vs {rt.value}.",
                        "cast one operand with Expr.cast so both have the same type.")
    if op in LOGICAL:
        if lt is not B:
            raise TypeFault("V003", f"{op.name} needs bool operands, got {lt.value}.",
                            "compare the values first (e.g. x.ne(0)) or use BITAND/BITOR for bits.")
        return B
    if op in COMPARISONS:
        if lt is B and op not in (BinOp.EQ, BinOp.NE):
            raise TypeFault("V003", f"{op.name} is not defined on bool.",
                            "cast the bools to u32 to order them.")
        return B
    if lt is B:
        raise TypeFault("V003", f"{op.name} is not defined on bool.",
                        "use AND/OR for bools, or cast to u32.")
    if op in INT_ONLY_BIN and not lt.is_integer:
        raise TypeFault("V003", f"{op.name} needs integer operands, got {lt.value}.",
                        "cast the operands to u32 or i32 (or Expr.bitcast for the bits).")
    return lt


def un_result(op: UnOp, t: DataType) -> DataType:
    if op is UnOp.LOGICAL_NOT:
        if t is not B:
            raise TypeFault("V003", f"LOGICAL_NOT needs bool, got {t.value}.",
                            "compare first (x.eq(0)) or use BITNOT for integers.")
        return B
    if t is B:
        raise TypeFault("V003", f"{op.name} is not defined on bool.", "cast the bool to u32 first.")
    if op in INT_ONLY_UN and not t.is_integer:
        raise TypeFault("V003", f"{op.name} needs an integer operand, got {t.value}.",
                        "bitcast the f32 to u32 to work on its bits.")
    if (op in FLOAT_ONLY_UN or op in TRANSCENDENTAL) and t is not F:
        raise TypeFault("V003", f"{op.name} needs an f32 operand, got {t.value}.",
                        "cast the operand to f32 first.")
    if op in FLOAT_PREDICATES:
        return B
    return t


def infer(expr: E.Expr, scope: Mapping[str, DataType], program) -> DataType:
    """Type of ``expr`` given visible locals ``scope``; raises TypeFault."""
    if isinstance(expr, E.Lit | E.Spec):
        return expr.dtype
    if isinstance(expr, E.Var):
        t = scope.get(expr.name)
        if t is None:
            raise TypeFault("V002", f"variable {expr.name!r} is not declared here.",
                            f"declare it first with Node.let_bind({expr.name!r}, ...) in an enclosing scope.")
        return t
    if isinstance(expr, E.Load | E.BufLen | E.Atomic):
        decl = program.buffer(expr.buffer)
        if decl is None:
            raise TypeFault("V001", f"buffer {expr.buffer!r} is not declared.",
                            "add a BufferDecl for it to Program.wrapped(buffers=...).")
        if isinstance(expr, E.BufLen):
            return U
        _index(infer(expr.index, scope, program))
        if isinstance(expr, E.Load):
            return decl.dtype
        if decl.dtype not in (U, I):
            raise TypeFault("V007", f"atomic on buffer {expr.buffer!r} of type {decl.dtype.value}.",
                            "atomics are integer-only: declare the buffer u32 or i32.")
        if not decl.writable:
            raise TypeFault("V008", f"atomic on read-only buffer {expr.buffer!r}.",
                            "declare it read_write, output or workgroup.")
        vt = infer(expr.value, scope, program)
        if vt is not decl.dtype:
            raise TypeFault("V003", f"atomic value is {vt.value}, buffer is {decl.dtype.value}.",
                            "cast the value to the buffer's type.")
        if (expr.op is AtomicOp.COMPARE_EXCHANGE) != (expr.expected is not None):
            raise TypeFault("V003", "COMPARE_EXCHANGE needs `expected`; other atomics take none.",
                            "pass expected= only with AtomicOp.COMPARE_EXCHANGE.")
        if expr.expected is not None and infer(expr.expected, scope, program) is not decl.dtype:
            raise TypeFault("V003", "atomic `expected` differs from the buffer type.",
                            "cast `expected` to the buffer's type.")
        return decl.dtype
    if isinstance(expr, E.Id):
        if expr.axis not in (0, 1, 2):
            raise TypeFault("V022", f"{expr.kind.value} axis {expr.axis} is not 0, 1 or 2.",
                            "use axis 0 (x), 1 (y) or 2 (z).")
        return U
    if isinstance(expr, E.Bin):
        return bin_result(expr.op, infer(expr.left, scope, program), infer(expr.right, scope, program))
    if isinstance(expr, E.Un):
        return un_result(expr.op, infer(expr.operand, scope, program))
    if isinstance(expr, E.Select):
        c = infer(expr.cond, scope, program)
        if c is not B:
            raise TypeFault("V003", f"select condition is {c.value}, not bool.",
                            "compare it (e.g. x.ne(0)) to get a bool.")
        a, b = infer(expr.if_true, scope, program), infer(expr.if_false, scope, program)
        if a is not b:
            raise TypeFault("V003", f"select branches differ: {a.value} vs {b.value}.",
                            "cast one branch so both have the same type.")
        return a
    if isinstance(expr, E.Cast):
        infer(expr.value, scope, program)
        return expr.dtype
    if isinstance(expr, E.Bitcast):
        t = infer(expr.value, scope, program)
        if t is B or expr.dtype is B:
            raise TypeFault("V003", "bitcast to or from bool is not defined.",
                            "use Expr.cast for bool conversions.")
        return expr.dtype
    if isinstance(expr, E.Subgroup):
        from .types import SUBGROUP_REDUCTIONS, SubgroupOp

        if expr.op in (SubgroupOp.LOCAL_ID, SubgroupOp.SIZE):
            return U
        vt = infer(expr.value, scope, program)
        if expr.op in SUBGROUP_REDUCTIONS:
            if not vt.is_integer:
                raise TypeFault("V003", f"subgroup {expr.op.value} needs u32 or i32, got {vt.value}.",
                                "reduce integers (float reductions would depend on lane order).")
            return vt
        if expr.op is SubgroupOp.BALLOT:
            if vt is not B:
                raise TypeFault("V003", f"subgroup ballot needs a bool, got {vt.value}.", "compare first.")
            return U
        if vt is B:
            raise TypeFault("V003", "subgroup shuffle of a bool.", "cast it to u32 first.")
        _index(infer(expr.lane, scope, program))
        return vt
    if isinstance(expr, E.Fma):
        for part in (expr.a, expr.b, expr.c):
            t = infer(part, scope, program)
            if t is not F:
                raise TypeFault("V003", f"fma operand is {t.value}, not f32.", "cast operands to f32.")
        return F
    raise TypeFault("V003", f"unknown expression kind {type(expr).__name__}.",
                    "build expressions with the vyre.ir.Expr constructors.")


def _index(t: DataType) -> None:
    if t is not U:
        raise TypeFault("V003", f"buffer index is {t.value}, not u32.",
                        "cast the index with Expr.cast(DataType.U32, ...).")
