"""Backend-neutral binding plans: which buffer is bound where, in what role, with what
static size; plus input byte-length validation against the plan."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.ir.program import Program
from vyre.ir.types import BufferAccess, DataType

from .errors import InvalidProgram
from .program_walks import input_sizes


class BindingRole(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    INPUT_OUTPUT = "input_output"
    SHARED = "shared"          # workgroup memory: not bound, allocated per workgroup
    PERSISTENT = "persistent"  # a resident buffer held across dispatches


_ROLE = {BufferAccess.READ: BindingRole.INPUT, BufferAccess.OUTPUT: BindingRole.OUTPUT,
         BufferAccess.READ_WRITE: BindingRole.INPUT_OUTPUT, BufferAccess.WORKGROUP: BindingRole.SHARED}


@dataclass(frozen=True)
class BindingSlot:
    name: str
    binding: int | None
    role: BindingRole
    dtype: DataType
    static_count: int  # 0 = runtime-sized

    @property
    def static_byte_len(self) -> int:
        return self.static_count * self.dtype.size


@dataclass(frozen=True)
class BindingPlan:
    slots: tuple[BindingSlot, ...]  # bound buffers in binding order, then shared ones

    @staticmethod
    def of(program: Program) -> BindingPlan:
        return BindingPlan(tuple(BindingSlot(b.name, b.binding, _ROLE[b.access], b.dtype, b.count)
                                 for b in [*program.facts.bound, *program.workgroup_buffers]))

    @property
    def bound(self) -> tuple[BindingSlot, ...]:
        return tuple(s for s in self.slots if s.role is not BindingRole.SHARED)

    @property
    def inputs(self) -> tuple[BindingSlot, ...]:
        return tuple(s for s in self.slots if s.role in (BindingRole.INPUT, BindingRole.INPUT_OUTPUT))

    def validate_inputs(self, program: Program, inputs: Sequence[Any],
                        backend: str | None = None) -> list[int]:
        """Check count and byte lengths of ``inputs`` (declaration order); return sizes."""
        decls = program.inputs
        sizes = input_sizes(inputs, backend)
        if len(sizes) != len(decls):
            raise InvalidProgram(f"expected {len(decls)} inputs, got {len(sizes)}.",
                                 "pass one bytes-like value per READ/READ_WRITE buffer, in "
                                 "declaration order.", backend=backend)
        for decl, n in zip(decls, sizes):
            if n % decl.dtype.size:
                raise InvalidProgram(f"input {decl.name!r} has {n} bytes, not a multiple of "
                                     f"{decl.dtype.size}.", "pass whole elements.", backend=backend)
            if decl.count and n != decl.count * decl.dtype.size:
                raise InvalidProgram(f"input {decl.name!r} has {n} bytes; its declaration needs "
                                     f"{decl.count * decl.dtype.size}.",
                                     "pass exactly the declared size, or declare it runtime-sized "
                                     "(count 0).", backend=backend)
        return sizes
