"""Closed sets of the IR: data types, operators, memory orderings, buffer access modes.

Every element is stored little-endian at its own size (`DataType.size`); `BOOL` is a 32-bit
word whose non-zero value reads as true.
"""

from __future__ import annotations

import enum

import numpy as np


class _Closed(enum.Enum):
    """An enum whose members hash by identity: they are singletons compared by identity
    anyway, and Enum's own hash (of the member's name, in Python) dominated lowering."""

    __hash__ = object.__hash__


class DataType(_Closed):
    """Element and value types.

    * 32-bit words: BOOL (non-zero reads as true), U32, I32, F32.
    * 64-bit integers: U64, I64 (two's complement, wrap-around).
    * 16-bit floats: F16 (IEEE binary16) and BF16 (bfloat16). Values are held as their 16
      bits; arithmetic widens exactly to f32, applies the f32 rule and rounds once (see
      docs/semantics.md, "f16 and bf16").
    * Storage-only integers: U8, I8, U16, I16. Buffers and local arrays may hold them; a load
      widens to U32 (unsigned) or I32 (signed, sign-extended) and a store keeps the low bits.
    """

    BOOL = "bool"
    U32 = "u32"
    I32 = "i32"
    F32 = "f32"
    U64 = "u64"
    I64 = "i64"
    U8 = "u8"
    I8 = "i8"
    U16 = "u16"
    I16 = "i16"
    F16 = "f16"
    BF16 = "bf16"

    @property
    def size(self) -> int:
        """Bytes per element in a buffer."""
        return _SIZE[self]

    @property
    def bits(self) -> int:
        return 8 * _SIZE[self]

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of values of this type in the reference (BOOL: numpy bools;
        F16/BF16: their 16 bits as uint16; storage-only types: their storage)."""
        return _NUMPY[self]

    @property
    def host(self) -> np.dtype:
        """The numpy dtype a host array of this buffer type has (F16: float16; BF16 and
        BOOL: their raw unsigned words)."""
        return _HOST[self]

    @property
    def storage(self) -> np.dtype:
        """The unsigned numpy dtype of one stored element."""
        return _STORAGE[_SIZE[self]]

    @property
    def value_type(self) -> DataType:
        """The type a load of this element type yields (storage-only types widen)."""
        return _WIDEN.get(self, self)

    @property
    def storage_only(self) -> bool:
        return self in _WIDEN

    @property
    def is_integer(self) -> bool:
        return self in _INTEGERS

    @property
    def is_signed(self) -> bool:
        return self in (DataType.I32, DataType.I64, DataType.I8, DataType.I16)

    @property
    def is_float(self) -> bool:
        return self in (DataType.F32, DataType.F16, DataType.BF16)

    @property
    def is_half(self) -> bool:
        """F16 or BF16: a 16-bit float computed through f32."""
        return self in (DataType.F16, DataType.BF16)

    @property
    def is_wide(self) -> bool:
        """U64 or I64."""
        return self in (DataType.U64, DataType.I64)


_SIZE = {DataType.BOOL: 4, DataType.U32: 4, DataType.I32: 4, DataType.F32: 4, DataType.U64: 8,
         DataType.I64: 8, DataType.U8: 1, DataType.I8: 1, DataType.U16: 2, DataType.I16: 2,
         DataType.F16: 2, DataType.BF16: 2}
_STORAGE = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_WIDEN = {DataType.U8: DataType.U32, DataType.U16: DataType.U32, DataType.I8: DataType.I32,
          DataType.I16: DataType.I32}
_INTEGERS = frozenset({DataType.U32, DataType.I32, DataType.U64, DataType.I64, DataType.U8,
                       DataType.I8, DataType.U16, DataType.I16})
_NUMPY = {
    DataType.BOOL: np.dtype(np.bool_),
    DataType.U32: np.dtype(np.uint32),
    DataType.I32: np.dtype(np.int32),
    DataType.F32: np.dtype(np.float32),
    DataType.U64: np.dtype(np.uint64),
    DataType.I64: np.dtype(np.int64),
    DataType.U8: np.dtype(np.uint8),
    DataType.I8: np.dtype(np.int8),
    DataType.U16: np.dtype(np.uint16),
    DataType.I16: np.dtype(np.int16),
    DataType.F16: np.dtype(np.uint16),
    DataType.BF16: np.dtype(np.uint16),
}
_HOST = {**_NUMPY, DataType.BOOL: np.dtype(np.uint32), DataType.F16: np.dtype(np.float16)}
VALUE_TYPES = frozenset({DataType.BOOL, DataType.U32, DataType.I32, DataType.F32, DataType.U64,
                         DataType.I64, DataType.F16, DataType.BF16})


class BufferAccess(_Closed):
    """How a buffer is bound. READ: input only; READ_WRITE: input and output; OUTPUT:
    output only (starts zeroed); WORKGROUP: per-workgroup scratch (starts zeroed); LOCAL: a
    fixed-size array private to each invocation (starts zeroed in every phase)."""

    READ = "read"
    READ_WRITE = "read_write"
    OUTPUT = "output"
    WORKGROUP = "workgroup"
    LOCAL = "local"


class MemoryOrdering(_Closed):
    """Barrier scope: SEQ_CST is a workgroup barrier; GRID_SYNC a grid-wide phase split."""

    SEQ_CST = "seq_cst"
    GRID_SYNC = "grid_sync"


class BinOp(_Closed):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    BITAND = "bitand"
    BITOR = "bitor"
    BITXOR = "bitxor"
    SHL = "shl"
    SHR = "shr"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    GT = "gt"
    LE = "le"
    GE = "ge"
    AND = "and"
    OR = "or"
    MIN = "min"
    MAX = "max"
    ABS_DIFF = "abs_diff"
    SATURATING_ADD = "saturating_add"
    SATURATING_SUB = "saturating_sub"
    SATURATING_MUL = "saturating_mul"
    ROTATE_LEFT = "rotate_left"
    ROTATE_RIGHT = "rotate_right"
    MUL_HIGH = "mul_high"
    HYPOT = "hypot"              # appended: wire op ids of the others stay
    POW = "pow"                  # appended too
    ATAN2 = "atan2"              # appended too: atan2(left = y, right = x)


class UnOp(_Closed):
    NEGATE = "negate"
    BITNOT = "bitnot"
    LOGICAL_NOT = "logical_not"
    POPCOUNT = "popcount"
    CLZ = "clz"
    CTZ = "ctz"
    REVERSE_BITS = "reverse_bits"
    ABS = "abs"
    SQRT = "sqrt"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    TRUNC = "trunc"
    SIGN = "sign"
    IS_NAN = "is_nan"
    IS_INF = "is_inf"
    IS_FINITE = "is_finite"
    RECIPROCAL = "reciprocal"
    EXP = "exp"
    LOG = "log"
    EXP2 = "exp2"
    LOG2 = "log2"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    TANH = "tanh"
    BYTE_SWAP = "byte_swap"
    # correctly rounded f32 functions added later (appended: wire op ids of the others stay)
    SINH = "sinh"
    COSH = "cosh"
    EXPM1 = "expm1"
    LOG1P = "log1p"
    ATAN = "atan"
    ASIN = "asin"
    ACOS = "acos"
    CBRT = "cbrt"
    ERF = "erf"


class AtomicOp(_Closed):
    ADD = "add"
    OR = "or"
    AND = "and"
    XOR = "xor"
    MIN = "min"
    MAX = "max"
    EXCHANGE = "exchange"
    COMPARE_EXCHANGE = "compare_exchange"


class Builtin(_Closed):
    """Invocation ids: global id, local id (within the workgroup), workgroup id."""

    GID = "gid"
    LID = "lid"
    WGID = "wgid"


COMPARISONS = frozenset({BinOp.EQ, BinOp.NE, BinOp.LT, BinOp.GT, BinOp.LE, BinOp.GE})
LOGICAL = frozenset({BinOp.AND, BinOp.OR})
SHIFTS = frozenset({BinOp.SHL, BinOp.SHR, BinOp.ROTATE_LEFT, BinOp.ROTATE_RIGHT})
INT_ONLY_BIN = frozenset({BinOp.BITAND, BinOp.BITOR, BinOp.BITXOR, BinOp.SATURATING_ADD,
                          BinOp.SATURATING_SUB, BinOp.SATURATING_MUL, BinOp.MUL_HIGH}) | SHIFTS
# Operand order does not matter for these (used by canonicalisation).
COMMUTATIVE = frozenset({BinOp.ADD, BinOp.MUL, BinOp.BITAND, BinOp.BITOR, BinOp.BITXOR, BinOp.EQ,
                         BinOp.NE, BinOp.AND, BinOp.OR, BinOp.MIN, BinOp.MAX, BinOp.ABS_DIFF,
                         BinOp.SATURATING_ADD, BinOp.SATURATING_MUL, BinOp.MUL_HIGH})
INT_ONLY_UN = frozenset({UnOp.BITNOT, UnOp.POPCOUNT, UnOp.CLZ, UnOp.CTZ, UnOp.REVERSE_BITS,
                         UnOp.BYTE_SWAP})
FLOAT_ONLY_UN = frozenset({UnOp.SQRT, UnOp.FLOOR, UnOp.CEIL, UnOp.ROUND, UnOp.TRUNC, UnOp.IS_NAN,
                           UnOp.IS_INF, UnOp.IS_FINITE, UnOp.RECIPROCAL})
# the correctly rounded f32 functions (docs/semantics.md S13): the one list every layer reads
TRANSCENDENTAL = frozenset({UnOp.EXP, UnOp.LOG, UnOp.EXP2, UnOp.LOG2, UnOp.SIN, UnOp.COS,
                            UnOp.TAN, UnOp.TANH, UnOp.SINH, UnOp.COSH, UnOp.EXPM1, UnOp.LOG1P,
                            UnOp.ATAN, UnOp.ASIN, UnOp.ACOS, UnOp.CBRT, UnOp.ERF, BinOp.HYPOT,
                            BinOp.POW, BinOp.ATAN2})
FLOAT_ONLY_BIN = frozenset({BinOp.HYPOT, BinOp.POW, BinOp.ATAN2})
FLOAT_PREDICATES = frozenset({UnOp.IS_NAN, UnOp.IS_INF, UnOp.IS_FINITE})


class SubgroupOp(_Closed):
    """Operations across the invocations of one subgroup (consecutive lanes of a workgroup,
    `subgroup_size` wide). Reductions are integer-only so their result cannot depend on the
    order hardware combines lanes in."""

    REDUCE_ADD = "reduce_add"
    REDUCE_MIN = "reduce_min"
    REDUCE_MAX = "reduce_max"
    REDUCE_AND = "reduce_and"
    REDUCE_OR = "reduce_or"
    REDUCE_XOR = "reduce_xor"
    SHUFFLE = "shuffle"
    BALLOT = "ballot"
    LOCAL_ID = "local_id"
    SIZE = "size"


SUBGROUP_REDUCTIONS = frozenset({SubgroupOp.REDUCE_ADD, SubgroupOp.REDUCE_MIN, SubgroupOp.REDUCE_MAX,
                                 SubgroupOp.REDUCE_AND, SubgroupOp.REDUCE_OR, SubgroupOp.REDUCE_XOR})
