"""CUDA device objects through cuda.core: device, context, stream, module loading,
device and pinned allocations, memory info and error mapping. Only this package imports
CUDA modules, and only when the backend is acquired."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import blake3
import numpy as np

from vyre.driver.errors import BackendUnavailable, DeviceLost, DeviceOutOfMemory, DispatchFailed
from vyre.driver.install import install_hint

from .compiler import CubinCache

ID = "cuda"
POOL_KEEP = 2 << 30   # freed device memory the stream-ordered pool keeps for reuse, at most

try:
    import cuda.core as cc
    from cuda.bindings import driver as cu
except ImportError as exc:  # the package is optional: `pip install 'vyre[cuda]'`
    raise BackendUnavailable(ID, f"cuda.core / cuda.bindings are not installed ({exc}).",
                             f"{install_hint('cuda')} on a machine with an NVIDIA GPU.") from None

_STICKY = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "HARDWARE_STACK_ERROR", "ILLEGAL_INSTRUCTION",
           "MISALIGNED_ADDRESS", "INVALID_PC", "ECC_UNCORRECTABLE", "CONTEXT_IS_DESTROYED")


@dataclass(frozen=True)
class DeviceFacts:
    name: str
    arch: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_threads_per_block: int
    max_block: tuple[int, int, int]
    max_grid: tuple[int, int, int]
    shared_per_block: int
    l2_bytes: int
    warp_size: int
    mem_clock_khz: int
    bus_width_bits: int
    total_memory: int
    shared_optin: int = 0   # shared memory a block may have once its kernel opts in (dynamic)

    @property
    def bandwidth_gbps(self) -> int:
        return int(2 * self.mem_clock_khz * 1e3 * (self.bus_width_bits / 8) / 1e9)


def _check(result):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"{err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def host_words(buf, n_words: int) -> np.ndarray:
    """A numpy u32 view of a pinned host Buffer."""
    if n_words == 0:
        return np.empty(0, dtype=np.uint32)
    addr = int(buf.handle)
    return np.frombuffer((ctypes.c_uint32 * n_words).from_address(addr), dtype=np.uint32)


class Runtime:
    def __init__(self, device_id: int = 0) -> None:
        try:
            self.dev = cc.Device(device_id)
            self.dev.set_current()
        except Exception as exc:
            raise BackendUnavailable(ID, f"no usable CUDA device {device_id} ({exc}).",
                                     "run on a machine with an NVIDIA GPU and driver, or pick "
                                     "another backend with VYRE_BACKEND.") from None
        self._tls = threading.local()
        self._tls.current = self
        self.stream = self.dev.create_stream()
        p = self.dev.properties
        cc_major, cc_minor = self.dev.compute_capability
        self.facts = DeviceFacts(
            name=self.dev.name, arch=f"sm_{cc_major}{cc_minor}", compute_capability=(cc_major, cc_minor),
            sm_count=p.multiprocessor_count, max_threads_per_block=p.max_threads_per_block,
            max_block=(p.max_block_dim_x, p.max_block_dim_y, p.max_block_dim_z),
            max_grid=(p.max_grid_dim_x, p.max_grid_dim_y, p.max_grid_dim_z),
            shared_per_block=p.max_shared_memory_per_block, l2_bytes=p.l2_cache_size,
            warp_size=p.warp_size, mem_clock_khz=p.memory_clock_rate,
            bus_width_bits=p.global_memory_bus_width, total_memory=self.mem_info()[1],
            shared_optin=max(p.max_shared_memory_per_block,
                             int(getattr(p, "max_shared_memory_per_block_optin", 0) or 0)))
        self.cubins = CubinCache()
        self.pinned = cc.LegacyPinnedMemoryResource()
        driver_version = _check(cu.cuDriverGetVersion())
        self.fingerprint = blake3.blake3(
            f"{self.facts.name}|{self.facts.arch}|{driver_version}|nvrtc{self.cubins.version}".encode()).digest()
        self.timing = cc.EventOptions(timing_enabled=True)
        self._keep_pool_memory()

    def _keep_pool_memory(self) -> None:
        """Let the stream-ordered pool keep up to POOL_KEEP of freed memory instead of
        returning it to the driver at every synchronisation (its default): allocations of
        outputs handed to the caller (`dispatch_device`) then cost microseconds, as in CuPy's
        pool, while other processes on the GPU still get the rest back (unbounded, a test's
        four child processes could not create a context next to a long-lived one)."""
        self.pool = None
        try:
            pool = _check(cu.cuDeviceGetMemPool(self.dev.device_id))
            keep = min(self.facts.total_memory // 8, POOL_KEEP)
            _check(cu.cuMemPoolSetAttribute(pool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                            cu.cuuint64_t(keep)))
            self.pool = pool
        except Exception:  # an older driver without pools: allocations stay correct, only slower
            pass

    def trim(self) -> None:
        """Give the pool's unused memory back to the driver (after an allocation failed)."""
        try:
            self.ensure_current()
            self.stream.sync()
            if self.pool is not None:
                _check(cu.cuMemPoolTrimTo(self.pool, 0))
        except Exception:
            pass

    def ensure_current(self) -> None:
        """Make this device's context current in the calling thread (once per thread).
        Every device operation calls it first: vyre is called from thread pools, servers
        and Dask workers, and a CUDA context is current per thread."""
        if getattr(self._tls, "current", None) is not self:
            self.dev.set_current()
            self._tls.current = self

    def mem_info(self) -> tuple[int, int]:
        self.ensure_current()
        free, total = _check(cu.cuMemGetInfo())
        return int(free), int(total)

    def alloc(self, nbytes: int):
        self.ensure_current()
        size = max(4, int(nbytes))
        if size > self.facts.total_memory:
            raise DeviceOutOfMemory(size, self.mem_info()[0], backend=ID)
        for attempt in (0, 1):
            try:
                return self.dev.allocate(size, stream=self.stream)
            except Exception as exc:
                if "OUT_OF_MEMORY" not in str(exc):
                    raise self.error(exc) from None
                if attempt:
                    raise DeviceOutOfMemory(size, self.mem_info()[0], backend=ID) from None
                self.trim()     # memory freed into the pool but not yet released: retry once
        raise AssertionError("unreachable")

    def alloc_pinned(self, nbytes: int):
        self.ensure_current()
        return self.pinned.allocate(max(4, int(nbytes)))

    def load(self, cubin: bytes):
        self.ensure_current()
        return cc.ObjectCode.from_cubin(cubin)

    def error(self, exc: Exception):
        text = str(exc)
        if any(s in text for s in _STICKY):
            return DeviceLost(f"the CUDA context failed ({text}).",
                              "call backend.try_recover() (this invalidates compiled pipelines) or "
                              "restart the process.", backend=ID)
        if "OUT_OF_MEMORY" in text or "out of memory" in text.lower():   # the driver's, CuPy's, torch's
            return DeviceOutOfMemory(0, self.mem_info()[0], backend=ID)
        return DispatchFailed(f"CUDA error: {text}.", "check inputs and the device state "
                              "(`vyre doctor`).", backend=ID)

    def elapsed_ns(self, start, end) -> int:
        self.ensure_current()
        try:
            return int((end - start) * 1e6)
        except TypeError:
            ms = _check(cu.cuEventElapsedTime(start.handle, end.handle))
            return int(ms * 1e6)
