"""The shape of one dispatch, shared by every compiled driver: the bound buffers in binding
order with their element counts and where each one's bytes come from (an input position)
and go to (an output position), the count words, and the launch grid. Drivers keep only the
target mechanics (allocations, copies, launches)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vyre.ir.launch import Launch
from vyre.ir.program import Program
from vyre.ir.types import DataType

from .binding import BindingRole
from .errors import InvalidProgram


@dataclass(frozen=True)
class BoundBuffer:
    name: str
    binding: int
    role: BindingRole
    dtype: DataType
    count: int
    input_index: int | None   # position in the dispatch inputs
    output_index: int | None  # position in the dispatch outputs
    decl_index: int           # position among the program's non-workgroup buffers

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.size

    @property
    def padded(self) -> int:
        """Bytes the device side moves and allocates: whole 32-bit words."""
        return padded(self.nbytes)


def padded(nbytes: int) -> int:
    """``nbytes`` rounded up to whole 32-bit words (device buffers, copies and fills are
    word-granular; elements narrower than a word never make a buffer's tail observable)."""
    return (nbytes + 3) & ~3


@dataclass(frozen=True)
class DispatchShape:
    buffers: tuple[BoundBuffer, ...]
    grid: tuple[int, int, int]
    workgroup: tuple[int, int, int]

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(b.count for b in self.buffers)

    @property
    def global_size(self) -> tuple[int, int, int]:
        return tuple(g * w for g, w in zip(self.grid, self.workgroup))  # type: ignore[return-value]

    @property
    def empty(self) -> bool:
        return any(g == 0 for g in self.grid)

    @property
    def outputs(self) -> tuple[BoundBuffer, ...]:
        return tuple(sorted((b for b in self.buffers if b.output_index is not None),
                            key=lambda b: b.output_index))  # type: ignore[arg-type, return-value]


_ROLES = {"read": BindingRole.INPUT, "output": BindingRole.OUTPUT,
          "read_write": BindingRole.INPUT_OUTPUT}


def bound_in_binding_order(program: Program) -> tuple:
    """``program.facts.bound``, or the same list recorded with a kernel loaded from the
    artifact cache (``_vyre_bound``: names in binding order), so that the first dispatch of a
    program loaded from disk walks no IR."""
    names = program.__dict__.get("_vyre_bound")
    if names is None:
        return program.facts.bound
    return tuple(program.buffer(n) for n in names)


def dispatch_shape(program: Program, launch: Launch) -> DispatchShape:
    counts = dict(launch.counts)
    ins = [b.name for b in program.inputs]
    outs = [b.name for b in program.outputs]
    order = {b.name: i for i, b in enumerate(program.bound_buffers)}
    bound = []
    for b in bound_in_binding_order(program):
        bound.append(BoundBuffer(b.name, b.binding, _ROLES[b.access.value], b.dtype, counts[b.name],
                                 ins.index(b.name) if b.name in ins else None,
                                 outs.index(b.name) if b.name in outs else None, order[b.name]))
    return DispatchShape(tuple(bound), launch.grid, program.workgroup_size)


def resident_sizes(program: Program, resources: Sequence, backend: str | None = None) -> list[int]:
    """Input byte lengths for a resident dispatch: one resource per non-workgroup buffer in
    declaration order; the inputs' sizes are their resources' sizes."""
    decls = [b for b in program.buffers if b.is_bound]
    if len(resources) != len(decls):
        raise InvalidProgram(
            f"resident dispatch got {len(resources)} resources for {len(decls)} buffers.",
            "pass one resident resource per non-workgroup buffer, in declaration order "
            f"({', '.join(b.name for b in decls)}).", backend=backend)
    return [r.byte_len for b, r in zip(decls, resources) if b.is_input]
