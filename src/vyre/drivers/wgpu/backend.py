"""`WgpuBackend`: the dispatch engine over a wgpu device.

Target mechanics only (`vyre.driver.engine.device.Device`): WGSL modules and compute
pipelines per program, storage buffers, queue writes and reads, one command encoder per
launch. wgpu reads device memory back only through the queue: `download` and `ctl_fetch`
copy into staging buffers of their own, submitted at the fence in queue order right after
the kernels (so dispatches in flight together never see each other's outputs, though they
share a shape's device buffers), and the fence maps them. Fences are polled without a lock
(`done`, `wait` with a timeout), so several threads' dispatches complete independently.
A running kernel cannot be stopped (no host-visible memory), so `cancellable` is false and
a timed-out dispatch is reported as the engine reports runaways; `try_recover` opens a
fresh device (`renew`), so later work never queues behind it. Vendor errors become vyre errors
(`DeviceLost` once the device reports its loss: wgpu-native 0.32 has no `GPUDevice.lost`, so a
loss is known from the errors wgpu raises, `_says_lost`), and interpreter exit waits a bounded
time for queued work and stops wgpu-py's poll thread (`_shutdown_all`).
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Any

import numpy as np

import vyre
from vyre.driver.capability import Capabilities, DeviceProfile
from vyre.driver.engine import Ctl, Device, EngineBackend, HostBuffer, Kernel
from vyre.driver.errors import (
    BackendError,
    BackendUnavailable,
    DeviceLost,
    DispatchFailed,
    KernelCompileFailed,
    UnsupportedFeature,
)
from vyre.driver.install import install_hint
from vyre.ir.ops import all_op_ids
from vyre.ir.program import Program
from vyre.lower.legalize.int64 import word_scale
from vyre.lower.wgsl import FOLDED, WgslRefusal, generate, refusals

ID = "wgpu"
# op ids WGSL cannot run with the reference's bytes (see vyre.lower.wgsl)
REFUSED_OPS = frozenset(op for op in all_op_ids() if op.startswith("vyre.subgroup."))


def _fix(why: list[str]) -> str:
    """Where a refused program runs (OpenCL has no subgroup operations either)."""
    if any("subgroup" in w for w in why):
        return "run this program on the cuda or reference backend."
    return "run this program on the cuda, opencl or reference backend."


def _runtime_dir() -> None:
    """Mesa's Vulkan drivers print "XDG_RUNTIME_DIR is invalid or not set" twice when the
    variable names no private directory (headless machines, containers, CI). Where it is unset
    or unusable, point it at a private directory of this user's (0700, as the XDG spec asks);
    a usable one is left alone."""
    import os
    import tempfile

    current = os.environ.get("XDG_RUNTIME_DIR", "")
    if current and os.path.isdir(current) and os.access(current, os.W_OK | os.X_OK):
        return
    path = os.path.join(tempfile.gettempdir(), f"vyre-runtime-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)
    except OSError:
        return   # nowhere to make one: Mesa only complains
    os.environ["XDG_RUNTIME_DIR"] = path


#: how wgpu-native words a lost device in the errors it raises
_LOST_WORDS = ("device is lost", "device was lost", "device lost")


def _says_lost(exc: BaseException) -> bool:
    """Whether a wgpu error reports a lost device."""
    text = str(exc).lower()
    return any(w in text for w in _LOST_WORDS)


def _wgpu():
    _runtime_dir()
    try:
        import wgpu
    except ImportError as exc:
        raise BackendUnavailable(ID, f"wgpu is not installed ({exc}).", f"{install_hint('wgpu')}.") from None
    return wgpu


def _settled(promise: Any) -> bool:
    """A wgpu-py `GPUPromise` whose callback has run (fulfilled or rejected). wgpu-py marks
    this in ``_state`` and ``_thread_event`` (set from its poll thread); reading them is the
    only way to poll a promise without an event loop."""
    return promise._thread_event.is_set()


def _await(promise: Any, timeout: float | None) -> bool:
    return promise._thread_event.wait(timeout)


class _Fence:
    """Everything enqueued up to a point: the staging buffers its reads were copied into
    (in queue order, right after the kernels that wrote them) and their map promises, or a
    work-done promise when it has no reads. Reads are copied out once, by the first waiter."""

    __slots__ = ("__weakref__", "done", "error", "lock", "pool", "promises", "reads")

    def __init__(self, reads: list, promises: list, pool: _StagingPool) -> None:
        self.reads, self.promises, self.pool = reads, promises, pool
        self.done = False
        self.error: BaseException | None = None
        self.lock = threading.Lock()


class _StagingPool:
    """Mapped-read buffers returned by completed fences, by size, up to `CAP_BYTES` in all
    (``list.pop``/``append`` are atomic; the byte count is approximate under races)."""

    CAP_BYTES = 64 << 20

    def __init__(self) -> None:
        self.free: dict[int, list] = {}
        self.bytes = 0

    def take(self, size: int) -> Any:
        try:
            buf = self.free[size].pop()
        except (KeyError, IndexError):
            return None
        self.bytes -= size
        return buf

    def give(self, size: int, buf: Any) -> bool:
        if self.bytes + size > self.CAP_BYTES:
            return False
        self.free.setdefault(size, []).append(buf)
        self.bytes += size
        return True


_LIVE: weakref.WeakSet = weakref.WeakSet()
EXIT_WAIT_S = 10.0   # how long the interpreter's exit waits for work still on a wgpu queue


def _shutdown_all() -> None:
    """At interpreter exit (registered after wgpu-py is imported, so it runs before
    wgpu-py's own exit hook): wait a bounded time for work still queued, then stop each
    device's poll thread, so no wgpu callback runs into Python while the interpreter is
    torn down."""
    limit = time.monotonic() + EXIT_WAIT_S
    try:   # maps and work-done callbacks of fences nobody waits for any more
        from wgpu._async import GPUPromise

        for promise in list(GPUPromise._UNRESOLVED):
            _await(promise, max(0.0, limit - time.monotonic()))
    except Exception:
        pass
    for dev in list(_LIVE):
        dev.close(max(0.0, limit - time.monotonic()))


class _Pipelines:
    """A kernel's compute pipelines, one per phase: ``plain`` as compiled (the module's
    ``vy_folded`` override false, so the compiler drops the folded-grid prologue), and the
    folded ones (override true), made on the first launch of a grid over the adapter's
    per-axis limit."""

    def __init__(self, owner: WgpuDevice, module: Any, playout: Any, entries: tuple[str, ...]) -> None:
        self._owner, self._module, self._playout, self._entries = owner, module, playout, entries
        self.plain = owner.pipelines(module, playout, entries, folded=False)
        self._folded: tuple | None = None

    def folded(self) -> tuple:
        """The folded pipelines (the caller holds the device's ``_qlock``)."""
        if self._folded is None:
            self._folded = self._owner.pipelines(self._module, self._playout, self._entries, folded=True)
        return self._folded


class WgpuDevice(Device):
    cancellable = False

    def __init__(self) -> None:
        wgpu = _wgpu()
        self.wgpu = wgpu
        try:
            self.adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as exc:
            raise BackendUnavailable(ID, f"no wgpu adapter ({exc}).",
                                     "install a Vulkan/Metal/D3D12 driver (Debian CPU: apt-get install "
                                     "mesa-vulkan-drivers libvulkan1).") from None
        if self.adapter is None:
            raise BackendUnavailable(ID, "no wgpu adapter.", "install mesa-vulkan-drivers libvulkan1.")
        lim = self.adapter.limits
        wanted = {k: lim[k] for k in ("max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size",
                                      "max-buffer-size", "max-compute-workgroup-storage-size",
                                      "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
                                      "max-compute-workgroup-size-y", "max-compute-workgroup-size-z",
                                      "max-compute-workgroups-per-dimension", "max-bind-groups")
                  if k in lim}
        self._wanted = wanted
        self._retired: list[tuple[Any, weakref.WeakSet]] = []   # (device, its fences) after renew
        self.usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self.read_usage = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
        self._open()
        if not _LIVE and not getattr(_shutdown_all, "registered", False):
            atexit.register(_shutdown_all)   # after wgpu-py's hooks: atexit runs it first
            _shutdown_all.registered = True  # type: ignore[attr-defined]
        _LIVE.add(self)

    def _open(self) -> None:
        """A device and queue of their own (at start, and on `renew`)."""
        try:
            self.device = self.adapter.request_device_sync(required_limits=self._wanted)
        except Exception as exc:
            raise BackendUnavailable(ID, f"the wgpu adapter gave no device ({exc}).",
                                     "check the driver with `vyre doctor`.") from None
        self.limits = dict(self.device.limits)
        self.queue = self.device.queue
        self._lost = False                    # set once an error of this device reports its loss
        # per thread: (host words, staging, nbytes) read since that thread's last fence. A
        # dispatch is enqueued and fenced (or finished) by one thread, while other threads
        # enqueue theirs in between: a fence takes only its own thread's reads.
        self._tls = threading.local()
        # commands are recorded into one encoder and submitted together at the next fence or
        # queue write (on lavapipe a submit waits for the kernels of the submit before it, so
        # a dispatch's kernels and read-back copies go in one submit)
        self._enc: Any = None
        self._qlock = threading.Lock()
        self._staging = _StagingPool()        # free MAP_READ buffers of this device
        self._fences: weakref.WeakSet = weakref.WeakSet()   # fences not yet complete
        # a fence with no reads maps a copy of these 4 bytes (wgpu-py 0.32's work-done
        # callback has the wrong C signature): it completes after everything before it
        self._probe = self.device.create_buffer(size=4, usage=self.usage)

    def capabilities(self) -> Capabilities:
        import blake3

        lim, info = self.limits, self.adapter.info
        profile = DeviceProfile(
            backend=ID, max_workgroup_size=(lim["max-compute-workgroup-size-x"], lim["max-compute-workgroup-size-y"],
                                            lim["max-compute-workgroup-size-z"]),
            max_invocations_per_workgroup=lim["max-compute-invocations-per-workgroup"],
            max_storage_buffer_binding_size=min(lim["max-storage-buffer-binding-size"], lim["max-buffer-size"]),
            has_shared_memory=True, has_mul_high=True,
            max_shared_memory_bytes=lim["max-compute-workgroup-storage-size"],
            device_name=f"{info.get('device', '?')} via {info.get('backend_type', '?')}")
        fingerprint = blake3.blake3(f"wgpu|{info.get('device')}|{info.get('backend_type')}|"
                                    f"{info.get('driver_description')}".encode()).digest()
        # speculation: fused prefilter/confirm programs run as written (tests/test_literal_search.py);
        # grids past the adapter's workgroups per axis are launched folded onto more axes (`_fold`)
        return Capabilities(ID, vyre.__version__, profile, unsupported_ops=REFUSED_OPS, async_compute=True,
                            speculation=True,
                            max_workgroups_per_dimension=lim["max-compute-workgroups-per-dimension"],
                            max_grid=(2**31 - 1,) * 3, max_invocations_per_dispatch=2**32 - 1,
                            fingerprint=fingerprint)

    def renew(self) -> None:
        """A fresh device and queue (the engine's `try_recover`): later work never queues
        behind a kernel that would not stop, and a lost device is replaced. The old device is
        left to finish by itself (`close` still waits for it and stops its poll thread)."""
        self._retired.append((self.device, self._fences))
        self._open()

    def software_adapter(self) -> bool:
        """True on a CPU adapter (lavapipe/llvmpipe), where a shader compiles in time that grows
        faster than its size: conformance keeps its random programs small there."""
        return self.adapter.info.get("adapter_type", "").upper() == "CPU"

    def refuse(self, program: Program) -> None:
        # what WGSL cannot give the reference's bytes for, including what only legalizing or
        # printing finds: routing must refuse exactly what the dispatch refuses
        self.source(program)
        hidden = len(program.facts.float_atomic_buffers)   # one hidden accumulator each (S36)
        n = len(program.facts.bound) + hidden + 2   # + the counts and the control block
        limit = self.limits.get("max-storage-buffers-per-shader-stage", 8)
        if n > limit:
            extra = f", {hidden} of them the hidden accumulators of float atomics" if hidden else ""
            raise UnsupportedFeature(f"{n - 2} bound buffers{extra} (this adapter binds {limit - 2})", ID,
                                     "use fewer buffers, or another backend.")

    # ---- compile ---------------------------------------------------------------------------
    def source(self, program: Program) -> tuple[Any, str]:
        cached = program.__dict__.get("_vyre_wgsl")    # refuse() and compile() both ask
        if cached is not None:
            return cached
        why = refusals(program)
        if why:
            raise UnsupportedFeature("; ".join(why), ID, _fix(why))
        try:
            program.__dict__["_vyre_wgsl"] = generate(program)
            return program.__dict__["_vyre_wgsl"]
        except WgslRefusal as exc:
            change = f"{exc.change}, or " if exc.change else ""
            raise UnsupportedFeature(str(exc), ID, f"{change}run this program on the cuda, opencl or reference "
                                     "backend.") from None

    def build(self, program: Program) -> Kernel:
        return self.compile(program)[0]

    def compile(self, program: Program) -> tuple[Kernel, dict, bytes]:
        plan, src = self.source(program)
        scale = word_scale(program)         # u64/i64 buffers are u32 words in WGSL
        words = [scale.get(b.name, 1) for b in plan.bound]
        kernel = self._kernel(src, plan.entries, len(plan.bound), [b.writable for b in plan.bound],
                              plan.uses_ctl, plan.fully_written, plan.stoppable, Kernel.indirect_of(plan),
                              words=words, scratch=Kernel.scratch_of(plan))
        return kernel, kernel.meta(plan.entries) | {"writable": [b.writable for b in plan.bound],
                                                     "words": words}, src.encode()

    def load(self, meta: dict, artifact: bytes) -> Kernel:
        k = Kernel.from_meta(None, meta)
        return self._kernel(artifact.decode(), tuple(meta["entries"]), len(meta["writable"]), meta["writable"],
                            k.uses_ctl, k.fully_written, k.stoppable, k.indirect, "disk", meta.get("words"),
                            k.scratch)

    def _kernel(self, src: str, entries, n_bound: int, writable, uses_ctl, fully, stoppable, indirect,
                built_from: str = "compiled", words: list[int] | None = None,
                scratch: tuple[tuple[int, int], ...] = ()) -> Kernel:
        wgpu = self.wgpu
        try:
            module = self.device.create_shader_module(code=src)
        except Exception as exc:
            self._raise_if_lost(exc)
            raise KernelCompileFailed(f"WGSL did not compile: {exc}", "this is a vyre code-generation bug: "
                                      "report it with `vyre inspect --backend wgpu`.", backend=ID) from None
        storage = wgpu.BufferBindingType.storage
        ro = wgpu.BufferBindingType.read_only_storage
        entries_l = [{"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                      "buffer": {"type": storage if writable[i] else ro}} for i in range(n_bound)]
        entries_l.append({"binding": n_bound, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": ro}})
        entries_l.append({"binding": n_bound + 1, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": storage}})
        layout = self.device.create_bind_group_layout(entries=entries_l)
        playout = self.device.create_pipeline_layout(bind_group_layouts=[layout])
        pipes = _Pipelines(self, module, playout, tuple(entries))
        return Kernel((pipes, layout, n_bound, tuple(words or [1] * n_bound)), uses_ctl, frozenset(fully), built_from,
                      src, stoppable, 1, indirect, scratch)

    def pipelines(self, module: Any, playout: Any, entries: tuple[str, ...], folded: bool) -> tuple:
        """One compute pipeline per entry point, with the module's ``vy_folded`` override set."""
        try:
            constants = {"constants": {FOLDED: 1}} if folded else {}
            return tuple(self.device.create_compute_pipeline(
                layout=playout, compute={"module": module, "entry_point": e, **constants}) for e in entries)
        except Exception as exc:
            self._raise_if_lost(exc)
            raise KernelCompileFailed(f"WGSL pipeline creation failed: {exc}", "this is a vyre code-generation "
                                      "bug: report it with `vyre inspect --backend wgpu`.", backend=ID) from None

    # ---- memory --------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        try:
            return self.device.create_buffer(size=max(4, (nbytes + 3) & ~3), usage=self.usage)
        except Exception as exc:
            raise self.error(exc) from None

    def free(self, buf: Any) -> None:
        buf.destroy()

    def upload(self, dst: Any, src: HostBuffer | np.ndarray, nbytes: int) -> None:
        words = src.words if isinstance(src, HostBuffer) else src
        with self._qlock:
            self._flush()   # queue writes are ordered with submits, not with recorded commands
            self.queue.write_buffer(dst, 0, memoryview(np.ascontiguousarray(words)).cast("B")[:nbytes])

    def _encoder(self) -> Any:
        """The encoder commands are recorded into (the caller holds ``_qlock``)."""
        if self._enc is None:
            self._enc = self.device.create_command_encoder()
        return self._enc

    def _flush(self) -> None:
        """Submit what was recorded (the caller holds ``_qlock``)."""
        enc, self._enc = self._enc, None
        if enc is not None:
            self.queue.submit([enc.finish()])

    def download(self, dst: HostBuffer, src: Any, nbytes: int) -> None:
        self._read(dst.words, src, nbytes)

    def _read(self, words: np.ndarray, src: Any, nbytes: int) -> None:
        """Record a copy of ``src`` into a staging buffer of this read's own, right after the
        kernels that wrote ``src`` (the engine holds its lock), so a later dispatch reusing
        ``src`` can never change what this read returns; the fence maps it."""
        size = (nbytes + 3) & ~3
        try:
            staging = self._staging.take(size)
            if staging is None:
                staging = self.device.create_buffer(size=max(4, size), usage=self.read_usage)
            with self._qlock:
                self._encoder().copy_buffer_to_buffer(src, 0, staging, 0, size)
        except Exception as exc:
            raise self.error(exc) from None
        self._pending().append((words, staging, size))

    def _pending(self) -> list:
        reads = getattr(self._tls, "reads", None)
        if reads is None:
            reads = self._tls.reads = []
        return reads

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        with self._qlock:
            self._encoder().copy_buffer_to_buffer(src, 0, dst, 0, (nbytes + 3) & ~3)

    def zero(self, buf: Any, nbytes: int) -> None:
        with self._qlock:
            self._encoder().clear_buffer(buf, 0, (nbytes + 3) & ~3)

    # ---- control block -------------------------------------------------------------------------
    def ctl_alloc(self) -> Ctl:
        try:
            buf = self.device.create_buffer(size=8, usage=self.usage)
        except Exception as exc:
            raise self.error(exc) from None
        return Ctl(buf, np.zeros(2, dtype=np.uint32), buf)

    def ctl_reset(self, ctl: Ctl) -> None:
        ctl.words[:] = 0
        with self._qlock:
            self._flush()
            self.queue.write_buffer(ctl.handle, 0, np.zeros(2, np.uint32))

    def ctl_fetch(self, ctl: Ctl) -> None:
        self._read(ctl.words, ctl.handle, 8)

    # ---- launch --------------------------------------------------------------------------------
    def pack(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> Any:
        try:
            return self._pack(kernel, buffers, counts, ctl)
        except Exception as exc:   # called outside the engine's error mapping (Prepared.take)
            raise self.error(exc) from None

    def _pack(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> Any:
        _, layout, n_bound, scale = kernel.handle
        counts = tuple(c * w for c, w in zip(counts, scale)) + tuple(counts[len(scale):])
        # + the kernels' opaque zero (vy_z) and the folded grid (vy_n[n+1..3], see `launch`)
        words = np.array(list(counts) + [0, 0, 0, 0], dtype=np.uint32)
        cbuf = self.device.create_buffer(size=max(4, words.nbytes), usage=self.usage)
        self.queue.write_buffer(cbuf, 0, words)
        entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                   for i, b in enumerate(buffers[:n_bound])]
        entries.append({"binding": n_bound, "resource": {"buffer": cbuf, "offset": 0, "size": cbuf.size}})
        entries.append({"binding": n_bound + 1, "resource": {"buffer": ctl.arg, "offset": 0, "size": 8}})
        return [self.device.create_bind_group(layout=layout, entries=entries), cbuf]

    def launch(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
               packed: Any, timed: Any = False, phases: slice | None = None,
               last_grid: tuple[int, int, int] | None = None) -> Any:
        ps: _Pipelines = kernel.handle[0]
        pick = slice(None) if phases is None else phases
        pipes = ps.plain[pick]
        grids = [grid] * len(pipes)
        if last_grid is not None:   # the finalising phase of float atomics: a grid of its own
            grids[-1] = last_grid
        with self._qlock:
            for k, (p, g) in enumerate(zip(pipes, grids)):   # one pass per phase: passes end in order (grid_sync)
                if not all(g):
                    continue
                g, folded = self._fold(kernel, g, packed)
                if folded:
                    p = ps.folded()[pick][k]
                enc = self._encoder()
                cp = enc.begin_compute_pass()
                cp.set_pipeline(p)
                cp.set_bind_group(0, packed[0])
                cp.dispatch_workgroups(*g)
                cp.end()
        return None

    # ---- completion ----------------------------------------------------------------------------
    def _fold(self, kernel: Kernel, grid: tuple[int, int, int], packed: list) -> tuple[tuple[int, int, int], bool]:
        """The grid to launch, and whether it is folded: ``grid`` itself when every axis is
        within the adapter's limit; otherwise its workgroups laid out over more axes, with the
        logical grid written to the kernel's count words, launched with the kernel's folded
        pipelines (whose prologue recovers each workgroup's logical id). The
        caller holds ``_qlock``; a count-word write first submits what was recorded, which
        may read the words as they were."""
        lim = self.limits["max-compute-workgroups-per-dimension"]
        gx, gy, gz = grid
        n_bound = kernel.handle[2]
        if max(grid) <= lim:   # the plain pipelines do not read the folded grid's words
            return grid, False
        total = gx * gy * gz
        px = min(total, lim)
        py = min(-(-total // px), lim)
        pz = -(-total // (px * py))
        if total >= 2**32 or pz > lim:
            raise DispatchFailed(f"a grid of {gx}x{gy}x{gz} workgroups is more than this adapter launches "
                                 f"({lim} per axis, 2^32 in all).", "use larger workgroups or split the "
                                 "dispatch.", backend=ID)
        self._flush()
        self.queue.write_buffer(packed[1], 4 * (n_bound + 1), np.array([gx, gy, gz], np.uint32))
        return (px, py, pz), True

    def fence(self) -> _Fence:
        try:
            if not self._pending():
                self._read(np.zeros(1, np.uint32), self._probe, 4)
            reads = self._pending()
            self._tls.reads = []
            with self._qlock:
                self._flush()
            # READ_NOSYNC: wgpu-py's map without its extra empty submit (the copies were
            # just submitted; an extra submit would wait for the kernels on lavapipe)
            promises = [staging.map_async("READ_NOSYNC") for _, staging, _ in reads]
        except Exception as exc:
            raise self.error(exc) from None
        fence = _Fence(reads, promises, self._staging)
        self._fences.add(fence)
        return fence

    def done(self, fence: _Fence) -> bool:
        return fence.done or all(_settled(p) for p in fence.promises)

    def wait(self, fence: _Fence, timeout: float | None) -> bool:
        """Wait (no lock held: other threads' fences complete meanwhile) until every map of
        ``fence`` is done, then copy its reads out once."""
        if not fence.done:
            limit = None if timeout is None else time.monotonic() + timeout
            for p in fence.promises:
                left = None if limit is None else max(0.0, limit - time.monotonic())
                if not _await(p, left):
                    return False
            self._finish(fence)
        if fence.error is not None:
            raise fence.error
        return True

    def _finish(self, fence: _Fence) -> None:
        with fence.lock:
            if fence.done:
                return
            try:
                for p in fence.promises:
                    p.sync_wait()   # settled: raises a failed map's error
                for words, staging, size in fence.reads:
                    words.view(np.uint8)[:size] = np.frombuffer(staging.read_mapped(0, size), np.uint8)
                    staging.unmap()
                    if not fence.pool.give(size, staging):   # the pool of the fence's device
                        staging.destroy()
            except Exception as exc:
                fence.error = self.error(exc)
            finally:
                fence.reads = []
                fence.done = True
                self._fences.discard(fence)

    def lost(self) -> bool:
        """True once an error of this device reported its loss (`error`)."""
        return self._lost

    def _raise_if_lost(self, exc: BaseException) -> None:
        """A build that failed because the device is lost raises `DeviceLost` (`error`), not a
        code-generation error."""
        err = self.error(exc)
        if isinstance(err, DeviceLost):
            raise err from None

    def error(self, exc: BaseException) -> BackendError:
        if isinstance(exc, BackendError):
            return exc
        if self._lost or _says_lost(exc):
            self._lost = True
            return DeviceLost(f"the wgpu device was lost ({type(exc).__name__}: {' '.join(str(exc).split())}).",
                              "call backend.try_recover() (a fresh device; compiled pipelines are "
                              "invalidated), or restart the process.", backend=ID)
        return DispatchFailed(f"wgpu error {type(exc).__name__}: {exc}.",
                              "check the adapter (`vyre doctor`); report it if it persists.", backend=ID)

    def close(self, timeout: float = 10.0) -> None:
        """Wait up to ``timeout`` for queued work, then stop wgpu-py's poll thread of this
        device and of every device `renew` replaced (deterministic shutdown: no wgpu callback
        runs into Python after the interpreter exits)."""
        limit = time.monotonic() + timeout
        for device, fences in [*self._retired, (self.device, self._fences)]:
            for fence in list(fences):
                try:
                    self.wait(fence, max(0.0, limit - time.monotonic()))
                except Exception:
                    pass
            poller = getattr(device, "_poller", None)
            if poller is not None:
                try:
                    poller.stop()
                except Exception:
                    pass
        self._retired = []
        _LIVE.discard(self)


def backend() -> EngineBackend:
    """The wgpu backend: the engine over a `WgpuDevice` (its factory)."""
    return EngineBackend(WgpuDevice())


#: the registered factory, by the backend's old class name
WgpuBackend = backend

__all__ = ["WgpuBackend", "WgpuDevice", "backend"]
