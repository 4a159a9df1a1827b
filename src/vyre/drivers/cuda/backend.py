"""`CudaBackend`: the VyreBackend on cuda.core + NVRTC, `CudaPipeline` (its compiled form),
and `BoundDispatch` (a resident dispatch with its launch arguments packed once).

Hot path: pipelines cache the dispatch shape per input sizes, device buffers are pooled,
host inputs go through pinned staging buffers, and everything runs on one stream, so async
dispatches are ordered without extra fences. Inputs exposing ``__cuda_array_interface__``
(CuPy, PyTorch) are bound in place (READ buffers) or copied device-to-device (READ_WRITE).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import vyre
from vyre.driver.backend import CompiledPipeline, Resource, VyreBackend
from vyre.driver.binding import BindingRole
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
    DeviceLost,
    InvalidProgram,
    check_upload_size,
    i32_division_failed,
)
from vyre.driver.pending import PendingDispatch, TimedDispatchResult, wait_until
from vyre.driver.pipeline import NativeCache, PipelineCacheSnapshot
from vyre.driver.program_walks import input_sizes, launch_for_sizes
from vyre.driver.subgroup import require_subgroups
from vyre.driver.tuner import tuned_config
from vyre.driver.validation import VALIDATION_CACHE, check_launch_geometry
from vyre.ir.launch import effective_program
from vyre.ir.program import Program
from vyre.reference import as_words

from .codegen import generate
from .runtime import ID, Runtime, cc, host_words


def _cai(x: Any) -> tuple[int, int] | None:
    """(device pointer, nbytes) of a C-contiguous CUDA array, else None."""
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        return None
    shape = tuple(cai["shape"])
    item = np.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides")
    if strides is not None:
        expect, acc = [], item
        for dim in reversed(shape):
            expect.append(acc)
            acc *= dim
        if tuple(reversed(expect)) != tuple(strides):
            raise InvalidProgram("a CUDA array input is not C-contiguous.",
                                 "pass a contiguous array (e.g. x.contiguous() / cupy.ascontiguousarray).",
                                 backend=ID)
    return int(cai["data"][0]), int(np.prod(shape, dtype=np.int64)) * item


class _Staging:
    """Pinned host buffers of one in-flight dispatch, reused while sizes stay the same."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.bufs: dict[tuple[str, int], Any] = {}
        self._views: dict[int, np.ndarray] = {}

    def views(self, buf, n_words: int) -> np.ndarray:
        """Cached numpy view of a pinned buffer's first ``n_words`` words."""
        v = self._views.get(id(buf))
        if v is None or v.size != n_words:
            v = host_words(buf, n_words)
            self._views[id(buf)] = v
        return v

    def get(self, slot: str, nbytes: int):
        size = max(4, nbytes)
        key = (slot, size)
        buf = self.bufs.get(key)
        if buf is None:
            buf = self.rt.alloc_pinned(size)
            self.bufs[key] = buf
        return buf


@dataclass(frozen=True, eq=False)
class _Prepared:
    shape: DispatchShape
    launch_cfg: Any
    buffers: tuple[tuple[Any, bool], ...]        # (BoundBuffer, zero-fill first?)
    outputs: tuple[tuple[int, str, int, int], ...]  # (arg position, staging slot, nbytes, count)
    counts: tuple[Any, ...]                      # packed u32 count arguments


class _FastPath:
    """A synchronous dispatch of one input-size set with every object bound in advance:
    its own device buffers, pinned staging, numpy views and packed arguments. Only for host
    inputs (no device arrays) and modest sizes; sync dispatches hold the backend lock, so the
    staging is never shared."""

    FAST_MAX_BYTES = 64 << 20

    def __init__(self, backend: CudaBackend, pipe: CudaPipeline, prep: _Prepared) -> None:
        rt = backend.rt
        self.ins: list[tuple[int, np.ndarray, Any, Any]] = []
        self.fills: list[Any] = []
        self.outs: list[tuple[Any, Any]] = []
        self.views: list[np.ndarray] = []
        self.owned: list[Any] = []
        devs = []
        for b, fill in prep.buffers:
            dev = rt.alloc(b.nbytes)
            self.owned.append(dev)
            devs.append(dev)
            if b.input_index is not None and b.nbytes:
                pin = rt.alloc_pinned(b.nbytes)
                self.owned.append(pin)
                self.ins.append((b.input_index, host_words(pin, b.count), pin, dev))
            if fill:
                self.fills.append(dev)
        for pos, _slot, nbytes, count in prep.outputs:
            pin = rt.alloc_pinned(nbytes)
            self.owned.append(pin)
            if nbytes:
                self.outs.append((pin, devs[pos]))
            self.views.append(host_words(pin, count))
        self.err = backend.err_dev if pipe.plan.needs_error_flag else None
        if self.err is not None:
            self.err_pin = rt.alloc_pinned(4)
            self.owned.append(self.err_pin)
            self.err_view = host_words(self.err_pin, 1)
        self.kernels = pipe.kernels if not prep.shape.empty else []
        self.cfg = prep.launch_cfg
        self.args = (*devs, *prep.counts, backend.err_dev)


class _Flight:
    __slots__ = ("done", "end", "err", "hosts", "keep", "pipe", "staging", "start")

    def __init__(self, pipe: CudaPipeline, staging: _Staging) -> None:
        self.pipe, self.staging = pipe, staging
        self.hosts: list[tuple[Any, int]] = []
        self.keep: list[Any] = []
        self.err = None
        self.start = self.end = self.done = None


class CudaPipeline(CompiledPipeline):
    def __init__(self, backend: CudaBackend, program: Program, config: DispatchConfig) -> None:
        self._backend, self._program, self.config = backend, program, config
        rt = backend.rt
        self.plan, self.source = generate(program)
        self.cubin, self.built_from = rt.cubins.get_or_compile(self.source, rt.facts.arch)
        self.module = rt.load(self.cubin)
        self.kernels = [self.module.get_kernel(name) for name in self.plan.entries]
        self.generation = backend.generation
        self.pool: dict[tuple[str, int], Any] = {}
        self.shapes: dict[tuple, tuple[DispatchShape, Any]] = {}
        self.prepped: dict[tuple, _Prepared] = {}
        self.fast: dict[_Prepared, _FastPath] = {}
        self.free_staging: list[_Staging] = []

    @property
    def program(self) -> Program:
        return self._program

    def backend_id(self) -> str:
        return ID

    def dispatch(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list[bytes]:
        return self._backend._run_sync(self, inputs, config or self.config)

    def dispatch_timed(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> TimedDispatchResult:
        return self._backend._timed(self, inputs, config or self.config)

    def dispatch_async(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> PendingDispatch:
        return _Pending(self._backend, self._backend._enqueue(self, inputs, config or self.config))

    def check_live(self) -> None:
        if self.generation != self._backend.generation:
            raise DeviceLost("this pipeline was compiled before the CUDA backend recovered from a "
                             "device loss; its module is gone.",
                             "compile the program again (vyre.driver.pipeline.compile or "
                             "backend.compile_native).", backend=ID)

    def device_buffer(self, name: str, nbytes: int):
        key = (name, max(4, nbytes))
        buf = self.pool.get(key)
        if buf is None:
            for k in [k for k in self.pool if k[0] == name]:
                self.pool.pop(k).close()
            buf = self._backend.rt.alloc(nbytes)
            self.pool[key] = buf
        return buf

    def prepared(self, sizes: tuple[int, ...], config: DispatchConfig) -> _Prepared:
        """Everything about a dispatch that depends only on input sizes and the grid
        config, computed once: the hot path then only moves bytes and launches."""
        key = (sizes, config.grid_override, config.dispatch_grid, config.dispatch_elements)
        hit = self.prepped.get(key)
        if hit is None:
            shape, launch_cfg = self.shape_for(sizes, config)
            gx = shape.global_size[0]
            bufs = tuple((b, b.input_index is None and bool(b.nbytes)
                          and not self.plan.skips_zero_fill(b.name, b.count, gx)) for b in shape.buffers)
            outs = tuple((shape.buffers.index(b), f"out{b.output_index}", b.nbytes, b.count) for b in shape.outputs)
            counts = tuple(np.uint32(c) for c in shape.counts)
            hit = _Prepared(shape, launch_cfg, bufs, outs, counts)
            if len(self.prepped) > 64:
                self.prepped.clear()
                self.fast.clear()
            self.prepped[key] = hit
        return hit

    def shape_for(self, sizes: tuple[int, ...], config: DispatchConfig) -> tuple[DispatchShape, Any]:
        key = (sizes, config.grid_override, config.dispatch_grid, config.dispatch_elements)
        hit = self.shapes.get(key)
        if hit is None:
            b = self._backend
            launch = launch_for_sizes(self._program, sizes, config, ID)
            check_launch_geometry(self._program, launch, b.device_profile(),
                                  b.max_compute_workgroups_per_dimension_x())
            if any(g > m for g, m in zip(launch.grid, b.rt.facts.max_grid)):
                raise InvalidProgram(f"grid {launch.grid} exceeds the device's {b.rt.facts.max_grid}.",
                                     "spread the work differently (dispatch_grid/grid_override).",
                                     backend=ID)
            shape = dispatch_shape(self._program, launch)
            hit = (shape, cc.LaunchConfig(grid=shape.grid, block=shape.workgroup))
            if len(self.shapes) > 64:
                self.shapes.clear()
            self.shapes[key] = hit
        return hit


class _Pending(PendingDispatch):
    def __init__(self, backend: CudaBackend, flight: _Flight) -> None:
        self.backend, self.flight, self.result = backend, flight, None

    def is_ready(self) -> bool:
        return self.result is not None or bool(self.flight.done.is_done)

    def await_result(self, timeout: float | None = None) -> list[bytes]:
        if self.result is None:
            wait_until(lambda: self.flight.done.is_done, timeout, ID)
            self.result = self.backend._complete(self.flight)
        return self.result


class BoundDispatch:
    """A resident dispatch with kernels, grid and arguments packed once: `launch()` only
    zeroes the outputs and launches (no shape, validation or argument work)."""

    def __init__(self, backend: CudaBackend, pipe: CudaPipeline, shape: DispatchShape,
                 launch_cfg: Any, resources: Sequence[Resource]) -> None:
        self.backend, self.pipe, self.shape, self.cfg = backend, pipe, shape, launch_cfg
        bufs = [resources[b.decl_index].handle for b in shape.buffers]
        self.args = (*bufs, *(np.uint32(c) for c in shape.counts), backend.err_dev)
        self.zero = [resources[b.decl_index].handle for b in shape.buffers
                     if b.role is BindingRole.OUTPUT and b.nbytes
                     and not pipe.plan.skips_zero_fill(b.name, b.count, shape.global_size[0])]
        if pipe.plan.needs_error_flag:
            self.zero.append(backend.err_dev)
        self.kernels = pipe.kernels if not shape.empty else []
        self.stream = backend.rt.stream

    def launch(self, on: Any = None, zero_error_flag: bool = True) -> None:
        """Enqueue the dispatch on the backend's stream (or a graph being captured) and
        return at once."""
        s = self.stream if on is None else on
        err = self.backend.err_dev
        for buf in self.zero:
            if zero_error_flag or buf is not err:
                buf.fill(0, stream=s)
        for k in self.kernels:
            cc.launch(s, self.cfg, k, *self.args)

    def run(self) -> None:
        """Launch and wait; raises on a device error or an i32 division error."""
        self.pipe.check_live()
        self.launch()
        self.backend._finish_resident(self.pipe)


class CudaGraphBatch:
    """A batch captured once into a CUDA graph; `replay()` launches the graph and waits."""

    def __init__(self, backend: CudaBackend, items: list) -> None:
        self.backend = backend
        self.bounds = [backend.bind_resident(it.program, it.resources, it.config) for it in items]
        s = backend.rt.stream
        pipes = {id(b.pipe): b.pipe for b in self.bounds}
        # the error flag is zeroed once, so an error in any item survives to the end
        self.checker = next((p for p in pipes.values() if p.plan.needs_error_flag), None)
        builder = s.create_graph_builder().begin_building()
        if self.checker is not None:
            backend.err_dev.fill(0, stream=builder)
        for b in self.bounds:
            b.launch(on=builder, zero_error_flag=False)
        builder.end_building()
        self.graph = builder.complete()
        self.pipes = list(pipes.values())

    def replay(self) -> None:
        be = self.backend
        for p in self.pipes:
            p.check_live()
        try:
            self.graph.launch(be.rt.stream)
        except Exception as exc:
            raise be._fail(exc) from None
        be._finish_resident(self.checker or self.pipes[0])


class CudaBackend(VyreBackend):
    def __init__(self) -> None:
        self.rt = Runtime()
        self._lock = threading.RLock()
        self._pipelines = NativeCache(ID)
        self.generation = 0
        self._init_state()

    def _init_state(self) -> None:
        self.err_dev = self.rt.alloc(4)
        self.err_host = self.rt.alloc_pinned(4)
        self._lost = False

    def id(self) -> str:
        return ID

    def version(self) -> str:
        return vyre.__version__

    # ---- compile -----------------------------------------------------------------------
    def _pipeline(self, program: Program, config: DispatchConfig) -> CudaPipeline:
        def build() -> CudaPipeline:
            eff = effective_program(program, config)
            require_subgroups(eff, self)
            return CudaPipeline(self, eff, config)

        return self._pipelines.get_or_build(program, config, build)

    def compile_native(self, program: Program, config: DispatchConfig | None = None) -> CudaPipeline:
        return self._pipeline(program, config or DEFAULT)

    def pipeline_cache_snapshot(self) -> PipelineCacheSnapshot:
        return self._pipelines.snapshot()

    def generated_source(self, program: Program) -> str:
        VALIDATION_CACHE.require_valid(program, ID)
        return generate(program)[1]

    # ---- dispatch ----------------------------------------------------------------------
    def dispatch(self, program: Program, inputs: Sequence[Any],
                 config: DispatchConfig | None = None) -> list[bytes]:
        config = tuned_config(self, program, inputs, config) or DEFAULT
        return self._run_sync(self._pipeline(program, config), inputs, config)

    def dispatch_borrowed(self, program: Program, inputs: Sequence[Any],
                          config: DispatchConfig | None = None) -> list[bytes]:
        return self.dispatch(program, inputs, config)  # staged through pinned memory, no copy first

    def dispatch_borrowed_timed(self, program: Program, inputs: Sequence[Any],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        config = config or DEFAULT
        return self._timed(self._pipeline(program, config), inputs, config)

    def dispatch_async(self, program: Program, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> PendingDispatch:
        config = config or DEFAULT
        return _Pending(self, self._enqueue(self._pipeline(program, config), inputs, config))

    dispatch_borrowed_async = dispatch_async

    def _timed(self, pipe: CudaPipeline, inputs: Sequence[Any], config: DispatchConfig) -> TimedDispatchResult:
        t0 = time.perf_counter_ns()
        flight = self._enqueue(pipe, inputs, config, timed=True)
        t1 = time.perf_counter_ns()
        outputs = self._complete(flight)
        t2 = time.perf_counter_ns()
        return TimedDispatchResult(outputs, t2 - t0, self.rt.elapsed_ns(flight.start, flight.end),
                                   t1 - t0, t2 - t1)

    def _enqueue(self, pipe: CudaPipeline, inputs: Sequence[Any], config: DispatchConfig,
                 timed: bool = False, sync: bool = False) -> _Flight:
        if self._lost:
            raise DeviceLost("the CUDA device was lost.", "call backend.try_recover() or restart.",
                             backend=ID)
        pipe.check_live()
        self.rt.ensure_current()
        prep = pipe.prepared(tuple(input_sizes(inputs, ID)), config)
        rt, s = self.rt, self.rt.stream
        with self._lock:
            staging = pipe.free_staging.pop() if pipe.free_staging else _Staging(rt)
            flight = _Flight(pipe, staging)
            try:
                args = []
                for b, fill in prep.buffers:
                    if b.input_index is not None:
                        dev = self._bind_input(pipe, b, inputs[b.input_index], staging, flight)
                    else:
                        dev = pipe.device_buffer(b.name, b.nbytes)
                        if fill:
                            dev.fill(0, stream=s)
                    args.append(dev)
                if pipe.plan.needs_error_flag:
                    self.err_dev.fill(0, stream=s)
                if timed:
                    flight.start = s.record(options=rt.timing)
                if not prep.shape.empty:
                    for k in pipe.kernels:
                        cc.launch(s, prep.launch_cfg, k, *args, *prep.counts, self.err_dev)
                if timed:
                    flight.end = s.record(options=rt.timing)
                for pos, slot, nbytes, count in prep.outputs:
                    host = staging.get(slot, nbytes)
                    if nbytes:
                        host.copy_from(args[pos], stream=s)
                    flight.hosts.append((host, count))
                if pipe.plan.needs_error_flag:
                    err = staging.get("err", 4)
                    err.copy_from(self.err_dev, stream=s)
                    flight.err = err
                if not sync:
                    flight.done = s.record()
            except BackendError:
                raise
            except Exception as exc:
                raise self._fail(exc) from None
        return flight

    def _bind_input(self, pipe: CudaPipeline, b, x: Any, staging: _Staging, flight: _Flight):
        s = self.rt.stream
        dev_ptr = _cai(x)
        if dev_ptr is not None:
            self.rt.dev.sync()  # the producer's stream is unknown: order its writes first
            ptr, nbytes = dev_ptr
            view = cc.Buffer.from_handle(ptr, max(4, nbytes), owner=x)
            flight.keep.append(view)
            if b.role is BindingRole.INPUT:
                return view  # used in place: no copy at all
            dev = pipe.device_buffer(b.name, b.nbytes)
            if b.nbytes:
                dev.copy_from(view, stream=s)
            return dev
        dev = pipe.device_buffer(b.name, b.nbytes)
        if b.nbytes:
            host = staging.get(f"in{b.input_index}", b.nbytes)
            np.copyto(staging.views(host, b.count), as_words(x, f"input {b.name!r}"))
            dev.copy_from(host, stream=s)
        return dev

    def _complete(self, flight: _Flight) -> list[bytes]:
        try:
            (flight.done or self.rt.stream).sync()
        except Exception as exc:
            raise self._fail(exc) from None
        try:
            views = flight.staging.views
            if flight.err is not None and views(flight.err, 1)[0]:
                raise i32_division_failed(ID)
            return [views(h, n).tobytes() for h, n in flight.hosts]
        finally:
            flight.pipe.free_staging.append(flight.staging)

    def _run_sync(self, pipe: CudaPipeline, inputs: Sequence[Any], config: DispatchConfig) -> list[bytes]:
        if any(hasattr(x, "__cuda_array_interface__") for x in inputs):
            return self._complete(self._enqueue(pipe, inputs, config, sync=True))
        if self._lost:
            raise DeviceLost("the CUDA device was lost.", "call backend.try_recover() or restart.",
                             backend=ID)
        pipe.check_live()
        self.rt.ensure_current()
        sizes = tuple(input_sizes(inputs, ID))
        prep = pipe.prepared(sizes, config)
        if sum(sizes) > _FastPath.FAST_MAX_BYTES:
            return self._complete(self._enqueue(pipe, inputs, config, sync=True))
        fast = pipe.fast.get(prep)
        s = self.rt.stream
        with self._lock:
            try:
                if fast is None:
                    fast = pipe.fast[prep] = _FastPath(self, pipe, prep)
                for i, view, pin, dev in fast.ins:
                    np.copyto(view, as_words(inputs[i], "input"))
                    dev.copy_from(pin, stream=s)
                for dev in fast.fills:
                    dev.fill(0, stream=s)
                if fast.err is not None:
                    fast.err.fill(0, stream=s)
                for k in fast.kernels:
                    cc.launch(s, fast.cfg, k, *fast.args)
                for pin, dev in fast.outs:
                    pin.copy_from(dev, stream=s)
                if fast.err is not None:
                    fast.err_pin.copy_from(fast.err, stream=s)
                s.sync()
            except BackendError:
                raise
            except Exception as exc:
                raise self._fail(exc) from None
            if fast.err is not None and fast.err_view[0]:
                raise i32_division_failed(ID)
            return [v.tobytes() for v in fast.views]

    def _fail(self, exc: Exception) -> BackendError:
        err = self.rt.error(exc)
        if isinstance(err, DeviceLost):
            self._lost = True
        return err

    # ---- resident buffers --------------------------------------------------------------
    def allocate_resident(self, byte_len: int) -> Resource:
        if byte_len < 0:
            raise InvalidProgram(f"cannot allocate {byte_len} bytes.", "pass a size >= 0.", backend=ID)
        return Resource(ID, id(self), int(byte_len), self.rt.alloc(byte_len))

    def upload_resident(self, resource: Resource, data: Any) -> None:
        self.own(resource)
        s = self.rt.stream
        dev_ptr = _cai(data)
        if dev_ptr is not None:
            ptr, nbytes = dev_ptr
            check_upload_size(nbytes, resource.byte_len, ID)
            self.rt.dev.sync()
            resource.handle.copy_from(cc.Buffer.from_handle(ptr, max(4, nbytes), owner=data), stream=s)
            s.sync()
            return
        words = as_words(data, "resident upload")
        check_upload_size(words.nbytes, resource.byte_len, ID)
        if words.nbytes:
            host = self.rt.alloc_pinned(words.nbytes)
            np.copyto(host_words(host, words.size), words)
            resource.handle.copy_from(host, stream=s)
            s.sync()
            host.close()

    def read_resident(self, resource: Resource) -> bytes:
        """Copy a resident buffer back to the host (additive method)."""
        self.own(resource)
        n = resource.byte_len // 4
        if n == 0:
            return b""
        host = self.rt.alloc_pinned(resource.byte_len)
        host.copy_from(resource.handle, stream=self.rt.stream)
        self.rt.stream.sync()
        out = host_words(host, n).tobytes()
        host.close()
        return out

    def free_resident(self, resource: Resource) -> None:
        self.own(resource)
        resource.handle.close()
        resource.freed = True

    def _resident(self, program: Program, resources: Sequence[Resource], config: DispatchConfig):
        self.rt.ensure_current()
        for r in resources:
            self.own(r)
        pipe = self._pipeline(program, config)
        pipe.check_live()
        shape, launch_cfg = pipe.shape_for(tuple(resident_sizes(pipe.program, resources)), config)
        check_resident_capacity(shape, resources)
        return pipe, shape, launch_cfg

    def bind_resident(self, program: Program, resources: Sequence[Resource],
                      config: DispatchConfig | None = None) -> BoundDispatch:
        """Pack a resident dispatch once; `BoundDispatch.launch()` is the hot path."""
        pipe, shape, launch_cfg = self._resident(program, resources, config or DEFAULT)
        return BoundDispatch(self, pipe, shape, launch_cfg, resources)

    def compile_batch(self, items: list) -> CudaGraphBatch:
        """Capture the batch's launches (and output zeroing) into one CUDA graph."""
        self.rt.ensure_current()
        try:
            return CudaGraphBatch(self, items)
        except BackendError:
            raise
        except Exception as exc:
            raise self._fail(exc) from None

    def _finish_resident(self, pipe: CudaPipeline) -> None:
        s = self.rt.stream
        try:
            if pipe.plan.needs_error_flag:
                self.err_host.copy_from(self.err_dev, stream=s)
            s.sync()
        except Exception as exc:
            raise self._fail(exc) from None
        if pipe.plan.needs_error_flag and host_words(self.err_host, 1)[0]:
            raise i32_division_failed(ID)

    def dispatch_resident_timed(self, program: Program, resources: Sequence[Resource],
                                config: DispatchConfig | None = None) -> TimedDispatchResult:
        """Run on resident buffers (one per non-workgroup buffer, declaration order); outputs
        stay on the device (read them with `read_resident`)."""
        t0 = time.perf_counter_ns()
        pipe, shape, launch_cfg = self._resident(program, resources, config or DEFAULT)
        bound = BoundDispatch(self, pipe, shape, launch_cfg, resources)
        s = self.rt.stream
        try:
            start = s.record(options=self.rt.timing)
            bound.launch()
            end = s.record(options=self.rt.timing)
        except Exception as exc:
            raise self._fail(exc) from None
        t1 = time.perf_counter_ns()
        self._finish_resident(pipe)
        t2 = time.perf_counter_ns()
        return TimedDispatchResult([], t2 - t0, self.rt.elapsed_ns(start, end), t1 - t0, t2 - t1)

    # ---- capabilities (probed from device attributes) ----------------------------------
    def supports_async_compute(self) -> bool:
        return True  # dispatch_async returns after enqueue; completion is a CUDA event

    def supports_subgroup_ops(self) -> bool:
        # the lowering emits __reduce_*_sync / __shfl_sync / __ballot_sync (sm_80 and newer)
        return self.rt.facts.compute_capability >= (8, 0) and self.rt.facts.warp_size == 32

    def max_workgroup_size(self) -> tuple[int, int, int]:
        return self.rt.facts.max_block

    def max_compute_invocations_per_workgroup(self) -> int:
        return self.rt.facts.max_threads_per_block

    def max_compute_workgroups_per_dimension(self) -> int:
        return min(self.rt.facts.max_grid)  # y and z are the binding limit (65535)

    def max_compute_workgroups_per_dimension_x(self) -> int:
        return min(self.rt.facts.max_grid[0], 2**31 - 1)

    def subgroup_size(self) -> int | None:
        return self.rt.facts.warp_size

    def max_storage_buffer_bytes(self) -> int:
        return self.rt.facts.total_memory

    def device_profile(self) -> DeviceProfile:
        f = self.rt.facts
        return replace(super().device_profile(), has_shared_memory=True, has_mul_high=True,
                       max_shared_memory_bytes=f.shared_per_block, compute_units=f.sm_count,
                       l2_cache_bytes=f.l2_bytes, mem_bw_gbps=f.bandwidth_gbps,
                       regs_per_thread_max=255, shared_memory_bank_count=32,
                       shared_memory_bank_width_bytes=4,
                       device_name=f"{f.name} ({f.arch})")

    def device_fingerprint(self) -> bytes:
        return self.rt.fingerprint

    # ---- lifecycle ---------------------------------------------------------------------
    def prepare(self) -> None:
        self.rt.dev.set_current()

    def flush(self) -> None:
        try:
            self.rt.stream.sync()
        except Exception as exc:
            raise self._fail(exc) from None

    def shutdown(self) -> None:
        try:
            self.rt.stream.sync()
        except Exception:
            pass
        self._pipelines.clear()

    def device_lost(self) -> bool:
        if self._lost:
            return True
        try:
            from .runtime import cu

            err, = cu.cuCtxSynchronize()
            if int(err) != 0 and any(s in repr(err) for s in ("ILLEGAL", "LAUNCH_FAILED", "ECC", "DESTROYED")):
                self._lost = True
        except Exception:
            self._lost = True
        return self._lost

    def try_recover(self) -> None:
        """Rebuild the runtime state and invalidate every pipeline handed out before."""
        from .runtime import cu

        with self._lock:
            self._pipelines.clear()
            self.generation += 1
            try:
                dev = int(self.rt.dev.device_id)
                if self._lost:
                    cu.cuDevicePrimaryCtxReset(dev)
                self.rt = Runtime(dev)
                self._init_state()
            except BackendError:
                raise
            except Exception as exc:
                raise DeviceLost(f"recovery failed ({exc}).", "restart the process.", backend=ID) from None
