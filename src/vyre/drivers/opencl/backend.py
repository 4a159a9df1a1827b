"""`OpenCLBackend`: the VyreBackend on PyOpenCL, and `OpenCLPipeline`, its compiled form.

Compiled programs are cached per backend (fingerprint + code-affecting config) and their
device binaries on disk; buffers are pooled per pipeline and reused; every dispatch runs on
one in-order profiling queue, so async dispatches need no extra fences.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyopencl as cl

import vyre
from vyre.driver.backend import CompiledPipeline, Resource, VyreBackend
from vyre.driver.capability import DeviceProfile
from vyre.driver.config import DEFAULT, DispatchConfig
from vyre.driver.dispatch_shape import (
    DispatchShape,
    check_resident_capacity,
    dispatch_shape,
    resident_sizes,
)
from vyre.driver.errors import (
    BackendError,
    DispatchFailed,
    InvalidProgram,
    UnsupportedFeature,
    check_upload_size,
    i32_division_failed,
)
from vyre.driver.pending import PendingDispatch, TimedDispatchResult, wait_until
from vyre.driver.pipeline import NativeCache, PipelineCacheSnapshot
from vyre.driver.program_walks import input_sizes, launch_for_sizes
from vyre.driver.subgroup import require_subgroups
from vyre.driver.tuner import tuned_config
from vyre.driver.validation import VALIDATION_CACHE, check_launch_geometry
from vyre.ir import expr as E
from vyre.ir import node as N
from vyre.ir.launch import effective_program
from vyre.ir.program import Program
from vyre.ir.types import BinOp, UnOp
from vyre.reference import as_words

from .codegen import generate
from .runtime import ID, Runtime


class _InFlight:
    """Everything one enqueued dispatch needs until its results are read."""

    __slots__ = ("err", "events", "hosts", "keep", "kernel_events", "maps", "started")

    def __init__(self) -> None:
        self.maps: list[Any] = []
        self.events: list[cl.Event] = []
        self.kernel_events: list[cl.Event] = []
        self.hosts: list[np.ndarray] = []
        self.keep: list[Any] = []
        self.err: np.ndarray | None = None
        self.started = time.perf_counter_ns()


class OpenCLPipeline(CompiledPipeline):
    def __init__(self, backend: OpenCLBackend, program: Program, config: DispatchConfig) -> None:
        self._backend, self._program, self.config = backend, program, config
        self.plan, self.source = generate(program)
        self.cl_program, self.built_from = backend.rt.build(self.source)
        self.kernels = [cl.Kernel(self.cl_program, name) for name in self.plan.entries]
        self.pool: dict[str, cl.Buffer] = {}
        self.pool_sizes: dict[str, int] = {}

    @property
    def program(self) -> Program:
        return self._program

    def backend_id(self) -> str:
        return ID

    def dispatch(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list[bytes]:
        return self._backend._complete(self._backend._enqueue(self, inputs, config or self.config))

    def dispatch_timed(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> TimedDispatchResult:
        return self._backend._timed(self, inputs, config or self.config)

    def dispatch_async(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> PendingDispatch:
        return _Pending(self._backend, self._backend._enqueue(self, inputs, config or self.config))

    def buffer(self, name: str, nbytes: int) -> cl.Buffer:
        size = max(4, nbytes)
        buf = self.pool.get(name)
        if buf is None or self.pool_sizes[name] != size:
            buf = self._backend.rt.buffer(size)
            self.pool[name], self.pool_sizes[name] = buf, size
        return buf


class _Pending(PendingDispatch):
    def __init__(self, backend: OpenCLBackend, flight: _InFlight) -> None:
        self.backend, self.flight, self.result = backend, flight, None

    def is_ready(self) -> bool:
        return all(e.command_execution_status == cl.command_execution_status.COMPLETE
                   for e in self.flight.events)

    def await_result(self, timeout: float | None = None) -> list[bytes]:
        if self.result is None:
            wait_until(self.is_ready, timeout, ID, 0.0005)
            self.result = self.backend._complete(self.flight)
        return self.result


def _needs_correct_division(program: Program) -> bool:
    return any((isinstance(e, E.Bin) and e.op is BinOp.DIV) or
               (isinstance(e, E.Un) and e.op in (UnOp.SQRT, UnOp.RECIPROCAL))
               for e in N.walk_exprs(program.body))


class _ClBound:
    """A resident dispatch with kernel arguments set once; `launch()` only zeroes outputs
    and enqueues the kernels."""

    def __init__(self, backend: OpenCLBackend, pipe: OpenCLPipeline, shape: DispatchShape,
                 resources: Sequence[Resource]) -> None:
        self.backend, self.pipe, self.shape = backend, pipe, shape
        bufs = [resources[b.decl_index].handle for b in shape.buffers]
        gx = shape.global_size[0]
        self.zero = [(resources[b.decl_index].handle, b.nbytes) for b in shape.buffers
                     if b.input_index is None and b.nbytes and not pipe.plan.skips_zero_fill(b.name, b.count, gx)]
        args = [*bufs, *(np.uint32(c) for c in shape.counts), backend._err_buf]
        # a kernel object keeps its arguments: give this binding its own kernels
        self.kernels = [cl.Kernel(pipe.cl_program, name) for name in pipe.plan.entries]
        for k in self.kernels:
            k.set_args(*args)

    def launch(self) -> None:
        q, rt = self.backend.rt.queue, self.backend.rt
        for buf, n in self.zero:
            cl.enqueue_fill_buffer(q, buf, rt.zero, 0, n)
        if self.pipe.plan.needs_error_flag:
            cl.enqueue_fill_buffer(q, self.backend._err_buf, rt.zero, 0, 4)
        if not self.shape.empty:
            for k in self.kernels:
                cl.enqueue_nd_range_kernel(q, k, self.shape.global_size, self.shape.workgroup)

    def run(self) -> None:
        self.launch()
        flight = _InFlight()
        if self.pipe.plan.needs_error_flag:
            flight.err = np.empty(1, dtype=np.uint32)
            flight.events.append(cl.enqueue_copy(self.backend.rt.queue, flight.err, self.backend._err_buf,
                                                 is_blocking=False))
        self.backend.rt.queue.finish()
        self.backend._complete(flight)


class OpenCLBackend(VyreBackend):
    def __init__(self) -> None:
        self.rt = Runtime()
        self._lock = threading.RLock()
        self._pipelines = NativeCache(ID)
        self._err_buf = self.rt.buffer(4)
        self._closed = False

    def id(self) -> str:
        return ID

    def version(self) -> str:
        return vyre.__version__

    # ---- compile -----------------------------------------------------------------------
    def _pipeline(self, program: Program, config: DispatchConfig) -> OpenCLPipeline:
        if self._closed:
            raise DispatchFailed("the OpenCL backend was shut down.",
                                 "acquire a new backend (vyre.driver.acquire('opencl')).", backend=ID)
        def build() -> OpenCLPipeline:
            eff = effective_program(program, config)
            require_subgroups(eff, self)  # OpenCL C 1.2 lowering emits no subgroup operations
            if not self.rt.info.correct_div_sqrt and _needs_correct_division(eff):
                raise UnsupportedFeature(
                    "correctly rounded f32 division/sqrt", ID,
                    "this OpenCL device cannot guarantee the reference's bytes for f32 DIV/SQRT; "
                    "use another backend for this program.")
            return OpenCLPipeline(self, eff, config)

        return self._pipelines.get_or_build(program, config, build)

    def compile_native(self, program: Program, config: DispatchConfig | None = None) -> OpenCLPipeline:
        return self._pipeline(program, config or DEFAULT)

    def pipeline_cache_snapshot(self) -> PipelineCacheSnapshot:
        return self._pipelines.snapshot()

    def generated_source(self, program: Program) -> str:
        """The OpenCL C this backend compiles for ``program`` (for `vyre inspect`)."""
        VALIDATION_CACHE.require_valid(program, ID)
        return generate(program)[1]

    # ---- dispatch ----------------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Sequence[Any],
                 config: DispatchConfig | None = None) -> list[bytes]:
        config = tuned_config(self, program, inputs, config) or DEFAULT
        return self._complete(self._enqueue(self._pipeline(program, config), inputs, config))

    def dispatch_borrowed(self, program: Program, inputs: Sequence[Any],
                          config: DispatchConfig | None = None) -> list[bytes]:
        return self.dispatch(program, inputs, config)  # inputs are read in place, never copied

    def dispatch_borrowed_timed(self, program: Program, inputs: Sequence[Any],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        config = config or DEFAULT
        return self._timed(self._pipeline(program, config), inputs, config)

    def dispatch_async(self, program: Program, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> PendingDispatch:
        config = config or DEFAULT
        return _Pending(self, self._enqueue(self._pipeline(program, config), inputs, config))

    dispatch_borrowed_async = dispatch_async

    def _timed(self, pipe: OpenCLPipeline, inputs: Sequence[Any], config: DispatchConfig) -> TimedDispatchResult:
        flight = self._enqueue(pipe, inputs, config)
        enq = time.perf_counter_ns() - flight.started
        t = time.perf_counter_ns()
        outputs = self._complete(flight)
        wait = time.perf_counter_ns() - t
        device = sum(e.profile.end - e.profile.start for e in flight.kernel_events)
        return TimedDispatchResult(outputs, time.perf_counter_ns() - flight.started, int(device), enq, wait)

    def _shape(self, pipe: OpenCLPipeline, sizes: list[int], config: DispatchConfig) -> DispatchShape:
        launch = launch_for_sizes(pipe.program, sizes, config, ID)
        check_launch_geometry(pipe.program, launch, self.device_profile(),
                              self.max_compute_workgroups_per_dimension())
        return dispatch_shape(pipe.program, launch)

    def _launch(self, pipe: OpenCLPipeline, shape: DispatchShape, bufs: list[cl.Buffer],
                flight: _InFlight) -> None:
        q = self.rt.queue
        if pipe.plan.needs_error_flag:
            flight.events.append(cl.enqueue_fill_buffer(q, self._err_buf, self.rt.zero, 0, 4))
        if shape.empty:
            return
        args = [*bufs, *(np.uint32(c) for c in shape.counts), self._err_buf]
        for k in pipe.kernels:
            k.set_args(*args)
            ev = cl.enqueue_nd_range_kernel(q, k, shape.global_size, shape.workgroup)
            flight.kernel_events.append(ev)
            flight.events.append(ev)

    def _enqueue(self, pipe: OpenCLPipeline, inputs: Sequence[Any], config: DispatchConfig) -> _InFlight:
        flight = _InFlight()
        inputs = list(inputs)
        shape = self._shape(pipe, input_sizes(inputs, ID), config)
        q, ctx = self.rt.queue, self.rt.context
        # On devices that share host memory (CPU OpenCL such as PoCL) buffers wrap host arrays
        # (USE_HOST_PTR) instead of copying them: inputs are read in place, outputs written
        # in place, and a map makes them visible to the host.
        zero_copy = self.rt.info.host_unified
        gx = shape.global_size[0]
        try:
            with self._lock:
                bufs = []
                outs: dict[int, np.ndarray] = {}
                for b in shape.buffers:
                    fill = b.input_index is None and bool(b.nbytes) and \
                        not pipe.plan.skips_zero_fill(b.name, b.count, gx)
                    if zero_copy and b.nbytes:
                        if b.input_index is not None:
                            host = as_words(inputs[b.input_index], f"input {b.name!r}")
                            if b.output_index is not None:
                                host = host.copy()  # the kernel writes READ_WRITE buffers
                        else:
                            host = np.empty(b.count, dtype=np.uint32)
                        flags = cl.mem_flags.USE_HOST_PTR | (cl.mem_flags.READ_WRITE if b.output_index is not None
                                                             else cl.mem_flags.READ_ONLY)
                        buf = cl.Buffer(ctx, flags, hostbuf=host)
                        flight.keep.append(host)
                        if b.output_index is not None:
                            outs[b.output_index] = host
                    else:
                        buf = pipe.buffer(b.name, b.nbytes)
                        if b.input_index is not None and b.nbytes:
                            host = as_words(inputs[b.input_index], f"input {b.name!r}")
                            flight.keep.append(host)
                            flight.events.append(cl.enqueue_copy(q, buf, host, is_blocking=False))
                    if fill:
                        flight.events.append(cl.enqueue_fill_buffer(q, buf, self.rt.zero, 0, b.nbytes))
                    bufs.append(buf)
                self._launch(pipe, shape, bufs, flight)
                for b in shape.outputs:
                    buf = bufs[shape.buffers.index(b)]
                    if b.output_index in outs:
                        mapped, ev = cl.enqueue_map_buffer(q, buf, cl.map_flags.READ, 0, (b.count,),
                                                           np.uint32, is_blocking=False)
                        flight.maps.append(mapped)
                        flight.events.append(ev)
                        flight.hosts.append(outs[b.output_index])
                    else:
                        host = np.empty(b.count, dtype=np.uint32)
                        flight.hosts.append(host)
                        if b.count:
                            flight.events.append(cl.enqueue_copy(q, host, buf, is_blocking=False))
                if pipe.plan.needs_error_flag:
                    flight.err = np.empty(1, dtype=np.uint32)
                    flight.events.append(cl.enqueue_copy(q, flight.err, self._err_buf, is_blocking=False))
                q.flush()
        except cl.Error as exc:
            raise self.rt.oom_or_fail(exc) from None
        return flight

    def _complete(self, flight: _InFlight) -> list[bytes]:
        try:
            if flight.events:
                cl.wait_for_events(flight.events)
        except cl.Error as exc:
            raise self.rt.oom_or_fail(exc) from None
        try:
            if flight.err is not None and flight.err[0]:
                raise i32_division_failed(ID)
            return [h.tobytes() for h in flight.hosts]
        finally:
            for m in flight.maps:
                m.base.release(self.rt.queue)

    # ---- resident buffers --------------------------------------------------------------
    def allocate_resident(self, byte_len: int) -> Resource:
        if byte_len < 0:
            raise InvalidProgram(f"cannot allocate {byte_len} bytes.", "pass a size >= 0.", backend=ID)
        return Resource(ID, id(self), int(byte_len), self.rt.buffer(byte_len))

    def upload_resident(self, resource: Resource, data: Any) -> None:
        self.own(resource)
        words = as_words(data, "resident upload")
        check_upload_size(words.nbytes, resource.byte_len, ID)
        if words.nbytes:
            cl.enqueue_copy(self.rt.queue, resource.handle, words, is_blocking=True)

    def read_resident(self, resource: Resource) -> bytes:
        """Copy a resident buffer back to the host (additive method)."""
        self.own(resource)
        host = np.empty(resource.byte_len // 4, dtype=np.uint32)
        if host.size:
            cl.enqueue_copy(self.rt.queue, host, resource.handle, is_blocking=True)
        return host.tobytes()

    def free_resident(self, resource: Resource) -> None:
        self.own(resource)
        resource.handle.release()
        resource.freed = True

    def bind_resident(self, program: Program, resources: Sequence[Resource],
                      config: DispatchConfig | None = None) -> _ClBound:
        """Pack a resident dispatch once (see `vyre.driver.persistent.bind`)."""
        config = config or DEFAULT
        for r in resources:
            self.own(r)
        pipe = self._pipeline(program, config)
        shape = self._shape(pipe, resident_sizes(pipe.program, resources), config)
        check_resident_capacity(shape, resources)
        return _ClBound(self, pipe, shape, resources)

    def dispatch_resident_timed(self, program: Program, resources: Sequence[Resource],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        """Run on resident buffers (one per non-workgroup buffer, declaration order); outputs
        stay on the device (read them with `read_resident`)."""
        config = config or DEFAULT
        for r in resources:
            self.own(r)
        pipe = self._pipeline(program, config)
        shape = self._shape(pipe, resident_sizes(pipe.program, resources), config)
        check_resident_capacity(shape, resources)
        flight = _InFlight()
        with self._lock:
            for b in shape.buffers:
                if b.input_index is None and b.nbytes and \
                        not pipe.plan.skips_zero_fill(b.name, b.count, shape.global_size[0]):
                    flight.events.append(cl.enqueue_fill_buffer(
                        self.rt.queue, resources[b.decl_index].handle, self.rt.zero, 0, b.nbytes))
            self._launch(pipe, shape, [resources[b.decl_index].handle for b in shape.buffers], flight)
            if pipe.plan.needs_error_flag:
                flight.err = np.empty(1, dtype=np.uint32)
                flight.events.append(cl.enqueue_copy(self.rt.queue, flight.err, self._err_buf,
                                                     is_blocking=False))
        self._complete(flight)
        device = sum(e.profile.end - e.profile.start for e in flight.kernel_events)
        return TimedDispatchResult([], time.perf_counter_ns() - flight.started, int(device))

    # ---- capabilities (probed from the device) -----------------------------------------
    def supports_f16(self) -> bool:
        return False  # vyre's IR has no f16 type yet: the lowering cannot emit it

    def supports_async_compute(self) -> bool:
        return True  # dispatch_async returns on enqueue; completion is an OpenCL event

    def max_workgroup_size(self) -> tuple[int, int, int]:
        m = self.rt.info.max_workgroup_size
        return tuple(min(s, m) for s in self.rt.info.max_item_sizes)  # type: ignore[return-value]

    def max_compute_invocations_per_workgroup(self) -> int:
        return self.rt.info.max_workgroup_size

    def max_compute_workgroups_per_dimension(self) -> int:
        return 2**31 - 1

    def max_storage_buffer_bytes(self) -> int:
        return self.rt.info.max_alloc

    def device_profile(self) -> DeviceProfile:
        info = self.rt.info
        return replace(super().device_profile(), has_shared_memory=True, has_mul_high=True,
                       max_shared_memory_bytes=info.local_mem, compute_units=info.compute_units,
                       device_name=f"{info.name} ({info.platform})")

    def device_fingerprint(self) -> bytes:
        return self.rt.fingerprint

    # ---- lifecycle ---------------------------------------------------------------------
    def prepare(self) -> None:
        self.rt.queue.finish()

    def flush(self) -> None:
        try:
            self.rt.queue.finish()
        except cl.Error as exc:
            raise self.rt.oom_or_fail(exc) from None

    def shutdown(self) -> None:
        if not self._closed:
            try:
                self.rt.queue.finish()
            except cl.Error:
                pass
            self._pipelines.clear()
            self._closed = True


__all__ = ["BackendError", "OpenCLBackend", "OpenCLPipeline"]
