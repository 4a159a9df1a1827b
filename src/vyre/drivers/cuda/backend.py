"""`CudaBackend`: the engine over `CudaDevice` (cuda.core + cuda.bindings + NVRTC).

One stream carries every operation; fences are events. Host staging is pinned memory, and so
is each dispatch's error word: the kernel writes the error flag through unified addressing, so
reading errors back costs no copy. The cancel word the kernel polls is device memory (a poll
of host memory crosses PCIe), raised by a copy on a stream of its own, so a timed-out kernel
stops. Sized copies and fills go through the driver API
(``cuMemcpyAsync``/``cuMemsetD32Async``) so a resident buffer larger than the dispatch needs
is never touched past the bytes that belong to it. Device arrays (CUDA Array Interface,
DLPack) are read in place, ordered after their producer's stream. Batches are captured into
CUDA graphs.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from typing import Any

import blake3
import numpy as np

import vyre
from vyre.driver import settings
from vyre.driver.bounded import lru
from vyre.driver.capability import Capabilities, DeviceProfile
from vyre.driver.engine import Ctl, Device, EngineBackend, HostBuffer, Kernel
from vyre.driver.errors import BackendError, InvalidInput
from vyre.driver.inputs import DeviceInput, cai_span
from vyre.ir.ops import all_op_ids
from vyre.ir.program import BufferDecl, Program

from .codegen import generate
from .compiler import CudaCompiler, kernel_of
from .runtime import ID, Runtime, cc, cu, host_words


def _ok(result: Any) -> Any:
    err = result[0]
    if int(err) != 0:
        raise RuntimeError(f"{err!r}")
    return result[1] if len(result) == 2 else None


_SUBGROUP_OPS = frozenset(op for op in all_op_ids() if op.startswith("vyre.subgroup."))


def _ptr(buf: Any) -> int:
    """The device address of a buffer, or of a view (`CudaDevice.view`: the address itself)."""
    return buf if type(buf) is int else int(buf.handle)


class _PinnedPool:
    """Pinned host memory, reused instead of freed: ``cuMemFreeHost`` waits for the whole
    device to go idle (and a thread stuck in it can keep the others from cancelling slow
    kernels), so pinned buffers return here when their `HostBuffer` or `Ctl` is dropped and
    are only released past a cap."""

    CAP_BYTES = 512 << 20

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.free: dict[int, list[Any]] = {}
        self.bytes = 0
        self.lock = threading.Lock()

    def take(self, nbytes: int) -> Any:
        size = max(4, nbytes)
        with self.lock:
            stack = self.free.get(size)
            if stack:
                self.bytes -= size
                return stack.pop()
        return self.rt.alloc_pinned(size)

    def give(self, buf: Any) -> None:
        self.rt.ensure_current()   # a finalizer: it runs in whichever thread dropped the buffer
        size = buf.size
        with self.lock:
            if self.bytes + size <= self.CAP_BYTES:
                self.free.setdefault(size, []).append(buf)
                self.bytes += size
                return
        buf.close()


class _Cancel:
    """A control block's cancel word: 4 bytes of device memory (``ptr``), and whether the
    host raised it since it was last zeroed."""

    __slots__ = ("ptr", "raised")

    def __init__(self, ptr: int, raised: bool) -> None:
        self.ptr, self.raised = ptr, raised


class _CancelWords:
    """The device words of control blocks' cancel flags, from slabs allocated and zeroed
    synchronously (a stream operation at an arbitrary time could fall inside another thread's
    graph capture, which forbids it). A returned word that was raised is zeroed by the next
    `CudaDevice.ctl_reset` of the block that takes it."""

    SLAB_WORDS = 1 << 14

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.slabs: list[Any] = []
        self.free: list[tuple[int, bool]] = []
        self.lock = threading.Lock()
        self._grow()

    def _grow(self) -> None:
        self.rt.ensure_current()
        slab = self.rt.alloc(4 * self.SLAB_WORDS)
        self.rt.stream.sync()   # the stream-ordered allocation has happened
        _ok(cu.cuMemsetD32(_ptr(slab), 0, self.SLAB_WORDS))
        self.slabs.append(slab)
        base = _ptr(slab)
        self.free.extend((base + 4 * i, False) for i in range(self.SLAB_WORDS))

    def take(self) -> _Cancel:
        with self.lock:
            if not self.free:
                self._grow()
            return _Cancel(*self.free.pop())

    def give(self, c: _Cancel) -> None:
        with self.lock:
            self.free.append((c.ptr, c.raised))


class CudaDevice(Device):
    reads_device_arrays = True
    cancellable = True
    supports_graphs = True
    direct_host_copies = True

    def __init__(self, device_id: int = 0) -> None:
        self.rt = Runtime(device_id)
        self.stream = self.rt.stream
        self._target: Any = self.stream          # the stream, or a graph being captured
        self._raw = self.stream.handle
        self._configs: dict[tuple, Any] = {}
        self._counts: dict[tuple[int, ...], tuple] = {}   # counts -> their u32 kernel arguments
        self._modules = lru(64)   # recently loaded cubins
        self._order = _ok(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))
        self.pinned = _PinnedPool(self.rt)
        self.cancel_words = _CancelWords(self.rt)
        self._cancel_stream: Any = None   # made at the first cancel (`ctl_cancel`)
        self._one: Any = None
        # matmul_acc on IMMA (vyre.drivers.cuda.imma): mma.sync m16n8k32 needs sm_80
        self.tensor_cores = self.rt.facts.compute_capability >= (8, 0) and \
            settings.flag("VYRE_CUDA_TENSOR_CORES", default=True)

    def capabilities(self) -> Capabilities:
        f = self.rt.facts
        # the lowering emits __reduce_*_sync / __shfl_sync / __ballot_sync (sm_80 and newer)
        subgroups = f.compute_capability >= (8, 0) and f.warp_size == 32
        profile = DeviceProfile(
            backend=ID, supports_subgroup_ops=subgroups, has_subgroup_shuffle=subgroups,
            # matmul_acc runs as mma.sync IMMA (sm_80+, unless VYRE_CUDA_TENSOR_CORES=0);
            # tests/cuda/test_imma_gpu.py checks the PTX and the bytes on the device
            supports_tensor_cores=self.tensor_cores,
            max_workgroup_size=f.max_block, max_invocations_per_workgroup=f.max_threads_per_block,
            max_storage_buffer_binding_size=f.total_memory, subgroup_size=f.warp_size,
            has_shared_memory=True, has_mul_high=True, max_shared_memory_bytes=f.shared_optin,
            compute_units=f.sm_count, l2_cache_bytes=f.l2_bytes, mem_bw_gbps=f.bandwidth_gbps,
            regs_per_thread_max=255, shared_memory_bank_count=32, shared_memory_bank_width_bytes=4,
            device_name=f"{f.name} ({f.arch})")
        x, y, z = f.max_grid
        return Capabilities(
            ID, vyre.__version__, profile,
            unsupported_ops=frozenset() if subgroups else _SUBGROUP_OPS,
            # async: dispatch_async returns after enqueue, completion is a CUDA event;
            # speculation: fused prefilter/confirm programs run as written
            # (tests/test_literal_search.py)
            async_compute=True, speculation=True,
            max_workgroups_per_dimension=min(f.max_grid),   # y and z are the binding limit (65535)
            max_grid=(min(x, 2**31 - 1), y, z),
            max_invocations_per_dispatch=2**40,   # a dispatch of more would run for minutes: split it
            # the kernels differ with the matmul_acc form (IMMA or scalar loops)
            fingerprint=self.rt.fingerprint + (b"" if self.tensor_cores else b"|scalar-matmul"))

    def build(self, program: Program) -> Kernel:
        return self.compile(program)[0]

    def compile(self, program: Program) -> tuple[Kernel, dict, bytes]:
        self.rt.ensure_current()
        limit = self.rt.facts.shared_optin
        plan, source = generate(program, self.tensor_cores, limit)
        cubin, built_from = self.rt.cubins.get_or_compile(source, self.rt.facts.arch)
        module = self.rt.load(cubin)
        kernel = kernel_of(tuple(module.get_kernel(name) for name in plan.entries), plan, source, built_from, limit)
        self._allow_shared(kernel)
        return kernel, kernel.meta(plan.entries), cubin

    def _allow_shared(self, kernel: Kernel) -> None:
        """Let the kernel's entry points take its dynamic shared memory (past 48 KiB a
        function must opt in to it)."""
        if kernel.shared_bytes > 48 * 1024:
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            for h in kernel.handle:
                raw = getattr(h, "handle", h)
                if isinstance(raw, cu.CUfunction):
                    _ok(cu.cuFuncSetAttribute(raw, attr, kernel.shared_bytes))
                else:
                    _ok(cu.cuKernelSetAttribute(attr, kernel.shared_bytes, raw, self.rt.dev.device_id))

    def compiler(self) -> CudaCompiler:
        return CudaCompiler(self.rt.facts.arch, self.tensor_cores, self.rt.facts.shared_optin)

    def load(self, meta: dict, artifact: bytes) -> Kernel:
        self.rt.ensure_current()
        key = blake3.blake3(artifact).digest()   # programs built in one batch share one cubin
        module = self._modules.get(key) or self.rt.load(artifact)
        self._modules[key] = module
        kernel = Kernel.from_meta(tuple(module.get_kernel(n) for n in meta["entries"]), meta)
        self._allow_shared(kernel)
        return kernel

    # ---- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        self.rt.ensure_current()
        return self.rt.alloc(nbytes)

    def free(self, buf: Any) -> None:
        self.rt.ensure_current()
        buf.close(self.stream)

    def trim(self) -> None:
        self.rt.ensure_current()
        self.rt.trim()

    def device_pointer(self, buf: Any) -> int:
        return _ptr(buf)

    def stream_handle(self) -> int | None:
        return int(self._raw)

    def host_alloc(self, nbytes: int) -> HostBuffer:
        self.rt.ensure_current()
        try:
            pin = self.pinned.take(nbytes)
        except Exception as exc:   # called outside the engine's error mapping (Prepared.take)
            raise self.error(exc) from None
        hb = HostBuffer(pin, host_words(pin, nbytes // 4))
        weakref.finalize(hb, self.pinned.give, pin)
        return hb

    def _copy(self, dst: Any, src: Any, nbytes: int) -> None:
        self.rt.ensure_current()
        if type(dst) is not int and type(src) is not int and dst.size == src.size == max(4, nbytes):
            dst.copy_from(src, stream=self.stream)   # the common case, through cuda.core
        else:                                         # part of a larger buffer, or a view
            _ok(cu.cuMemcpyAsync(_ptr(dst), _ptr(src), nbytes, self._raw))

    def upload(self, dst: Any, src: HostBuffer | np.ndarray, nbytes: int) -> None:
        if type(src) is np.ndarray:   # the caller's words (a call that waits for its dispatch):
            self.rt.ensure_current()  # pageable memory is staged by the driver before this returns
            _ok(cu.cuMemcpyHtoDAsync(_ptr(dst), src.__array_interface__["data"][0], nbytes, self._raw))
            return
        self._copy(dst, src.handle, nbytes)

    def read(self, dst: np.ndarray, buf: Any, nbytes: int) -> None:
        self.rt.ensure_current()
        if nbytes:
            _ok(cu.cuMemcpyDtoHAsync(dst.__array_interface__["data"][0], _ptr(buf), nbytes, self._raw))
        self.stream.record().sync()   # this copy (and what came before it) only

    def download(self, dst: HostBuffer, src: Any, nbytes: int) -> None:
        self._copy(dst.handle, src, nbytes)

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        self._copy(dst, src, nbytes)

    def zero(self, buf: Any, nbytes: int) -> None:
        self.rt.ensure_current()
        stream = self._target.stream.handle if self._target is not self.stream else self._raw
        _ok(cu.cuMemsetD32Async(_ptr(buf), 0, nbytes // 4, stream))

    # ---- control block: the error word in pinned host memory the kernel writes directly; the
    # cancel word in device memory the kernel polls, raised by a copy on a stream of its own --
    def ctl_alloc(self) -> Ctl:
        self.rt.ensure_current()
        try:
            pin = self.pinned.take(8)
            cancel = self.cancel_words.take()
        except Exception as exc:
            raise self.error(exc) from None
        words = host_words(pin, 2)
        words[:] = 0
        ctl = Ctl(pin, words, cancel)
        weakref.finalize(ctl, self._ctl_release, pin, cancel)
        return ctl

    def _ctl_release(self, pin: Any, cancel: _Cancel) -> None:
        self.pinned.give(pin)
        self.cancel_words.give(cancel)

    def ctl_reset(self, ctl: Ctl) -> None:
        ctl.words[:] = 0
        c: _Cancel = ctl.handle
        if c.raised:   # zero it again, in order before the dispatch's kernels
            self.zero(c.ptr, 4)
            c.raised = False

    def ctl_cancel(self, ctl: Ctl) -> bool:
        """Copy a 1 into the dispatch's cancel word on the cancel stream (not blocked by the
        kernels it stops: a copy engine runs it) and wait for the copy, so that `ctl_reset`'s
        zeroing can never be overtaken by it."""
        c: _Cancel = ctl.handle
        try:
            self.rt.ensure_current()
            if self._cancel_stream is None:
                self._cancel_stream = self.rt.dev.create_stream(options=cc.StreamOptions(nonblocking=True))
                self._one = self.pinned.take(4)
                host_words(self._one, 1)[:] = 1
            _ok(cu.cuMemcpyHtoDAsync(c.ptr, _ptr(self._one), 4, self._cancel_stream.handle))
            self._cancel_stream.sync()
        except Exception:
            return False
        c.raised = True
        return True

    # ---- launch --------------------------------------------------------------------------------
    def pack(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> tuple:
        words = self._counts.get(counts)
        if words is None:
            if len(self._counts) > 1024:
                self._counts.clear()
            words = self._counts[counts] = tuple(np.uint32(c) for c in counts)
        return (*buffers, *words, ctl.arg, ctl.handle.ptr)

    def _config(self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int = 0) -> Any:
        key = (grid, block, shared)
        cfg = self._configs.get(key)
        if cfg is None:
            cfg = self._configs[key] = cc.LaunchConfig(grid=grid, block=block, shmem_size=shared)
            if len(self._configs) > 1024:
                self._configs.clear()
        return cfg

    def launch(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
               packed: tuple, timed: Any = False, phases: slice | None = None,
               last_grid: tuple[int, int, int] | None = None) -> Any:
        self.rt.ensure_current()
        cfg = self._config(grid, block, kernel.shared_bytes)
        s = self._target
        handles = kernel.handle if phases is None else kernel.handle[phases]
        if last_grid is not None:   # the finalising phase of float atomics: a grid of its own
            handles, last = handles[:-1], handles[-1]
        if timed:
            start, end = self.timer() if timed is True else timed
            s.record(start)
        for k in handles:
            cc.launch(s, cfg, k, *packed)
        if last_grid is not None and all(last_grid):
            cc.launch(s, self._config(last_grid, block, kernel.shared_bytes), last, *packed)
        if not timed:
            return None
        s.record(end)
        return start, end

    def launcher(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 packed: tuple) -> Any:
        if len(kernel.handle) != 1:
            return None
        # on the dispatch stream itself, never a capture in progress (captures are locked);
        # bound in the calling thread, whose context is made current now (the engine calls
        # it only from this thread)
        self.rt.ensure_current()
        return functools.partial(cc.launch, self.stream, self._config(grid, block, kernel.shared_bytes),
                                 kernel.handle[0], *packed)

    def timer(self) -> Any:
        self.rt.ensure_current()
        opts = self.rt.timing
        return (self.stream.record(options=opts), self.stream.record(options=opts))

    def elapsed_ns(self, token: Any) -> int | None:
        self.rt.ensure_current()
        return self.rt.elapsed_ns(*token)

    def fence_of(self, token: Any) -> Any:
        return token[1] if isinstance(token, tuple) else None   # the end event is a fence

    # ---- completion ----------------------------------------------------------------------------
    def fence(self) -> Any:
        self.rt.ensure_current()
        return self.stream.record()

    def done(self, fence: Any) -> bool:
        self.rt.ensure_current()
        return bool(fence.is_done)

    def wait(self, fence: Any, timeout: float | None) -> bool:
        self.rt.ensure_current()
        if timeout is None:
            fence.sync()
            return True
        limit = time.monotonic() + timeout
        pause = 2e-5
        while not fence.is_done:
            if time.monotonic() >= limit:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        fence.sync()  # raises a sticky launch error, if any
        return True

    def finish(self) -> None:
        self.rt.ensure_current()
        self.stream.sync()

    def abandon(self) -> None:
        self.rt.ensure_current()
        self.stream = self._target = self.rt.stream = self.rt.dev.create_stream()
        self._raw = self.stream.handle

    # ---- graphs --------------------------------------------------------------------------------
    def begin_capture(self) -> None:
        self.rt.ensure_current()
        self._target = self.stream.create_graph_builder().begin_building()

    def end_capture(self) -> Any:
        self.rt.ensure_current()
        builder, self._target = self._target, self.stream
        builder.end_building()
        return builder.complete()

    def launch_graph(self, graph: Any) -> None:
        self.rt.ensure_current()
        graph.launch(self.stream)

    # ---- device arrays -------------------------------------------------------------------------
    def device_input(self, decl: BufferDecl | None, value: Any, where: str, cai: dict | None = None) -> DeviceInput:
        """A CUDA array read in place: its dtype checked against ``decl``; the dispatch is
        ordered after its producer's stream (the CAI ``stream``, `order_after`) or, for DLPack,
        after the handshake made here."""
        if cai is None:
            cai = getattr(value, "__cuda_array_interface__", None)
        if cai is not None:
            ptr, nbytes = cai_span(decl, value, where, ID, cai)
            producer = cai.get("stream")
            return DeviceInput(value, ptr, nbytes, None if producer in (None, 0) else producer)
        self.rt.ensure_current()
        from cuda.core.utils import StridedMemoryView

        try:
            view = StridedMemoryView.from_dlpack(value, stream_ptr=int(self._raw))
        except Exception as exc:
            raise InvalidInput("input_type", f"{where} ({type(value).__name__}) could not be read "
                               f"through DLPack ({exc}).", "pass a CuPy array, a torch CUDA tensor or "
                               "a numpy array.", backend=ID) from None
        if not view.is_device_accessible:
            raise InvalidInput("input_device", f"{where} is not in device memory.",
                               "pass a numpy array for host data.", backend=ID)
        dt = np.dtype(view.dtype)
        shape = tuple(view.shape)
        if decl is not None:
            from vyre.driver.inputs import check_dtype

            check_dtype(decl, dt, where, ID, value)
        strides = view.strides
        if strides is not None:
            expect, acc = [], 1
            for dim in reversed(shape):
                expect.append(acc)
                acc *= dim
            if tuple(reversed(expect)) != tuple(strides) and int(np.prod(shape)) > 1:
                raise InvalidInput("input_layout", f"{where} is a non-contiguous device array.",
                                   "pass a contiguous array.", backend=ID)
        return DeviceInput(value, int(view.ptr), int(np.prod(shape, dtype=np.int64)) * dt.itemsize)

    def order_after(self, stream: Any) -> None:
        self.rt.ensure_current()
        if int(stream) == int(self._raw):
            return   # our own stream: already in order
        _ok(cu.cuEventRecord(self._order, int(stream)))
        _ok(cu.cuStreamWaitEvent(self._raw, self._order, 0))

    def view(self, ptr: int, nbytes: int, owner: Any) -> int:
        """The device address itself: cuda.core passes a Python int as a pointer argument, and
        `_copy`/`zero` take it, so no buffer object is made per call (the engine keeps
        ``owner`` alive until the dispatch completes)."""
        return int(ptr)

    def error(self, exc: BaseException) -> BackendError:
        return self.rt.error(exc)

    # ---- lifecycle: the context is current per thread; loss and recovery ---------------------
    def attach(self) -> None:
        self.rt.ensure_current()

    def lost(self) -> bool:
        try:
            self.rt.ensure_current()
            err, = cu.cuCtxSynchronize()
            return int(err) != 0 and any(s in repr(err) for s in
                                         ("ILLEGAL", "LAUNCH_FAILED", "ECC", "DESTROYED"))
        except Exception:
            return True

    def renew(self) -> None:
        """A fresh context state when the device was lost, then a fresh stream (`abandon`)."""
        if self.lost():
            dev = int(self.rt.dev.device_id)
            cu.cuDevicePrimaryCtxReset(dev)
            self.rt = Runtime(dev)
            self._cancel_stream = self._one = None   # (they belonged to the old context)
            self.cancel_words = _CancelWords(self.rt)
        self.abandon()

    def close(self) -> None:
        self.rt.ensure_current()
        try:
            self.stream.sync()
        except Exception:
            pass


def backend(device_id: int = 0) -> EngineBackend:
    """The CUDA backend: the engine over a `CudaDevice` of device ``device_id`` (its
    factory)."""
    return EngineBackend(CudaDevice(device_id))


#: the registered factory, by the backend's old class name
CudaBackend = backend

__all__ = ["CudaBackend", "CudaDevice", "backend"]
