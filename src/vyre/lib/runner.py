"""Running a primitive's passes on one backend.

Owns how `vyre.lib` dispatches: the backend (``backend=`` an id or object, else the
preferred one, as ``@vyre.kernel`` picks it), the workgroup size and grid of each pass, and
where intermediates live. On a backend that reads device memory (CUDA) every pass but a host
caller's last one uses ``dispatch_device``: intermediates stay on the device and feed the next
pass in place. Elsewhere passes exchange host arrays (``dispatch_arrays``); on a device that
shares host memory (PoCL) the engine lets kernels read and write large ones in place, so
an intermediate crosses no copy between passes either.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.driver import DispatchConfig, VyreBackend
from vyre.driver.capability import Capabilities
from vyre.driver.engine.core import DeviceOutput
from vyre.ir import DataType, Program
from vyre.kernel.launch import resolve_backend

from .errors import LibError

# workgroups of a grid-stride pass: enough to fill the device, few enough that the next pass
# is one workgroup
_GRID = {"cuda": 1024}
_GRID_DEFAULT = 64
# workgroups of a pass over consecutive chunks (scans, sorts): on CUDA one tile each (the
# hardware balances many small workgroups; a few long ones leave a partial last wave)
_CHUNK_GROUPS = {"cuda": 1 << 24}
# workgroup memory a pass may use: CUDA's static limit per block; elsewhere 16 KiB, the least
# WebGPU guarantees (PoCL and the reference allow more)
_SHARED = {"cuda": 48 * 1024}
_SHARED_DEFAULT = 16 * 1024
# backends whose scans pass each tile through workgroup memory so that every warp-wide access
# is coalesced (GPUs); elsewhere (CPUs: PoCL, lavapipe, the reference) each invocation reads
# and writes its own consecutive run, which a CPU caches best
STAGED = frozenset({"cuda"})


def serial(backend: Any) -> bool:
    """Whether ``backend``'s workgroups run their invocations one after another on one CPU
    core (its capabilities record's ``serial_workgroups``: an OpenCL CPU device such as PoCL,
    whose "loops" work-group method makes an atomic cost many plain adds). Counting passes
    there give each invocation its own row of counters in workgroup memory and its own run of
    consecutive elements, one invocation a workgroup unless the caller chose a size; a GPU
    (an OpenCL one included), lavapipe and the reference run invocations side by side, where
    those long serial runs would be slow."""
    caps = getattr(backend, "caps", None)   # the engine's and dask's record; none elsewhere
    return isinstance(caps, Capabilities) and caps.serial_workgroups


class Runner:
    """One primitive call's backend and settings."""

    def __init__(self, backend: Any = None, workgroup_size: int | None = None) -> None:
        if backend is not None and not isinstance(backend, str | VyreBackend):
            raise LibError("L005", f"backend={backend!r} is not a backend id or backend object.",
                           "pass an id such as 'opencl', or an object from vyre.driver.acquire(id).")
        self.backend = resolve_backend(backend)
        self.id = self.backend.id()
        self.device = self.backend.reads_device_arrays()
        if workgroup_size is not None:
            if isinstance(workgroup_size, bool) or not isinstance(workgroup_size, int | np.integer) \
                    or not 1 <= int(workgroup_size) <= 1024:
                raise LibError("L005", f"workgroup_size={workgroup_size!r} is not an int in 1..1024.",
                               "pass a workgroup size such as 64 or 256 (or leave it out).")
            self.wg = int(workgroup_size)
        else:
            self.wg = 256 if self.id == "cuda" else 64
        self.max_groups = _GRID.get(self.id, _GRID_DEFAULT)
        self.shared_bytes = _SHARED.get(self.id, _SHARED_DEFAULT)
        self.chunk_groups = _CHUNK_GROUPS.get(self.id, _GRID_DEFAULT)
        self.staged = self.id in STAGED
        self.serial = serial(self.backend)
        # invocations a workgroup of a serial counting pass (`serial`)
        self.serial_wg = self.wg if workgroup_size is not None else 1
        # consecutive elements per invocation in the float scan's blocks
        self.items = 8 if self.id == "cuda" else 16

    def groups(self, n: int, per_min: int = 1, per_max: int = 1 << 14, wg: int | None = None) -> int:
        """Workgroups (of ``wg`` invocations, default this call's) for a grid-stride pass over
        ``n`` items: at most `max_groups` unless each invocation would take more than
        ``per_max`` items."""
        wg = self.wg if wg is None else wg
        want = -(-n // (wg * per_min))
        need = -(-n // (wg * per_max))
        return max(1, min(want, self.max_groups), need)

    def fit(self, bytes_per_invocation: int, wg: int | None = None) -> int:
        """The workgroup size (``wg``, default this call's, halved as needed) whose workgroup
        memory, ``bytes_per_invocation`` per invocation, fits `shared_bytes`."""
        wg = self.wg if wg is None else wg
        while wg > 1 and wg * bytes_per_invocation > self.shared_bytes:
            wg //= 2
        return wg

    def span(self, n: int, reach: int, what: str) -> None:
        """Refuse ``n`` elements when a pass's u32 element indices would run to ``reach`` at
        or past 2**32 (they would wrap onto real elements)."""
        if reach >= 2**32:
            raise LibError("L002", f"{what}: {n} elements are too many for one call (indices reach {reach}).",
                           f"pass at most {n - (reach - 2**32) - 1} elements per call.")

    def run(self, program: Program, inputs: Sequence[Any], groups: int, elements: int,
            keep: bool = True, alloc: Any = None, wait: bool = True) -> list[Any]:
        """Dispatch ``program`` over ``groups`` workgroups with runtime-sized outputs of
        ``elements``. ``keep``: leave the outputs on the device where the backend can (they
        come back as `DeviceOutput`s, or in arrays from ``alloc``, `dispatch_device`'s
        allocator), else host numpy arrays of each output's type. ``wait=False``: a pass
        whose outputs only later passes of this call read (`dispatch_device(wait=False)`:
        no host round trip before the next pass; the call's last pass, or `read_u32`,
        waits for it and raises its error)."""
        cfg = _config(int(groups), max(1, int(elements)))
        if keep and self.device:
            if not wait:
                return list(self.backend.dispatch_device(program, list(inputs), cfg, alloc, wait=False))
            return list(self.backend.dispatch_device(program, list(inputs), cfg, alloc))
        # arrays, not bytes: engine backends read large outputs straight into them, or on a
        # zero-copy device (PoCL) the kernels write them in place; 16-bit floats as their bits
        outs = self.backend.dispatch_arrays(program, list(inputs), cfg)
        return [o if o.dtype == _np(d.dtype) else o.view(_np(d.dtype)) for o, d in zip(outs, program.outputs)]


    def to_host(self, x: Any, dtype: DataType) -> np.ndarray:
        """A pass's output as a host array of ``dtype``: as it is when it is one already, else
        (a device buffer kept by an earlier pass, of element type ``dtype``) read back through
        a copy pass (bits moved, nothing computed)."""
        if isinstance(x, np.ndarray):
            return x
        n = int(x.nbytes) // dtype.size
        return self.run(_copy(dtype), [x, params(n)], -(-n // 256), n, keep=False)[0]

    def read_u32(self, x: Any, index: int) -> int:
        """One u32 word of a pass's output: a host array's, or a device buffer's read back
        by the backend (`read_output`: one small copy, where a one-invocation copy pass cost a
        dispatch: 1.6 us of kernel and tens of us of host work per call on the H100), or
        through that copy pass on a backend without it."""
        if isinstance(x, np.ndarray):
            return int(x.view(np.uint32)[index])
        read = getattr(self.backend, "read_output", None)
        if read is not None and isinstance(x, DeviceOutput):
            return int(read(x, 4 * index, 4).view(np.uint32)[0])
        out = self.run(_copy_word(), [x, params(index)], 1, 1, keep=False)[0]
        return int(out[0])


@functools.lru_cache(maxsize=1024)
def _config(groups: int, elements: int) -> DispatchConfig:
    """A pass's config (frozen, so one object serves every call of its shape: building and
    checking one was a tenth of a warm vyre.lib sum's Python)."""
    return DispatchConfig(grid_override=(groups, 1, 1), dispatch_elements=elements)


@functools.cache
def _copy_word() -> Program:
    from vyre.ir import BufferDecl, Expr, Node

    return Program.wrapped([BufferDecl.read("x", 0, DataType.U32), BufferDecl.read("prm", 1, DataType.U32, 4),
                            BufferDecl.output("out", 2, DataType.U32, 1)], 1,
                           [Node.store("out", Expr.u32(0), Expr.load("x", Expr.load("prm", 0)))])


@functools.cache
def _copy(dtype: DataType) -> Program:
    from vyre.ir import BufferDecl, Expr, Node

    i = Expr.gid_x()
    return Program.wrapped([BufferDecl.read("x", 0, dtype), BufferDecl.read("prm", 1, DataType.U32, 4),
                            BufferDecl.output("out", 2, dtype)], 256,
                           [Node.if_(i.lt(Expr.load("prm", 0)), [Node.store("out", i, Expr.load("x", i))])])


def _np(dt: DataType) -> np.dtype:
    return np.dtype(dt.storage) if dt.is_half else np.dtype(dt.host)


def params(*values: int) -> np.ndarray:
    """A small u32 parameter block (padded to 4 words)."""
    words = [int(v) & 0xFFFFFFFF for v in values]
    return np.asarray(words + [0] * (4 - len(words) % 4 if len(words) % 4 else 0), dtype=np.uint32)


__all__ = ["STAGED", "Runner", "params", "serial"]
