"""Expressions of the IR: immutable, hashable trees with structural equality.

`Expr` is the base class and the builder namespace: ``Expr.u32(7)``, ``Expr.load("a", i)``,
``Expr.add(a, b)`` or ``a + b``, ``a.lt(b)``. Each concrete kind is a frozen dataclass below.
Comparisons are methods (``a.lt(b)``, ``a.eq(b)``): ``==`` stays structural equality so that
Programs can be compared and hashed.

Python numbers used as operands are *weak* (NEP 50): ``x + 1`` gives the ``1`` the type of
``x``. A `WeakLit` keeps the Python value until the Program is built, when `vyre.ir.weak`
gives it the type its context asks for (the other operand, the buffer stored to, the
variable assigned, the parameter passed); with no context an ``int`` becomes U32 (I32 when
negative, U64/I64 past 32 bits) and a ``float`` F32. ``bool`` is always BOOL; numpy scalars
keep their own type. Float literals are stored as canonical bits (f32: NaN -> 0x7FC00000,
subnormal -> signed zero), so the IR never holds a non-canonical float literal.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .errors import VyreError
from .limits import MAX_DEPTH, too_deep
from .types import AtomicOp, BinOp, Builtin, DataType, SubgroupOp, UnOp

# what `vyre.ir` exports from here: Expr and every expression kind (a new kind is added here)
__all__ = ["Atomic", "Bin", "Bitcast", "BufLen", "Call", "Cast", "Expr", "Fma", "Id", "Lit", "Load",
           "Select", "Spec", "Subgroup", "Un", "Var", "WeakLit"]

CANONICAL_NAN_BITS = 0x7FC00000
F16_NAN_BITS = 0x7E00
BF16_NAN_BITS = 0x7FC0


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
    """The f32 whose IEEE bits are ``bits``."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def canonical_f16_bits(bits: int) -> int:
    """Canonical f16: any NaN -> 0x7E00 (subnormals are kept: they are f32 normals)."""
    bits &= 0xFFFF
    return F16_NAN_BITS if (bits & 0x7C00) == 0x7C00 and bits & 0x03FF else bits


def canonical_bf16_bits(bits: int) -> int:
    """Canonical bf16: any NaN -> 0x7FC0, subnormal -> zero of the same sign (as f32)."""
    return canonical_f32_bits((bits & 0xFFFF) << 16) >> 16


def _round_float_bits(value: float, frac: int, bias: int, width: int) -> int:
    """``value`` rounded once, to nearest even, to an IEEE format with ``frac`` fraction
    bits and exponent ``bias`` (subnormals included; overflow -> inf)."""
    sign = (1 << (width - 1)) if math.copysign(1.0, value) < 0 else 0
    exp_all = (1 << (width - 1 - frac)) - 1
    if math.isnan(value):
        return (exp_all << frac) | (1 << (frac - 1))
    a = abs(value)
    if math.isinf(a):
        return sign | (exp_all << frac)
    if a == 0:
        return sign
    e = math.frexp(a)[1] - 1                      # a = 1.f * 2**e
    q_exp = max(e, 1 - bias) - frac               # the quantum at this exponent
    q = round(Fraction(a) / Fraction(2) ** q_exp)  # round half to even, exactly
    if q >= 1 << (frac + 1):                      # rounded up into the next binade
        q >>= 1
        q_exp += 1
    if q < 1 << frac:                             # subnormal (or zero)
        return sign | q
    biased = q_exp + frac + bias
    if biased >= exp_all:
        return sign | (exp_all << frac)
    return sign | (biased << frac) | (q - (1 << frac))


def f16_bits(value: float) -> int:
    """``value`` rounded once to IEEE binary16 (round to nearest even)."""
    return _round_float_bits(float(value), 10, 15, 16)


def bf16_bits(value: float) -> int:
    """``value`` rounded once to bfloat16 (round to nearest even)."""
    return _round_float_bits(float(value), 7, 127, 16)


def bits_f16(bits: int) -> float:
    """The value of the f16 whose bits are ``bits``."""
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def bits_bf16(bits: int) -> float:
    """The value of the bf16 whose bits are ``bits``."""
    return bits_f32((bits & 0xFFFF) << 16)


class OperandError(VyreError, TypeError):
    """A Python value that cannot be an IR operand (still a TypeError for callers that
    catch those)."""


class Expr:
    """Base of every expression kind, and the builder namespace."""

    __slots__ = ()
    # numpy scalars on the left of an operator defer to our reflected methods (which keep
    # their dtype) instead of converting the expression to an array
    __array_ufunc__ = None

    def __post_init__(self) -> None:
        # every node knows its height; trees over MAX_DEPTH are refused here, so no walk of
        # a Program can hit Python's recursion limit
        h = 1 + max((getattr(k, "_h", 1) for k in children(self)), default=0)
        if h > MAX_DEPTH:
            raise too_deep(h, "expression")
        object.__setattr__(self, "_h", h)
        # whether a WeakLit is inside (Programs resolve them when built)
        if isinstance(self, WeakLit) or any(getattr(k, "_w", False) for k in children(self)):
            object.__setattr__(self, "_w", True)

    @property
    def height(self) -> int:
        """Levels of this expression tree (a leaf is 1)."""
        return getattr(self, "_h", 1)

    # ---- literals and leaves -------------------------------------------------------
    @staticmethod
    def u32(value: int) -> Lit:
        """A u32 literal (``value`` must fit in 32 bits unsigned)."""
        return Lit(DataType.U32, int(value) & 0xFFFFFFFF) if 0 <= int(value) <= 0xFFFFFFFF \
            else _range_error(value, "u32", "0..4294967295")

    @staticmethod
    def i32(value: int) -> Lit:
        """An i32 literal (``value`` must fit in 32 bits signed)."""
        v = int(value)
        if not -(2**31) <= v < 2**31:
            _range_error(value, "i32", "-2147483648..2147483647")
        return Lit(DataType.I32, v & 0xFFFFFFFF)

    @staticmethod
    def u64(value: int) -> Lit:
        """A u64 literal."""
        v = int(value)
        if not 0 <= v < 2**64:
            _range_error(value, "u64", "0..2**64-1")
        return Lit(DataType.U64, v)

    @staticmethod
    def i64(value: int) -> Lit:
        """An i64 literal."""
        v = int(value)
        if not -(2**63) <= v < 2**63:
            _range_error(value, "i64", "-2**63..2**63-1")
        return Lit(DataType.I64, v & 0xFFFFFFFFFFFFFFFF)

    @staticmethod
    def f32(value: float) -> Lit:
        """An f32 literal, rounded to f32 (subnormals flush to a zero of their sign, S9)."""
        return Lit(DataType.F32, canonical_f32_bits(f32_bits(float(value))))

    @staticmethod
    def f16(value: float) -> Lit:
        """An IEEE binary16 literal (``value`` rounded once to nearest even)."""
        return Lit(DataType.F16, canonical_f16_bits(f16_bits(float(value))))

    @staticmethod
    def f16_from_bits(bits: int) -> Lit:
        """An f16 literal given by its 16 bits."""
        return Lit(DataType.F16, canonical_f16_bits(int(bits)))

    @staticmethod
    def bf16_from_bits(bits: int) -> Lit:
        """A bf16 literal given by its 16 bits."""
        return Lit(DataType.BF16, canonical_bf16_bits(int(bits)))

    @staticmethod
    def bf16(value: float) -> Lit:
        """A bfloat16 literal (``value`` rounded once to nearest even; subnormals flush)."""
        return Lit(DataType.BF16, canonical_bf16_bits(bf16_bits(float(value))))

    @staticmethod
    def lit(dtype: DataType, value: Any) -> Lit:
        """A literal of any value type from a Python number."""
        maker = _LITERALS.get(dtype)
        if maker is None:
            raise VyreError(f"there are no {getattr(dtype, 'value', dtype)} literals (a storage-only "
                            "or unknown type).", "use a u32/i32 literal: loads of u8/u16/i8/i16 "
                            "widen to u32/i32.")
        return maker(value)

    @staticmethod
    def f32_from_bits(bits: int) -> Lit:
        """An f32 literal given by its 32 bits."""
        return Lit(DataType.F32, canonical_f32_bits(int(bits)))

    @staticmethod
    def bool_(value: bool) -> Lit:
        """A bool literal."""
        return Lit(DataType.BOOL, 1 if value else 0)

    @staticmethod
    def call(function: str, *args: Any) -> Call:
        """Call a function the Program declares (`Function`); evaluates to its result."""
        return Call(function, tuple(coerce(a) for a in args))

    @staticmethod
    def var(name: str) -> Var:
        """The value of local ``name`` (bound by `Node.let_bind`, a loop or a parameter)."""
        return Var(name)

    @staticmethod
    def load(buffer: str, index: Any) -> Load:
        """Element ``index`` of buffer ``buffer`` (0 when out of bounds, S5)."""
        return Load(buffer, coerce(index))

    @staticmethod
    def buf_len(buffer: str) -> BufLen:
        """The element count of ``buffer`` in this dispatch (u32)."""
        return BufLen(buffer)

    @staticmethod
    def gid(axis: int = 0) -> Id:
        """This invocation's global id along ``axis`` (u32)."""
        return Id(Builtin.GID, axis)

    @staticmethod
    def lid(axis: int = 0) -> Id:
        """This invocation's id inside its workgroup along ``axis`` (u32)."""
        return Id(Builtin.LID, axis)

    @staticmethod
    def wgid(axis: int = 0) -> Id:
        """This invocation's workgroup id along ``axis`` (u32)."""
        return Id(Builtin.WGID, axis)

    @staticmethod
    def gid_x() -> Id:
        """`gid` along x."""
        return Id(Builtin.GID, 0)

    @staticmethod
    def gid_y() -> Id:
        """`gid` along y."""
        return Id(Builtin.GID, 1)

    @staticmethod
    def gid_z() -> Id:
        """`gid` along z."""
        return Id(Builtin.GID, 2)

    @staticmethod
    def lid_x() -> Id:
        """`lid` along x."""
        return Id(Builtin.LID, 0)

    @staticmethod
    def lid_y() -> Id:
        """`lid` along y."""
        return Id(Builtin.LID, 1)

    @staticmethod
    def lid_z() -> Id:
        """`lid` along z."""
        return Id(Builtin.LID, 2)

    @staticmethod
    def wgid_x() -> Id:
        """`wgid` along x."""
        return Id(Builtin.WGID, 0)

    @staticmethod
    def wgid_y() -> Id:
        """`wgid` along y."""
        return Id(Builtin.WGID, 1)

    @staticmethod
    def wgid_z() -> Id:
        """`wgid` along z."""
        return Id(Builtin.WGID, 2)

    @staticmethod
    def spec(name: str, dtype: DataType, default: Any) -> Spec:
        """A named specialization constant: ``default`` unless the dispatch config's
        ``specialization`` gives another value; drivers bake the value into their code."""
        return Spec(name, dtype, Expr.lit(dtype, default).bits)

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
        """This invocation's lane in its subgroup (backends with subgroup ops only)."""
        return Subgroup(SubgroupOp.LOCAL_ID, None, None)

    @staticmethod
    def subgroup_size() -> Subgroup:
        """Lanes per subgroup (backends with subgroup ops only)."""
        return Subgroup(SubgroupOp.SIZE, None, None)

    # ---- generic constructors -------------------------------------------------------
    @staticmethod
    def bin(op: BinOp, left: Any, right: Any) -> Bin:
        """The binary operation ``op`` (Python numbers are weak literals, NEP 50)."""
        return Bin(op, coerce(left), coerce(right))

    @staticmethod
    def un(op: UnOp, value: Any) -> Un:
        """The unary operation ``op``."""
        return Un(op, coerce(value))

    @staticmethod
    def select(cond: Any, if_true: Any, if_false: Any) -> Select:
        """``if_true`` where ``cond`` holds, else ``if_false`` (both are evaluated)."""
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
    def __rfloordiv__(self, o: Any) -> Bin: return Bin(BinOp.DIV, coerce(o), self)
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
    def __rlshift__(self, o: Any) -> Bin: return Bin(BinOp.SHL, coerce(o), self)
    def __rrshift__(self, o: Any) -> Bin: return Bin(BinOp.SHR, coerce(o), self)
    def __pos__(self) -> Expr: return self

    def __pow__(self, o: Any) -> Any:
        raise OperandError("vyre has no power operator.",
                           "multiply explicitly, or use exp2/log2 for floats.")

    __rpow__ = __pow__

    def __matmul__(self, o: Any) -> Any:
        raise OperandError("vyre expressions are scalars: `@` is not defined.",
                           "write the matrix product as a loop (see vyre.examples.matmul_tiled).")

    __rmatmul__ = __matmul__

    def __divmod__(self, o: Any) -> Any:
        raise OperandError("divmod() of a vyre expression is not defined.",
                           "use a // b and a % b.")

    __rdivmod__ = __divmod__

    def __abs__(self) -> Un: return Un(UnOp.ABS, self)
    def __neg__(self) -> Un: return Un(UnOp.NEGATE, self)
    def __invert__(self) -> Un: return Un(UnOp.BITNOT, self)

    def __bool__(self) -> bool:
        raise TypeError(
            "a vyre Expr has no Python truth value. Fix: build the condition as an IR "
            "expression (e.g. Node.if_(a.lt(b), ...)) instead of using Python `if`/`and`/`or`.")


def _range_error(value: Any, typename: str, allowed: str) -> Any:
    raise VyreError(f"literal {value!r} does not fit {typename}.",
                    f"use a value in {allowed}, or a literal of another type.")


_LITERALS: dict[DataType, Any] = {
    DataType.U32: Expr.u32, DataType.I32: Expr.i32, DataType.F32: Expr.f32,
    DataType.BOOL: Expr.bool_, DataType.U64: Expr.u64, DataType.I64: Expr.i64,
    DataType.F16: Expr.f16, DataType.BF16: Expr.bf16,
}


def default_literal(value: int | float) -> Lit:
    """The literal a weak Python number becomes where nothing gives it a type."""
    if isinstance(value, float):
        return Expr.f32(value)
    if value >= 0:
        return Expr.u32(value) if value <= 0xFFFFFFFF else Expr.u64(value)
    return Expr.i32(value) if value >= -(2**31) else Expr.i64(value)


def coerce(value: Any) -> Expr:
    """Turn a Python value into an operand: Exprs pass through, ``bool`` is a BOOL literal,
    ``int``/``float`` a weak literal, numpy scalars a literal of their own type."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Expr.bool_(value)
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            _range_error(value, "any vyre integer type", "-2**63..2**64-1")
        return WeakLit(value)
    if isinstance(value, float):
        return WeakLit(value)
    np_type = _numpy_literal(value)
    if np_type is not None:
        return np_type
    raise OperandError(f"cannot use a {type(value).__name__} ({value!r:.60}) as a vyre operand.",
                       "pass an Expr, a Python int/float/bool or a numpy scalar.")


def _numpy_literal(value: Any) -> Lit | None:
    import numpy as np

    if not isinstance(value, np.generic):
        return None
    for dtype in _LITERALS:
        if value.dtype == dtype.host and dtype is not DataType.BOOL:
            if dtype.is_float:
                return Expr.lit(dtype, float(value))
            return Expr.lit(dtype, int(value))
    if value.dtype == np.bool_:
        return Expr.bool_(bool(value))
    if value.dtype.kind in "ui" and value.dtype.itemsize < 4:  # widen like a load would
        return (Expr.i32 if value.dtype.kind == "i" else Expr.u32)(int(value))
    raise OperandError(f"numpy {value.dtype} scalars have no vyre type.",
                       "convert it (e.g. np.float32(x)) or pass a Python number.")


@dataclass(frozen=True)
class Lit(Expr):
    """A literal; ``bits`` is its bit pattern at its type's width (signed integers two's
    complement, floats IEEE bits)."""

    dtype: DataType
    bits: int

    @property
    def value(self) -> int | float | bool:
        """The literal as a Python value of its type."""
        t = self.dtype
        if t is DataType.BOOL:
            return bool(self.bits)
        if t is DataType.F32:
            return bits_f32(self.bits)
        if t is DataType.F16:
            return bits_f16(self.bits)
        if t is DataType.BF16:
            return bits_bf16(self.bits)
        if t.is_signed and self.bits >> (t.bits - 1):
            return self.bits - (1 << t.bits)
        return self.bits


@dataclass(frozen=True)
class WeakLit(Expr):
    """A Python number whose type its context decides when the Program is built (NEP 50
    weak scalar). Only `vyre.ir.weak` consumes these; a built Program holds none."""

    value: int | float


@dataclass(frozen=True)
class Call(Expr):
    """A call of one of the Program's functions, evaluating to its result."""

    function: str
    args: tuple[Expr, ...]


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


# children by exact type, one dict lookup per node on the walks every pass makes: filled from
# the one list of kinds (`vyre.ir.kinds`, imported first by `vyre.ir`)
_KIDS: dict[type, Any] = {}


def children(expr: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions, in evaluation order."""
    kids = _KIDS.get(type(expr))
    return () if kids is None else kids(expr)   # not an IR kind: the validator reports it


def walk(expr: Expr):
    """Pre-order traversal of an expression tree."""
    stack = [expr]
    get = _KIDS.get
    while stack:
        e = stack.pop()
        yield e
        kids = get(type(e))
        kids = () if kids is None else kids(e)
        if kids:
            stack.extend(reversed(kids))
