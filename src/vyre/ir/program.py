"""Buffer declarations and the Program: the unit every backend executes.

Roles (DESIGN §2): inputs are the READ and READ_WRITE buffers in declaration order; outputs
are the OUTPUT and READ_WRITE buffers in declaration order; WORKGROUP buffers are scratch.
A count of 0 means runtime-sized: the element count comes from the bound input's byte
length (or, for an OUTPUT, from the largest runtime-sized input; see docs/semantics.md).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .node import Node
from .types import BufferAccess, DataType


@dataclass(frozen=True)
class BufferDecl:
    name: str
    binding: int | None
    access: BufferAccess
    dtype: DataType
    count: int = 0

    @staticmethod
    def read(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        return BufferDecl(name, binding, BufferAccess.READ, dtype, count)

    @staticmethod
    def read_write(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        return BufferDecl(name, binding, BufferAccess.READ_WRITE, dtype, count)

    @staticmethod
    def output(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        return BufferDecl(name, binding, BufferAccess.OUTPUT, dtype, count)

    @staticmethod
    def workgroup(name: str, count: int, dtype: DataType) -> BufferDecl:
        return BufferDecl(name, None, BufferAccess.WORKGROUP, dtype, count)

    def with_count(self, count: int) -> BufferDecl:
        return replace(self, count=int(count))

    @property
    def is_input(self) -> bool:
        return self.access in (BufferAccess.READ, BufferAccess.READ_WRITE)

    @property
    def is_output(self) -> bool:
        return self.access in (BufferAccess.OUTPUT, BufferAccess.READ_WRITE)

    @property
    def is_workgroup(self) -> bool:
        return self.access is BufferAccess.WORKGROUP

    @property
    def writable(self) -> bool:
        return self.access is not BufferAccess.READ


@dataclass(frozen=True)
class Program:
    buffers: tuple[BufferDecl, ...]
    workgroup_size: tuple[int, int, int]
    body: tuple[Node, ...]

    @staticmethod
    def wrapped(buffers: Iterable[BufferDecl], workgroup_size: int | Iterable[int],
                body: Iterable[Node]) -> Program:
        if isinstance(workgroup_size, int):
            wg = (workgroup_size, 1, 1)
        else:
            wg = tuple(int(v) for v in workgroup_size)
            wg = (wg + (1, 1, 1))[:3] if len(wg) < 3 else wg
        return Program(tuple(buffers), wg, tuple(body))  # type: ignore[arg-type]

    @functools.cached_property
    def _by_name(self) -> dict[str, BufferDecl]:
        return {b.name: b for b in self.buffers}

    def buffer(self, name: str) -> BufferDecl | None:
        return self._by_name.get(name)

    @property
    def inputs(self) -> tuple[BufferDecl, ...]:
        return tuple(b for b in self.buffers if b.is_input)

    @property
    def outputs(self) -> tuple[BufferDecl, ...]:
        return tuple(b for b in self.buffers if b.is_output)

    @property
    def workgroup_buffers(self) -> tuple[BufferDecl, ...]:
        return tuple(b for b in self.buffers if b.is_workgroup)

    @property
    def invocations_per_workgroup(self) -> int:
        x, y, z = self.workgroup_size
        return x * y * z

    def ops(self):
        """The OpIds this program uses (see `vyre.ir.ops`)."""
        from .ops import program_ops

        return program_ops(self)

    def fingerprint(self) -> bytes:
        from .fingerprint import fingerprint

        return fingerprint(self)
