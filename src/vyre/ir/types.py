"""Closed sets of the IR: data types, operators, memory orderings, buffer access modes.

Every 32-bit type is stored as one little-endian 32-bit word; `BOOL` is a word whose
non-zero value reads as true.
"""

from __future__ import annotations

import enum

import numpy as np


class DataType(enum.Enum):
    """Element types. Wave 1: BOOL, U32, I32, F32 (all one 32-bit word)."""

    BOOL = "bool"
    U32 = "u32"
    I32 = "i32"
    F32 = "f32"

    @property
    def size(self) -> int:
        """Bytes per element in a buffer."""
        return 4

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype used for values of this type (BOOL values are numpy bools)."""
        return _NUMPY[self]

    @property
    def is_integer(self) -> bool:
        return self in (DataType.U32, DataType.I32)

    @property
    def is_float(self) -> bool:
        return self is DataType.F32


_NUMPY = {
    DataType.BOOL: np.dtype(np.bool_),
    DataType.U32: np.dtype(np.uint32),
    DataType.I32: np.dtype(np.int32),
    DataType.F32: np.dtype(np.float32),
}


class BufferAccess(enum.Enum):
    """How a buffer is bound. READ: input only; READ_WRITE: input and output; OUTPUT:
    output only (starts zeroed); WORKGROUP: per-workgroup scratch (starts zeroed)."""

    READ = "read"
    READ_WRITE = "read_write"
    OUTPUT = "output"
    WORKGROUP = "workgroup"


class MemoryOrdering(enum.Enum):
    """Barrier scope: SEQ_CST is a workgroup barrier; GRID_SYNC a grid-wide phase split."""

    SEQ_CST = "seq_cst"
    GRID_SYNC = "grid_sync"


class BinOp(enum.Enum):
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


class UnOp(enum.Enum):
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


class AtomicOp(enum.Enum):
    ADD = "add"
    OR = "or"
    AND = "and"
    XOR = "xor"
    MIN = "min"
    MAX = "max"
    EXCHANGE = "exchange"
    COMPARE_EXCHANGE = "compare_exchange"


class Builtin(enum.Enum):
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
INT_ONLY_UN = frozenset({UnOp.BITNOT, UnOp.POPCOUNT, UnOp.CLZ, UnOp.CTZ, UnOp.REVERSE_BITS})
FLOAT_ONLY_UN = frozenset({UnOp.SQRT, UnOp.FLOOR, UnOp.CEIL, UnOp.ROUND, UnOp.TRUNC, UnOp.IS_NAN,
                           UnOp.IS_INF, UnOp.IS_FINITE, UnOp.RECIPROCAL})
TRANSCENDENTAL = frozenset({UnOp.EXP, UnOp.LOG, UnOp.EXP2, UnOp.LOG2, UnOp.SIN, UnOp.COS,
                            UnOp.TAN, UnOp.TANH})
FLOAT_PREDICATES = frozenset({UnOp.IS_NAN, UnOp.IS_INF, UnOp.IS_FINITE})


class SubgroupOp(enum.Enum):
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
