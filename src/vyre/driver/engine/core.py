"""`EngineBackend`: every entry point of the backend contract as one recipe over a `Device`.

The recipe, in the order a dispatch meets it (each step is a method below, called from
every entry point; nothing is wrapped or swapped at class creation):

1. ``_config``     the config is a `DispatchConfig` (None: the default); ``cooperative`` is
                   refused where the backend has no single-launch grid barrier.
2. ``_pipeline``   the program is validated (cache keyed by its exact identity), the ops it
                   uses are checked against ``supported_ops()``, specialization and
                   workgroup override are applied, and the device builds it once (cache keyed
                   by fingerprint + code-affecting config; the fingerprint keeps declaration
                   order, so equal keys mean equal outputs).
3. ``_inputs``     every input is checked against its declaration (`vyre.driver.inputs`).
4. ``_prepared``   the shape for these input sizes (cached), checked against the backend's
                   declared limits, and ``max_output_bytes`` — all before any allocation.
5. ``_enqueue``    host inputs are copied into staging *at call time* (an async call never
                   reads the caller's memory afterwards; a call that waits may upload large
                   ones from it directly, or on a zero-copy device let its kernels read them
                   in place until it returns), outputs zeroed where some element
                   could stay unwritten, the dispatch's own control block reset, the kernels
                   launched, outputs and control block read back, a fence recorded.
6. ``_complete``   wait for the fence, bounded by ``timeout`` (on expiry: raise the cancel
                   word, and if the kernel cannot stop, never queue behind it); the error
                   flag becomes `DispatchFailed`; outputs become bytes.
7. ``fixpoint_iterations`` re-runs 3-6 feeding READ_WRITE outputs back; counters record every
                   dispatch, ok or not.

Resident dispatches, bound (persistent) handles and batches are in `vyre.driver.engine.resident`
and go through the same steps.

Two warm paths run steps 5-6 straight through, for calls whose every check has a known
outcome (issue 24): `_run_staged`, a synchronous dispatch with a plain config whose host
inputs and outputs all go through staging; and `_device_warm`, a `dispatch_device` call with
the signature of one that passed every check (`vyre.driver.engine.warm`). Each does what
`_enqueue` and `_complete` do for that case, with the same errors.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from vyre.ir.errors import VyreError
from vyre.ir.fingerprint import fingerprint, identity
from vyre.ir.launch import effective_program, uses_atomics
from vyre.ir.program import Program

from .. import hostbytes, observability, tuner
from ..backend import CompiledPipeline, Resource, VyreBackend
from ..bounded import fifo
from ..capability import Capabilities, answer_queries
from ..config import DEFAULT, DispatchConfig
from ..dispatch_shape import dispatch_shape, padded, resident_sizes
from ..errors import (
    BackendError,
    DeviceLost,
    DeviceOutOfMemory,
    DispatchFailed,
    InvalidInput,
    InvalidProgram,
    LimitExceeded,
    UnsupportedFeature,
    build_timed_out,
    ctl_failure,
    from_foundation,
    timed_out,
)
from ..inputs import DeviceInput, Input, InputChecker, raw_words
from ..pending import PendingDispatch, TimedDispatchResult
from ..pipeline import PipelineCacheSnapshot
from ..program_walks import launch_for_sizes
from ..runnable import refusals
from ..validation import VALIDATION_CACHE
from . import memory, timed_build
from .artifacts import ArtifactCache, load_program
from .device import Cancelled, Ctl, Device
from .plan import Limits, Prepared, StageSet
from .resident import Bound, EngineBatch
from .timed_build import BuildTimedOut
from .warm import PLANS_PER_PIPELINE, DevicePlan, cai_key, signature

log = logging.getLogger("vyre.engine")
CANCEL_GRACE_S = 2.0      # how long a cancelled kernel gets to notice its cancel word
MAX_GLOBAL_AXIS = 2**32 - 1   # invocations per axis: gid is a u32
PREPARED_PER_PIPELINE = 32
#: host buffers of at least this many bytes are copied to and from the device directly (no
#: staging copy) in calls that wait for their dispatch, on devices with direct host copies
DIRECT_BYTES = 1 << 18
PIPELINES_PER_BACKEND = 512


def _now() -> int:
    return time.perf_counter_ns()


def deadline_of(config: DispatchConfig) -> float | None:
    return None if config.timeout is None else time.monotonic() + config.timeout


class EnginePipeline(CompiledPipeline):
    """A program compiled once for an engine backend. Its dispatches are those of
    ``backend.dispatch(program, inputs, config)``, byte for byte, rules included."""

    def __init__(self, backend: EngineBackend, source: Program, program: Program,
                 config: DispatchConfig, kernel: Any) -> None:
        self._backend, self._source, self.effective, self.config = backend, source, program, config
        self.kernel = kernel
        self.generation = backend.generation
        self.prepared = fifo(PREPARED_PER_PIPELINE)   # shapes by input sizes and grid options
        self.bounds: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        dev = backend.device
        self.check = InputChecker(program, backend.id(), dev.device_input if dev.reads_device_arrays else None)
        outputs = [b.name for b in program.outputs]
        # (input position, output position) of READ_WRITE buffers: fixpoint feeds them back
        self.feedback = tuple((i, outputs.index(d.name)) for i, d in enumerate(program.inputs) if d.is_output)
        self.out_dtypes = tuple(d.dtype.host for d in program.outputs)   # dispatch_arrays' dtypes
        self.outputs = program.outputs
        self.alloc_where = tuple(f"the array alloc() returned for output {d.name!r}" for d in self.outputs)
        self.warm = fifo(PLANS_PER_PIPELINE)   # dispatch_device's plans by signature (`warm`)

    def __repr__(self) -> str:
        return (f"<EnginePipeline {self._backend.id()} program={fingerprint(self._source).hex()[:12]} "
                f"wg={self.effective.workgroup_size} built_from={self.kernel.built_from}>")

    @property
    def program(self) -> Program:
        return self._source

    @property
    def built_from(self) -> str:
        return self.kernel.built_from

    @property
    def source(self) -> str | None:
        return self.kernel.source

    def backend_id(self) -> str:
        return self._backend.id()

    def dispatch(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list[bytes]:
        return self._backend._run(self, inputs, self.config if config is None or config is self.config else
                                  self._backend._pipe_config(self, config))

    def dispatch_borrowed(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list[bytes]:
        return self.dispatch(inputs, config)

    def dispatch_timed(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> TimedDispatchResult:
        return self._backend._run(self, inputs, self._backend._pipe_config(self, config), timed=True)

    def dispatch_async(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> PendingDispatch:
        return self._backend._run_async(self, inputs, self._backend._pipe_config(self, config))

    def dispatch_resident_timed(self, resources: Sequence[Resource],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        cfg = self._backend._pipe_config(self, config)
        return self._backend._bound_for(self, resources, cfg).run_timed(cfg)

    def bind(self, resources: Sequence[Resource], config: DispatchConfig | None = None) -> Any:
        cfg = self._backend._pipe_config(self, config)
        return Bound(self._backend, self, resources, cfg)

    def check_live(self) -> None:
        if self.generation != self._backend.generation:
            raise DeviceLost(f"this pipeline was compiled before the {self._backend.id()} backend "
                             "recovered; its device objects are gone.",
                             "compile the program again (vyre.driver.pipeline.compile or "
                             "backend.compile_native).", backend=self._backend.id())


_NONE: list = []   # an empty list that is never appended to (the common case of _enqueue)


def _on_gpu(x: Any) -> bool:
    """A DLPack producer whose memory is not the host's."""
    try:
        return int(x.__dlpack_device__()[0]) != 1   # 1: kDLCPU
    except Exception:
        return False


def grid_key(config: DispatchConfig) -> tuple:
    """The config fields that change the shape of a dispatch (cached on the config)."""
    key = config.__dict__.get("_grid_key")
    if key is None:
        key = (config.grid_override, config.dispatch_grid, config.dispatch_elements)
        object.__setattr__(config, "_grid_key", key)
    return key


class DeviceOutput:
    """One output of `EngineBackend.dispatch_device`: a device buffer the caller owns,
    ``nbytes`` long, of element type ``dtype``, readable in place through
    ``__cuda_array_interface__`` (1-D, the dtype's host type)."""

    __slots__ = ("__weakref__", "backend", "buffer", "dtype", "nbytes", "ptr", "stream")

    def __init__(self, buffer: Any, ptr: int, nbytes: int, dtype: Any, backend: str,
                 stream: int | None = None) -> None:
        self.buffer, self.ptr, self.nbytes, self.dtype, self.backend = buffer, ptr, nbytes, dtype, backend
        # the stream still writing it (an output of `dispatch_device(wait=False)`), which a
        # reader through the interface must order itself after; None: complete
        self.stream = stream

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        import numpy as np

        host = np.dtype(self.dtype.host)
        return {"shape": (self.nbytes // host.itemsize,), "typestr": host.str, "version": 3,
                "data": (self.ptr, False), "strides": None, "stream": self.stream}

    def __repr__(self) -> str:
        return f"<vyre DeviceOutput {self.dtype.value}[{self.nbytes // self.dtype.size}] on {self.backend}>"


class Flight:
    """One dispatch in flight: what it needs until its results are read."""

    __slots__ = ("deadline", "direct", "fence", "keep", "pipe", "prep", "sset", "token", "wrapped", "zeroed")

    def __init__(self, pipe: EnginePipeline, prep: Prepared, sset: StageSet, deadline: float | None) -> None:
        self.pipe, self.prep, self.sset, self.deadline = pipe, prep, sset, deadline
        self.fence: Any = None
        self.token: Any = None
        self.keep: tuple = ()
        # outputs read straight into the returned arrays once the dispatch is complete:
        # (output position, this dispatch's own device buffer, bytes, and on a zero-copy
        # device the array that buffer wraps, else None; the bytes object whose storage that
        # array is, for `dispatch`, else None)
        self.direct: tuple[tuple[int, Any, int, Any, bytes | None], ...] = ()
        # host arrays used in place (`Device.wrap_host`): (buffer, writable), unwrapped after
        # the wait; bound positions of outputs already zero (fresh zeroed arrays)
        self.wrapped: tuple[tuple[Any, bool], ...] = ()
        self.zeroed: tuple[int, ...] = ()


class EnginePending(PendingDispatch):
    """The handle of an asynchronous dispatch; safe to poll and await from several threads
    (the first awaiter completes it, the others get the same result or error)."""

    def __init__(self, backend: EngineBackend, flight: Flight, config: DispatchConfig,
                 ins: list[Input] | None, started: int) -> None:
        self._backend, self._flight, self._config, self._ins, self._started = \
            backend, flight, config, ins, started
        self._lock = threading.Lock()
        self._result: list[bytes] | None = None
        self._error: BaseException | None = None

    def is_ready(self) -> bool:
        if self._result is not None or self._error is not None:
            return True
        f = self._flight
        try:
            return f is None or self._backend.device.done(f.fence)
        except Exception:
            return True  # the device failed: await_result reports it

    def await_result(self, timeout: float | None = None) -> list[bytes]:
        if timeout is not None and not self._lock.acquire(timeout=max(0.0, timeout)):
            raise DispatchFailed(f"dispatch not finished after {timeout} s.", "wait longer, or "
                                 "dispatch less work per call.", backend=self._backend.id())
        if timeout is None:
            self._lock.acquire()
        try:
            if self._result is None and self._error is None:
                b, f = self._backend, self._flight
                if timeout is not None and not b.device.synchronous:
                    limit = time.monotonic() + timeout
                    while not b.device.done(f.fence):
                        if time.monotonic() > limit:
                            raise DispatchFailed(f"dispatch not finished after {timeout} s.",
                                                 "wait longer, or dispatch less work per call.",
                                                 backend=b.id())
                        time.sleep(0.0002)
                ok = False
                try:
                    outs = b._complete(f, self._config)
                    if self._config.fixpoint_iterations > 1:
                        outs = b._fixpoint_rest(f.pipe, self._ins or [], outs, self._config, f.deadline)
                    self._result = outs
                    ok = True
                except BaseException as exc:
                    self._error = exc
                finally:
                    self._flight = None
                    self._ins = None
                    observability.record_dispatch(b.name, _now() - self._started, ok, self._config.label)
            if self._error is not None:
                raise self._error
            return self._result  # type: ignore[return-value]
        finally:
            self._lock.release()


@answer_queries
class EngineBackend(VyreBackend):
    """A backend whose every entry point is the engine's recipe over ``self.device``, and
    whose every capability query is answered from the device's `Capabilities` (``caps``,
    read once here). A driver is a `Device` and nothing else: what depends on the program
    (`Device.refuse`) or on the vendor's lifecycle (`Device.attach`, `lost`, `renew`) are
    device hooks, so every engine backend is a plain ``EngineBackend(device)`` (a driver's
    factory builds one; tests/driver/test_capabilities.py checks no driver subclasses it)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.caps: Capabilities = device.capabilities()
        self.name = self.caps.id   # `id()`, as the hot paths read it
        self._direct = device.direct_host_copies
        # one in-order queue: enqueueing is serialised under this lock
        self.lock = threading.RLock()
        self._pipes = fifo(PIPELINES_PER_BACKEND, on_evict=self._drop)   # lock-free reads
        self._hits = self._misses = 0
        self._log_hits = log.isEnabledFor(logging.DEBUG)   # re-read on every compile (`_lookup`)
        self._ctls: list[Ctl] = []
        self.closed = False   # True after `shutdown()`: every later use is an error
        # timed-out kernels that could not stop: (fence, objects they may still write)
        self.runaway: list[tuple[Any, tuple]] = []
        self._draining: list[tuple[Any, tuple]] = []  # cancelled, not yet ended: kept alive
        self.generation = 0
        self._limits: Limits | None = None
        # bumped whenever the backend leaves its plain state (shutdown, recovery, a kernel
        # that could not stop): hot paths compare it instead of re-checking everything
        self.epoch = 0
        self._inflight = timed_build.InFlight()   # builds a timed-out dispatch left running
        # per thread: its `dispatch_device(wait=False)` calls not yet covered by a wait
        # (`_settle`): (prep, stage set, reads the control block, inputs kept alive)
        self._later = threading.local()

    def __repr__(self) -> str:
        name = self.device_profile().device_name or "?"
        return f"<{type(self).__name__} {self.id()} {self.version()} on {name}>"

    # ---- declared limits (engine checks, from the record) --------------------------------
    def max_grid_size(self) -> tuple[int, int, int]:
        """Workgroups per axis of one launch."""
        return self.caps.grid

    def max_invocations_per_dispatch(self) -> int:
        """Total invocations of one launch."""
        return self.caps.max_invocations_per_dispatch

    def device_fingerprint(self) -> bytes:
        fp = self.caps.fingerprint
        return fp if fp is not None else super().device_fingerprint()

    def limits(self) -> Limits:
        if self._limits is None:
            prof = self.device_profile()
            self._limits = Limits(tuple(self.max_workgroup_size()), self.max_compute_invocations_per_workgroup(),
                                  self.max_grid_size(), self.max_invocations_per_dispatch(),
                                  prof.max_shared_memory_bytes, self.max_storage_buffer_bytes())
        return self._limits

    # ---- 1. config -----------------------------------------------------------------------
    def _config(self, config: Any) -> DispatchConfig:
        if config is None:
            return DEFAULT
        if type(config) is not DispatchConfig and not isinstance(config, DispatchConfig):
            raise InvalidProgram(f"config is a {type(config).__name__}, not a DispatchConfig.",
                                 "pass vyre.driver.DispatchConfig(...) or None.", backend=self.id())
        if config.cooperative and not self.supports_grid_sync():
            raise UnsupportedFeature("cooperative (single-launch grid barrier) dispatch", self.id(),
                                     "drop cooperative=True: grid_sync programs still run, as one "
                                     "launch per phase; or use a backend that reports "
                                     "supports_grid_sync().")
        return config

    def _pipe_config(self, pipe: EnginePipeline, config: Any) -> DispatchConfig:
        if config is None:
            return pipe.config
        config = self._config(config)
        if config.code_key() != pipe.config.code_key():
            raise InvalidProgram("the dispatch config changes code-affecting fields (ulp_budget, "
                                 "workgroup_override, specialization) of a compiled pipeline.",
                                 "compile the program again with that config.", backend=self.id())
        return config

    # ---- 2. pipelines --------------------------------------------------------------------
    def usable(self) -> None:
        """Raise unless dispatches may be enqueued: after `shutdown()`, or while a kernel that
        could not be cancelled still runs (`runaway`)."""
        if self.closed:
            raise DispatchFailed(f"the {self.id()} backend was shut down.",
                                 f"acquire it again: vyre.driver.acquire({self.id()!r}) returns a new "
                                 "instance.", backend=self.id())
        if self._draining:
            self._draining = [(f, k) for f, k in self._draining if not self.device.done(f)]
        if self.runaway:
            dev = self.device
            self.runaway = [(f, k) for f, k in self.runaway if not dev.done(f)]
            if self.runaway:
                raise DeviceLost("a timed-out dispatch whose kernel cannot be cancelled is still "
                                 "running on the device.", "wait for it to finish, or call "
                                 "backend.try_recover() (a fresh queue; compiled pipelines are "
                                 "invalidated).", backend=self.id())
        self.device.attach()

    def refuse(self, program: Program) -> None:
        """The device's target checks (`Device.refuse`)."""
        self.device.refuse(program)

    def device_lost(self) -> bool:
        """The device's own report (`Device.lost`)."""
        return self.device.lost()

    def _validate(self, program: Any) -> None:
        if not isinstance(program, Program):
            raise InvalidProgram(f"expected a vyre Program, got {type(program).__name__}.",
                                 "build one with vyre.ir.Program.wrapped(...) or @vyre.kernel.",
                                 backend=self.id())
        VALIDATION_CACHE.require_valid(program, self.id())

    def _pipeline(self, program: Program, config: DispatchConfig) -> EnginePipeline:
        # fast path: this very (immutable, already validated) program object compiled here before
        mine = getattr(program, "__dict__", {}).get("_vyre_pipes")
        if mine is not None:
            pipe = mine.get((id(self), config.code_key()))
            if pipe is not None and pipe.generation == self.generation and not self.closed:
                self._hits += 1
                if self._log_hits:
                    self._log_hit(pipe.program)
                return pipe
        pipe = self._lookup(program, config)
        program.__dict__.setdefault("_vyre_pipes", {})[(id(self), config.code_key())] = pipe
        return pipe

    def _lookup(self, program: Program, config: DispatchConfig) -> EnginePipeline:
        if not isinstance(program, Program):
            self._validate(program)
        try:
            ident = identity(program)
        except Exception:  # a malformed object cannot be encoded: validation says why
            self._validate(program)
            raise
        code = config.code_key()
        key = (ident, code)
        pipe = self._pipes.get(key)
        if pipe is not None:
            self._hits += 1
            if self._log_hits:
                self._log_hit(program)
            return pipe
        with self.lock:
            self.usable()
            pipe = self._pipes.get(key)
            if pipe is not None:
                self._hits += 1
                if self._log_hits:
                    self._log_hit(program)
                return pipe
            art = self._artifacts()
            akey = art.key(ident, code) if art is not None else b""
            started = time.perf_counter()
            loaded = load_program(art, akey, self.device, program, config, self.id()) if art is not None else None
            if loaded is not None:
                eff, kernel = loaded
                how = "loaded from the disk cache"
            else:
                eff, kernel, meta, binary = self._compile(program, config)
                how = f"built ({kernel.built_from})"
                if art is not None and meta is not None and binary is not None:
                    meta["atomics"] = uses_atomics(eff)
                    meta["bound"] = [b.name for b in eff.facts.bound]
                    meta["fingerprint"] = fingerprint(program).hex()
                    art.put(akey, meta, binary)
            pipe = EnginePipeline(self, program, eff, config, kernel)
            self._pipes[key] = pipe
            self._misses += 1
            self._log_hits = log.isEnabledFor(logging.DEBUG)
            if self._log_hits:
                log.debug("vyre.engine: %s: program %s %s in %.1f ms", self.id(), ident.hex()[:12], how,
                          (time.perf_counter() - started) * 1e3)
            return pipe

    def _log_hit(self, program: Program) -> None:
        """A debug line for an in-memory pipeline-cache hit. Called only while ``_log_hits``
        (whether DEBUG was on at construction or at the last compile), so a warm dispatch
        with debug off pays one attribute test."""
        log.debug("vyre.engine: %s: program %s from the in-memory pipeline cache", self.id(),
                  identity(program).hex()[:12])

    #: packages whose source decides this backend's generated code (the artifact-cache key)
    CODEGEN: tuple[str, ...] = ()

    def _artifacts(self) -> ArtifactCache | None:
        """The on-disk cache of compiled programs, where the device can rebuild kernels from
        binaries (see `vyre.driver.engine.artifacts`)."""
        art = self.__dict__.get("_artifact_cache", False)
        if art is False:
            art = None
            if type(self.device).load is not Device.load:
                art = ArtifactCache(self.id(), self.version(), self.device_fingerprint(),
                                    (type(self.device).__module__.rsplit(".", 1)[0], *self.CODEGEN))
            self.__dict__["_artifact_cache"] = art
        return art

    def _compile(self, program: Program, config: DispatchConfig) -> tuple[Program, Any, Any, Any]:
        """Validate, specialize, check ops and limits, and build."""
        self._validate(program)
        try:
            eff = effective_program(program, config)
        except VyreError as err:
            raise from_foundation(err, self.id()) from None
        if eff is not program:
            self._validate(eff)  # a workgroup override can break barrier/subgroup rules
        refused = refusals(eff, self)   # ops, limits, then the target's own checks
        if refused:
            raise refused[0].error(self.id())
        return (eff, *self._build(eff, config.timeout))

    def precompile(self, programs: Sequence[Any]) -> int:
        """Build many programs (or (program, config) pairs) at once, before their first
        dispatches: in worker processes (`vyre.driver.engine.farm`) where the device has a
        compiler, each kept in the artifact cache (`adopt`); else through the device's own
        `Device.precompile`. A program that fails here is built, or refused, on its dispatch.
        Returns how many were built."""
        items: list[tuple[Program, DispatchConfig]] = []
        for item in programs:
            program, config = item if isinstance(item, tuple) else (item, None)
            try:
                config = self._config(config)
            except VyreError:
                continue   # its dispatch reports it
            if isinstance(program, Program):
                items.append((program, config))
        try:
            compiler = self.device.compiler()
            if compiler is None:
                return self.device.precompile(self._effective_runnable(items))
            return self._farm(compiler, items)
        except Exception as exc:   # a warm-up never fails the caller: dispatches build on demand
            log.warning("vyre %s: precompile failed (%s); programs build on first dispatch", self.id(), exc)
            return 0

    def _effective_runnable(self, items: list[tuple[Program, DispatchConfig]]) -> list[Program]:
        effective = []
        for program, config in items:
            try:
                self._validate(program)
                eff = effective_program(program, config)
                if eff is not program:
                    self._validate(eff)
            except VyreError:
                continue
            if not refusals(eff, self):
                effective.append(eff)
        return effective

    def _farm(self, compiler: Any, items: list[tuple[Program, DispatchConfig]]) -> int:
        from . import farm

        art = self._artifacts()
        if art is None:
            return 0
        todo = [(p, c) for p, c in items if art.get(art.key(identity(p), c.code_key())) is None]
        jobs = [(compiler, group) for group in farm.batched(farm.encode_all(todo))]
        results = (got for batch in farm.run_jobs(farm.build_batch, jobs) for got in batch)
        built = 0
        for (program, config), got in zip(todo, results):
            if got is not None and self.adopt(program, config, *got):
                built += 1
        return built

    def adopt(self, program: Program, config: DispatchConfig | None, meta: dict[str, Any], binary: bytes) -> bool:
        """Keep a kernel built in another process (`vyre.driver.engine.farm.build_job`, which
        validated the program) for ``program`` under ``config``: unless this backend refuses
        the program, it goes to the artifact cache, and the program's first dispatch loads it
        as a later process would. False when it was not kept (the dispatch builds or refuses
        the program itself)."""
        art = self._artifacts()
        if art is None:
            return False
        config = self._config(config)
        try:
            eff = effective_program(program, config)
            if refusals(eff, self):
                return False
            art.put(art.key(identity(program), config.code_key()), meta, binary)
        except (VyreError, OSError):
            return False
        return True

    def _build(self, program: Program, timeout: float | None = None) -> tuple[Any, Any, Any]:
        """`Device.compile`, its failures as vyre errors. With a ``timeout`` (the dispatch's),
        never waits longer for it (`vyre.driver.engine.timed_build`); without one, builds in
        this thread as always, unless a timed-out dispatch left this program's build running
        (then it waits for that build)."""
        try:
            if timeout is None and not (self._inflight and self._inflight.waiting(identity(program))):
                return self.device.compile(program)
            return timed_build.build(self.device, self._inflight, program, timeout, self.id())
        except BuildTimedOut as exc:
            raise build_timed_out(timeout, self.id(), exc.stopped) from None
        except BackendError:
            raise
        except VyreError as err:
            raise from_foundation(err, self.id()) from None
        except OSError as exc:  # a full disk or file-size limit while writing build artifacts
            from ..errors import KernelCompileFailed

            raise KernelCompileFailed(f"building the kernel failed with an I/O error ({exc}).",
                                      "free disk space or point VYRE_CACHE_DIR somewhere writable.",
                                      backend=self.id()) from None
        except Exception as exc:
            raise self.device.error(exc) from None

    def _drop(self, pipe: EnginePipeline) -> None:
        """Forget a pipeline's device objects (freed once no dispatch in flight holds them)."""
        pipe.prepared.clear()
        for bound in list(pipe.bounds.values()):
            bound.release()

    def compile_native(self, program: Program, config: DispatchConfig | None = None) -> EnginePipeline:
        return self._pipeline(program, self._config(config))

    def pipeline_cache_snapshot(self) -> PipelineCacheSnapshot:
        return PipelineCacheSnapshot(self._hits, self._misses, len(self._pipes), len(self._pipes))

    def generated_source(self, program: Program, config: DispatchConfig | None = None) -> str | None:
        """The target source this backend compiles for ``program`` (None: no source)."""
        return self._pipeline(program, self._config(config)).kernel.source

    # ---- 3. inputs -----------------------------------------------------------------------
    def _inputs(self, pipe: EnginePipeline, inputs: Any) -> list[Input]:
        return pipe.check(inputs)

    # ---- 4. shape, limits, budget ----------------------------------------------------------
    def _prepared(self, pipe: EnginePipeline, sizes: tuple[int, ...], config: DispatchConfig) -> Prepared:
        key = (sizes, grid_key(config))
        prep = pipe.prepared.get(key)
        if prep is None:
            with pipe._lock:
                prep = pipe.prepared.get(key)
                if prep is None:
                    prep = self._make_prepared(pipe, sizes, config)
                    pipe.prepared[key] = prep   # an evicted shape is freed when no dispatch holds it
        if config.max_output_bytes is not None and prep.out_nbytes > config.max_output_bytes:
            raise InvalidProgram(
                f"dispatch would produce {prep.out_nbytes} output bytes, over max_output_bytes="
                f"{config.max_output_bytes}.", "raise DispatchConfig.max_output_bytes or shrink the "
                "outputs (declare smaller counts or pass smaller inputs).", backend=self.id())
        return prep

    def _shed_cached_buffers(self, keep: Prepared) -> None:
        """Forget every cached shape but ``keep``, so their device buffers return to the
        device (dispatches in flight hold their own shape, and with it its buffers)."""
        for pipe in list(self._pipes.values()):
            for key, prep in list(pipe.prepared.items()):
                if prep is not keep:
                    pipe.prepared.pop(key, None)
            pipe.warm.clear()   # plans hold shapes too
        gc.collect()
        self.device.trim()

    def _make_prepared(self, pipe: EnginePipeline, sizes: tuple[int, ...], config: DispatchConfig) -> Prepared:
        launch = launch_for_sizes(pipe.effective, sizes, config, self.id())
        lim = self.limits()
        wg = pipe.effective.workgroup_size
        if any(g * w > MAX_GLOBAL_AXIS for g, w in zip(launch.grid, wg)):
            raise LimitExceeded("grid", f"grid {launch.grid} of {wg} workgroups has more than "
                                f"{MAX_GLOBAL_AXIS} invocations on an axis (gid is a u32).",
                                "split the work into several dispatches.", backend=self.id())
        if any(g > m for g, m in zip(launch.grid, lim.max_grid)):
            raise LimitExceeded("grid", f"grid {launch.grid} exceeds this device's {lim.max_grid} "
                                "workgroups per axis.", "spread the work over more axes "
                                "(dispatch_grid/grid_override) or several dispatches.", backend=self.id())
        total = launch.workgroups * pipe.effective.invocations_per_workgroup
        if total > lim.max_invocations_per_dispatch:
            raise LimitExceeded("invocations", f"the dispatch has {total} invocations; this backend "
                                f"runs at most {lim.max_invocations_per_dispatch} per dispatch.",
                                "split the work into several dispatches.", backend=self.id())
        shape = dispatch_shape(pipe.effective, launch)
        for b in shape.buffers:
            if b.nbytes > lim.max_buffer_bytes:
                raise LimitExceeded("buffer_bytes", f"buffer {b.name!r} needs {b.nbytes} bytes; this "
                                    f"device's limit is {lim.max_buffer_bytes}.",
                                    "split the data over several dispatches.", backend=self.id())
        prep = Prepared(pipe.kernel, shape, len(pipe.effective.inputs), lim)
        prep.staged = all(b.padded < DIRECT_BYTES for b in shape.buffers)   # `_run_staged`
        for (pos, _), words in zip(pipe.kernel.scratch, prep.scratch):
            if words > 0xFFFFFFFF or 4 * words > lim.max_buffer_bytes:
                target = shape.buffers[pos]
                raise LimitExceeded("buffer_bytes", f"the float atomics on {target.name!r} ({target.count} "
                                    f"elements) need a hidden accumulator of {4 * words} bytes; this "
                                    f"device's limit is {min(lim.max_buffer_bytes, 4 * 0xFFFFFFFF)}.",
                                    "accumulate into fewer elements per dispatch (split the buffer), "
                                    "or use float atomic MIN/MAX (4 bytes per element).", backend=self.id())
        if prep.final_grid is not None and prep.final_grid[0] > lim.max_grid[0]:
            raise LimitExceeded("grid", f"finalising the float atomics needs {prep.final_grid[0]} "
                                f"workgroups, over this device's {lim.max_grid[0]}.",
                                "use larger workgroups or accumulate into fewer elements per dispatch.",
                                backend=self.id())
        return prep

    # ---- control blocks --------------------------------------------------------------------
    def ctl_take(self) -> Ctl:
        """A control block for a dispatch (reused, or new from the device)."""
        try:
            return self._ctls.pop()
        except IndexError:
            return self.device.ctl_alloc()

    def ctl_give(self, ctl: Ctl) -> None:
        """Return a control block no dispatch in flight uses any more."""
        self._ctls.append(ctl)

    # ---- 5. enqueue --------------------------------------------------------------------------
    def _enqueue(self, pipe: EnginePipeline, prep: Prepared, ins: list[Input], config: DispatchConfig,
                 deadline: float | None, timed: bool, fence: bool = True,
                 device_outputs: bool = False, outputs: list[DeviceInput] | None = None,
                 direct: bool = False, direct_reads: bool = False, as_bytes: bool = False) -> Flight:
        """Stage, launch and read back one dispatch. With ``fence`` False the caller waits
        with `Device.finish` instead (synchronous calls without a deadline). With
        ``device_outputs`` every output gets its own fresh device buffer, left on the device
        (``flight.keep`` starts with them, in output order) instead of read back; ``outputs``
        (checked device arrays of exactly each output's bytes) are those buffers when given.
        With ``direct`` (a call that waits for this dispatch, on a device with direct host
        copies) large host inputs are uploaded from the caller's memory, or on a `zero_copy`
        device read there in place (only inputs the program never writes); with
        ``direct_reads`` too (it wants arrays, or bytes on a zero-copy device: ``as_bytes``)
        large outputs go to buffers of this dispatch, read straight into the arrays by
        `_complete` (zero-copy: written into them, or into the bytes)."""
        dev = self.device
        lock = self.lock
        lock.acquire()
        try:
            sset = self._take(pipe, prep)
            flight = Flight(pipe, prep, sset, deadline)
            try:
                bufs = prep.buffers(dev)
                packed = sset.packed
                views: list[Any] | None = None
                waited: list[Any] = _NONE   # producer streams this dispatch is ordered after
                tails: list[tuple[Any, Any, int]] = _NONE   # (caller's output, padded buffer, bytes)
                if device_outputs:   # outputs the caller will own: never the reused buffers
                    waited, tails = [], []
                    views = bufs = self._fresh_outputs(prep, bufs, outputs, flight, waited, tails)
                elif direct_reads and prep.out_nbytes >= DIRECT_BYTES:
                    views = bufs = self._direct_outputs(prep, bufs, flight, as_bytes)
                direct_min = 0 if dev.synchronous else DIRECT_BYTES if direct else -1
                wrap = direct and dev.zero_copy
                for pos, index, nbytes in prep.copies_in:
                    x = ins[index]
                    if type(x) is not DeviceInput:
                        if nbytes:
                            if 0 <= direct_min <= nbytes == x.nbytes:
                                if wrap and prep.shape.buffers[pos].output_index is None:
                                    # read in place until the call returns (never written)
                                    views = list(bufs) if views is None else views
                                    views[pos] = dev.wrap_host(x, False)
                                    flight.wrapped += ((views[pos], False),)
                                else:
                                    dev.upload(bufs[pos], x, nbytes)   # the caller's words, read now
                            else:
                                host = sset.ins[index]
                                host.stage(x)   # staged now: never read later
                                dev.upload(bufs[pos], host, nbytes)
                    else:
                        if x.stream is not None and x.stream not in waited:
                            dev.order_after(x.stream)   # after the producer's work on it
                            waited = [*waited, x.stream]
                        view = dev.view(x.ptr, x.nbytes, x.value)
                        if prep.shape.buffers[pos].output_index is None:
                            views = list(bufs) if views is None else views
                            views[pos] = view   # read in place: no copy at all
                        elif x.nbytes:
                            dev.copy(bufs[pos], view, x.nbytes)  # never write the caller's array
                        flight.keep += (view, x.value)
                if views is not None:
                    packed = dev.pack_once(prep.kernel, views, prep.counts, sset.ctl)
                for pos, nbytes in prep.zero:
                    if pos not in flight.zeroed:
                        dev.zero(bufs[pos], nbytes)
                uses_ctl = prep.kernel.uses_ctl
                flight.token = self._launch(prep, sset, packed, views if views is not None else bufs, deadline, timed)
                for view, buf, exact in tails:
                    dev.copy(view, buf, exact)
                if not device_outputs:
                    for (pos, nbytes, exact), host in zip(prep.outs, sset.outs):
                        if nbytes and not (flight.direct and exact >= DIRECT_BYTES):
                            dev.download(host, bufs[pos], nbytes)
                if uses_ctl:
                    dev.ctl_fetch(sset.ctl)
                if fence:
                    flight.fence = dev.fence()
            except BaseException as exc:
                if flight.wrapped:   # host memory this dispatch's queued work may still use
                    try:
                        dev.finish()
                    except BaseException:   # the first error is the one to raise
                        pass
                raise self._aborted(prep, sset, exc, config) from None
        finally:
            lock.release()
        return flight

    def _fresh_outputs(self, prep: Prepared, bufs: list[Any], outputs: list[DeviceInput] | None, flight: Flight,
                       waited: list[Any], tails: list[tuple[Any, Any, int]]) -> list[Any]:
        """`_enqueue`'s buffers with each output replaced by a buffer the caller will own: a
        fresh device allocation, or the caller's array from ``outputs`` (ordered after its
        allocator's stream; a narrow output whose bytes are not whole words gets a padded
        buffer, copied into it after the launch: ``tails``). ``flight.keep`` holds them."""
        dev = self.device
        bufs = list(bufs)
        fresh: list[Any] = []
        for i, (pos, nbytes, exact) in enumerate(prep.outs):
            if outputs is None:
                bufs[pos] = dev.alloc(nbytes)
                fresh.append(bufs[pos])
                continue
            o = outputs[i]
            if o.stream is not None and o.stream not in waited:
                dev.order_after(o.stream)   # the allocator's last use of the memory
                waited.append(o.stream)
            view = dev.view(o.ptr, o.nbytes, o.value)
            if nbytes == exact:
                bufs[pos] = view
            else:
                bufs[pos] = dev.alloc(nbytes)
                tails.append((view, bufs[pos], exact))
            fresh.append(o.value)
        flight.keep = tuple(fresh) if not tails else tuple(fresh) + tuple(b for _, b, _ in tails)
        return bufs

    def _direct_outputs(self, prep: Prepared, bufs: list[Any], flight: Flight, as_bytes: bool) -> list[Any]:
        """`_enqueue`'s buffers with each large output replaced by a buffer of this dispatch
        alone (``flight.direct``), which `_complete` reads straight into the returned array:
        a later dispatch reuses the cached buffers, so they cannot be read after the wait.
        On a `zero_copy` device that buffer is the returned array itself (zeroed when made,
        where it must be: ``flight.zeroed``), and nothing is read; for ``as_bytes``
        (`dispatch`), the returned bytes object's storage (`hostbytes.fresh`), where the
        output is whole words."""
        dev = self.device
        bufs = list(bufs)
        direct = []
        zero = {pos for pos, _ in prep.zero}
        for i, (pos, nbytes, exact) in enumerate(prep.outs):
            if exact >= DIRECT_BYTES:
                if dev.zero_copy:   # zeroed here where the launch may leave elements unwritten
                    held = None
                    if as_bytes and nbytes == exact:   # written into the bytes `dispatch` returns
                        held, raw = hostbytes.fresh(exact)
                        words = raw.view(np.uint32)
                        if pos in zero:
                            words.fill(0)
                    else:
                        words = (np.zeros if pos in zero else np.empty)(nbytes // 4, np.uint32)
                    bufs[pos] = dev.wrap_host(words, True)
                    flight.wrapped += ((bufs[pos], True),)
                    flight.zeroed += (pos,)
                    direct.append((i, bufs[pos], exact, words, held))
                else:
                    bufs[pos] = dev.alloc(nbytes)
                    direct.append((i, bufs[pos], exact, None, None))
        flight.direct = tuple(direct)
        return bufs

    def failure(self, exc: BaseException) -> BaseException:
        """The exception to raise for ``exc`` (a `BackendError`; interrupts stay themselves)."""
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, VyreError):
            return from_foundation(exc, self.id())
        if isinstance(exc, MemoryError):
            return DeviceOutOfMemory(0, None, backend=self.id(),
                                     fix="dispatch smaller inputs: the host ran out of memory.")
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return exc
        return self.device.error(exc)

    # ---- 6. complete -------------------------------------------------------------------------
    def wait_fence(self, fence: Any, deadline: float | None, ctls: Sequence[Ctl], keep: tuple,
                   config: DispatchConfig, stoppable: bool = True) -> bool:
        """Wait for ``fence``. At the deadline: raise each dispatch's cancel word and give the
        kernels a moment to stop. A kernel that polls its cancel word stops as soon as it runs,
        even if it still waits behind other work: its memory is kept alive until its fence
        completes (draining), and other dispatches go on. A kernel that cannot stop is never
        queued behind: the queue is abandoned and the backend reports `DeviceLost` until the
        kernel ends or `try_recover()`. Raises `DispatchFailed` on timeout."""
        dev = self.device
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            if dev.wait(fence, remaining):
                return True
        except BaseException as exc:
            raise self.failure(exc) from None
        cancelled = all([dev.ctl_cancel(c) for c in ctls]) and bool(ctls)
        if not dev.wait(fence, CANCEL_GRACE_S if cancelled else 0.0):
            with self.lock:
                if cancelled and stoppable:
                    self._draining.append((fence, keep))
                else:
                    dev.abandon()
                    self.runaway.append((fence, keep))
                    self.epoch += 1
        raise timed_out(config.timeout, self.id())

    def _complete(self, flight: Flight, config: DispatchConfig, read: bool = True,
                  arrays: Sequence[Any] | None = None) -> list[Any]:
        """Wait for a dispatch, raise its error, and return its outputs' bytes (none when
        ``read`` is False: the outputs stayed on the device; numpy arrays of the dtypes
        ``arrays`` names when given: one copy out of the staging, no bytes in between)."""
        prep, sset = flight.prep, flight.sset
        try:
            if flight.fence is None:
                self.device.finish()
            else:
                self.wait_fence(flight.fence, flight.deadline, (sset.ctl,) if prep.kernel.uses_ctl else (),
                           (prep, sset, flight.keep), config, prep.kernel.stoppable)
        except DispatchFailed:
            self._forget_later()
            if not any(f is flight.fence for f, _ in self.runaway + self._draining):
                prep.give(sset)   # the kernel stopped: its staging is free again
            raise
        except BaseException as exc:
            self._forget_later()
            raise self.failure(exc) from None
        if flight.wrapped:
            self._unwrap(flight)
        try:
            self._settle()   # the wait covered what this thread enqueued before it
        except BaseException:
            prep.give(sset)
            raise
        if prep.kernel.uses_ctl and sset.ctl.words[0]:
            word = int(sset.ctl.words[0])
            prep.give(sset)
            raise ctl_failure(word, self.id())
        if not read:
            outs: list[Any] = []
        elif arrays is None:
            outs = [v.tobytes() for v in sset.views] if not flight.direct else self._read_direct_bytes(flight)
        else:
            outs = [v.view(dt).copy() for v, dt in zip(sset.views, arrays)] if not flight.direct else \
                self._read_direct(flight, arrays)
        prep.give(sset)
        return outs

    def _unwrap(self, flight: Flight) -> None:
        """Release the host arrays a completed dispatch used in place (its outputs' writes
        are then in their arrays)."""
        try:
            for buf, writable in flight.wrapped:
                self.device.unwrap_host(buf, writable)
        except BaseException as exc:
            raise self.failure(exc) from None
        flight.wrapped = ()

    def _read_direct(self, flight: Flight, arrays: Sequence[Any]) -> list[Any]:
        """The outputs of a completed dispatch with direct outputs (`_direct_outputs`): those
        read straight from their buffers into fresh arrays, the others from the staging."""
        dev = self.device
        outs = [None if v.nbytes >= DIRECT_BYTES else v.view(dt).copy()
                for v, dt in zip(flight.sset.views, arrays)]
        for i, buf, exact, words, _ in flight.direct:
            dt = np.dtype(arrays[i])
            if words is not None:   # written in place (`unwrap_host` made it visible)
                outs[i] = words.view(np.uint8)[:exact].view(dt)
                continue
            arr = np.empty(exact // dt.itemsize, dt)
            try:
                dev.read(arr, buf, exact)
            except BaseException as exc:
                raise self.failure(exc) from None
            outs[i] = arr
            dev.free(buf)
        flight.direct = ()
        return outs

    def _read_direct_bytes(self, flight: Flight) -> list[bytes]:
        """`_read_direct` for `dispatch` on a zero-copy device: each large output is the bytes
        object it was written into, or (a padded narrow output) its words' exact bytes."""
        outs: list[Any] = [None if v.nbytes >= DIRECT_BYTES else v.tobytes() for v in flight.sset.views]
        for i, _, exact, words, held in flight.direct:
            assert words is not None   # (zero-copy only: `_run`)
            outs[i] = held if held is not None else words.view(np.uint8)[:exact].tobytes()
        flight.direct = ()
        return outs

    # ---- the synchronous recipe ------------------------------------------------------------
    def _run(self, pipe: EnginePipeline, inputs: Any, config: DispatchConfig, *, timed: bool = False,
             arrays: bool = False) -> Any:
        started = time.perf_counter_ns()
        ok = False
        try:
            ins = pipe.check(inputs)
            prep = self._prepared(pipe, tuple([x.nbytes for x in ins]), config)
            if prep.staged and not timed and config.plain and not self.device.synchronous:
                for x in ins:
                    if type(x) is DeviceInput:
                        break
                else:
                    outs = self._run_staged(pipe, prep, cast("list[np.ndarray]", ins), config, arrays)
                    ok = True
                    return outs
            deadline = None if config.timeout is None else time.monotonic() + config.timeout
            if deadline is None and not timed:
                direct = self._direct and config.fixpoint_iterations == 1
                # large outputs straight into the returned arrays, or on a zero-copy device into
                # the returned bytes (`hostbytes`)
                flight = self._enqueue(pipe, prep, ins, config, None, False, False, direct=direct,
                                       direct_reads=direct and (arrays or self.device.zero_copy),
                                       as_bytes=not arrays)
            else:
                flight = self._enqueue(pipe, prep, ins, config, deadline, timed)
            if timed:
                enqueued = _now()
            dtypes = pipe.out_dtypes if arrays and config.fixpoint_iterations <= 1 else None
            outs = self._complete(flight, config, arrays=dtypes)
            if config.fixpoint_iterations > 1:
                outs = self._fixpoint_rest(pipe, ins, outs, config, deadline)
                if arrays:
                    outs = [np.frombuffer(r, dtype=dt).copy() for r, dt in zip(outs, pipe.out_dtypes)]
            ok = True
            if timed:
                end = _now()
                device_ns = self.device.elapsed_ns(flight.token) if flight.token is not None else None
                return TimedDispatchResult(outs, end - started, device_ns, enqueued - started, end - enqueued)
            return outs
        finally:
            observability.record_dispatch(self.name, time.perf_counter_ns() - started, ok, config.label)

    def _run_staged(self, pipe: EnginePipeline, prep: Prepared, ins: list[np.ndarray], config: DispatchConfig,
                    arrays: bool) -> list[Any]:
        """`_enqueue` and `_complete` of a synchronous dispatch with a plain config whose
        inputs are all host arrays and whose buffers are all below `DIRECT_BYTES`
        (``prep.staged``), straight through: every input staged and uploaded, the kernels
        launched, every output read back into staging, then the device's finish; the
        outputs as bytes, or as arrays of the outputs' dtypes (``arrays``)."""
        dev = self.device
        lock = self.lock
        lock.acquire()
        try:
            sset = self._take(pipe, prep)
            try:
                bufs = prep.buffers(dev)
                staging = sset.ins
                for pos, index, nbytes in prep.copies_in:
                    host = staging[index]
                    if host is not None:   # none for an empty input
                        host.stage(ins[index])   # staged now: never read later
                        dev.upload(bufs[pos], host, nbytes)
                for pos, nbytes in prep.zero:
                    dev.zero(bufs[pos], nbytes)
                uses_ctl = prep.kernel.uses_ctl
                self._launch(prep, sset, sset.packed, bufs, None, False)
                for (pos, nbytes, _), host in zip(prep.outs, sset.outs):
                    if nbytes:
                        dev.download(host, bufs[pos], nbytes)
                if uses_ctl:
                    dev.ctl_fetch(sset.ctl)
            except BaseException as exc:
                raise self._aborted(prep, sset, exc, config) from None
        finally:
            lock.release()
        self._finish_straight(prep, sset, uses_ctl)
        outs = [v.view(dt).copy() for v, dt in zip(sset.views, pipe.out_dtypes)] if arrays else \
            [v.tobytes() for v in sset.views]
        prep.give(sset)
        return outs

    def _take(self, pipe: EnginePipeline, prep: Prepared) -> StageSet:
        """With the engine lock held: check the backend and the pipeline are still usable, then
        take a stage set of ``prep`` (on running out of device memory, cached shapes give
        theirs back and it is taken once more)."""
        if self.closed or self.runaway or self._draining:
            self.usable()
        if pipe.generation != self.generation:
            pipe.check_live()
        try:
            return prep.take(self.device, self.ctl_take)
        except DeviceOutOfMemory:   # cached shapes hold device buffers: drop them, retry once
            self._shed_cached_buffers(prep)
            return prep.take(self.device, self.ctl_take)

    def _launch(self, prep: Prepared, sset: StageSet, packed: Any, bufs: Sequence[Any], deadline: float | None,
                timed: bool) -> Any:
        """The kernels' launch (with the engine lock held), the control block reset first where
        the kernel reads it; the device's timing token."""
        if prep.kernel.uses_ctl:
            sset.ctl.deadline = deadline
            self.device.ctl_reset(sset.ctl)
        return prep.launch(self.device, packed, bufs, timed)

    def _owned(self, pipe: EnginePipeline, prep: Prepared, bufs: Sequence[Any],
               stream: int | None = None) -> list[DeviceOutput]:
        """Fresh device buffers of ``dispatch_device`` as the `DeviceOutput`s the caller owns
        (``stream``: the stream still writing them)."""
        dev, backend = self.device, self.name
        return [DeviceOutput(buf, dev.device_pointer(buf), exact, d.dtype, backend, stream)
                for buf, (_, _, exact), d in zip(bufs, prep.outs, pipe.outputs)]

    # ---- dispatches not waited for (`dispatch_device(wait=False)`) ---------------------------
    def _settle(self) -> None:
        """After a wait that covered all this thread has enqueued: each dispatch it did not
        wait for gives its staging back, and the first control-block error among them is
        raised (they came before the one waited for)."""
        items = getattr(self._later, "items", None)
        if not items:
            return
        self._later.items = []
        word = 0
        for prep, sset, uses_ctl, _ in items:
            if uses_ctl and sset.ctl.words[0] and not word:
                word = int(sset.ctl.words[0])
            prep.give(sset)
        if word:
            raise ctl_failure(word, self.id())

    def _forget_later(self) -> None:
        """A wait failed (the queue is broken or abandoned): the dispatches not waited for
        give their staging back and are forgotten; the failure is what the caller sees."""
        items = getattr(self._later, "items", None)
        if items:
            self._later.items = []
            for prep, sset, _, _ in items:
                prep.give(sset)

    def wait_deferred(self) -> None:
        """Wait for this thread's `dispatch_device(wait=False)` calls (additive method): when it
        returns their outputs are complete; raises the first one's error."""
        items = getattr(self._later, "items", None)
        if not items:
            return
        try:
            with self.lock:
                self.device.finish()
        except BaseException as exc:
            self._forget_later()
            raise self.failure(exc) from None
        self._settle()

    def _aborted(self, prep: Prepared, sset: StageSet, exc: BaseException, config: DispatchConfig) -> BaseException:
        """What to raise when enqueueing a dispatch failed: a cancelled one (its deadline passed
        while it was enqueued) as the timeout, anything else as the device's error; the stage
        set goes back where nothing can still be using it."""
        if isinstance(exc, Cancelled):
            prep.give(sset)
            return timed_out(config.timeout, self.id())
        if self.device.synchronous:
            prep.give(sset)
        return self.failure(exc)

    def _finish_straight(self, prep: Prepared, sset: StageSet, uses_ctl: bool) -> None:
        """`_complete` of a straight-through dispatch (no fence): the device's finish, then the
        control block's error word; the stage set goes back on an error (on success the
        caller gives it back after reading its outputs)."""
        try:
            self.device.finish()
        except DispatchFailed:
            self._forget_later()
            prep.give(sset)
            raise
        except BaseException as exc:
            self._forget_later()
            raise self.failure(exc) from None
        try:
            self._settle()
        except BaseException:
            prep.give(sset)
            raise
        if uses_ctl and sset.ctl.words[0]:
            word = int(sset.ctl.words[0])
            prep.give(sset)
            raise ctl_failure(word, self.id())

    def _fixpoint_rest(self, pipe: EnginePipeline, ins: list[Input], outs: list[bytes],
                       config: DispatchConfig, deadline: float | None) -> list[bytes]:
        """Iterations 2..n of ``fixpoint_iterations``: feed READ_WRITE outputs back as inputs
        until they stop changing."""
        ins = list(ins)
        for _ in range(config.fixpoint_iterations - 1):
            changed = False
            for i, j in pipe.feedback:
                if outs[j] != self._input_bytes(ins[i]):
                    changed = True
                ins[i] = raw_words(outs[j])
            if not changed:
                break
            prep = self._prepared(pipe, tuple([x.nbytes for x in ins]), config)
            outs = self._complete(self._enqueue(pipe, prep, ins, config, deadline, False), config)
        return outs

    def _input_bytes(self, x: Input) -> bytes:
        if type(x) is not DeviceInput:
            return x.tobytes()
        dev = self.device
        host = dev.host_alloc(padded(x.nbytes))
        with self.lock:
            if x.stream is not None:
                dev.order_after(x.stream)
            if x.nbytes:
                dev.download(host, dev.view(x.ptr, x.nbytes, x.value), x.nbytes)
            fence = dev.fence()
        dev.wait(fence, None)
        return host.words.tobytes()[: x.nbytes]

    # ---- entry points: the contract ----------------------------------------------------------
    def _tuned(self, program: Program, inputs: Any, config: DispatchConfig) -> DispatchConfig:
        """The config after autotuning (profile "throughput", or VYRE_AUTOTUNER=on)."""
        if config.profile == "latency" or (config.profile != "throughput" and not tuner.enabled()):
            return config
        return tuner.tuned_config(self, program, inputs, config, force=True) or config

    def dispatch(self, program: Program, inputs: Sequence[Any],
                 config: DispatchConfig | None = None) -> list[bytes]:
        config = self._config(config)
        return self._run(self._pipeline(program, self._tuned(program, inputs, config)), inputs, config)

    def dispatch_borrowed(self, program: Program, inputs: Sequence[Any],
                          config: DispatchConfig | None = None) -> list[bytes]:
        return self.dispatch(program, inputs, config)  # inputs are staged once, never copied first

    def dispatch_arrays(self, program: Program, inputs: Sequence[Any],
                        config: DispatchConfig | None = None) -> list[np.ndarray]:
        config = self._config(config)
        return self._run(self._pipeline(program, self._tuned(program, inputs, config)), inputs, config,
                         arrays=True)

    def reads_device_arrays(self) -> bool:
        return self.device.reads_device_arrays

    def read_output(self, out: DeviceOutput, offset: int, nbytes: int) -> np.ndarray:
        """Bytes ``[offset, offset + nbytes)`` of a `dispatch_device` output of this backend,
        read now, after everything enqueued before (additive method: `vyre.lib` reads a pass's
        flag word so, where a one-word copy pass cost a dispatch)."""
        if not isinstance(out, DeviceOutput) or out.backend != self.id():
            raise InvalidInput("input_type", f"{out!r} is not an output of this {self.id()} backend.",
                               "pass a DeviceOutput that this backend's dispatch_device returned.",
                               backend=self.id())
        if offset < 0 or nbytes < 0 or offset + nbytes > out.nbytes:
            raise InvalidInput("input_size", f"bytes [{offset}, {offset + nbytes}) are outside the "
                               f"{out.nbytes}-byte output.", "read within the output.", backend=self.id())
        dst = np.empty(nbytes, np.uint8)
        try:
            with self.lock:
                self.device.read(dst, self.device.view(out.ptr + offset, nbytes, out), nbytes)
        except BaseException as exc:
            self._forget_later()
            raise self.failure(exc) from None
        self._settle()   # the read waited for everything enqueued before it
        return dst

    def dispatch_device(self, program: Program, inputs: Sequence[Any],
                        config: DispatchConfig | None = None, alloc: Any = None, *,
                        wait: bool = True) -> list[Any]:
        """Dispatch and leave the outputs on the device (additive method): one `DeviceOutput`
        per output, each a fresh device buffer the caller owns, exposed through
        ``__cuda_array_interface__`` (CuPy, torch and numba take it without a copy). Inputs may
        be device arrays (read in place) or host arrays. Same rules, bytes and errors as
        `dispatch`; returns once the dispatch is complete.

        ``alloc(nbytes, dtype)``: the caller's allocator (e.g. ``cupy.empty``), asked once
        per output for a C-contiguous device array of exactly ``nbytes`` of the output's
        `DataType`; the outputs are written into those arrays (after any work their
        allocator's stream has queued), which are returned instead of `DeviceOutput`s.

        A call with the signature of an earlier one that passed every check (`warm`) runs
        its `DevicePlan`: only what depends on the data is done again.

        ``wait=False`` (without ``alloc``; `vyre.lib` between its passes): a warm call returns
        once its work is enqueued, with no host round trip. Its outputs carry this backend's
        stream in their interface, so a reader orders itself after it, and this backend's
        later work in the thread is queued behind it. The next wait of this thread (a
        dispatch that waits, `read_output`, `wait_deferred`) covers it and raises its error
        (a control-block error); its inputs are kept alive until then. A call that is not
        warm, or has ``alloc``, waits as always."""
        dev = self.device
        if not dev.reads_device_arrays:
            raise UnsupportedFeature("device-resident outputs", self.id(),
                                     "use dispatch() (host bytes) on this backend, or the cuda backend.")
        config = self._config(config)
        started = time.perf_counter_ns()
        ok = False
        try:
            pipe = self._pipeline(program, config)
            sig = signature(pipe.check.fast, inputs, grid_key(config), alloc is not None) \
                if config.plain else None
            key = None if sig is None else sig[0]
            if sig is not None:
                try:
                    plan = pipe.warm.get(sig[0])
                except TypeError:   # an unhashable interface field (a list shape): the full path
                    plan = key = None
                if plan is not None:
                    got = self._device_warm(pipe, plan, inputs, sig[1], config, alloc, wait)
                    if got is not None:
                        ok = True
                        return got
            ins = pipe.check(inputs)
            prep = self._prepared(pipe, tuple([x.nbytes for x in ins]), config)
            given = None if alloc is None else self._allocated(pipe, prep, ins, alloc)
            deadline = None if config.timeout is None else time.monotonic() + config.timeout
            flight = self._enqueue(pipe, prep, ins, config, deadline, False, fence=deadline is not None,
                                   device_outputs=True, outputs=given)
            outs = flight.keep[: len(prep.outs)]
            self._complete(flight, config, read=False)
            ok = True
            if key is not None:
                self._plan_device(pipe, prep, ins, given, key)
            if given is not None:
                return [o.value for o in given]
            return self._owned(pipe, prep, outs)
        finally:
            observability.record_dispatch(self.name, time.perf_counter_ns() - started, ok, config.label)

    def _plan_device(self, pipe: EnginePipeline, prep: Prepared, ins: list[Input],
                     given: list[DeviceInput] | None, key: tuple) -> None:
        """Keep a `DevicePlan` of a `dispatch_device` call that passed every check, unless its
        outputs need padded buffers (narrow outputs of a length that is not whole words)."""
        if any(n != exact for _, n, exact in prep.outs) and given is not None:
            return
        keys: list[Any] = []
        for o in given or ():
            try:
                keys.append(cai_key(o.value.__cuda_array_interface__))
                hash(keys[-1])
            except Exception:   # a DLPack array, or a layout the full check reads: checked in full
                keys.append(None)
        plan = DevicePlan(prep, ins, tuple(keys))
        with pipe._lock:   # readers go lock-free (`fifo`); writers one at a time
            pipe.warm[key] = plan

    def _device_warm(self, pipe: EnginePipeline, plan: DevicePlan, inputs: Sequence[Any], parts: list[Any],
                     config: DispatchConfig, alloc: Any, wait: bool = True) -> list[Any] | None:
        """`dispatch_device` by its plan: the steps of `_allocated`, `_enqueue` and
        `_complete` for this signature, straight through (None, before anything is done:
        take the full path). ``parts``: each input's interface (device arrays) or words
        (host arrays), from `signature`."""
        dev = self.device
        prep = plan.prep
        spans = []   # (input position, pointer, bytes, producer stream) of device inputs
        try:
            for i in plan.device:
                cai = parts[i]
                stream = cai.get("stream")
                spans.append((i, int(cai["data"][0]), plan.nbytes[i], None if stream in (None, 0) else stream))
        except (KeyError, TypeError, ValueError, IndexError):
            return None   # a malformed pointer: the full path's check says so
        given: list[DeviceInput] | None = None
        if alloc is not None:
            given = []
            for (_, _, exact), d, where, want in zip(prep.outs, pipe.outputs, pipe.alloc_where, plan.out_keys):
                arr = self._alloc_output(alloc, exact, d)
                cai = getattr(arr, "__cuda_array_interface__", None)
                o = None
                if want is not None and type(cai) is dict:
                    try:
                        if cai_key(cai) == want:
                            stream = cai.get("stream")
                            o = DeviceInput(arr, int(cai["data"][0]), exact,
                                            None if stream in (None, 0) else stream)
                    except (KeyError, TypeError, ValueError, IndexError):
                        o = None
                if o is None:
                    o = self._output_checked(arr, exact, d, where, cai)
                if spans:
                    self._refuse_overlap(o, spans, where)
                given.append(o)
        lock = self.lock
        lock.acquire()
        try:
            sset = self._take(pipe, prep)
            try:
                views = list(prep.buffers(dev))
                waited: list[Any] = []
                if given is None:   # fresh device buffers the caller will own
                    keep = []
                    for pos, nbytes, _ in prep.outs:
                        views[pos] = dev.alloc(nbytes)
                        keep.append(views[pos])
                else:
                    for (pos, _, exact), o in zip(prep.outs, given):
                        if o.stream is not None and o.stream not in waited:
                            dev.order_after(o.stream)   # the allocator's last use of the memory
                            waited.append(o.stream)
                        views[pos] = dev.view(o.ptr, exact, o.value)
                for pos, i, nbytes in plan.host:
                    host = sset.ins[i]
                    if host is not None:   # none for an empty input
                        host.stage(parts[i])   # staged now: never read later
                        dev.upload(views[pos], host, nbytes)
                for _, _, _, stream in spans:
                    if stream is not None and stream not in waited:
                        dev.order_after(stream)   # after the producer's work on it
                        waited.append(stream)
                for pos, i, k in plan.in_place:   # read in place: no copy at all
                    _, ptr, nbytes, _ = spans[k]
                    views[pos] = dev.view(ptr, nbytes, inputs[i])
                for pos, i, k in plan.copied:     # never write the caller's array
                    _, ptr, nbytes, _ = spans[k]
                    if nbytes:
                        dev.copy(views[pos], dev.view(ptr, nbytes, inputs[i]), nbytes)
                packed = dev.pack_once(prep.kernel, views, prep.counts, sset.ctl)
                for pos, nbytes in prep.zero:
                    dev.zero(views[pos], nbytes)
                uses_ctl = prep.kernel.uses_ctl
                self._launch(prep, sset, packed, views, None, False)
                if uses_ctl:
                    dev.ctl_fetch(sset.ctl)
            except BaseException as exc:
                raise self._aborted(prep, sset, exc, config) from None
        finally:
            lock.release()
        if not wait and given is None:
            later = getattr(self._later, "items", None)
            if later is None:
                later = self._later.items = []
            later.append((prep, sset, uses_ctl, tuple(inputs)))
            return self._owned(pipe, prep, keep, dev.stream_handle())
        self._finish_straight(prep, sset, uses_ctl)
        prep.give(sset)
        if given is not None:
            return [o.value for o in given]
        return self._owned(pipe, prep, keep)

    def _alloc_output(self, alloc: Any, exact: int, d: Any) -> Any:
        """``alloc(exact, d.dtype)``; the allocator's own error (out of device memory) as the
        device's error."""
        try:
            return alloc(exact, d.dtype)
        except VyreError:
            raise
        except Exception as exc:
            raise self.device.error(exc) from None

    def _output_checked(self, arr: Any, exact: int, d: Any, where: str, cai: Any) -> DeviceInput:
        """An array the caller's allocator returned, checked like an input (device memory,
        dtype, layout) and of exactly ``exact`` bytes."""
        if cai is None and not _on_gpu(arr):
            raise InvalidInput("input_device", f"{where} is a {type(arr).__name__}, not a device array.",
                               "return a device array (cupy.empty / torch.empty on the GPU).",
                               backend=self.id())
        o = self.device.device_input(d, arr, where, cai)
        if o.nbytes != exact:
            raise InvalidInput("input_size", f"{where} holds {o.nbytes} bytes; the output has {exact}.",
                               "allocate exactly nbytes (alloc receives it).", backend=self.id())
        return o

    def _refuse_overlap(self, o: DeviceInput, spans: Sequence[tuple[int, int, int, Any]], where: str) -> None:
        """Refuse an allocated output overlapping a device input (``spans``: (input position,
        pointer, bytes, ...) each): vyre never writes its inputs."""
        for i, ptr, nbytes, _ in spans:
            if o.nbytes and nbytes and o.ptr < ptr + nbytes and ptr < o.ptr + o.nbytes:
                raise InvalidInput("input_device", f"{where} overlaps input {i}: vyre never writes "
                                   "its inputs.", "return fresh memory from alloc.", backend=self.id())

    def _allocated(self, pipe: EnginePipeline, prep: Prepared, ins: list[Input], alloc: Any) -> list[DeviceInput]:
        """The caller-allocated outputs of `dispatch_device`, checked like inputs (device
        memory, dtype, layout), of exactly each output's bytes, overlapping no input."""
        spans = [(i, x.ptr, x.nbytes, None) for i, x in enumerate(ins) if type(x) is DeviceInput]
        given = []
        for (_, _, exact), d, where in zip(prep.outs, pipe.outputs, pipe.alloc_where):
            arr = self._alloc_output(alloc, exact, d)
            o = self._output_checked(arr, exact, d, where, getattr(arr, "__cuda_array_interface__", None))
            self._refuse_overlap(o, spans, where)
            given.append(o)
        return given

    def dispatch_borrowed_timed(self, program: Program, inputs: Sequence[Any],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        config = self._config(config)
        return self._run(self._pipeline(program, config), inputs, config, timed=True)

    def dispatch_borrowed_into(self, program: Program, inputs: Sequence[Any],
                               config: DispatchConfig | None, outputs: list) -> None:
        if not isinstance(outputs, list):
            raise InvalidProgram(f"outputs is a {type(outputs).__name__}, not a list.",
                                 "pass a list; it is cleared and filled with one bytes per output.",
                                 backend=self.id())
        result = self.dispatch(program, inputs, config)
        outputs[:] = result

    def _run_async(self, pipe: EnginePipeline, inputs: Any, config: DispatchConfig) -> PendingDispatch:
        started = _now()
        try:
            ins = pipe.check(inputs)
            prep = self._prepared(pipe, tuple([x.nbytes for x in ins]), config)
            flight = self._enqueue(pipe, prep, ins, config, deadline_of(config), False)
        except BaseException:
            observability.record_dispatch(self.name, _now() - started, False, config.label)
            raise
        if config.fixpoint_iterations > 1:  # later iterations read copies, not the caller's arrays
            ins = [x.copy() if type(x) is not DeviceInput else x for x in ins]
        return EnginePending(self, flight, config, ins if config.fixpoint_iterations > 1 else None, started)

    def dispatch_async(self, program: Program, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> PendingDispatch:
        config = self._config(config)
        return self._run_async(self._pipeline(program, config), inputs, config)

    def dispatch_borrowed_async(self, program: Program, inputs: Sequence[Any],
                                config: DispatchConfig | None = None) -> PendingDispatch:
        return self.dispatch_async(program, inputs, config)

    # ---- resident buffers (`vyre.driver.engine.memory`) ----------------------------------------
    def allocate_resident(self, byte_len: int) -> Resource:
        return memory.allocate(self, byte_len)

    def upload_resident(self, resource: Resource, data: Any) -> None:
        memory.upload(self, resource, data)

    def read_resident(self, resource: Resource) -> bytes:
        """Copy a resident buffer back to the host (additive method)."""
        return memory.read(self, resource)

    def free_resident(self, resource: Resource) -> None:
        """Free a resident buffer. Later uses are errors with a Fix; the device memory goes
        once no bound dispatch holds it (cached internal bindings are dropped now)."""
        memory.free(self, resource)

    def free_if_unheld(self, resource: Resource) -> None:
        """Release a freed resource's device memory once no bound dispatch holds it."""
        memory.free_if_unheld(self, resource)

    def _bound_for(self, pipe: EnginePipeline, resources: Sequence[Resource], config: DispatchConfig) -> Any:
        """The cached binding of ``resources`` (a binding holds its resources, so their ids
        cannot be reused while it is cached)."""
        try:
            key = (tuple(map(id, resources)), grid_key(config))
        except TypeError:
            key = None
        bound = pipe.bounds.get(key)
        if bound is None or bound.released:
            bound = Bound(self, pipe, resources, config, cached=True)
            if len(pipe.bounds) > 64:
                for old in list(pipe.bounds.values()):
                    old.release()
            pipe.bounds[key] = bound
        return bound

    def dispatch_resident_timed(self, program: Program, resources: Sequence[Resource],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        """Run on resident buffers (one per non-workgroup buffer, declaration order); outputs
        stay on the device (`read_resident`)."""
        config = self._config(config)
        return self._bound_for(self._pipeline(program, config), resources, config).run_timed(config)

    def bind_resident(self, program: Program, resources: Sequence[Resource],
                      config: DispatchConfig | None = None) -> Any:
        """Pack a resident dispatch once (see `vyre.driver.persistent.bind`)."""
        config = self._config(config)
        return Bound(self, self._pipeline(program, config), resources, config)

    def compile_batch(self, items: list) -> Any:
        bounds = []
        for it in items:
            config = self._config(it.config)
            bounds.append(Bound(self, self._pipeline(it.program, config), it.resources, config))
        return EngineBatch(self, bounds)

    def resident_prepared(self, pipe: EnginePipeline, resources: Sequence[Resource],
                          config: DispatchConfig) -> Prepared:
        """The shape of a resident dispatch of ``pipe`` on ``resources`` (this backend's, live,
        each large enough), with its limits checked."""
        for r in resources:
            self.own(r)
        sizes = tuple(resident_sizes(pipe.effective, resources, self.id()))
        prep = self._prepared(pipe, sizes, config)
        for b in prep.shape.buffers:
            have = resources[b.decl_index].byte_len
            if have < b.nbytes:
                raise InvalidProgram(f"resident buffer for {b.name!r} holds {have} bytes; the dispatch "
                                     f"needs {b.nbytes}.", "allocate a larger resident buffer.",
                                     backend=self.id())
        return prep

    # ---- lifecycle -----------------------------------------------------------------------------
    def prepare(self) -> None:
        with self.lock:
            self.usable()

    def flush(self) -> None:
        with self.lock:
            fence = self.device.fence()
        self.wait_fence(fence, None, (), (), DEFAULT)

    def shutdown(self) -> None:
        with self.lock:
            if self.closed:
                return
            try:
                if not self.runaway:
                    self.device.wait(self.device.fence(), 10.0)
            except Exception:
                pass
            self._pipes.clear()   # drops each pipeline's device objects (`_drop`)
            self.closed = True
            self.epoch += 1
            from .. import pipeline as P

            P.clear(self.id(), self)
            self.device.close()

    def try_recover(self) -> None:
        """Start over on a fresh queue (`Device.renew`: a fresh device or context too, where
        the target needs one): every pipeline, staging set and bound dispatch handed out before
        is invalidated (their device objects are dropped, except those a runaway kernel may
        still write, which are kept alive until it ends)."""
        from .. import pipeline as P

        with self.lock:
            self.device.renew()
            self._inflight = timed_build.InFlight()   # builds for the old queue are not kept
            self.generation += 1
            self.epoch += 1
            keep = [k for _, k in self.runaway]
            self._graveyard = getattr(self, "_graveyard", []) + keep
            self.runaway = []
            self._pipes.clear()   # drops each pipeline's bound dispatches and shapes (`_drop`)
            self._ctls = []
            P.clear(self.id(), self)

