"""vyre.ir — the foundation: types, expressions, statements, programs, validation,
canonical form, wire encoding and fingerprints. Imports nothing else of vyre."""

from . import wire
from .canonical import canonicalize
from .errors import ExecutionError, ValidationError, VyreError, WireError
from .expr import (
    Atomic,
    Bin,
    Bitcast,
    BufLen,
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
)
from .fingerprint import fingerprint
from .launch import Launch, resolve
from .node import Assign, Barrier, Block, Eval, If, Let, Loop, Node, Region, Return, Store
from .ops import OpId, all_op_ids, program_ops
from .program import BufferDecl, Program
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
    "BufLen", "BufferAccess", "BufferDecl", "Builtin", "Cast", "DataType", "Diagnostic", "Eval",
    "ExecutionError", "Expr", "Fma", "Id", "If", "Launch", "Let", "Lit", "Load", "Loop",
    "MemoryOrdering", "Node", "OpId", "Program", "Region", "Return", "Select", "Spec", "Store", "Subgroup", "SubgroupOp", "Un",
    "UnOp", "ValidationError", "Var", "VyreError", "WireError", "all_op_ids", "canonicalize",
    "check", "fingerprint", "program_ops", "resolve", "spec_constants", "specialize", "validate", "wire",
]
