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
import numpy as np

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
        """Backend version string, part of every cache key (default: "unspecified")."""
        return "unspecified"

    def supported_ops(self) -> frozenset[str]:
        """Op ids (`vyre.ir.ops`) this backend runs with the reference's bytes; routing and
        validation refuse programs that use others (default: every op the IR defines)."""
        return default_supported_ops()

    @abc.abstractmethod
    def dispatch(self, program: Program, inputs: Inputs,
                 config: DispatchConfig | None = None) -> list[bytes]:
        """Execute ``program``; return output buffers (declaration order) byte-identical to
        the reference, or raise a `BackendError` ending in ``Fix: ...``."""

    def dispatch_borrowed(self, program: Program, inputs: Inputs,
                          config: DispatchConfig | None = None) -> list[bytes]:
        """`dispatch` on inputs the caller keeps ownership of (read during the call only).
        Default: `dispatch` on the same objects, which it does not keep past returning; they
        are not flattened to bytes first, so their dtypes are still checked."""
        return self.dispatch(program, inputs, config)

    def dispatch_borrowed_timed(self, program: Program, inputs: Inputs,
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        """`dispatch_borrowed` plus its wall time in nanoseconds (`TimedDispatchResult`)."""
        started = time.perf_counter_ns()
        outputs = self.dispatch_borrowed(program, inputs, config)
        return TimedDispatchResult(outputs, time.perf_counter_ns() - started)

    def dispatch_borrowed_into(self, program: Program, inputs: Inputs,
                               config: DispatchConfig | None, outputs: OutputBuffers) -> None:
        """`dispatch_borrowed`, writing the outputs into the caller's ``outputs`` list
        (cleared first) instead of returning a new one."""
        result = self.dispatch_borrowed(program, inputs, config)
        outputs.clear()
        outputs.extend(result)

    def precompile(self, programs: Sequence[Program | tuple[Program, DispatchConfig | None]]) -> int:
        """Warm-up: build many programs (or (program, config) pairs) ahead of their first
        dispatches, in parallel where the backend can (CUDA: NVRTC in a process pool).
        Programs that are invalid or refused are skipped: their dispatch reports why. Returns
        how many were built. Default: 0 (each dispatch builds its own program)."""
        return 0

    def refuse(self, program: Program) -> None:
        """Target checks beyond the ops and limits every backend declares: raise a
        `BackendError` (usually `UnsupportedFeature`) with a Fix when this backend cannot give
        ``program`` the reference's bytes. Routing and dispatch both ask it
        (`vyre.driver.runnable`). Default: no further checks."""
        return None

    def dispatch_arrays(self, program: Program, inputs: Inputs,
                        config: DispatchConfig | None = None) -> list[np.ndarray]:
        """`dispatch`, returning one writable numpy array per output (declaration order, the
        output's host dtype) instead of bytes: what array callers (`@vyre.kernel`, `vyre.lib`)
        use. Default: each output's bytes copied once into its array; engine backends copy
        once from their staging instead, with no `bytes` in between."""
        outs = self.dispatch(program, inputs, config)
        return [np.frombuffer(r, dtype=d.dtype.host).copy() for r, d in zip(outs, program.outputs)]

    def allocate_resident(self, byte_len: int) -> Resource:
        """A device buffer of ``byte_len`` bytes that outlives dispatches (`Resource`).
        Default: `UnsupportedFeature`."""
        raise UnsupportedFeature("resident buffer allocation", self.id())

    def upload_resident(self, resource: Resource, data: Any) -> None:
        """Copy host ``data`` into a resident buffer. Default: `UnsupportedFeature`."""
        raise UnsupportedFeature("resident buffer upload", self.id())

    def free_resident(self, resource: Resource) -> None:
        """Release a resident buffer; later use of it is an error, never a crash.
        Default: `UnsupportedFeature`."""
        raise UnsupportedFeature("resident buffer free", self.id())

    def dispatch_resident_timed(self, program: Program, resources: Sequence[Resource],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        """Run ``program`` on resident buffers bound in declaration order (outputs stay on
        the device), timed. Default: `UnsupportedFeature`."""
        raise UnsupportedFeature("resident timed dispatch", self.id())

    def bind_resident(self, program: Program, resources: Sequence[Resource],
                      config: DispatchConfig | None = None) -> Any:
        """A warm resident dispatch of ``program`` on ``resources`` (declaration order):
        ``launch()`` enqueues, ``run()`` also waits and checks errors. Default: a
        `vyre.driver.persistent.GenericBinding`, which calls `dispatch_resident_timed` each
        time; backends that pack their launch arguments once return their own."""
        from .persistent import GenericBinding

        return GenericBinding(self, program, resources, config)

    def dispatch_device(self, program: Program, inputs: Inputs,
                        config: DispatchConfig | None = None, alloc: Any = None) -> list[Any]:
        """Dispatch and leave the outputs on the device: one device array per output
        (``__cuda_array_interface__``), same rules, bytes and errors as `dispatch`;
        ``alloc(nbytes, dtype)`` allocates them where given (the caller's array library).
        Default: `UnsupportedFeature` (see `reads_device_arrays`)."""
        raise UnsupportedFeature("device-resident outputs", self.id(),
                                 "use dispatch() (host bytes) on this backend, or the cuda backend.")

    def reads_device_arrays(self) -> bool:
        """True where `dispatch_device` runs and device arrays are read in place (default:
        False)."""
        return False

    def generated_source(self, program: Program, config: DispatchConfig | None = None) -> str | None:
        """The target source this backend compiles for ``program``, or None where it has
        none (the default: an interpreter, or a backend that forwards programs)."""
        return None

    def compile_native(self, program: Program,
                       config: DispatchConfig | None = None) -> CompiledPipeline | None:
        """A `CompiledPipeline` for ``program`` (validated and compiled once), or None when
        the backend has no native compile step (the default; `vyre.driver.pipeline` then
        wraps `dispatch`)."""
        return None

    def compile_native_shared(self, program: Program,
                              config: DispatchConfig | None = None) -> CompiledPipeline | None:
        """As `compile_native`, for a pipeline several threads share (default: the same)."""
        return self.compile_native(program, config)

    def pipeline_cache_snapshot(self):  # -> PipelineCacheSnapshot | None
        """Counters of the backend's own pipeline cache (`PipelineCacheSnapshot`), or None."""
        return None

    def dispatch_async(self, program: Program, inputs: Inputs,
                       config: DispatchConfig | None = None) -> PendingDispatch:
        """Start a dispatch and return a `PendingDispatch`; the inputs are copied before
        this returns, so the caller may change them at once. Default: run synchronously."""
        return ReadyPending(self.dispatch(program, inputs, config))

    def dispatch_borrowed_async(self, program: Program, inputs: Inputs,
                                config: DispatchConfig | None = None) -> PendingDispatch:
        """`dispatch_async` for borrowed inputs (also copied before it returns)."""
        return ReadyPending(self.dispatch_borrowed(program, inputs, config))

    # ---- capability queries (honest; default: conservative) ----------------------------
    def supports_subgroup_ops(self) -> bool:
        """True only where subgroup reduce/shuffle/ballot run with the reference's bytes."""
        return False

    def supports_f16(self) -> bool:
        """True only where f16 arithmetic runs natively (vyre's printers may still run f16
        programs through integer helpers where this is False)."""
        return False

    def supports_bf16(self) -> bool:
        """As `supports_f16`, for bf16."""
        return False

    def supports_tensor_cores(self) -> bool:
        """True only where programs are lowered to tensor-core instructions."""
        return False

    def supports_async_compute(self) -> bool:
        """True where dispatches can overlap with the host (a real `dispatch_async`)."""
        return False

    def supports_indirect_dispatch(self) -> bool:
        """True where the device reads an `indirect_dispatch` grid itself, without a host
        read-back."""
        return False

    def supports_speculation(self) -> bool:
        """True where the fused prefilter/confirm program of a speculative workload runs as
        written (`vyre.driver.speculate`). Every built-in backend reports True; the default
        False is for a third-party backend that does not, where ``AUTO`` takes the two-stage
        path and ``FORCE`` is refused."""
        return False

    def supports_persistent_thread_dispatch(self) -> bool:
        """True where persistent-thread dispatch (`vyre.driver.persistent`) is native."""
        return False

    def supports_grid_sync(self) -> bool:
        """True where `grid_sync` runs as a device-wide barrier inside one launch."""
        return False

    def is_distributed(self) -> bool:
        """True where one dispatch is partitioned across more than one physical device or node."""
        return False

    def max_workgroup_size(self) -> tuple[int, int, int]:
        """Largest workgroup extent per axis (default: (1, 1, 1))."""
        return (1, 1, 1)

    def max_compute_workgroups_per_dimension(self) -> int:
        """Largest grid extent per axis, in workgroups (default: 1)."""
        return 1

    def max_compute_invocations_per_workgroup(self) -> int:
        """Largest product of the workgroup extents."""
        x, y, z = self.max_workgroup_size()
        return min(x * y * z, 0xFFFFFFFF)

    def subgroup_size(self) -> int | None:
        """Invocations per subgroup, or None where there are no subgroup ops."""
        return None

    def max_storage_buffer_bytes(self) -> int:
        """Largest single storage buffer in bytes (default: 0, nothing)."""
        return 0

    def device_profile(self) -> DeviceProfile:
        """The capabilities and limits above as one `DeviceProfile` value."""
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
        """Warm the backend before the first dispatch (default: nothing to do)."""
        return None

    def flush(self) -> None:
        """Wait until every dispatch this backend started has finished."""
        return None

    def shutdown(self) -> None:
        """Release the device; later dispatches raise `DispatchFailed` with a Fix."""
        return None

    def device_lost(self) -> bool:
        """True once the device can no longer run dispatches (`try_recover` may help)."""
        return False

    def try_recover(self) -> None:
        """Re-open a lost device, dropping compiled pipelines and resident buffers.
        Default: `UnsupportedFeature`."""
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
    def program(self) -> Program:
        """The program this pipeline was compiled from."""

    @abc.abstractmethod
    def backend_id(self) -> str:
        """The id of the backend that compiled it."""

    @abc.abstractmethod
    def dispatch(self, inputs: Inputs, config: DispatchConfig | None = None) -> list[bytes]:
        """Run the compiled program; same bytes and errors as the backend's `dispatch`."""

    def dispatch_borrowed(self, inputs: Inputs, config: DispatchConfig | None = None) -> list[bytes]:
        """`dispatch` on borrowed inputs."""
        return self.dispatch(inputs, config)

    def dispatch_timed(self, inputs: Inputs, config: DispatchConfig | None = None) -> TimedDispatchResult:
        """`dispatch` plus its wall time (`TimedDispatchResult`)."""
        started = time.perf_counter_ns()
        outputs = self.dispatch(inputs, config)
        return TimedDispatchResult(outputs, time.perf_counter_ns() - started)

    def dispatch_async(self, inputs: Inputs, config: DispatchConfig | None = None) -> PendingDispatch:
        """Start a dispatch; inputs are copied before this returns."""
        return ReadyPending(self.dispatch(inputs, config))


class PassthroughPipeline(CompiledPipeline):
    """What the framework wraps when `compile_native` returns None: every dispatch calls
    back into ``backend.dispatch``."""

    def __init__(self, backend: VyreBackend, program: Program, config: DispatchConfig | None) -> None:
        self._backend, self._program, self._config = backend, program, config

    @property
    def program(self) -> Program:
        """The program this pipeline runs."""
        return self._program

    def backend_id(self) -> str:
        """The id of the backend it dispatches to."""
        return self._backend.id()

    def dispatch(self, inputs: Inputs, config: DispatchConfig | None = None) -> list[bytes]:
        """The backend's `dispatch` of the program."""
        return self._backend.dispatch(self._program, inputs, config or self._config)
