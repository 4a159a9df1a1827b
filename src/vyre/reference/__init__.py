"""vyre.reference — the CPU reference interpreter: the meaning of every Program.

``run(program, inputs, config=None) -> list[bytes]`` validates the program, sizes the launch
(`vyre.ir.launch`), executes it (`interp.Machine`) and returns the output buffers in
declaration order. Any bad input raises a `VyreError` whose text ends in ``Fix: ...``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from cachetools import LRUCache, cached

from vyre.ir.errors import ExecutionError, ValidationError
from vyre.ir.fingerprint import identity
from vyre.ir.launch import effective_program, input_nbytes, resolve
from vyre.ir.program import Program
from vyre.ir.validate import validate

from .interp import (
    MAX_BATCH_LANES,
    MAX_BATCH_LOCAL_BYTES,
    MAX_LOOP_TRIPS,
    MAX_WORKGROUP_WORDS,
    Machine,
)

__all__ = ["MAX_BATCH_LANES", "MAX_LOOP_TRIPS", "MAX_WORKGROUP_WORDS", "execute", "run"]

_VALID: LRUCache[bytes, tuple] = LRUCache(1024)   # validation results by exact identity


@cached(_VALID, key=lambda fp, program: fp, lock=threading.Lock())
def _diagnostics(fp: bytes, program: Program) -> tuple:
    return tuple(validate(program))


def _check(program: Program) -> None:
    if not isinstance(program, Program):
        raise ExecutionError("inputs", f"expected a vyre Program, got {type(program).__name__}.",
                             "build one with vyre.ir.Program.wrapped(...).")
    try:
        fp = identity(program)
    except Exception:  # malformed: validate() reports why
        raise ValidationError(validate(program)) from None
    diags = _diagnostics(fp, program)
    if diags:
        raise ValidationError(list(diags))


def _raw_elements(value: Any, name: str, storage: np.dtype) -> np.ndarray:
    """The oracle's raw view: any contiguous bytes-like value as little-endian elements of
    ``storage``. (Typed checking of what callers pass is the driver layer's job:
    `vyre.driver.inputs`; sizes were checked by `vyre.ir.launch`.)"""
    try:
        raw = np.frombuffer(memoryview(np.ascontiguousarray(value) if isinstance(value, np.ndarray)
                                       else value).cast("B"), dtype=np.uint8)
    except (TypeError, ValueError) as exc:
        raise ExecutionError("inputs", f"{name} is not a contiguous bytes-like object ({exc}).",
                             "pass bytes, bytearray, a contiguous memoryview or a numpy array.") from None
    if raw.size % storage.itemsize:
        raise ExecutionError("inputs", f"{name} has {raw.size} bytes, not a multiple of "
                             f"{storage.itemsize}.", "pass whole elements.")
    return raw.view(storage.newbyteorder("<")).astype(storage)


def execute(program: Program, launch: Any, memory: dict[str, np.ndarray],
            should_stop: Callable[[], bool] | None = None, subgroup_size: int = 32) -> None:
    """Run a validated, specialized ``program`` over a resolved launch. ``memory`` maps every
    bound buffer to its elements (``DataType.storage`` dtype, ``launch`` counts long),
    updated in place."""
    facts = program.facts
    if program.invocations_per_workgroup % subgroup_size and facts.subgroup_ops:
        raise ExecutionError("inputs", f"workgroup of {program.invocations_per_workgroup} invocations "
                             f"is not a whole number of {subgroup_size}-wide subgroups.",
                             f"use a workgroup size that is a multiple of {subgroup_size}.")
    if facts.workgroup_bytes > 4 * MAX_WORKGROUP_WORDS:
        raise ExecutionError("limit", "workgroup memory over the reference's "
                             f"{MAX_WORKGROUP_WORDS * 4} bytes per workgroup.",
                             "use smaller workgroup buffers.")
    local = facts.local_bytes
    if local * program.invocations_per_workgroup > MAX_BATCH_LOCAL_BYTES:
        raise ExecutionError("limit", f"local arrays of {local} bytes per invocation over a "
                             f"workgroup of {program.invocations_per_workgroup} exceed the reference's "
                             f"{MAX_BATCH_LOCAL_BYTES} bytes.", "use smaller local arrays or workgroups.")
    Machine(program, launch, memory, should_stop, subgroup_size).run()


def run(program: Program, inputs: Sequence[Any], config: Any = None,
        should_stop: Callable[[], bool] | None = None, subgroup_size: int = 32) -> list[bytes]:
    """Execute ``program`` on ``inputs`` (one bytes-like per input buffer, declaration order).

    ``config``: a DispatchConfig (or any object with ``grid_override``, ``dispatch_grid``,
    ``dispatch_elements``, ``workgroup_override`` attributes) or None. ``should_stop`` is
    polled between statements; when it returns True the run aborts with ExecutionError.
    ``subgroup_size`` is the simulated subgroup width for subgroup operations.
    """
    _check(program)
    effective = effective_program(program, config)
    if effective is not program:  # a workgroup override can break barrier or subgroup rules
        _check(effective)
    program = effective
    inputs = list(inputs)
    sizes = []
    for i, value in enumerate(inputs):
        try:
            sizes.append(input_nbytes(value))
        except TypeError:
            raise ExecutionError("inputs", f"input {i} is a {type(value).__name__}, not bytes-like.",
                                 "pass bytes, bytearray, memoryview or numpy arrays.") from None
    launch = resolve(program, sizes, config)
    counts = dict(launch.counts)
    memory: dict[str, np.ndarray] = {}
    for decl, value in zip(program.inputs, inputs):
        memory[decl.name] = _raw_elements(value, f"input {decl.name!r}", decl.dtype.storage)
    for decl in program.buffers:
        if decl.access.value == "output":
            memory[decl.name] = np.zeros(counts[decl.name], dtype=decl.dtype.storage)
    execute(program, launch, memory, should_stop, subgroup_size)
    return [memory[b.name].astype(b.dtype.storage.newbyteorder("<")).tobytes() for b in program.outputs]
