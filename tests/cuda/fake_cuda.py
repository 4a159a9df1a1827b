"""A stand-in for ``cuda.core`` and ``cuda.bindings.driver`` on a machine without a GPU.

`install()` puts two small modules in ``sys.modules`` so that the real cuda driver
(`vyre.drivers.cuda`) starts and runs every Python line of its hot paths: device memory and
pinned memory are host memory, copies and fills are ``ctypes.memmove``/``memset``, events are
always complete and kernels launch nothing (their outputs stay as the engine left them).
NVRTC is the real one (``cuda.bindings.nvrtc``), so kernels really compile.

What it is for: measuring and testing the *Python* side of the CUDA paths on the CPU machine
(`scripts/profile-cuda-python`, tests of the call path that need no kernel results). Each
stand-in call costs well under a microsecond, far less than the C calls it replaces, so the
numbers it gives are vyre's own overhead. It is not a simulator: never check kernel results
through it.
"""

from __future__ import annotations

import ctypes
import sys
import types
from typing import Any

import numpy as np

_KEEP: dict[int, np.ndarray] = {}   # address -> the host memory backing a fake allocation
LAUNCHES = [0]                       # launches seen (tests read it)


class _Props:
    multiprocessor_count = 132
    max_threads_per_block = 1024
    max_block_dim_x, max_block_dim_y, max_block_dim_z = 1024, 1024, 64
    max_grid_dim_x, max_grid_dim_y, max_grid_dim_z = 2**31 - 1, 65535, 65535
    max_shared_memory_per_block = 49152
    max_shared_memory_per_block_optin = 232448
    l2_cache_size = 50 << 20
    warp_size = 32
    memory_clock_rate = 2_619_000
    global_memory_bus_width = 5120


_POOL: dict[int, list[np.ndarray]] = {}   # freed memory by size, reused (a stream-ordered pool)


class Buffer:
    """Device or pinned memory: a numpy byte array's address."""

    def __init__(self, size: int, handle: int | None = None, owner: Any = None) -> None:
        self.size = size
        self.owner = owner
        if handle is None:
            free = _POOL.get(max(size, 4))
            mem = free.pop() if free else np.zeros(max(size, 4), np.uint8)
            handle = mem.ctypes.data
            _KEEP[handle] = mem
        self.handle = handle

    @staticmethod
    def from_handle(ptr: int, size: int, owner: Any = None) -> Buffer:
        return Buffer(size, int(ptr), owner)

    def copy_from(self, src: Buffer, stream: Any = None) -> None:
        ctypes.memmove(self.handle, src.handle, min(self.size, src.size))

    def close(self, stream: Any = None) -> None:
        mem = _KEEP.pop(self.handle, None)
        if mem is not None and self.owner is None:
            _POOL.setdefault(mem.size, []).append(mem)


class Event:
    is_done = True

    def sync(self) -> None:
        return None

    def __sub__(self, other: Event) -> float:
        return 0.001

    @property
    def handle(self) -> int:
        return id(self)


class Stream:
    def __init__(self) -> None:
        self.handle = id(self)

    def record(self, event: Event | None = None, options: Any = None) -> Event:
        return event if event is not None else Event()

    def sync(self) -> None:
        return None

    def create_graph_builder(self) -> GraphBuilder:
        return GraphBuilder(self)


class GraphBuilder:
    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def begin_building(self) -> GraphBuilder:
        return self

    def end_building(self) -> None:
        return None

    def complete(self) -> Graph:
        return Graph()

    def record(self, event: Event | None = None, options: Any = None) -> Event:
        return event if event is not None else Event()


class Graph:
    def launch(self, stream: Stream) -> None:
        LAUNCHES[0] += 1


class Device:
    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self.properties = _Props()
        self.compute_capability = (9, 0)
        self.name = "fake H100 (no GPU: tests/cuda/fake_cuda.py)"

    def set_current(self) -> None:
        return None

    def create_stream(self, options: Any = None) -> Stream:
        return Stream()

    def allocate(self, size: int, stream: Any = None) -> Buffer:
        return Buffer(size)


class LegacyPinnedMemoryResource:
    def allocate(self, size: int) -> Buffer:
        return Buffer(size)


class EventOptions:
    def __init__(self, **kw: Any) -> None:
        self.kw = kw


class StreamOptions(EventOptions):
    pass


class LaunchConfig:
    def __init__(self, grid: Any, block: Any, shmem_size: int = 0) -> None:
        self.grid, self.block, self.shmem_size = grid, block, shmem_size


class _Kernel:
    def __init__(self, name: str) -> None:
        self.name = name


class ObjectCode:
    def __init__(self, cubin: bytes) -> None:
        self.cubin = cubin

    @staticmethod
    def from_cubin(cubin: bytes) -> ObjectCode:
        return ObjectCode(cubin)

    def get_kernel(self, name: str) -> _Kernel:
        return _Kernel(name)


_ARG_TYPES = frozenset({Buffer, int, np.uint32, np.int32, np.float32, np.uint64})


def launch(stream: Any, config: LaunchConfig, kernel: _Kernel, *args: Any) -> None:
    for a in args:   # what cuda.core accepts: buffers, Python ints (pointers), numpy scalars
        if type(a) not in _ARG_TYPES:
            raise TypeError(f"the argument is of unsupported type: {type(a)}")
    LAUNCHES[0] += 1


# ---- cuda.bindings.driver -------------------------------------------------------------------
class _Ok(int):
    def __repr__(self) -> str:
        return "CUresult.CUDA_SUCCESS"


OK = _Ok(0)


class CUevent_flags:
    CU_EVENT_DISABLE_TIMING = 2


class CUmemPool_attribute:
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4


def cuuint64_t(v: int) -> int:
    return v


def _ptr(x: Any) -> int:
    return int(x.handle) if isinstance(x, Buffer) else int(x)


def _driver() -> types.ModuleType:
    cu = types.ModuleType("cuda.bindings.driver")
    cu.CUevent_flags = CUevent_flags
    cu.CUmemPool_attribute = CUmemPool_attribute
    cu.cuuint64_t = cuuint64_t
    cu.cuDriverGetVersion = lambda: (OK, 13000)
    cu.cuDeviceGetMemPool = lambda dev: (OK, object())
    cu.cuMemPoolSetAttribute = lambda pool, attr, value: (OK,)
    cu.cuMemPoolTrimTo = lambda pool, n: (OK,)
    cu.cuMemGetInfo = lambda: (OK, 79 << 30, 80 << 30)
    cu.cuEventCreate = lambda flags: (OK, Event())
    cu.cuEventRecord = lambda event, stream: (OK,)
    cu.cuStreamWaitEvent = lambda stream, event, flags: (OK,)
    cu.cuEventElapsedTime = lambda a, b: (OK, 0.001)
    cu.cuCtxSynchronize = lambda: (OK,)
    cu.cuDevicePrimaryCtxReset = lambda dev: (OK,)

    def memcpy(dst: Any, src: Any, n: int, stream: Any = None) -> tuple:
        ctypes.memmove(_ptr(dst), _ptr(src), n)
        return (OK,)

    def memset32(dst: Any, value: int, count: int, stream: Any = None) -> tuple:
        ctypes.memset(_ptr(dst), value, 4 * count)
        return (OK,)

    cu.cuMemcpyAsync = memcpy
    cu.cuMemcpyHtoDAsync = memcpy
    cu.cuMemcpyDtoHAsync = memcpy
    cu.cuMemcpyHtoD = lambda dst, src, n: memcpy(dst, src, n)
    cu.cuMemcpyDtoH = lambda dst, src, n: memcpy(dst, src, n)
    cu.cuMemsetD32Async = memset32
    cu.cuMemsetD32 = lambda dst, value, n: memset32(dst, value, n, None)
    return cu


def modules() -> dict[str, types.ModuleType]:
    """The stand-in modules by their ``sys.modules`` name."""
    core = types.ModuleType("cuda.core")
    for name in ("Buffer", "Device", "Event", "EventOptions", "LaunchConfig", "LegacyPinnedMemoryResource",
                 "ObjectCode", "Stream", "StreamOptions", "launch"):
        setattr(core, name, globals()[name])
    utils = types.ModuleType("cuda.core.utils")
    core.utils = utils
    return {"cuda.core": core, "cuda.core.utils": utils, "cuda.bindings.driver": _driver()}


def install() -> None:
    """Put the stand-ins in ``sys.modules`` for good (before `vyre.drivers.cuda` is imported;
    scripts only: tests patch them in and out, see tests/cuda/test_cuda_python_paths.py)."""
    import cuda.bindings  # the real package: its nvrtc stays
    import cuda.bindings.nvrtc  # imported first: it reads the real driver module

    mods = modules()
    sys.modules.update(mods)
    cuda.bindings.driver = mods["cuda.bindings.driver"]
    sys.modules["cuda"].core = mods["cuda.core"]


class DeviceArray:
    """A CuPy-like device array: ``__cuda_array_interface__`` built on each read (as CuPy
    does), reporting the legacy default stream as its producer. `fake_cupy` presents it as
    ``cupy.ndarray``."""

    def __init__(self, host: np.ndarray) -> None:
        self.host = np.ascontiguousarray(host)
        self.dtype, self.shape = self.host.dtype, self.host.shape
        self.size = self.host.size
        self.ptr = self.host.ctypes.data

    def get(self) -> np.ndarray:
        return self.host.copy()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": 1}


def fake_cupy() -> types.ModuleType:
    """A module named ``cupy`` whose ``ndarray`` is `DeviceArray` (``empty``, ``asarray``):
    what vyre.kernel needs to take its CuPy path. Put it in ``sys.modules["cupy"]`` only
    where nothing else can import the real CuPy (profiling scripts, a monkeypatched test)."""
    mod = types.ModuleType("cupy")

    class ndarray(DeviceArray):
        __module__ = "cupy"

    def empty(n: Any, dtype: Any = np.float32) -> ndarray:
        return ndarray(np.empty(n, dtype))

    def asarray(obj: Any) -> ndarray:
        cai = obj.__cuda_array_interface__
        n = int(np.prod(cai["shape"]))
        raw = (ctypes.c_uint8 * (n * np.dtype(cai["typestr"]).itemsize)).from_address(cai["data"][0])
        return ndarray(np.frombuffer(raw, np.dtype(cai["typestr"])).copy())

    mod.ndarray, mod.empty, mod.asarray = ndarray, empty, asarray
    return mod
