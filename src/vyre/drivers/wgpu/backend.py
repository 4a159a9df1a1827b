"""`WgpuBackend`: the dispatch engine over a wgpu device.

Target mechanics only (`vyre.driver.engine.device.Device`): WGSL modules and compute
pipelines per program, storage buffers, queue writes and reads, one command encoder per
launch. wgpu reads device memory back only through the queue, so `download` and `ctl_fetch`
are recorded and done when the dispatch's fence is waited on (in queue order, after the
kernels). A running kernel cannot be stopped (no host-visible memory), so `cancellable` is
false and a timed-out dispatch is reported as the engine reports runaways.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import numpy as np

import vyre
from vyre.driver.capability import DeviceProfile
from vyre.driver.engine import Ctl, Device, EngineBackend, HostBuffer, Kernel
from vyre.driver.errors import (
    BackendError,
    BackendUnavailable,
    DispatchFailed,
    KernelCompileFailed,
    UnsupportedFeature,
)
from vyre.ir.ops import all_op_ids
from vyre.ir.program import Program
from vyre.lower.legalize.int64 import word_scale
from vyre.lower.wgsl import WgslRefusal, generate, refusals

ID = "wgpu"
# op ids WGSL cannot run with the reference's bytes (see vyre.lower.wgsl)
REFUSED_OPS = frozenset({
    "vyre.un_op.exp", "vyre.un_op.log",
    "vyre.un_op.exp2", "vyre.un_op.log2", "vyre.un_op.sin", "vyre.un_op.cos", "vyre.un_op.tan",
    "vyre.un_op.tanh",
}) | frozenset(op for op in all_op_ids() if op.startswith("vyre.subgroup."))


def _fix(why: list[str]) -> str:
    """Where a refused program runs (OpenCL has no subgroup operations either)."""
    if any("subgroup" in w for w in why):
        return "run this program on the cuda or reference backend."
    return "run this program on the cuda, opencl or reference backend."


def _wgpu():
    try:
        import wgpu
    except ImportError as exc:
        raise BackendUnavailable(ID, f"wgpu is not installed ({exc}).", "pip install 'vyre[wgpu]'.") from None
    return wgpu


class _Fence:
    __slots__ = ("done", "reads")

    def __init__(self, reads: list) -> None:
        self.reads, self.done = reads, False


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
        self.device = self.adapter.request_device_sync(required_limits=wanted)
        self.limits = dict(self.device.limits)
        self.queue = self.device.queue
        self.usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self._reads: list = []
        self._lock = threading.Lock()
        # reading 4 bytes back is how this waits for the queue (a read completes after every
        # submission before it)
        self._probe = self.device.create_buffer(size=4, usage=self.usage)

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
            raise UnsupportedFeature(str(exc), ID, "run this program on the cuda, opencl or reference backend.") from None

    def build(self, program: Program) -> Kernel:
        return self.compile(program)[0]

    def compile(self, program: Program) -> tuple[Kernel, dict, bytes]:
        plan, src = self.source(program)
        scale = word_scale(program)         # u64/i64 buffers are u32 words in WGSL
        words = [scale.get(b.name, 1) for b in plan.bound]
        kernel = self._kernel(src, plan.entries, len(plan.bound), [b.writable for b in plan.bound],
                              plan.uses_ctl, plan.fully_written, plan.stoppable, Kernel.indirect_of(plan),
                              words=words)
        return kernel, kernel.meta(plan.entries) | {"writable": [b.writable for b in plan.bound],
                                                     "words": words}, src.encode()

    def load(self, meta: dict, artifact: bytes) -> Kernel:
        k = Kernel.from_meta(None, meta)
        return self._kernel(artifact.decode(), tuple(meta["entries"]), len(meta["writable"]), meta["writable"],
                            k.uses_ctl, k.fully_written, k.stoppable, k.indirect, "disk", meta.get("words"))

    def _kernel(self, src: str, entries, n_bound: int, writable, uses_ctl, fully, stoppable, indirect,
                built_from: str = "compiled", words: list[int] | None = None) -> Kernel:
        wgpu = self.wgpu
        try:
            module = self.device.create_shader_module(code=src)
        except Exception as exc:
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
        try:
            pipes = tuple(self.device.create_compute_pipeline(layout=playout, compute={"module": module, "entry_point": e})
                          for e in entries)
        except Exception as exc:
            raise KernelCompileFailed(f"WGSL pipeline creation failed: {exc}", "this is a vyre code-generation "
                                      "bug: report it with `vyre inspect --backend wgpu`.", backend=ID) from None
        return Kernel((pipes, layout, n_bound, tuple(words or [1] * n_bound)), uses_ctl, frozenset(fully), built_from, src, stoppable, 1, indirect)

    # ---- memory --------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        return self.device.create_buffer(size=max(4, (nbytes + 3) & ~3), usage=self.usage)

    def free(self, buf: Any) -> None:
        buf.destroy()

    def upload(self, dst: Any, src: HostBuffer | np.ndarray, nbytes: int) -> None:
        words = src.words if isinstance(src, HostBuffer) else src
        self.queue.write_buffer(dst, 0, memoryview(np.ascontiguousarray(words)).cast("B")[:nbytes])

    def download(self, dst: HostBuffer, src: Any, nbytes: int) -> None:
        self._reads.append((dst.words, src, nbytes))

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        enc = self.device.create_command_encoder()
        enc.copy_buffer_to_buffer(src, 0, dst, 0, (nbytes + 3) & ~3)
        self.queue.submit([enc.finish()])

    def zero(self, buf: Any, nbytes: int) -> None:
        enc = self.device.create_command_encoder()
        enc.clear_buffer(buf, 0, (nbytes + 3) & ~3)
        self.queue.submit([enc.finish()])

    # ---- control block -------------------------------------------------------------------------
    def ctl_alloc(self) -> Ctl:
        buf = self.device.create_buffer(size=8, usage=self.usage)
        return Ctl(buf, np.zeros(2, dtype=np.uint32), buf)

    def ctl_reset(self, ctl: Ctl) -> None:
        ctl.words[:] = 0
        self.queue.write_buffer(ctl.handle, 0, np.zeros(2, np.uint32))

    def ctl_fetch(self, ctl: Ctl) -> None:
        self._reads.append((ctl.words, ctl.handle, 8))

    # ---- launch --------------------------------------------------------------------------------
    def pack(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> Any:
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
        return [self.device.create_bind_group(layout=layout, entries=entries), cbuf, False]

    def launch(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
               packed: Any, timed: Any = False, phases: slice | None = None) -> Any:
        pipes = kernel.handle[0] if phases is None else kernel.handle[0][phases]
        grid = self._fold(kernel, grid, packed)
        enc = self.device.create_command_encoder()
        for p in pipes:          # one pass per phase: passes end in order (grid_sync)
            cp = enc.begin_compute_pass()
            cp.set_pipeline(p)
            cp.set_bind_group(0, packed[0])
            cp.dispatch_workgroups(*grid)
            cp.end()
        self.queue.submit([enc.finish()])
        return None

    # ---- completion ----------------------------------------------------------------------------
    def _fold(self, kernel: Kernel, grid: tuple[int, int, int], packed: list) -> tuple[int, int, int]:
        """The grid to launch: ``grid`` itself when every axis is within the adapter's limit;
        otherwise its workgroups laid out over more axes, with the logical grid written to
        the kernel's count words (the kernel recovers each workgroup's logical id)."""
        lim = self.limits["max-compute-workgroups-per-dimension"]
        gx, gy, gz = grid
        n_bound = kernel.handle[2]
        if max(grid) <= lim:
            if packed[2]:
                self.queue.write_buffer(packed[1], 4 * (n_bound + 1), np.zeros(3, np.uint32))
                packed[2] = False
            return grid
        total = gx * gy * gz
        px = min(total, lim)
        py = min(-(-total // px), lim)
        pz = -(-total // (px * py))
        if total >= 2**32 or pz > lim:
            raise DispatchFailed(f"a grid of {gx}x{gy}x{gz} workgroups is more than this adapter launches "
                                 f"({lim} per axis, 2^32 in all).", "use larger workgroups or split the "
                                 "dispatch.", backend=ID)
        self.queue.write_buffer(packed[1], 4 * (n_bound + 1), np.array([gx, gy, gz], np.uint32))
        packed[2] = True
        return (px, py, pz)

    def fence(self) -> _Fence:
        reads, self._reads = self._reads, []
        return _Fence(reads)

    def _complete(self, fence: _Fence) -> None:
        with self._lock:
            if fence.done:
                return
            for words, buf, nbytes in fence.reads:
                data = self.queue.read_buffer(buf, 0, (nbytes + 3) & ~3)
                words.view(np.uint8)[: (nbytes + 3) & ~3] = np.frombuffer(data, np.uint8)
            if not fence.reads:
                self.queue.read_buffer(self._probe, 0, 4)
            fence.done = True

    def done(self, fence: _Fence) -> bool:
        return fence.done

    def wait(self, fence: _Fence, timeout: float | None) -> bool:
        if timeout is None:
            self._complete(fence)
            return True
        t = threading.Thread(target=self._complete, args=(fence,), daemon=True)
        t.start()
        t.join(timeout)
        return fence.done

    def error(self, exc: BaseException) -> BackendError:
        return DispatchFailed(f"wgpu error {type(exc).__name__}: {exc}.",
                              "check the adapter (`vyre doctor`); report it if it persists.", backend=ID)


class WgpuBackend(EngineBackend):
    def __init__(self) -> None:
        super().__init__(WgpuDevice())
        self.dev = self.device

    def id(self) -> str:
        return ID

    def version(self) -> str:
        return vyre.__version__

    def supported_ops(self) -> frozenset[str]:
        return frozenset(op for op in super().supported_ops() if op not in REFUSED_OPS)

    def refuse(self, program: Program) -> None:
        # what WGSL cannot give the reference's bytes for, including what only legalizing or
        # printing finds: routing must refuse exactly what the dispatch refuses
        self.dev.source(program)
        n = len(program.facts.bound) + 2
        limit = self.dev.limits.get("max-storage-buffers-per-shader-stage", 8)
        if n > limit:
            raise UnsupportedFeature(f"{n - 2} bound buffers (this adapter binds {limit - 2})", ID,
                                     "use fewer buffers, or another backend.")

    def supports_async_compute(self) -> bool:
        return True

    def supports_speculation(self) -> bool:
        return True  # fused prefilter/confirm programs run as written (tests/test_literal_search.py)

    def max_workgroup_size(self) -> tuple[int, int, int]:
        lim = self.dev.limits
        return (lim["max-compute-workgroup-size-x"], lim["max-compute-workgroup-size-y"],
                lim["max-compute-workgroup-size-z"])

    def max_compute_invocations_per_workgroup(self) -> int:
        return self.dev.limits["max-compute-invocations-per-workgroup"]

    def max_compute_workgroups_per_dimension(self) -> int:
        return self.dev.limits["max-compute-workgroups-per-dimension"]

    def max_grid_size(self) -> tuple[int, int, int]:
        # larger grids are launched folded onto more axes (WgpuDevice._fold)
        return (2**31 - 1, 2**31 - 1, 2**31 - 1)

    def max_invocations_per_dispatch(self) -> int:
        return 2**32 - 1

    def max_storage_buffer_bytes(self) -> int:
        lim = self.dev.limits
        return min(lim["max-storage-buffer-binding-size"], lim["max-buffer-size"])

    def device_profile(self) -> DeviceProfile:
        info = self.dev.adapter.info
        return replace(super().device_profile(), has_shared_memory=True, has_mul_high=True,
                       max_shared_memory_bytes=self.dev.limits["max-compute-workgroup-storage-size"],
                       device_name=f"{info.get('device', '?')} via {info.get('backend_type', '?')}")

    def device_fingerprint(self) -> bytes:
        import blake3

        info = self.dev.adapter.info
        return blake3.blake3(f"wgpu|{info.get('device')}|{info.get('backend_type')}|{info.get('driver_description')}"
                             .encode()).digest()


__all__ = ["WgpuBackend", "WgpuDevice"]
