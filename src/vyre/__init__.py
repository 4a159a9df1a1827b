"""vyre — portable GPU compute from Python.

One IR (`vyre.ir`), a CPU reference interpreter that defines the bytes (`vyre.reference`),
a substrate-neutral driver layer (`vyre.driver`) and concrete drivers (`vyre.drivers.*`) that
reproduce the reference byte for byte.

``import vyre`` loads only the IR; every other submodule (``vyre.driver``, ``vyre.reference``,
``vyre.conform``, ...) is imported on first attribute access, and no vendor module (pyopencl,
cuda) is imported until its backend is acquired.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import ir
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

if TYPE_CHECKING:   # `@vyre.kernel` / `@vyre.func` are decorators to a type checker (the module is callable)
    def kernel(fn: Any = None, **options: Any) -> Any: ...
    def func(fn: Any) -> Any: ...

def _version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vyre")
    except PackageNotFoundError:   # vyre on sys.path without being installed
        return "0+unknown"


__version__ = _version()

_LAZY = ("conform", "driver", "drivers", "examples", "kernel", "lib", "lower", "reference", "cli")
# the kernel frontend's names, at the top level: @vyre.kernel, @vyre.func, vyre.In[vyre.f32], ...
_KERNEL_NAMES = ("func", "In", "Out", "InOut", "Scalar", "gid", "lid", "wgid", "barrier", "u8", "i8",
                 "u16", "i16", "u32", "i32", "u64", "i64", "f16", "bf16", "f32", "bool_")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    if name in _KERNEL_NAMES:
        return getattr(importlib.import_module(f"{__name__}.kernel"), name)
    raise AttributeError(f"module 'vyre' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_KERNEL_NAMES))


__all__ = [
    "AtomicOp", "BinOp", "BufferDecl", "DataType", "Expr", "MemoryOrdering", "Node", "Program",
    "UnOp", "VyreError", "__version__", "fingerprint", "ir", "validate",
]
