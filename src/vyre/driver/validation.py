"""Program-level preconditions shared by every backend: the default supported-op set, a
successful-validation cache keyed by program fingerprint, and launch-geometry checks against
a device profile. Concrete drivers add only their target compiler's own checks."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

from vyre.ir.fingerprint import fingerprint
from vyre.ir.launch import Launch
from vyre.ir.ops import all_op_ids
from vyre.ir.program import Program
from vyre.ir.validate import validate

from .capability import DeviceProfile
from .errors import InvalidProgram, UnsupportedFeature


@functools.cache
def default_supported_ops() -> frozenset[str]:
    """Every OpId of the IR: what the reference executes (`core_supported_ops`)."""
    return all_op_ids()


class ValidationCache:
    """Remembers programs that validated, so a hot path validates each program once."""

    def __init__(self, capacity: int = 4096) -> None:
        self._ok: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity
        self.hits = self.misses = 0

    def require_valid(self, program: Program, backend: str | None = None) -> bytes:
        """Validate ``program`` (once per fingerprint); return its fingerprint."""
        try:
            fp = fingerprint(program)
        except Exception as exc:  # a structurally broken object cannot even be encoded
            raise InvalidProgram(f"program cannot be encoded ({exc}).",
                                 "build programs with vyre.ir constructors; run vyre.validate() "
                                 "on it for details.", backend=backend) from None
        with self._lock:
            if fp in self._ok:
                self._ok.move_to_end(fp)
                self.hits += 1
                return fp
        diags = validate(program)
        if diags:
            lines = "; ".join(str(d) for d in diags[:5])
            raise InvalidProgram(f"program is invalid: {lines}",
                                 "correct the program as each diagnostic says (vyre.validate() "
                                 "lists them all).", backend=backend, diagnostics=diags)
        with self._lock:
            self.misses += 1
            self._ok[fp] = None
            if len(self._ok) > self.capacity:
                self._ok.popitem(last=False)
        return fp


VALIDATION_CACHE = ValidationCache()


def shared_memory_bytes(program: Program) -> int:
    return sum(b.count * b.dtype.size for b in program.workgroup_buffers)


def check_launch_geometry(program: Program, launch: Launch, profile: DeviceProfile,
                          max_workgroups_per_dimension: int) -> None:
    """Raise `UnsupportedFeature` when the launch exceeds the device's limits."""
    wg = program.workgroup_size
    mx = profile.max_workgroup_size
    name = profile.backend
    if any(w > m for w, m in zip(wg, mx)):
        raise UnsupportedFeature(
            f"workgroup size {wg} (device maximum per axis {mx})", name,
            f"use a workgroup size within {mx} (DispatchConfig.workgroup_override).")
    inv = program.invocations_per_workgroup
    if inv > profile.max_invocations_per_workgroup:
        raise UnsupportedFeature(
            f"{inv} invocations per workgroup (device maximum "
            f"{profile.max_invocations_per_workgroup})", name,
            "use a smaller workgroup size.")
    if any(g > max_workgroups_per_dimension for g in launch.grid):
        raise UnsupportedFeature(
            f"grid {launch.grid} (device maximum {max_workgroups_per_dimension} workgroups per "
            "axis)", name, "spread the work over more axes with dispatch_grid, or over several "
            "dispatches.")
    shared = shared_memory_bytes(program)
    if shared and shared > profile.max_shared_memory_bytes:
        raise UnsupportedFeature(
            f"{shared} bytes of workgroup memory (device maximum "
            f"{profile.max_shared_memory_bytes})", name, "use smaller workgroup buffers.")
