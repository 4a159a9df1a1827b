"""The subgroup taxonomy shared by all drivers: which subgroup operations a program needs,
what a backend offers (`SubgroupCaps`), and the refusal, with a Fix, of programs a backend
cannot run. Concrete drivers map the operations to their own intrinsics (CUDA: warp
``__reduce_*_sync`` / ``__shfl_sync`` / ``__ballot_sync``)."""

from __future__ import annotations

from dataclasses import dataclass

from vyre.ir.program import Program
from vyre.ir.types import SubgroupOp

from .errors import UnsupportedFeature

__all__ = ["SubgroupCaps", "SubgroupOp", "require_subgroups", "subgroup_ops"]


@dataclass(frozen=True)
class SubgroupCaps:
    supported: bool
    size: int | None
    ops: frozenset[SubgroupOp]

    @staticmethod
    def of(backend) -> SubgroupCaps:
        ok = backend.supports_subgroup_ops()
        return SubgroupCaps(ok, backend.subgroup_size(), frozenset(SubgroupOp) if ok else frozenset())


def subgroup_ops(program: Program) -> frozenset[SubgroupOp]:
    """The subgroup operations ``program`` uses (a fact of the program)."""
    return program.facts.subgroup_ops


def require_subgroups(program: Program, backend) -> None:
    """Refuse a program with subgroup operations on a backend that does not emit them, or
    whose workgroups are not whole subgroups."""
    ops = subgroup_ops(program)
    if not ops:
        return
    caps = SubgroupCaps.of(backend)
    missing = ops - caps.ops
    if missing:
        raise UnsupportedFeature(
            f"subgroup operations ({', '.join(sorted(o.value for o in missing))})", backend.id(),
            "run this program on a backend that reports supports_subgroup_ops() (CUDA, or the "
            "reference), or rewrite it with workgroup memory and barriers.")
    if caps.size and program.invocations_per_workgroup % caps.size:
        raise UnsupportedFeature(
            f"a workgroup of {program.invocations_per_workgroup} invocations with {caps.size}-wide "
            "subgroups", backend.id(), f"use a workgroup size that is a multiple of {caps.size}.")
