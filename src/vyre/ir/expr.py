"""Expressions of the IR: immutable, hashable trees with structural equality.

`Expr` is the base class and the builder namespace: ``Expr.u32(7)``, ``Expr.load("a", i)``,
``Expr.add(a, b)`` or ``a + b``, ``a.lt(b)``. Each concrete kind is a frozen dataclass below.
Comparisons are methods (``a.lt(b)``, ``a.eq(b)``): ``==`` stays structural equality so that
Programs can be compared and hashed.

Python numbers used as operands become literals: ``int`` -> U32 (I32 when negative),
``float`` -> F32, ``bool`` -> BOOL. f32 literals are stored as canonical bits (NaN ->
0x7FC00000, subnormal -> signed zero), so the IR never holds a non-canonical float literal.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .limits import MAX_DEPTH, too_deep
from .types import AtomicOp, BinOp, Builtin, DataType, SubgroupOp, UnOp

CANONICAL_NAN_BITS = 0x7FC00000


def canonical_f32_bits(bits: int) -> int:
    """Canonicalise f32 bits: any NaN -> 0x7FC00000, subnormal -> zero of the same sign."""
    bits &= 0xFFFFFFFF
    exponent = bits & 0x7F800000
    if exponent == 0x7F800000 and bits & 0x007FFFFF:
        return CANONICAL_NAN_BITS
    if exponent == 0:
        return bits & 0x80000000
    return bits


def f32_bits(value: float) -> int:
    """The bits of ``value`` rounded to f32 (round-to-nearest-even; overflow -> inf)."""
    try:
        return struct.unpack("<I", struct.pack("<f", value))[0]
    except OverflowError:
        return 0x7F800000 if value > 0 else 0xFF800000


def bits_f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


class Expr:
    """Base of every expression kind, and the builder namespace."""

    __slots__ = ()

    def __post_init__(self) -> None:
        # every node knows its height; trees over MAX_DEPTH are refused here, so no walk of
        # a Program can hit Python's recursion limit
        h = 1 + max((getattr(k, "_h", 1) for k in children(self)), default=0)
        if h > MAX_DEPTH:
            raise too_deep(h, "expression")
        object.__setattr__(self, "_h", h)

    @property
    def height(self) -> int:
        """Levels of this expression tree (a leaf is 1)."""
        return getattr(self, "_h", 1)

    # ---- literals and leaves -------------------------------------------------------
    @staticmethod
    def u32(value: int) -> Lit:
        return Lit(DataType.U32, int(value) & 0xFFFFFFFF) if 0 <= int(value) <= 0xFFFFFFFF \
            else _range_error(value, "u32", "0..4294967295")

    @staticmethod
    def i32(value: int) -> Lit:
        v = int(value)
        if not -(2**31) <= v < 2**31:
            _range_error(value, "i32", "-2147483648..2147483647")
        return Lit(DataType.I32, v & 0xFFFFFFFF)

    @staticmethod
    def f32(value: float) -> Lit:
        return Lit(DataType.F32, canonical_f32_bits(f32_bits(float(value))))

    @staticmethod
    def f32_from_bits(bits: int) -> Lit:
        return Lit(DataType.F32, canonical_f32_bits(int(bits)))

    @staticmethod
    def bool_(value: bool) -> Lit:
        return Lit(DataType.BOOL, 1 if value else 0)

    @staticmethod
    def var(name: str) -> Var:
        return Var(name)

    @staticmethod
    def load(buffer: str, index: Any) -> Load:
        return Load(buffer, coerce(index))

    @staticmethod
    def buf_len(buffer: str) -> BufLen:
        return BufLen(buffer)

    @staticmethod
    def gid(axis: int = 0) -> Id:
        return Id(Builtin.GID, axis)

    @staticmethod
    def lid(axis: int = 0) -> Id:
        return Id(Builtin.LID, axis)

    @staticmethod
    def wgid(axis: int = 0) -> Id:
        return Id(Builtin.WGID, axis)

    @staticmethod
    def gid_x() -> Id:
        return Id(Builtin.GID, 0)

    @staticmethod
    def gid_y() -> Id:
        return Id(Builtin.GID, 1)

    @staticmethod
    def gid_z() -> Id:
        return Id(Builtin.GID, 2)

    @staticmethod
    def lid_x() -> Id:
        return Id(Builtin.LID, 0)

    @staticmethod
    def lid_y() -> Id:
        return Id(Builtin.LID, 1)

    @staticmethod
    def lid_z() -> Id:
        return Id(Builtin.LID, 2)

    @staticmethod
    def wgid_x() -> Id:
        return Id(Builtin.WGID, 0)

    @staticmethod
    def wgid_y() -> Id:
        return Id(Builtin.WGID, 1)

    @staticmethod
    def wgid_z() -> Id:
        return Id(Builtin.WGID, 2)

    @staticmethod
    def spec(name: str, dtype: DataType, default: Any) -> Spec:
        """A named specialization constant: ``default`` unless the dispatch config's
        ``specialization`` gives another value; drivers bake the value into their code."""
        lit = {DataType.U32: Expr.u32, DataType.I32: Expr.i32, DataType.F32: Expr.f32,
               DataType.BOOL: Expr.bool_}[dtype](default)
        return Spec(name, dtype, lit.bits)

    # ---- subgroups -------------------------------------------------------------------
    @staticmethod
    def subgroup_reduce(op: SubgroupOp, value: Any) -> Subgroup:
        """Integer reduction over the subgroup; every lane gets the result."""
        return Subgroup(op, coerce(value), None)

    @staticmethod
    def subgroup_shuffle(value: Any, lane: Any) -> Subgroup:
        """``value`` as held by lane ``lane % subgroup_size`` of this subgroup (bits moved)."""
        return Subgroup(SubgroupOp.SHUFFLE, coerce(value), coerce(lane))

    @staticmethod
    def subgroup_ballot(cond: Any) -> Subgroup:
        """A u32 whose bit i is set when lane i of the subgroup has ``cond`` true."""
        return Subgroup(SubgroupOp.BALLOT, coerce(cond), None)

    @staticmethod
    def subgroup_local_id() -> Subgroup:
        return Subgroup(SubgroupOp.LOCAL_ID, None, None)

    @staticmethod
    def subgroup_size() -> Subgroup:
        return Subgroup(SubgroupOp.SIZE, None, None)

    # ---- generic constructors -------------------------------------------------------
    @staticmethod
    def bin(op: BinOp, left: Any, right: Any) -> Bin:
        return Bin(op, coerce(left), coerce(right))

    @staticmethod
    def un(op: UnOp, value: Any) -> Un:
        return Un(op, coerce(value))

    @staticmethod
    def select(cond: Any, if_true: Any, if_false: Any) -> Select:
        return Select(coerce(cond), coerce(if_true), coerce(if_false))

    @staticmethod
    def cast(dtype: DataType, value: Any) -> Cast:
        """Value conversion (f32->int truncates and saturates, NaN->0; int->f32 rounds to
        nearest even; u32<->i32 keeps the bits; x->BOOL is x != 0)."""
        return Cast(dtype, coerce(value))

    @staticmethod
    def bitcast(dtype: DataType, value: Any) -> Bitcast:
        """Reinterpret the 32 bits of ``value`` as ``dtype`` (no canonicalisation)."""
        return Bitcast(dtype, coerce(value))

    @staticmethod
    def fma(a: Any, b: Any, c: Any) -> Fma:
        """f32 fused multiply-add ``a*b + c`` with a single rounding."""
        return Fma(coerce(a), coerce(b), coerce(c))

    @staticmethod
    def atomic(op: AtomicOp, buffer: str, index: Any, value: Any, expected: Any = None) -> Atomic:
        """Atomic read-modify-write of ``buffer[index]``; evaluates to the old value."""
        return Atomic(op, buffer, coerce(index), coerce(value),
                      None if expected is None else coerce(expected))

    # ---- operator sugar (arithmetic and bitwise only; comparisons are methods) ----------
    def __add__(self, o: Any) -> Bin: return Bin(BinOp.ADD, self, coerce(o))
    def __radd__(self, o: Any) -> Bin: return Bin(BinOp.ADD, coerce(o), self)
    def __sub__(self, o: Any) -> Bin: return Bin(BinOp.SUB, self, coerce(o))
    def __rsub__(self, o: Any) -> Bin: return Bin(BinOp.SUB, coerce(o), self)
    def __mul__(self, o: Any) -> Bin: return Bin(BinOp.MUL, self, coerce(o))
    def __rmul__(self, o: Any) -> Bin: return Bin(BinOp.MUL, coerce(o), self)
    def __truediv__(self, o: Any) -> Bin: return Bin(BinOp.DIV, self, coerce(o))
    def __rtruediv__(self, o: Any) -> Bin: return Bin(BinOp.DIV, coerce(o), self)
    def __floordiv__(self, o: Any) -> Bin: return Bin(BinOp.DIV, self, coerce(o))
    def __mod__(self, o: Any) -> Bin: return Bin(BinOp.MOD, self, coerce(o))
    def __rmod__(self, o: Any) -> Bin: return Bin(BinOp.MOD, coerce(o), self)
    def __and__(self, o: Any) -> Bin: return Bin(BinOp.BITAND, self, coerce(o))
    def __rand__(self, o: Any) -> Bin: return Bin(BinOp.BITAND, coerce(o), self)
    def __or__(self, o: Any) -> Bin: return Bin(BinOp.BITOR, self, coerce(o))
    def __ror__(self, o: Any) -> Bin: return Bin(BinOp.BITOR, coerce(o), self)
    def __xor__(self, o: Any) -> Bin: return Bin(BinOp.BITXOR, self, coerce(o))
    def __rxor__(self, o: Any) -> Bin: return Bin(BinOp.BITXOR, coerce(o), self)
    def __lshift__(self, o: Any) -> Bin: return Bin(BinOp.SHL, self, coerce(o))
    def __rshift__(self, o: Any) -> Bin: return Bin(BinOp.SHR, self, coerce(o))
    def __neg__(self) -> Un: return Un(UnOp.NEGATE, self)
    def __invert__(self) -> Un: return Un(UnOp.BITNOT, self)

    def __bool__(self) -> bool:
        raise TypeError(
            "a vyre Expr has no Python truth value. Fix: build the condition as an IR "
            "expression (e.g. Node.if_(a.lt(b), ...)) instead of using Python `if`/`and`/`or`.")


def _range_error(value: Any, typename: str, allowed: str) -> Any:
    from .errors import VyreError

    raise VyreError(f"literal {value!r} does not fit {typename}.",
                    f"use a value in {allowed}, or a literal of another type.")


def coerce(value: Any) -> Expr:
    """Turn a Python number into a literal; pass expressions through."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Expr.bool_(value)
    if isinstance(value, int):
        return Expr.u32(value) if value >= 0 else Expr.i32(value)
    if isinstance(value, float):
        return Expr.f32(value)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a vyre expression. "
                    "Fix: pass an Expr or a Python int/float/bool.")


@dataclass(frozen=True)
class Lit(Expr):
    """A literal; ``bits`` is its 32-bit word (i32 two's complement, f32 IEEE bits)."""

    dtype: DataType
    bits: int

    @property
    def value(self) -> int | float | bool:
        if self.dtype is DataType.U32:
            return self.bits
        if self.dtype is DataType.I32:
            return self.bits - (1 << 32) if self.bits & 0x80000000 else self.bits
        if self.dtype is DataType.F32:
            return bits_f32(self.bits)
        return bool(self.bits)


@dataclass(frozen=True)
class Subgroup(Expr):
    op: SubgroupOp
    value: Expr | None
    lane: Expr | None


@dataclass(frozen=True)
class Spec(Expr):
    """A specialization constant (name, type, default bits)."""

    name: str
    dtype: DataType
    bits: int


@dataclass(frozen=True)
class Var(Expr):
    name: str


@dataclass(frozen=True)
class Load(Expr):
    buffer: str
    index: Expr


@dataclass(frozen=True)
class BufLen(Expr):
    """Element count of a buffer (runtime-sized buffers: from the bound bytes)."""

    buffer: str


@dataclass(frozen=True)
class Id(Expr):
    kind: Builtin
    axis: int


@dataclass(frozen=True)
class Bin(Expr):
    op: BinOp
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Un(Expr):
    op: UnOp
    operand: Expr


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    if_true: Expr
    if_false: Expr


@dataclass(frozen=True)
class Cast(Expr):
    dtype: DataType
    value: Expr


@dataclass(frozen=True)
class Bitcast(Expr):
    dtype: DataType
    value: Expr


@dataclass(frozen=True)
class Fma(Expr):
    a: Expr
    b: Expr
    c: Expr


@dataclass(frozen=True)
class Atomic(Expr):
    op: AtomicOp
    buffer: str
    index: Expr
    value: Expr
    expected: Expr | None = None


def _install_helpers() -> None:
    """One named helper per operator: ``Expr.add(a, b)`` == ``a.add(b)`` == ``Bin(ADD, a, b)``."""
    keywords = {"and": "and_", "or": "or_"}
    for op in BinOp:
        name = keywords.get(op.value, op.value)

        def binary(self: Any, other: Any, _op: BinOp = op) -> Bin:
            return Bin(_op, coerce(self), coerce(other))

        binary.__name__ = name
        binary.__doc__ = f"``Bin(BinOp.{op.name}, self, other)``"
        setattr(Expr, name, binary)
    for uop in UnOp:

        def unary(self: Any, _op: UnOp = uop) -> Un:
            return Un(_op, coerce(self))

        unary.__name__ = uop.value
        unary.__doc__ = f"``Un(UnOp.{uop.name}, self)``"
        setattr(Expr, uop.value, unary)
    Expr.not_ = Expr.logical_not  # type: ignore[attr-defined]


_install_helpers()


def children(expr: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions, in evaluation order."""
    if isinstance(expr, Load):
        return (expr.index,)
    if isinstance(expr, Bin):
        return (expr.left, expr.right)
    if isinstance(expr, Un):
        return (expr.operand,)
    if isinstance(expr, Select):
        return (expr.cond, expr.if_true, expr.if_false)
    if isinstance(expr, Cast | Bitcast):
        return (expr.value,)
    if isinstance(expr, Fma):
        return (expr.a, expr.b, expr.c)
    if isinstance(expr, Atomic):
        return (expr.index, expr.value) + (() if expr.expected is None else (expr.expected,))
    if isinstance(expr, Subgroup):
        return tuple(x for x in (expr.value, expr.lane) if x is not None)
    return ()


def walk(expr: Expr):
    """Pre-order traversal of an expression tree."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(reversed(children(e)))
