"""Backend-neutral capability records: `DeviceProfile` (facts about the device a backend
drives) and `BackendCapability` (what a backend executes), both plain frozen values."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


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
    by the driver's `Device.capabilities()`. The engine answers every capability query of the
    contract from this record (`vyre.driver.engine.EngineBackend`), so a driver is a `Device`
    plus this value: no Backend subclass of capability methods. ``profile`` carries the device
    facts (limits, subgroups, f16/bf16, tensor cores, indirect dispatch, name); the fields
    below are the contract's remaining queries."""

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
    fingerprint: bytes | None = None               # None: derived from id, version and profile
