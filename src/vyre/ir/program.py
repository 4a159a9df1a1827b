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
from typing import TYPE_CHECKING, Any

from .expr import Expr
from .node import Node
from .types import BufferAccess, DataType

if TYPE_CHECKING:
    from .facts import ProgramFacts


def _holds_weak(program: Any) -> bool:
    parts: list[Any] = []
    for group in (program.body, program.functions):
        if isinstance(group, tuple | list):
            parts.extend(group)
    for f in parts:
        if isinstance(f, Function):
            if any(getattr(n, "_w", False) for n in f.body if isinstance(f.body, tuple | list)) or \
                    getattr(f.result, "_w", False):
                return True
        elif getattr(f, "_w", False):
            return True
    return False


@dataclass(frozen=True)
class BufferDecl:
    name: str
    binding: int | None
    access: BufferAccess
    dtype: DataType
    count: int = 0

    @staticmethod
    def read(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        """An input buffer the program only reads, bound at ``binding``."""
        return BufferDecl(name, binding, BufferAccess.READ, dtype, count)

    @staticmethod
    def read_write(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        """An input buffer the program may also write; its final contents are an output."""
        return BufferDecl(name, binding, BufferAccess.READ_WRITE, dtype, count)

    @staticmethod
    def output(name: str, binding: int, dtype: DataType, count: int = 0) -> BufferDecl:
        """An output buffer, zero-filled before the dispatch (sized by ``count`` or the launch)."""
        return BufferDecl(name, binding, BufferAccess.OUTPUT, dtype, count)

    @staticmethod
    def workgroup(name: str, count: int, dtype: DataType) -> BufferDecl:
        """``count`` elements shared by a workgroup, zeroed when it starts."""
        return BufferDecl(name, None, BufferAccess.WORKGROUP, dtype, count)

    @staticmethod
    def local(name: str, count: int, dtype: DataType) -> BufferDecl:
        """A fixed-size array private to each invocation (``load``/``store`` by name, the
        out-of-bounds rule applies; zeroed when each phase starts)."""
        return BufferDecl(name, None, BufferAccess.LOCAL, dtype, count)

    def with_count(self, count: int) -> BufferDecl:
        """This declaration with ``count`` elements."""
        return replace(self, count=int(count))

    @property
    def is_input(self) -> bool:
        """True for buffers fed from the dispatch's inputs (read, read_write)."""
        return self.access in (BufferAccess.READ, BufferAccess.READ_WRITE)

    @property
    def is_output(self) -> bool:
        """True for buffers returned by the dispatch (output, read_write)."""
        return self.access in (BufferAccess.OUTPUT, BufferAccess.READ_WRITE)

    @property
    def is_workgroup(self) -> bool:
        """True for workgroup memory."""
        return self.access is BufferAccess.WORKGROUP

    @property
    def is_local(self) -> bool:
        """True for per-invocation arrays."""
        return self.access is BufferAccess.LOCAL

    @property
    def is_bound(self) -> bool:
        """Backed by caller memory (an input or output), not scratch."""
        return self.access not in (BufferAccess.WORKGROUP, BufferAccess.LOCAL)

    @property
    def writable(self) -> bool:
        """True where the program may store to it."""
        return self.access is not BufferAccess.READ


@dataclass(frozen=True)
class Function:
    """A callable a Program declares: typed parameters, a body, and an optional result
    expression evaluated after the body. Calls pass arguments by value; a function may
    read and write buffers, call functions declared before it (so never recursively) and
    use loops with break/continue, but not barriers, subgroup operations or ``return_``."""

    name: str
    params: tuple[tuple[str, DataType], ...]
    body: tuple[Node, ...]
    result: Expr | None = None

    @staticmethod
    def define(name: str, params: Iterable[tuple[str, DataType]], body: Iterable[Node] = (),
               result: Any = None) -> Function:
        """A device function ``name(params) -> result`` whose body is ``body`` (see `Expr.call`)."""
        from .expr import coerce

        return Function(name, tuple((str(n), t) for n, t in params), tuple(body),
                        None if result is None else coerce(result))


@dataclass(frozen=True)
class Program:
    buffers: tuple[BufferDecl, ...]
    workgroup_size: tuple[int, int, int]
    body: tuple[Node, ...]
    functions: tuple[Function, ...] = ()

    def __post_init__(self) -> None:
        # weak Python literals take their types now (vyre.ir.weak), so no later stage sees one
        if _holds_weak(self):
            from .weak import resolve

            body, functions = resolve(self)
            object.__setattr__(self, "body", body)
            object.__setattr__(self, "functions", functions)
            for stale in ("_functions", "_vyre_fn_types", "_by_name"):
                self.__dict__.pop(stale, None)

    def __str__(self) -> str:
        """A short indented text of the buffers, functions and statements (`vyre.ir.show`);
        ``repr`` keeps the full constructor form."""
        from .show import program_text

        return program_text(self)

    @staticmethod
    def wrapped(buffers: Iterable[BufferDecl], workgroup_size: int | Iterable[int],
                body: Iterable[Node], functions: Iterable[Function] = ()) -> Program:
        """A Program from its parts (an int workgroup size means (n, 1, 1))."""
        if isinstance(workgroup_size, int):
            wg = (workgroup_size, 1, 1)
        else:
            wg = tuple(int(v) for v in workgroup_size)
            wg = (wg + (1, 1, 1))[:3] if len(wg) < 3 else wg
        return Program(tuple(buffers), wg, tuple(body), tuple(functions))  # type: ignore[arg-type]

    @functools.cached_property
    def _functions(self) -> dict[str, Function]:
        return {f.name: f for f in self.functions if isinstance(f, Function)}

    def function(self, name: str) -> Function | None:
        """The function named ``name``, or None."""
        return self._functions.get(name)

    @functools.cached_property
    def _by_name(self) -> dict[str, BufferDecl]:
        return {b.name: b for b in self.buffers}

    def buffer(self, name: str) -> BufferDecl | None:
        """The buffer declaration named ``name``, or None."""
        return self._by_name.get(name)

    @property
    def inputs(self) -> tuple[BufferDecl, ...]:
        """The buffers fed from the dispatch's inputs, in binding order."""
        return tuple(b for b in self.buffers if b.is_input)

    @property
    def outputs(self) -> tuple[BufferDecl, ...]:
        """The buffers the dispatch returns, in binding order."""
        return tuple(b for b in self.buffers if b.is_output)

    @property
    def workgroup_buffers(self) -> tuple[BufferDecl, ...]:
        """The workgroup-memory declarations."""
        return tuple(b for b in self.buffers if b.is_workgroup)

    @property
    def local_buffers(self) -> tuple[BufferDecl, ...]:
        """The per-invocation array declarations."""
        return tuple(b for b in self.buffers if b.is_local)

    @property
    def bound_buffers(self) -> tuple[BufferDecl, ...]:
        """Buffers backed by caller memory, in declaration order."""
        return tuple(b for b in self.buffers if b.is_bound)

    @property
    def invocations_per_workgroup(self) -> int:
        """The product of the workgroup extents."""
        x, y, z = self.workgroup_size
        return x * y * z

    @property
    def facts(self) -> ProgramFacts:
        """What every stage asks about this program, computed once (`vyre.ir.facts`)."""
        from .facts import facts_of

        return facts_of(self)

    def ops(self):
        """The OpIds this program uses (see `vyre.ir.ops`)."""
        from .ops import program_ops

        return program_ops(self)

    def fingerprint(self) -> bytes:
        """The blake3 fingerprint of the canonical form (equal meaning, equal fingerprint)."""
        from .fingerprint import fingerprint

        return fingerprint(self)
