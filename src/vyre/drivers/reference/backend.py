"""`ReferenceBackend`: `vyre.reference.run` as a `VyreBackend`, with honest capabilities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import vyre
from vyre import reference
from vyre.driver.backend import VyreBackend
from vyre.driver.capability import DeviceProfile
from vyre.driver.config import DispatchConfig
from vyre.driver.enforcement import cancel_requested
from vyre.driver.validation import VALIDATION_CACHE
from vyre.ir.program import Program
from vyre.reference.interp import MAX_BATCH_LANES

MAX_AXIS = 1 << 16
SUBGROUP = 32  # the simulated subgroup width (that of CUDA warps)


class ReferenceBackend(VyreBackend):
    def id(self) -> str:
        return "reference"

    def version(self) -> str:
        return vyre.__version__

    def dispatch(self, program: Program, inputs: Sequence[Any],
                 config: DispatchConfig | None = None) -> list[bytes]:
        VALIDATION_CACHE.require_valid(program, self.id())
        return reference.run(program, inputs, config, should_stop=cancel_requested,
                             subgroup_size=SUBGROUP)

    # The interpreter executes grid_sync natively (phases), any workgroup shape up to the
    # limits below, and workgroup memory in host RAM.
    def supports_grid_sync(self) -> bool:
        return True

    def supports_subgroup_ops(self) -> bool:
        return True  # simulated exactly, `SUBGROUP` lanes wide

    def subgroup_size(self) -> int:
        return SUBGROUP

    def max_workgroup_size(self) -> tuple[int, int, int]:
        return (MAX_AXIS, MAX_AXIS, MAX_AXIS)

    def max_compute_invocations_per_workgroup(self) -> int:
        return MAX_BATCH_LANES

    def max_compute_workgroups_per_dimension(self) -> int:
        return 2**31 - 1

    def max_storage_buffer_bytes(self) -> int:
        return 4 * (2**32 - 1)

    def device_profile(self) -> DeviceProfile:
        base = super().device_profile()
        from dataclasses import replace

        return replace(base, has_shared_memory=True, has_mul_high=True,
                       max_shared_memory_bytes=1 << 30, device_name="numpy (host CPU)")
