"""vyre.ir — the foundation: types, expressions, statements, programs, validation,
canonical form, wire encoding and fingerprints. Imports nothing else of vyre."""

from . import expr, kinds, node, wire  # kinds fills the structural tables of expr and node
from .canonical import canonicalize
from .errors import ExecutionError, ValidationError, VyreError, WireError
from .expr import *  # noqa: F403  (Expr and every expression kind: expr.__all__)
from .fingerprint import fingerprint
from .launch import Launch, resolve
from .node import *  # noqa: F403  (Node and every statement kind: node.__all__)
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
    "CODES", "AtomicOp", "BinOp", "BufferAccess", "BufferDecl", "Builtin", "DataType", "Diagnostic",
    "ExecutionError", "Function", "Launch", "MemoryOrdering", "OpId", "Program", "SubgroupOp",
    "UnOp", "ValidationError", "VyreError", "WireError", "all_op_ids", "canonicalize", "check",
    "fingerprint", "program_ops", "resolve", "spec_constants", "kinds", "specialize", "validate",
    "wire",
]
__all__ += expr.__all__ + node.__all__   # the kinds, from their own modules
