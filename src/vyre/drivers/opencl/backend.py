"""`OpenCLBackend`: the engine over `OpenCLDevice`, PyOpenCL's device interface.

Everything runs on one in-order profiling queue; fences are markers. Control blocks are
buffers over host memory (``USE_HOST_PTR``): on host-unified devices (PoCL) a running kernel
sees the cancel word the engine writes, so timed-out kernels stop; elsewhere the engine
abandons the queue instead (`Device.abandon`). On host-unified devices the engine's large
host arrays are buffers over their own memory too (`Device.zero_copy`; a CPU device copied
16 MiB in about as long as numpy sums it), unless ``VYRE_OPENCL_ZERO_COPY=0``.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

import vyre
from vyre.driver.capability import Capabilities, DeviceProfile
from vyre.driver.engine import Ctl, Device, EngineBackend, HostBuffer, Kernel
from vyre.driver.errors import BackendError, UnsupportedFeature
from vyre.driver.speculate import DEFAULT_THRESHOLD_PCT
from vyre.ir.ops import all_op_ids
from vyre.ir.program import Program

from .codegen import INT64_ATOMICS, generate
from .probe import PROBE_STATEMENTS, build_in_child
from .runtime import ID, Runtime

_COMPLETE = cl.command_execution_status.COMPLETE
# OpenCL C 1.2 has no subgroup intrinsics: the lowering emits none
SUBGROUP_OPS = frozenset(op for op in all_op_ids() if op.startswith("vyre.subgroup."))


class _Fence:
    """A marker plus the copy events enqueued before it. PyOpenCL's events of non-blocking
    host copies wait for their copy when they are garbage collected, so they live here
    until the fence completes instead of blocking the caller."""

    __slots__ = ("copies", "marker")

    def __init__(self, marker: cl.Event, copies: list) -> None:
        self.marker, self.copies = marker, copies


def _build(rt: Runtime, program: Program) -> tuple[Kernel, tuple[str, ...], bytes]:
    """(kernel, entry names, binary) of a validated program, built on ``rt``."""
    plan, source = generate(program)
    statements = plan.program.facts.statements   # inlined: the body is all of it
    if statements > PROBE_STATEMENTS and not rt.cached(source):
        build_in_child(source, statements)   # PoCL may crash on it: never in this process
    prg, built_from = rt.build(source)
    kernel = Kernel((prg, plan.entries), plan.uses_ctl, plan.fully_written, built_from, source,
                    plan.stoppable, plan.vector, Kernel.indirect_of(plan), Kernel.scratch_of(plan))
    return kernel, plan.entries, bytes(prg.binaries[0])


_WORKER_RT: list[Runtime] = []


@dataclass(frozen=True)
class OpenCLCompiler:
    """`vyre.driver.engine.farm.Compiler`: builds in a worker process on that process's own
    context of the same device (``fingerprint``: a worker that finds another device builds
    nothing)."""

    fingerprint: bytes

    def build(self, program: Program) -> tuple[dict, bytes]:
        if not _WORKER_RT:
            _WORKER_RT.append(Runtime())
        rt = _WORKER_RT[0]
        if rt.fingerprint != self.fingerprint:
            raise RuntimeError("this process sees another OpenCL device")
        kernel, entries, binary = _build(rt, program)
        return kernel.meta(entries), binary


def _wide_atomics(program: Program) -> bool:
    return program.facts.wide_atomics


_CORRECT_DIVISION_OPS = frozenset({"vyre.bin_op.div", "vyre.un_op.sqrt", "vyre.un_op.reciprocal"})


def _needs_correct_division(program: Program) -> bool:
    return not _CORRECT_DIVISION_OPS.isdisjoint(program.facts.op_set)


#: the AdaptiveSpeculator threshold on a CPU device: on PoCL (2-core VM, zero-copy buffers;
#: benchmarks/speculation.py) the fused literal search lost to the two-stage pair at 1 % and
#: 15 % commit rates and won at 86 % (1.21x and 1.68x in two runs), the crossover at 60-72 %;
#: 80 turns speculation off below 60 % (0.75x), as the seed's hysteresis does for 15 on a GPU
CPU_SPECULATION_PCT = 80


class OpenCLDevice(Device):
    direct_host_copies = True

    def __init__(self) -> None:
        self.rt = Runtime()
        self.queue = self.rt.queue
        self.cancellable = self.zero_copy = self.rt.info.host_unified
        self._zero = np.zeros(1, dtype=np.uint32)
        self._copies: list = []
        # per kernel, the kernel objects `pack_once` sets the arguments of (creating one
        # costs PyOpenCL about 0.2 ms; its arguments are read when a launch is enqueued)
        self._once: weakref.WeakKeyDictionary[Kernel, list[cl.Kernel]] = weakref.WeakKeyDictionary()

    def capabilities(self) -> Capabilities:
        info = self.rt.info
        wg = info.max_workgroup_size
        profile = DeviceProfile(
            backend=ID, max_workgroup_size=tuple(min(s, wg) for s in info.max_item_sizes),  # type: ignore[arg-type]
            max_invocations_per_workgroup=wg, max_storage_buffer_binding_size=info.max_alloc,
            has_shared_memory=True, has_mul_high=True, max_shared_memory_bytes=info.local_mem,
            compute_units=info.compute_units, device_name=f"{info.name} ({info.platform})")
        # async: dispatch_async returns on enqueue, completion is an OpenCL event; speculation:
        # fused prefilter/confirm programs run as written (tests/test_literal_search.py);
        # invocations: the global size of each axis is a size_t, but vyre's ids are u32 (a
        # launch past 2**32 invocations would wrap them, and crashes PoCL outright); on a CPU
        # device the fused speculative path pays only at high commit rates (`CPU_SPECULATION_PCT`)
        return Capabilities(ID, vyre.__version__, profile, unsupported_ops=SUBGROUP_OPS,
                            async_compute=True, speculation=True, max_workgroups_per_dimension=2**31 - 1,
                            max_invocations_per_dispatch=2**32 - 1, fingerprint=self.rt.fingerprint,
                            serial_workgroups=info.cpu,
                            speculation_threshold_pct=CPU_SPECULATION_PCT if info.cpu else DEFAULT_THRESHOLD_PCT)

    def refuse(self, program: Program) -> None:
        # correctly rounded transcendentals are computed in double (vyre.lower.crmath)
        if "cl_khr_fp64" not in self.rt.info.extensions and program.facts.transcendental:
            raise UnsupportedFeature(
                "correctly rounded transcendentals", ID,
                "this OpenCL device has no double precision (cl_khr_fp64), which vyre's "
                "correctly rounded exp/log/sin/... need; run this program on cuda, on an "
                "OpenCL device with fp64 (PoCL has it) or on the reference backend.")
        if not self.rt.info.correct_div_sqrt and _needs_correct_division(program):
            raise UnsupportedFeature(
                "correctly rounded f32 division/sqrt", ID,
                "this OpenCL device cannot guarantee the reference's bytes for f32 DIV/SQRT; "
                "use another backend for this program.")
        if _wide_atomics(program) and not set(INT64_ATOMICS) <= self.rt.info.extensions:
            raise UnsupportedFeature(
                "64-bit atomics", ID,
                f"this OpenCL device lacks {' and '.join(INT64_ATOMICS)}: use u32/i32 atomics "
                "(e.g. two 32-bit halves) or run on a backend with 64-bit atomics (cuda, reference).")

    def build(self, program: Program) -> Kernel:
        return self.compile(program)[0]

    def compile(self, program: Program) -> tuple[Kernel, dict, bytes]:
        kernel, entries, binary = _build(self.rt, program)
        return kernel, kernel.meta(entries), binary

    def compiler(self) -> OpenCLCompiler:
        return OpenCLCompiler(self.rt.fingerprint)

    def load(self, meta: dict, artifact: bytes) -> Kernel:
        prg = cl.Program(self.rt.context, [self.rt.device], [artifact]).build(options=self.rt.options)
        return Kernel.from_meta((prg, tuple(meta["entries"])), meta)

    def alloc(self, nbytes: int) -> cl.Buffer:
        return self.rt.buffer(nbytes)

    def free(self, buf: cl.Buffer) -> None:
        buf.release()

    def upload(self, dst: cl.Buffer, src: HostBuffer | np.ndarray, nbytes: int) -> None:
        words = src.words if isinstance(src, HostBuffer) else src
        self._copies.append(cl.enqueue_copy(self.queue, dst, words[: nbytes // 4], is_blocking=False))

    def wrap_host(self, array: np.ndarray, writable: bool) -> cl.Buffer:
        access = cl.mem_flags.READ_WRITE if writable else cl.mem_flags.READ_ONLY
        try:
            return cl.Buffer(self.rt.context, access | cl.mem_flags.USE_HOST_PTR, hostbuf=array)
        except cl.Error as exc:
            raise self.rt.oom_or_fail(exc, array.nbytes) from None

    def unwrap_host(self, buf: cl.Buffer, writable: bool) -> None:
        if writable:   # a map makes the kernels' writes visible in the array (no copy here)
            mapped, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ, 0, (buf.size,),
                                              np.uint8, is_blocking=True)
            mapped.base.release(self.queue)
            self.queue.finish()
        buf.release()

    def download(self, dst: HostBuffer, src: cl.Buffer, nbytes: int) -> None:
        self._copies.append(cl.enqueue_copy(self.queue, dst.words[: nbytes // 4], src, is_blocking=False))

    def read(self, dst: np.ndarray, buf: cl.Buffer, nbytes: int) -> None:
        if nbytes:
            cl.enqueue_copy(self.queue, dst.reshape(-1).view(np.uint8)[:nbytes], buf, is_blocking=True)

    def copy(self, dst: cl.Buffer, src: cl.Buffer, nbytes: int) -> None:
        cl.enqueue_copy(self.queue, dst, src, byte_count=nbytes)

    def zero(self, buf: cl.Buffer, nbytes: int) -> None:
        cl.enqueue_fill_buffer(self.queue, buf, self._zero, 0, nbytes)

    def ctl_alloc(self) -> Ctl:
        words = np.zeros(16, dtype=np.uint32)[:2]  # its own cache line, host-visible
        buf = cl.Buffer(self.rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=words)
        return Ctl(buf, words, buf)

    def ctl_reset(self, ctl: Ctl) -> None:
        # The cancel word (1) is reset by the host now, never by a queued command: a fill that
        # runs after the engine raised it would erase a cancel. The error flag (0) is reset in
        # queue order, which is what devices without host-visible buffers need.
        ctl.words[:] = 0
        cl.enqueue_fill_buffer(self.queue, ctl.handle, self._zero, 0, 4)

    def ctl_fetch(self, ctl: Ctl) -> None:
        self._copies.append(cl.enqueue_copy(self.queue, ctl.words, ctl.handle, is_blocking=False))

    def pack(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> list[cl.Kernel]:
        prg, entries = kernel.handle
        args = [*buffers, *(np.uint32(c) for c in counts), ctl.arg]
        kernels = [cl.Kernel(prg, name) for name in entries]  # a kernel object keeps its arguments
        for k in kernels:
            k.set_args(*args)
        return kernels

    def pack_once(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> list[cl.Kernel]:
        kernels = self._once.get(kernel)
        if kernels is None:
            kernels = self._once[kernel] = self.pack(kernel, buffers, counts, ctl)
            return kernels
        args = [*buffers, *(np.uint32(c) for c in counts), ctl.arg]
        for k in kernels:
            k.set_args(*args)
        return kernels

    def launch(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
               packed: list[cl.Kernel], timed: bool = False, phases: slice | None = None,
               last_grid: tuple[int, int, int] | None = None) -> Any:
        kernels = packed if phases is None else packed[phases]
        grids = [grid] * len(kernels)
        if last_grid is not None:   # the finalising phase of float atomics: a grid of its own
            grids[-1] = last_grid
        events = [cl.enqueue_nd_range_kernel(self.queue, k, tuple(x * b for x, b in zip(g, block)), block)
                  for k, g in zip(kernels, grids) if all(g)]
        return events if timed else None

    def elapsed_ns(self, token: Any) -> int | None:
        return int(sum(e.profile.end - e.profile.start for e in token))

    def fence(self) -> _Fence:
        copies, self._copies = self._copies, []
        fence = _Fence(cl.enqueue_marker(self.queue), copies)
        self.queue.flush()
        return fence

    def done(self, fence: _Fence) -> bool:
        return fence.marker.command_execution_status <= _COMPLETE  # complete, or failed (<0)

    def wait(self, fence: _Fence, timeout: float | None) -> bool:
        if timeout is not None:
            limit = time.monotonic() + timeout
            pause = 5e-5
            while fence.marker.command_execution_status > _COMPLETE:
                if time.monotonic() >= limit:
                    return False
                time.sleep(pause)
                pause = min(pause * 2, 2e-3)
        fence.marker.wait()  # raises if a command failed
        fence.copies.clear()
        return True

    def finish(self) -> None:
        copies, self._copies = self._copies, []
        self.queue.finish()
        del copies  # complete now: dropping them no longer blocks

    def abandon(self) -> None:
        self._copies = []
        self.queue = self.rt.queue = self.rt.new_queue()

    def error(self, exc: BaseException) -> BackendError:
        if isinstance(exc, cl.Error):
            return self.rt.oom_or_fail(exc)
        return self.rt.fail(exc)

    def close(self) -> None:
        try:
            self.queue.finish()
        except cl.Error:
            pass


def backend() -> EngineBackend:
    """The OpenCL backend: the engine over an `OpenCLDevice` (its factory)."""
    return EngineBackend(OpenCLDevice())


#: the registered factory, by the backend's old class name
OpenCLBackend = backend

__all__ = ["OpenCLBackend", "OpenCLDevice", "backend"]
