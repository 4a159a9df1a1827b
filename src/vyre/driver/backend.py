"""The frozen backend contract: `VyreBackend`, `CompiledPipeline` and `Resource`.

Mirrors seeds/vyre_backend.rs method for method, with the same conservative defaults:
`id` and `dispatch` are abstract; every capability query answers "no"/minimal; lifecycle
hooks are no-ops; `try_recover` and the resident-buffer methods raise `UnsupportedFeature`.
After 0.6 the surface only grows by defaulted methods (`device_fingerprint` is one).

Sealed: a subclass defined outside the ``vyre`` package must opt in explicitly with
``class MyBackend(VyreBackend, external=True)``.

This class is the contract and its defaults, nothing more. The rules every dispatch obeys
(input checks, limits, ``max_output_bytes``, ``timeout``, ``fixpoint_iterations``, counters)
live in `vyre.driver.engine.EngineBackend`, which every built-in backend subclasses; a backend
that overrides ``dispatch`` directly gets only the defaults below.
"""

from __future__ import annotations

import abc
import itertools
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import blake3

from vyre.ir.errors import VyreError
from vyre.ir.program import Program

from .capability import DeviceProfile
from .config import DispatchConfig
from .errors import InvalidProgram, UnsupportedFeature
from .pending import OutputBuffers, PendingDispatch, ReadyPending, TimedDispatchResult
from .validation import default_supported_ops

Inputs = Sequence[Any]  # numpy arrays, bytes-like values, device arrays (vyre.driver.inputs)


class SealedContractError(VyreError, TypeError):
    pass


def _is_internal(module: str) -> bool:
    return module == "vyre" or module.startswith("vyre.")


def _seal(cls: type, external: bool, contract: str) -> None:
    inherited = any(getattr(b, "_vyre_external", False) for b in cls.__mro__[1:])
    if not (_is_internal(cls.__module__) or external or inherited):
        raise SealedContractError(
            f"{cls.__module__}.{cls.__qualname__} implements the sealed {contract} contract "
            "without opting in.",
            f"declare it as `class {cls.__name__}({contract}, external=True)` to accept that "
            "the contract may grow defaulted methods in minor versions.")
    cls._vyre_external = bool(external or inherited)  # type: ignore[attr-defined]


class VyreBackend(abc.ABC):
    """A pure function from a validated Program and input buffers to output buffers,
    byte-identical to the CPU reference on success."""

    _vyre_external = False

    def __init_subclass__(cls, external: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _seal(cls, external, "VyreBackend")

    # ---- dispatch core ---------------------------------------------------------------
    @abc.abstractmethod
    def id(self) -> str:
        """Stable backend identifier, unique in the process."""

    def version(self) -> str:
        return "unspecified"

    def supported_ops(self) -> frozenset[str]:
        return default_supported_ops()

    @abc.abstractmethod
    def dispatch(self, program: Program, inputs: Inputs,
                 config: DispatchConfig | None = None) -> list[bytes]:
        """Execute ``program``; return output buffers (declaration order) byte-identical to
        the reference, or raise a `BackendError` ending in ``Fix: ...``."""

    def dispatch_borrowed(self, program: Program, inputs: Inputs,
                          config: DispatchConfig | None = None) -> list[bytes]:
        owned = [bytes(memoryview(x).cast("B")) if not isinstance(x, bytes) else x for x in inputs]
        return self.dispatch(program, owned, config)

    def dispatch_borrowed_timed(self, program: Program, inputs: Inputs,
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        started = time.perf_counter_ns()
        outputs = self.dispatch_borrowed(program, inputs, config)
        return TimedDispatchResult(outputs, time.perf_counter_ns() - started)

    def dispatch_borrowed_into(self, program: Program, inputs: Inputs,
                               config: DispatchConfig | None, outputs: OutputBuffers) -> None:
        result = self.dispatch_borrowed(program, inputs, config)
        outputs.clear()
        outputs.extend(result)

    def allocate_resident(self, byte_len: int) -> Resource:
        raise UnsupportedFeature("resident buffer allocation", self.id())

    def upload_resident(self, resource: Resource, data: Any) -> None:
        raise UnsupportedFeature("resident buffer upload", self.id())

    def free_resident(self, resource: Resource) -> None:
        raise UnsupportedFeature("resident buffer free", self.id())

    def dispatch_resident_timed(self, program: Program, resources: Sequence[Resource],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        raise UnsupportedFeature("resident timed dispatch", self.id())

    def compile_native(self, program: Program,
                       config: DispatchConfig | None = None) -> CompiledPipeline | None:
        return None

    def compile_native_shared(self, program: Program,
                              config: DispatchConfig | None = None) -> CompiledPipeline | None:
        return self.compile_native(program, config)

    def pipeline_cache_snapshot(self):  # -> PipelineCacheSnapshot | None
        return None

    def dispatch_async(self, program: Program, inputs: Inputs,
                       config: DispatchConfig | None = None) -> PendingDispatch:
        return ReadyPending(self.dispatch(program, inputs, config))

    def dispatch_borrowed_async(self, program: Program, inputs: Inputs,
                                config: DispatchConfig | None = None) -> PendingDispatch:
        return ReadyPending(self.dispatch_borrowed(program, inputs, config))

    # ---- capability queries (honest; default: conservative) ----------------------------
    def supports_subgroup_ops(self) -> bool:
        return False

    def supports_f16(self) -> bool:
        return False

    def supports_bf16(self) -> bool:
        return False

    def supports_tensor_cores(self) -> bool:
        return False

    def supports_async_compute(self) -> bool:
        return False

    def supports_indirect_dispatch(self) -> bool:
        return False

    def supports_speculation(self) -> bool:
        return False

    def supports_persistent_thread_dispatch(self) -> bool:
        return False

    def supports_grid_sync(self) -> bool:
        return False

    def is_distributed(self) -> bool:
        return False

    def max_workgroup_size(self) -> tuple[int, int, int]:
        return (1, 1, 1)

    def max_compute_workgroups_per_dimension(self) -> int:
        return 1

    def max_compute_invocations_per_workgroup(self) -> int:
        x, y, z = self.max_workgroup_size()
        return min(x * y * z, 0xFFFFFFFF)

    def subgroup_size(self) -> int | None:
        return None

    def max_storage_buffer_bytes(self) -> int:
        return 0

    def device_profile(self) -> DeviceProfile:
        return DeviceProfile(
            backend=self.id(),
            supports_subgroup_ops=self.supports_subgroup_ops(),
            supports_indirect_dispatch=self.supports_indirect_dispatch(),
            supports_f16=self.supports_f16(), supports_bf16=self.supports_bf16(),
            supports_tensor_cores=self.supports_tensor_cores(),
            has_subgroup_shuffle=self.supports_subgroup_ops(),
            max_workgroup_size=tuple(self.max_workgroup_size()),  # type: ignore[arg-type]
            max_invocations_per_workgroup=self.max_compute_invocations_per_workgroup(),
            max_storage_buffer_binding_size=self.max_storage_buffer_bytes(),
            subgroup_size=self.subgroup_size() or 0)

    def compile_batch(self, items: list) -> Any:
        """Record many resident dispatches for native replay (additive method; see
        `vyre.driver.batch`). Default: None, and `Batch` replays item by item."""
        return None

    def device_fingerprint(self) -> bytes:
        """Identifies the device (and its driver) for cache keys. Additive default: blake3 of
        the id, version and device profile."""
        text = f"{self.id()}|{self.version()}|{self.device_profile()!r}"
        return blake3.blake3(text.encode()).digest()

    # ---- lifecycle hooks -------------------------------------------------------------
    def prepare(self) -> None:
        return None

    def flush(self) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def device_lost(self) -> bool:
        return False

    def try_recover(self) -> None:
        raise UnsupportedFeature("device recovery", self.id())

    # ---- helpers for implementations ---------------------------------------------------
    def own(self, resource: Resource) -> Resource:
        """Check that ``resource`` was allocated by this backend instance and is live."""
        if not isinstance(resource, Resource) or resource.owner != id(self) \
                or resource.backend != self.id():
            raise InvalidProgram(
                f"resource {getattr(resource, 'backend', '?')}#{getattr(resource, 'serial', '?')} "
                f"does not belong to this {self.id()} backend.",
                "use a resident buffer only with the backend instance that allocated it.",
                backend=self.id())
        if resource.freed:
            raise InvalidProgram(f"resource {resource.backend}#{resource.serial} was freed.",
                                 "allocate a new resident buffer.", backend=self.id())
        return resource


_serials = itertools.count(1)


@dataclass(eq=False)
class Resource:
    """A backend-resident buffer handle; only meaningful to the backend that made it.

    ``holders`` are the bound dispatches that use it. Freeing a held resource marks it freed
    at once (every later use is an error with a Fix) and releases the device memory when the
    last holder is released, so a bound dispatch can never launch on freed memory."""

    backend: str
    owner: int
    byte_len: int
    handle: Any = field(repr=False, default=None)
    serial: int = field(default_factory=lambda: next(_serials))
    freed: bool = False
    holders: weakref.WeakSet = field(default_factory=weakref.WeakSet, repr=False, compare=False)

    def __repr__(self) -> str:
        state = "freed" if self.freed else f"{self.byte_len} bytes"
        return f"<Resource {self.backend}#{self.serial} {state}>"


class CompiledPipeline(abc.ABC):
    """A program compiled once for one backend; `dispatch` must be bit-identical to
    ``backend.dispatch(program, inputs, config)``."""

    _vyre_external = False

    def __init_subclass__(cls, external: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _seal(cls, external, "CompiledPipeline")

    @property
    @abc.abstractmethod
    def program(self) -> Program: ...

    @abc.abstractmethod
    def backend_id(self) -> str: ...

    @abc.abstractmethod
    def dispatch(self, inputs: Inputs, config: DispatchConfig | None = None) -> list[bytes]: ...

    def dispatch_borrowed(self, inputs: Inputs, config: DispatchConfig | None = None) -> list[bytes]:
        return self.dispatch(inputs, config)

    def dispatch_timed(self, inputs: Inputs, config: DispatchConfig | None = None) -> TimedDispatchResult:
        started = time.perf_counter_ns()
        outputs = self.dispatch(inputs, config)
        return TimedDispatchResult(outputs, time.perf_counter_ns() - started)

    def dispatch_async(self, inputs: Inputs, config: DispatchConfig | None = None) -> PendingDispatch:
        return ReadyPending(self.dispatch(inputs, config))


class PassthroughPipeline(CompiledPipeline):
    """What the framework wraps when `compile_native` returns None: every dispatch calls
    back into ``backend.dispatch``."""

    def __init__(self, backend: VyreBackend, program: Program, config: DispatchConfig | None) -> None:
        self._backend, self._program, self._config = backend, program, config

    @property
    def program(self) -> Program:
        return self._program

    def backend_id(self) -> str:
        return self._backend.id()

    def dispatch(self, inputs: Inputs, config: DispatchConfig | None = None) -> list[bytes]:
        return self._backend.dispatch(self._program, inputs, config or self._config)
