"""Backend-neutral capability records: `DeviceProfile` (facts about the device a backend
drives), `BackendCapability` (what a backend executes) and `Capabilities` (everything a
driver declares, read once from the vendor), all plain frozen values; and `answer_queries`,
which answers every capability query of the contract from a backend's `Capabilities`
(`CAPABILITY_QUERIES`, the one table of where each answer lies)."""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from typing import Any, TypeVar

from .speculate import DEFAULT_THRESHOLD_PCT
from .validation import default_supported_ops


@dataclass(frozen=True)
class DeviceProfile:
    backend: str
    supports_subgroup_ops: bool = False
    supports_indirect_dispatch: bool = False
    supports_specialization_constants: bool = False
    supports_f16: bool = False
    supports_bf16: bool = False
    supports_trap_propagation: bool = False
    supports_tensor_cores: bool = False
    has_mul_high: bool = False
    has_dual_issue_fp32_int32: bool = False
    has_subgroup_shuffle: bool = False
    has_shared_memory: bool = False
    max_native_int_width: int = 32
    max_workgroup_size: tuple[int, int, int] = (1, 1, 1)
    max_invocations_per_workgroup: int = 1
    max_shared_memory_bytes: int = 0
    max_storage_buffer_binding_size: int = 0
    subgroup_size: int = 0
    compute_units: int = 0
    regs_per_thread_max: int = 0
    l1_cache_bytes: int = 0
    l2_cache_bytes: int = 0
    mem_bw_gbps: int = 0
    ideal_unroll_depth: int = 0
    ideal_vector_pack_bits: int = 0
    ideal_workgroup_tile: tuple[int, int, int] = (0, 0, 0)
    shared_memory_bank_count: int = 0
    shared_memory_bank_width_bytes: int = 0
    device_name: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BackendCapability:
    """What one backend executes: ops, limits and feature flags, read off its queries."""

    backend: str
    version: str
    supported_ops: frozenset[str]
    max_workgroup_size: tuple[int, int, int]
    max_invocations_per_workgroup: int
    max_storage_buffer_bytes: int
    subgroup_size: int | None
    features: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def of(backend) -> BackendCapability:  # backend: VyreBackend
        flags = {
            "subgroup_ops": backend.supports_subgroup_ops(), "f16": backend.supports_f16(),
            "bf16": backend.supports_bf16(), "tensor_cores": backend.supports_tensor_cores(),
            "async_compute": backend.supports_async_compute(),
            "indirect_dispatch": backend.supports_indirect_dispatch(),
            "speculation": backend.supports_speculation(),
            "persistent_thread_dispatch": backend.supports_persistent_thread_dispatch(),
            "grid_sync": backend.supports_grid_sync(), "distributed": backend.is_distributed(),
        }
        return BackendCapability(
            backend=backend.id(), version=backend.version(),
            supported_ops=frozenset(backend.supported_ops()),
            max_workgroup_size=tuple(backend.max_workgroup_size()),  # type: ignore[arg-type]
            max_invocations_per_workgroup=backend.max_compute_invocations_per_workgroup(),
            max_storage_buffer_bytes=backend.max_storage_buffer_bytes(),
            subgroup_size=backend.subgroup_size(),
            features=frozenset(k for k, v in flags.items() if v))


@dataclass(frozen=True)
class Capabilities:
    """Everything a backend declares about itself and its device, read once from the vendor
    by the driver's `Device.capabilities()` (the dask driver: from its workers). Every
    capability query of the contract is answered from this record (`answer_queries`, which
    `vyre.driver.engine.EngineBackend` uses), so a driver is a `Device` plus this value: no
    Backend subclass of capability methods. ``profile`` carries the device facts (limits,
    subgroups, f16/bf16, tensor cores, indirect dispatch, name); the fields below are the
    contract's remaining queries and the engine's launch limits."""

    id: str
    version: str
    profile: DeviceProfile
    unsupported_ops: frozenset[str] = frozenset()   # op ids of the IR this backend does not run
    async_compute: bool = False
    speculation: bool = False
    persistent_thread_dispatch: bool = False
    grid_sync: bool = False
    distributed: bool = False
    max_workgroups_per_dimension: int = 1
    max_invocations_per_dispatch: int = 2**32 - 1  # gid is u32 per axis
    #: workgroups per axis of one launch; None: ``max_workgroups_per_dimension`` on each axis
    max_grid: tuple[int, int, int] | None = None
    fingerprint: bytes | None = None               # None: derived from id, version and profile
    #: a workgroup's invocations run one after another on one CPU core (an OpenCL CPU device
    #: such as PoCL): vyre.lib gives each invocation its own run of elements there
    serial_workgroups: bool = False
    #: the commit rate (whole percent) for this device's `AdaptiveSpeculator` (`vyre.driver.
    #: speculate.threshold_pct`): the seed's 15 for a GPU; an OpenCL CPU device (PoCL) sets
    #: its own (the fused path pays there only at high commit rates). None: the fused path
    #: never pays here, so AUTO always takes the two-stage pair (FORCE still runs it)
    speculation_threshold_pct: int | None = DEFAULT_THRESHOLD_PCT

    @functools.cached_property
    def supported_ops(self) -> frozenset[str]:
        """Every op id of the IR but ``unsupported_ops`` (computed once)."""
        return default_supported_ops() - self.unsupported_ops

    @functools.cached_property
    def grid(self) -> tuple[int, int, int]:
        """``max_grid``, or ``max_workgroups_per_dimension`` on each axis."""
        n = self.max_workgroups_per_dimension
        return self.max_grid if self.max_grid is not None else (n, n, n)


#: every capability query of the contract (`vyre.driver.backend.VyreBackend`) and where its
#: answer lies in a `Capabilities` record: an attribute path, or a function of the record
#: (a test checks that no query of the contract is missing)
CAPABILITY_QUERIES: dict[str, str | Callable[[Capabilities], Any]] = {
    "id": "id",
    "version": "version",
    "supported_ops": "supported_ops",
    "supports_subgroup_ops": "profile.supports_subgroup_ops",
    "supports_f16": "profile.supports_f16",
    "supports_bf16": "profile.supports_bf16",
    "supports_tensor_cores": "profile.supports_tensor_cores",
    "supports_indirect_dispatch": "profile.supports_indirect_dispatch",
    "supports_async_compute": "async_compute",
    "supports_speculation": "speculation",
    "supports_persistent_thread_dispatch": "persistent_thread_dispatch",
    "supports_grid_sync": "grid_sync",
    "is_distributed": "distributed",
    "max_workgroup_size": "profile.max_workgroup_size",
    "max_compute_workgroups_per_dimension": "max_workgroups_per_dimension",
    "max_compute_invocations_per_workgroup": "profile.max_invocations_per_workgroup",
    "subgroup_size": lambda c: c.profile.subgroup_size or None,
    "max_storage_buffer_bytes": "profile.max_storage_buffer_binding_size",
    "device_profile": "profile",
}

B = TypeVar("B", bound=type)


def _answer(query: str, where: str | Callable[[Capabilities], Any], doc: str | None) -> Callable[..., Any]:
    read = where if callable(where) else attrgetter(where)

    def answer(self: Any) -> Any:
        return read(self.caps)

    answer.__name__ = answer.__qualname__ = query
    answer.__doc__ = doc
    return answer


def answer_queries(cls: B) -> B:
    """Class decorator for a `VyreBackend` subclass whose ``caps`` is its `Capabilities`:
    every query of `CAPABILITY_QUERIES` is answered from it (one attribute read each)."""
    for query, where in CAPABILITY_QUERIES.items():
        setattr(cls, query, _answer(query, where, getattr(cls, query).__doc__))
    abc.update_abstractmethods(cls)
    return cls
