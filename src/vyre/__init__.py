"""vyre — portable GPU compute from Python.

One IR (`vyre.ir`), a CPU reference interpreter that defines the bytes (`vyre.reference`),
a substrate-neutral driver layer (`vyre.driver`) and concrete drivers (`vyre.drivers.*`) that
reproduce the reference byte for byte.
"""

from . import ir, reference
from .ir import (
    AtomicOp,
    BinOp,
    BufferDecl,
    DataType,
    Expr,
    MemoryOrdering,
    Node,
    Program,
    UnOp,
    VyreError,
    fingerprint,
    validate,
)

__version__ = "0.1.0"

__all__ = [
    "AtomicOp", "BinOp", "BufferDecl", "DataType", "Expr", "MemoryOrdering", "Node", "Program",
    "UnOp", "VyreError", "__version__", "fingerprint", "ir", "reference", "validate",
]
