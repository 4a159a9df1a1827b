"""`Device`: the small interface a concrete driver implements under the engine.

A device declares its `Capabilities` (read once from the vendor) and knows target
mechanics only: how to build a program, allocate and free memory, copy
bytes in and out, zero a buffer, pack kernel arguments, launch, fence and wait, time, and turn
its vendor's exceptions into `BackendError`s. It knows nothing of the rules (validation,
input checks, limits, budgets, timeouts, fixpoint, counters), of caches or of which entry point
is running: those are the engine's (`vyre.driver.engine.core`).

Every operation is enqueued in one in-order queue (a CUDA stream, an OpenCL queue); `fence()`
marks everything enqueued so far. A *synchronous* device (the reference) does each operation
at once, and its fences are always complete.

Host memory the device copies from or to is a `HostBuffer` from `host_alloc` (pinned where
the target has it): the engine owns these, fills them at call time and does not reuse one
before the fence of the dispatch that used it has completed.

The control block (`Ctl`) is a dispatch's two host-visible words: the kernel sets word 0 on
an i32 division error and polls word 1, which the engine sets to cancel a timed-out dispatch.
Each dispatch in flight has its own block, so concurrent dispatches never see each other's
errors.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.ir.program import BufferDecl, Program

from ..capability import Capabilities
from ..errors import BackendError


class Cancelled(Exception):
    """Raised by a synchronous device's `launch` when its control block's deadline passed or
    its cancel word was raised: the engine reports the dispatch's timeout."""


@dataclass(frozen=True, eq=False)
class Kernel:
    """A compiled program, as the engine sees it."""

    handle: Any                          # the device's compiled object
    uses_ctl: bool                       # the kernel reads or writes its control block
    fully_written: frozenset[str] = frozenset()  # outputs every lane overwrites (no zero-fill)
    built_from: str = "compiled"         # "compiled", "disk" or "interpreter"
    source: str | None = field(default=None, repr=False)
    stoppable: bool = True               # a raised cancel word ends it soon (see plan.stoppable)
    items: int = 1                       # consecutive gid.x per invocation (the launch covers
                                         # ceil(gx / items) invocations and passes gx last)
    # per phase: (bound buffer position, word offset) of its indirect grid, or None; empty
    # when no phase has one
    indirect: tuple[tuple[int, int] | None, ...] = ()
    # hidden u32 buffers the kernel takes after the program's bound buffers (float atomics,
    # S36): per one, (bound position of the float buffer it serves, u32 words per element of
    # that buffer). The engine allocates and zeroes them for every dispatch and never returns
    # them; when any, the last phase gets a grid of its own covering the largest of those
    # buffers (one invocation per element)
    scratch: tuple[tuple[int, int], ...] = ()
    # workgroup memory a launch asks for at launch time (dynamic), in bytes; 0: none (the
    # kernel's arrays are declared in it)
    shared_bytes: int = 0

    def skips_zero_fill(self, name: str, count: int, global_x: int) -> bool:
        """True when the launch overwrites every element of output ``name``."""
        return name in self.fully_written and global_x >= count

    def meta(self, entries: tuple[str, ...]) -> dict[str, Any]:
        """What `from_meta` needs to rebuild this kernel from its binary in another process."""
        return {"entries": list(entries), "uses_ctl": self.uses_ctl, "fully_written": sorted(self.fully_written),
                "stoppable": self.stoppable, "items": self.items, "source": self.source,
                "indirect": [list(x) if x else None for x in self.indirect],
                "scratch": [list(x) for x in self.scratch], "shared_bytes": self.shared_bytes}

    @staticmethod
    def from_meta(handle: Any, meta: dict[str, Any]) -> Kernel:
        indirect = tuple(tuple(int(v) for v in x) if x else None for x in meta.get("indirect") or ())
        scratch = tuple((int(pos), int(words)) for pos, words in meta.get("scratch") or ())
        return Kernel(handle, bool(meta["uses_ctl"]), frozenset(meta["fully_written"]), "disk",
                      meta.get("source"), bool(meta["stoppable"]), int(meta["items"]),
                      indirect, scratch, int(meta.get("shared_bytes") or 0))  # type: ignore[arg-type]

    @staticmethod
    def indirect_of(plan: Any) -> tuple[tuple[int, int] | None, ...]:
        """`indirect` from a `vyre.lower.plan.KernelPlan` (buffer names to bound positions)."""
        if not any(plan.indirect):
            return ()
        return tuple(None if x is None else (plan.param_index(x[0]), x[1]) for x in plan.indirect)

    @staticmethod
    def scratch_of(plan: Any) -> tuple[tuple[int, int], ...]:
        """`scratch` from a `vyre.lower.plan.KernelPlan` (target names to bound positions)."""
        return tuple((plan.param_index(s.target), s.words) for s in plan.scratch)


class HostBuffer:
    """Host memory the device copies from/to: ``words`` is its u32 view."""

    __slots__ = ("__weakref__", "handle", "words")

    def __init__(self, handle: Any, words: np.ndarray) -> None:
        self.handle, self.words = handle, words

    def stage(self, x: np.ndarray) -> None:
        """Copy a checked host input in: u32 words of the same length, or any bytes (a
        narrow-typed input of a length that is not whole words), zero-padded."""
        if x.dtype.itemsize == 4 and x.size == self.words.size:
            self.words[...] = x
        else:
            raw = self.words.view(np.uint8)
            n = x.nbytes
            raw[:n] = x.reshape(-1).view(np.uint8)
            raw[n:] = 0


class Ctl:
    """A dispatch's control block. ``words`` is host-visible once the dispatch's fence is
    complete (after `Device.ctl_fetch`); ``deadline`` is for synchronous devices, which run the
    kernel inside `launch` and must stop by themselves."""

    __slots__ = ("__weakref__", "arg", "deadline", "handle", "words")

    def __init__(self, arg: Any, words: np.ndarray, handle: Any = None) -> None:
        self.arg, self.words, self.handle = arg, words, handle
        self.deadline: float | None = None


class Device(abc.ABC):
    """Target mechanics for one device. Subclasses live in ``vyre.drivers.<target>``."""

    #: kernels stop when the engine raises their cancel word (timeouts really stop work)
    cancellable: bool = False
    #: every operation completes before it returns (fences are always done)
    synchronous: bool = False
    #: the backend reads device arrays in place (`device_input`)
    reads_device_arrays: bool = False
    #: `launch` itself reads indirect grids (the reference); else the engine splits the
    #: phases and reads each indirect grid back before launching its phase
    indirect_in_launch: bool = False
    #: `upload` also takes the caller's words (a numpy array) and `read` copies device memory
    #: straight into a host array: the engine uses both for large buffers of calls that wait
    #: for their dispatch before returning, instead of a copy through host staging
    direct_host_copies: bool = False
    #: with `direct_host_copies`, kernels of a call that waits for its dispatch use large host
    #: arrays in place (`wrap_host`): the caller's inputs are read where they are and outputs
    #: are written straight into the arrays returned, with no copy at all (devices that share
    #: host memory: PoCL)
    zero_copy: bool = False

    @abc.abstractmethod
    def capabilities(self) -> Capabilities:
        """What this backend and device declare (`Capabilities`), read from the vendor when
        the engine is built over this device (once); the engine answers every capability
        query of the contract from it."""

    # ---- compile -----------------------------------------------------------------------
    @abc.abstractmethod
    def build(self, program: Program) -> Kernel:
        """Compile a validated, specialized program (its kernels, one per grid_sync phase)."""

    def compile(self, program: Program) -> tuple[Kernel, dict[str, Any] | None, bytes | None]:
        """`build`, plus what `load` needs to rebuild the kernel in another process
        (`Kernel.meta`, the target binary); (kernel, None, None) when nothing can be kept."""
        return self.build(program), None, None

    def launcher(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 packed: Any) -> Any:
        """A no-argument callable that enqueues exactly what `launch` (untimed, every phase)
        would, with everything bound in advance, for a bound dispatch's hot path; valid in the
        calling thread (a device may make its context current there once) until the backend's
        epoch changes (a recovery may replace the queue). None (the default): the hot path
        calls `launch`."""
        return None

    def precompile(self, programs: list[Program]) -> int:
        """Build the target binaries of many validated, specialized programs at once (in
        parallel where the target can) into the device's own disk cache, so that their first
        dispatches load them. Returns how many were built (default: 0, nothing to do). Not
        called where the device has a `compiler`."""
        return 0

    def compiler(self) -> Any:
        """A picklable `vyre.driver.engine.farm.Compiler` that builds what `compile` keeps
        (meta and binary) without this device, in worker processes; None (the default)
        where the target cannot (the engine then calls `precompile`)."""
        return None

    def load(self, meta: dict[str, Any], artifact: bytes) -> Kernel:
        """The kernel `compile` described, from its binary (raise anything to rebuild)."""
        raise NotImplementedError

    # ---- memory ------------------------------------------------------------------------
    @abc.abstractmethod
    def alloc(self, nbytes: int) -> Any:
        """Device memory of at least ``max(nbytes, 4)`` bytes (contents undefined)."""

    @abc.abstractmethod
    def free(self, buf: Any) -> None: ...

    def host_alloc(self, nbytes: int) -> HostBuffer:
        """Host memory the device copies quickly (default: a plain numpy array); ``nbytes``
        is a whole number of 32-bit words."""
        words = np.empty(max(1, nbytes // 4), dtype=np.uint32)
        return HostBuffer(words, words[: nbytes // 4])

    @abc.abstractmethod
    def upload(self, dst: Any, src: HostBuffer | np.ndarray, nbytes: int) -> None:
        """Enqueue a copy of ``nbytes`` from host ``src`` into ``dst``. ``src`` is a
        `HostBuffer`, or — on a synchronous device, or one with `direct_host_copies` in a
        call that waits for its dispatch — the caller's words."""

    def read(self, dst: np.ndarray, buf: Any, nbytes: int) -> None:
        """Copy the first ``nbytes`` of ``buf`` into the host array ``dst`` now, after what
        is enqueued before it, and return when the bytes are there (default: through host
        staging; devices with `direct_host_copies` copy straight into ``dst``)."""
        size = (nbytes + 3) & ~3
        host = self.host_alloc(size)
        if nbytes:
            self.download(host, buf, size)
        self.wait(self.fence(), None)
        dst.reshape(-1).view(np.uint8)[:nbytes] = host.words.view(np.uint8)[:nbytes]

    def wrap_host(self, array: np.ndarray, writable: bool) -> Any:
        """A device buffer over host ``array``'s memory (C-contiguous, a whole number of
        32-bit words; only where `zero_copy`), usable as a kernel argument until `unwrap_host`:
        kernels read (``writable``: and write) the array itself. The engine wraps only arrays
        of calls that wait for their dispatch, and unwraps them after that wait."""
        raise NotImplementedError

    def unwrap_host(self, buf: Any, writable: bool) -> None:
        """After the wait for every dispatch that used ``buf`` (from `wrap_host`): the kernels'
        writes are in the array (``writable``), and the device no longer refers to it."""
        raise NotImplementedError

    @abc.abstractmethod
    def download(self, dst: HostBuffer, src: Any, nbytes: int) -> None:
        """Enqueue a copy of ``nbytes`` of ``src`` into host ``dst``."""

    @abc.abstractmethod
    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        """Enqueue a device-to-device copy."""

    @abc.abstractmethod
    def zero(self, buf: Any, nbytes: int) -> None:
        """Enqueue zeroing the first ``nbytes`` of ``buf``."""

    # ---- control block -----------------------------------------------------------------
    @abc.abstractmethod
    def ctl_alloc(self) -> Ctl: ...

    def ctl_reset(self, ctl: Ctl) -> None:
        """Zero both words before the dispatch's kernels run (default: a host write, for
        blocks the device reads from host memory)."""
        ctl.words[:] = 0

    def ctl_fetch(self, ctl: Ctl) -> None:
        """Enqueue what makes the kernels' writes visible in ``ctl.words`` (default: none)."""
        return None

    def trim(self) -> None:
        """Return memory the device layer keeps for reuse (a pool) to the driver: called
        when an allocation failed, before it is tried once more (default: nothing kept)."""
        return None

    def ctl_cancel(self, ctl: Ctl) -> bool:
        """Raise the cancel word now, while kernels run; False where the device cannot."""
        if not self.cancellable:
            return False
        ctl.words[1] = 1
        return True

    # ---- launch ------------------------------------------------------------------------
    @abc.abstractmethod
    def pack(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> Any:
        """Kernel arguments (buffers in binding order, one u32 count each, the control
        block), packed once for any number of launches."""

    def pack_once(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> Any:
        """`pack` for one launch, enqueued before the next `pack_once` (a dispatch whose
        buffers are its own: device arrays, wrapped host arrays); a device may reuse its
        argument objects from one such pack to the next. Default: `pack`."""
        return self.pack(kernel, buffers, counts, ctl)

    @abc.abstractmethod
    def launch(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
               packed: Any, timed: Any = False, phases: slice | None = None,
               last_grid: tuple[int, int, int] | None = None) -> Any:
        """Enqueue every phase of ``kernel`` (or the ``phases`` slice of them). ``timed``:
        True, or a token from `timer` to reuse; then return the token for `elapsed_ns`.
        ``last_grid``: the grid of the last phase enqueued (a kernel with `Kernel.scratch`
        finalises there), instead of ``grid``; a phase whose grid has a zero is skipped."""

    def timer(self) -> Any:
        """A reusable timing token for `launch` (default: True, a fresh one each time)."""
        return True

    def elapsed_ns(self, token: Any) -> int | None:
        """Device time of a completed timed launch, or None where the device cannot time."""
        return None

    def fence_of(self, token: Any) -> Any:
        """A fence for everything enqueued up to the end of the timed launch ``token`` when
        nothing was enqueued after it (the timing end marker itself, where it can be waited
        on), or None (the default): the caller asks for a new `fence`."""
        return None

    # ---- completion --------------------------------------------------------------------
    @abc.abstractmethod
    def fence(self) -> Any:
        """A marker of everything enqueued so far."""

    @abc.abstractmethod
    def done(self, fence: Any) -> bool: ...

    @abc.abstractmethod
    def wait(self, fence: Any, timeout: float | None) -> bool:
        """Block until ``fence`` completes (True) or ``timeout`` seconds pass (False)."""

    def finish(self) -> None:
        """Block until everything enqueued so far is done (the synchronous call's wait when
        it has no deadline; cheaper than a fence on most targets)."""
        self.wait(self.fence(), None)

    def abandon(self) -> None:
        """Stop waiting on work that would not stop: later dispatches must not queue behind
        it (a fresh queue or stream). Default: nothing to do."""
        return None

    # ---- program checks and lifecycle ---------------------------------------------------
    def refuse(self, program: Program) -> None:
        """Target checks that depend on the program, beyond the ops and limits the
        `Capabilities` record declares: raise a `BackendError` (usually `UnsupportedFeature`)
        with a Fix when this device cannot give ``program`` the reference's bytes. The engine's
        `refuse` is this (routing and dispatch both ask it, `vyre.driver.runnable`). Default:
        no further checks."""
        return None

    def attach(self) -> None:
        """Make the device usable from the calling thread (CUDA: its context current);
        called whenever the engine checks that it may enqueue (`usable`). Default: nothing."""
        return None

    def lost(self) -> bool:
        """True once the device can no longer run work (the engine's `device_lost`; `renew`
        may help). Default: False."""
        return False

    def renew(self) -> None:
        """Start over, for the engine's `try_recover`: later work must never queue behind
        anything enqueued before (a kernel that would not stop), and a lost device or context
        is opened again where the target can. Default: `abandon`."""
        self.abandon()

    # ---- errors and hooks --------------------------------------------------------------
    @abc.abstractmethod
    def error(self, exc: BaseException) -> BackendError:
        """The `BackendError` for a vendor exception."""

    def device_input(self, decl: BufferDecl | None, value: Any, where: str, cai: dict | None = None) -> Any:
        """Resolve a device array for in-place use (only if `reads_device_arrays`): a
        `vyre.driver.inputs.DeviceInput` whose ``stream`` names the producer's stream, if the
        dispatch must wait for it. ``cai``: its ``__cuda_array_interface__`` when the caller
        has read it already (None: read it here, or use DLPack)."""
        raise NotImplementedError

    def order_after(self, stream: Any) -> None:
        """Make the queue wait for everything a device input's producer ``stream`` has
        enqueued so far (`DeviceInput.stream`); called under the engine's lock, once per
        distinct stream per dispatch, before anything of the dispatch is enqueued."""
        raise NotImplementedError

    def view(self, ptr: int, nbytes: int, owner: Any) -> Any:
        """A device buffer object over memory the caller owns (device arrays), usable as a
        kernel argument and with `copy` and `zero`."""
        raise NotImplementedError

    def stream_handle(self) -> int | None:
        """The handle of the queue this device enqueues on, as a ``__cuda_array_interface__``
        ``stream`` (devices that read device arrays); None where there is none."""
        return None

    def device_pointer(self, buf: Any) -> int:
        """The device address of a buffer from `alloc` (devices that read device arrays)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the device (backend shutdown)."""
        return None
