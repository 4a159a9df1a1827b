"""vyre.kernel — write kernels as Python functions.

    import numpy as np
    import vyre
    from vyre.kernel import In, Out, f32, gid

    @vyre.kernel
    def saxpy(x: In[f32], y: In[f32], out: Out[f32]):
        i = gid()
        out[i] = 2.5 * x[i] + y[i]

    out = saxpy(np.ones(1000, np.float32), np.arange(1000, dtype=np.float32))

The function's source is compiled to a `vyre.ir.Program` (`vyre.kernel.frontend`; no
tracing: ``if``/``for``/``while`` on device values become device control flow), once per
kernel, and runs on the preferred backend with the same bytes as everywhere else. See
`Kernel.__call__` for launching and `vyre.kernel.intrinsics` for the device functions.
The IR builders (`vyre.ir`) remain the low-level API: ``saxpy.program`` is the Program.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from vyre.driver.errors import BackendError
from vyre.ir import Program

from . import intrinsics
from .errors import CODES, KernelError, called_on_host, located
from .frontend import Built, build_program, capture
from .intrinsics import (
    acos,
    asin,
    atan,
    atan2,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_exchange,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_xor,
    barrier,
    bitcast,
    byte_swap,
    cbrt,
    ceil,
    clz,
    cos,
    cosh,
    ctz,
    erf,
    exp,
    exp2,
    expm1,
    floor,
    fma,
    gid,
    grid_sync,
    hypot,
    isinf,
    isnan,
    lid,
    local,
    log,
    log1p,
    log2,
    mul_high,
    popcount,
    reverse_bits,
    rotl,
    rotr,
    sat_add,
    sat_sub,
    select,
    shared,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    wgid,
)
from .intrinsics import (
    pow as pow,
)
from .launch import call, check_workgroup, resolve_backend
from .types import (
    In,
    InOut,
    Out,
    Scalar,
    bf16,
    bool_,
    f16,
    f32,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)

DEFAULT_MAX_ITERATIONS = 1 << 20
_log = logging.getLogger("vyre.kernel")


class Kernel:
    """A compiled-on-first-use kernel. Call it like the function (In/InOut/Scalar arguments
    in order; Out buffers come back), index it with a grid (``k[(blocks,)](...)``), or read
    ``.program`` for the IR and ``.source(backend)`` for the generated code."""

    __name__: str   # the function's (functools.update_wrapper)

    def __init__(self, fn: Callable, workgroup_size: Any = 256,
                 max_iterations: int = DEFAULT_MAX_ITERATIONS) -> None:
        cap = capture(fn)            # the source as it is now (a later edit does not change it)
        if cap.error is not None:
            raise cap.error
        self._where = cap.where()
        self.workgroup_size = check_workgroup(workgroup_size, self._where)
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            raise KernelError(f"max_iterations={max_iterations!r} is not a positive integer.",
                              "pass max_iterations=n (the cap on every while loop).", "K021", self._where)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.max_iterations = max_iterations
        self._built: Built | None = None
        self._lock = threading.Lock()

    def _build(self) -> Built:
        with self._lock:
            if self._built is None:
                start = time.perf_counter()
                self._built = build_program(self.fn, self.workgroup_size, self.max_iterations)
                _log.debug("vyre.kernel: compiled %s to IR in %.1f ms", self.__name__,
                          (time.perf_counter() - start) * 1e3)
            return self._built

    @property
    def program(self) -> Program:
        """The kernel as a `vyre.ir.Program` (built once)."""
        return self._build().program

    def source(self, backend: Any = None) -> str:
        """The code ``backend`` (an id or backend object; default: the one a call would use)
        generates for this kernel: CUDA C, OpenCL C or WGSL; for the reference (and any
        backend that generates no code), ``str(program)``: the IR as short indented text."""
        built = self._build()
        try:
            b = resolve_backend(backend, built.program, built.where)
            text = b.generated_source(built.program)
        except BackendError as err:
            raise located(err, built.where).with_traceback(err.__traceback__) from err.__cause__
        return text if text is not None else str(built.program)

    def __call__(self, *args: Any, out: Any = None, grid: Any = None, elements: Any = None,
                 backend: Any = None, config: Any = None, dim: Any = None, shape: Any = None) -> Any:
        """Run the kernel. ``backend``: an id or backend object (default: the first backend by
        precedence that can run it; ``VYRE_BACKEND`` overrides); ``grid``: workgroups per
        axis; ``dim``: invocations per axis (the grid is derived); ``elements``: the count of
        runtime-sized outputs; ``shape``: the shape of runtime-sized N-D outputs; ``config``: a
        DispatchConfig; ``out``: arrays to write the outputs into. Returns writable numpy
        arrays shaped like their inputs (N-D outputs: their N-D shape)."""
        built = self._built   # built once; read without the lock afterwards
        return call(built if built is not None else self._build(), self.__name__, args, out=out, grid=grid,
                    elements=elements, backend=backend, config=config, dim=dim, shape=shape)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.__call__, grid=grid)

    def __repr__(self) -> str:
        state = "built" if self._built is not None else "not yet built"
        return f"<vyre.kernel {self.__name__} workgroup={self.workgroup_size} ({state})>"


class DeviceFunction:
    """A ``@vyre.func``: callable from kernels (and other device functions) only."""

    __name__: str   # the function's (functools.update_wrapper)

    def __init__(self, fn: Callable) -> None:
        cap = capture(fn)            # the source as it is now
        if cap.error is not None:
            raise cap.error
        functools.update_wrapper(self, fn)
        self.__vyre_func__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise called_on_host(f"{self.__name__}, a @vyre.func,", "call it from a @vyre.kernel or @vyre.func "
                             "body; to compute on the host use numpy.")

    def __repr__(self) -> str:
        return f"<vyre.func {self.__name__}>"


def kernel(fn: Callable | None = None, *, workgroup_size: int | tuple[int, ...] = 256,
           max_iterations: int = DEFAULT_MAX_ITERATIONS) -> Any:
    """Decorator: ``@vyre.kernel`` or ``@vyre.kernel(workgroup_size=64)``. ``max_iterations``
    caps every ``while`` loop (exceeding it fails the dispatch with a clear error)."""
    if fn is None:
        return lambda f: Kernel(f, workgroup_size, max_iterations)
    if not callable(fn):
        raise KernelError(f"@vyre.kernel decorates a function, not {fn!r}.",
                          "write @vyre.kernel or @vyre.kernel(workgroup_size=64) above a def.", "K021")
    return Kernel(fn, workgroup_size, max_iterations)


def func(fn: Callable) -> DeviceFunction:
    """Decorator: a device function kernels can call (parameters annotated with value types
    or buffer types; one ``return value`` at the end, or none: then it is called as a
    statement)."""
    return DeviceFunction(fn)


__all__ = ["CODES", "DeviceFunction", "In", "InOut", "Kernel", "KernelError", "Out", "Scalar", "atomic_add",
           "atomic_and", "atomic_cas", "atomic_exchange", "atomic_max", "atomic_min", "atomic_or",
           "atomic_xor", "barrier", "bf16", "bitcast", "bool_", "byte_swap", "ceil", "clz", "cos", "ctz",
           "exp", "exp2", "f16", "f32", "floor", "fma", "func", "gid", "grid_sync", "i8", "i16", "i32",
           "i64", "intrinsics", "isinf", "isnan", "kernel", "lid", "local", "log", "log2", "mul_high",
           "popcount", "reverse_bits", "rotl", "rotr", "sat_add", "sat_sub", "select", "shared", "sin",
           "sqrt", "tan", "tanh", "trunc", "u8", "u16", "u32", "u64", "wgid",
           "sinh", "cosh", "expm1", "log1p", "atan", "asin", "acos", "cbrt", "erf", "hypot", "atan2"]
# vyre.kernel.pow is left out of __all__: `from vyre.kernel import *` keeps Python's own pow,
# which kernels accept too (pow(a, b) and a ** b are the same correctly rounded POW)


class _CallableModule(type(functools)):  # type: ignore[misc]
    """``vyre.kernel`` is both this module and the decorator: ``@vyre.kernel`` works."""

    def __call__(self, fn: Callable | None = None, **options: Any) -> Any:
        return kernel(fn, **options)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _CallableModule
