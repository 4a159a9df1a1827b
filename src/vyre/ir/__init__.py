"""vyre.ir — the foundation: types, expressions, statements, programs, validation,
canonical form, wire encoding and fingerprints. Imports nothing else of vyre."""

from . import kinds, wire  # kinds first: it fills the structural tables of expr and node
from .canonical import canonicalize
from .errors import ExecutionError, ValidationError, VyreError, WireError
from .expr import (
    Atomic,
    Bin,
    Bitcast,
    BufLen,
    Call,
    Cast,
    Expr,
    Fma,
    Id,
    Lit,
    Load,
    Select,
    Spec,
    Subgroup,
    Un,
    Var,
    WeakLit,
)
from .fingerprint import fingerprint
from .launch import Launch, resolve
from .node import (
    Assign,
    Barrier,
    Block,
    Break,
    Continue,
    Eval,
    If,
    IndirectDispatch,
    Let,
    Loop,
    MatMulAcc,
    Node,
    Region,
    Return,
    Store,
    While,
)
from .ops import OpId, all_op_ids, program_ops
from .program import BufferDecl, Function, Program
from .specialize import spec_constants, specialize
from .types import (
    AtomicOp,
    BinOp,
    BufferAccess,
    Builtin,
    DataType,
    MemoryOrdering,
    SubgroupOp,
    UnOp,
)
from .validate import CODES, Diagnostic, check, validate

__all__ = [
    "CODES", "Assign", "Atomic", "AtomicOp", "Barrier", "Bin", "BinOp", "Bitcast", "Block",
    "Break", "BufLen", "BufferAccess", "BufferDecl", "Builtin", "Call", "Cast", "Continue",
    "DataType", "Diagnostic", "Eval", "ExecutionError", "Expr", "Fma", "Function", "Id", "If",
    "IndirectDispatch", "Launch", "Let", "Lit", "Load", "Loop", "MatMulAcc", "MemoryOrdering", "Node", "OpId",
    "Program", "Region", "Return", "Select", "Spec", "Store", "Subgroup", "SubgroupOp", "Un",
    "UnOp", "ValidationError", "Var", "VyreError", "WeakLit", "While", "WireError", "all_op_ids",
    "canonicalize", "check", "fingerprint", "program_ops", "resolve", "spec_constants",
    "kinds", "specialize", "validate", "wire",
]
