"""Launch geometry: element counts of every buffer and the workgroup grid of a dispatch.

This is the "grid" row of docs/semantics.md, in one place for the reference and every
driver: default n = the largest element count among outputs; when the program has atomics
or workgroup buffers, or no outputs, the largest among all non-workgroup buffers; 1-D over x
with ceil(n / wg_x) workgroups. ``dispatch_elements`` replaces n, ``dispatch_grid`` gives
invocations per axis and ``grid_override`` gives workgroups per axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ExecutionError
from .program import Program

MAX_WORKGROUPS_PER_AXIS = 2**31 - 1


@dataclass(frozen=True)
class Launch:
    counts: tuple[tuple[str, int], ...]
    grid: tuple[int, int, int]

    def count(self, name: str) -> int:
        for n, c in self.counts:
            if n == name:
                return c
        raise KeyError(name)

    @property
    def workgroups(self) -> int:
        x, y, z = self.grid
        return x * y * z


def uses_atomics(program: Program) -> bool:
    """Whether any expression is an atomic (it sizes every launch). A program loaded from
    the artifact cache carries the answer recorded with its kernel (``_vyre_atomics``), so a
    disk hit never walks the IR."""
    hit = program.__dict__.get("_vyre_atomics")
    return program.facts.atomics if hit is None else hit


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def input_nbytes(value: Any) -> int:
    """Byte length of a bytes-like input (bytes, memoryview, numpy array, buffer object)."""
    nbytes = getattr(value, "nbytes", None)
    if nbytes is not None:
        return int(nbytes)
    return len(memoryview(value).cast("B"))


def element_counts(program: Program, nbytes: Sequence[int],
                   dispatch_elements: int | None = None) -> dict[str, int]:
    ins = program.inputs
    if len(nbytes) != len(ins):
        raise ExecutionError(
            "inputs", f"program takes {len(ins)} input buffer(s) "
            f"({', '.join(b.name for b in ins) or 'none'}) but {len(nbytes)} were given.",
            "pass one bytes-like value per READ/READ_WRITE buffer, in declaration order.")
    counts: dict[str, int] = {}
    runtime: list[int] = []
    for decl, size in zip(ins, nbytes):
        if size % decl.dtype.size:
            raise ExecutionError(
                "inputs", f"input {decl.name!r} has {size} bytes, not a multiple of "
                f"{decl.dtype.size} ({decl.dtype.value}).",
                f"pass whole {decl.dtype.value} elements (a length divisible by {decl.dtype.size}).")
        n = size // decl.dtype.size
        if decl.count and n != decl.count:
            raise ExecutionError(
                "inputs", f"input {decl.name!r} has {n} elements but is declared with {decl.count}.",
                f"pass exactly {decl.count * decl.dtype.size} bytes, or declare it runtime-sized "
                "with .with_count(0).")
        if n > 0xFFFFFFFF:
            raise ExecutionError("inputs", f"input {decl.name!r} has {n} elements (> 2**32-1).",
                                 "split the data into smaller dispatches.")
        if not decl.count:
            runtime.append(n)
        counts[decl.name] = n
    for decl in program.buffers:
        if decl.is_input or not decl.is_bound:
            continue
        if decl.count:
            counts[decl.name] = decl.count
        elif dispatch_elements is not None:
            counts[decl.name] = int(dispatch_elements)
        elif runtime:
            counts[decl.name] = max(runtime)
        else:
            raise ExecutionError(
                "inputs", f"output {decl.name!r} is runtime-sized but no input is.",
                "declare the output's count (BufferDecl.output(..., count=n)) or pass "
                "DispatchConfig(dispatch_elements=n).")
    return counts


def effective_program(program: Program, config: Any) -> Program:
    """Apply ``config.specialization`` (named constants become literals) and
    ``config.workgroup_override`` (it changes lid/wgid and workgroup sharing): both are part
    of what a dispatch means, for the reference and every driver alike."""
    from .specialize import specialize

    program = specialize(program, getattr(config, "specialization", None))
    wg = getattr(config, "workgroup_override", None)
    if wg is None or tuple(wg) == program.workgroup_size:
        return program
    return Program(program.buffers, tuple(int(v) for v in wg), program.body, program.functions)  # type: ignore[arg-type]


def resolve(program: Program, nbytes: Sequence[int], config: Any = None) -> Launch:
    """Element counts + workgroup grid for ``program`` with inputs of ``nbytes`` bytes.

    ``config`` is a DispatchConfig or any object with optional attributes
    ``dispatch_elements``, ``dispatch_grid`` and ``grid_override``.
    """
    dispatch_elements = getattr(config, "dispatch_elements", None)
    dispatch_grid = getattr(config, "dispatch_grid", None)
    grid_override = getattr(config, "grid_override", None)
    counts = element_counts(program, nbytes, dispatch_elements)
    wx, wy, wz = program.workgroup_size
    if grid_override is not None:
        grid = tuple(int(v) for v in grid_override)
    elif dispatch_grid is not None:
        gx, gy, gz = (int(v) for v in dispatch_grid)
        grid = (_ceil(gx, wx), _ceil(gy, wy), _ceil(gz, wz))
    else:
        if dispatch_elements is not None:
            n = int(dispatch_elements)
        else:
            wide = not program.outputs or bool(program.workgroup_buffers) or uses_atomics(program)
            pool = [b for b in program.buffers if b.is_bound] if wide else program.outputs
            n = max((counts[b.name] for b in pool), default=0)
        grid = (_ceil(n, wx), 1, 1)
    if len(grid) != 3 or any(g < 0 or g > MAX_WORKGROUPS_PER_AXIS for g in grid):
        raise ExecutionError("inputs", f"grid {grid} is outside 0..2**31-1 workgroups per axis.",
                             "pass a grid_override/dispatch_grid of three non-negative sizes "
                             "within the limit.")
    return Launch(tuple(sorted(counts.items())), grid)  # type: ignore[arg-type]
