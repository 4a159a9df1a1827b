"""Program traversals shared across backends: output layouts, element sizes, the launch
(element counts + grid) of a dispatch, and the count words kernels receive."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.ir.errors import ExecutionError
from vyre.ir.launch import Launch, input_nbytes, resolve
from vyre.ir.program import Program
from vyre.ir.types import DataType

from .errors import InvalidProgram, from_foundation


@dataclass(frozen=True)
class OutputBindingLayout:
    name: str
    binding: int
    dtype: DataType
    element_count: int

    @property
    def element_size(self) -> int:
        return self.dtype.size

    @property
    def byte_len(self) -> int:
        return self.element_count * self.dtype.size


def output_buffer_indices(program: Program) -> list[int]:
    """Positions (in ``program.buffers``) of the output buffers, declaration order."""
    return [i for i, b in enumerate(program.buffers) if b.is_output]


def element_size(program: Program, name: str) -> int:
    decl = program.buffer(name)
    if decl is None:
        raise KeyError(name)
    return decl.dtype.size


def launch_for_sizes(program: Program, nbytes: Sequence[int], config: Any = None,
                     backend: str | None = None) -> Launch:
    try:
        return resolve(program, nbytes, config)
    except ExecutionError as err:
        raise from_foundation(err, backend) from None


def input_sizes(inputs: Sequence[Any], backend: str | None = None) -> list[int]:
    sizes = []
    for i, x in enumerate(inputs):
        try:
            sizes.append(input_nbytes(x))
        except TypeError:
            raise InvalidProgram(f"input {i} is a {type(x).__name__}, not bytes-like.",
                                 "pass bytes, bytearray, memoryview or numpy arrays.",
                                 backend=backend) from None
    return sizes


def launch_for(program: Program, inputs: Sequence[Any], config: Any = None,
               backend: str | None = None) -> Launch:
    return launch_for_sizes(program, input_sizes(inputs, backend), config, backend)


def output_layouts(program: Program, launch: Launch) -> list[OutputBindingLayout]:
    counts = dict(launch.counts)
    return [OutputBindingLayout(b.name, b.binding or 0, b.dtype, counts[b.name])
            for b in program.outputs]


def count_words(program: Program, launch: Launch) -> list[int]:
    """Element count of each non-workgroup buffer in binding order: the u32 words a kernel
    receives for bounds checks and `buf_len`."""
    counts = dict(launch.counts)
    return [counts[b.name] for b in program.facts.bound]
