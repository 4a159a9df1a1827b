"""The reference driver: the CPU reference interpreter behind the engine, as one `Device`
with its `Capabilities` record (`backend()` builds the engine over it).

Its device is host memory: buffers are numpy word arrays, copies are numpy copies, and
`launch` runs the interpreter (`vyre.reference.execute`) at once — a *synchronous* device.
Cancellation is cooperative: the interpreter polls the control block's deadline and cancel
word between statements. Being on the engine, the reference obeys exactly the rules every
other backend obeys, on every entry point (resident buffers and bound dispatches included).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

import vyre
from vyre import reference
from vyre.driver.capability import Capabilities, DeviceProfile
from vyre.driver.engine import Cancelled, Ctl, Device, EngineBackend, HostBuffer, Kernel
from vyre.driver.errors import CTL_ERRORS, BackendError, DispatchFailed, indirect_failed
from vyre.ir.errors import ExecutionError
from vyre.ir.inline import call_depth, inline
from vyre.ir.launch import Launch
from vyre.ir.program import Program
from vyre.reference.interp import MAX_BATCH_LANES, MAX_WORKGROUP_WORDS

ID = "reference"
# calls nested deeper than this are run inlined (`vyre.ir.inline`, the transform every
# generated kernel uses): the interpreter executes a call by recursion, and a long call
# chain would exceed Python's recursion limit
DIRECT_CALL_DEPTH = 48
MAX_AXIS = 1 << 16
SUBGROUP = 32  # the simulated subgroup width (that of CUDA warps)


def _host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def _bytes(buf: np.ndarray) -> np.ndarray:
    return buf.reshape(-1).view(np.uint8)


class ReferenceDevice(Device):
    """Host memory and the interpreter; every operation completes before it returns."""

    synchronous = True
    cancellable = True
    indirect_in_launch = True   # the interpreter reads each phase's indirect grid itself
    direct_host_copies = True

    def capabilities(self) -> Capabilities:
        # The interpreter executes grid_sync natively (phases), subgroups exactly (`SUBGROUP`
        # lanes wide), any workgroup shape up to the limits below, and workgroup memory in
        # host RAM.
        profile = DeviceProfile(
            backend=ID, supports_subgroup_ops=True, has_subgroup_shuffle=True,
            max_workgroup_size=(MAX_AXIS, MAX_AXIS, MAX_AXIS),
            max_invocations_per_workgroup=MAX_BATCH_LANES,
            max_storage_buffer_binding_size=min(4 * (2**32 - 1), _host_memory_bytes() // 4),
            subgroup_size=SUBGROUP, has_shared_memory=True, has_mul_high=True,
            max_shared_memory_bytes=4 * MAX_WORKGROUP_WORDS, device_name="numpy (host CPU)")
        # speculation: fused prefilter/confirm programs run as written (tests/test_literal_search.py)
        return Capabilities(ID, vyre.__version__, profile, grid_sync=True, speculation=True,
                            max_workgroups_per_dimension=2**31 - 1)

    def build(self, program: Program) -> Kernel:
        if program.functions and call_depth(program) > DIRECT_CALL_DEPTH:
            program = inline(program)
        bound = tuple(b.name for b in program.facts.bound)
        return Kernel((program, bound), uses_ctl=True, built_from="interpreter")

    def alloc(self, nbytes: int) -> np.ndarray:
        return np.empty(max(1, -(-nbytes // 4)), dtype=np.uint32)

    def free(self, buf: Any) -> None:
        return None

    def upload(self, dst: np.ndarray, src: HostBuffer | np.ndarray, nbytes: int) -> None:
        words = src.words if isinstance(src, HostBuffer) else src
        _bytes(dst)[:nbytes] = _bytes(words)[:nbytes]

    def download(self, dst: HostBuffer, src: np.ndarray, nbytes: int) -> None:
        _bytes(dst.words)[:nbytes] = _bytes(src)[:nbytes]

    def copy(self, dst: np.ndarray, src: Any, nbytes: int) -> None:
        _bytes(dst)[:nbytes] = _bytes(src)[:nbytes]

    def read(self, dst: np.ndarray, buf: np.ndarray, nbytes: int) -> None:
        _bytes(dst)[:nbytes] = _bytes(buf)[:nbytes]

    def zero(self, buf: np.ndarray, nbytes: int) -> None:
        _bytes(buf)[:nbytes] = 0

    def ctl_alloc(self) -> Ctl:
        return Ctl(None, np.zeros(2, dtype=np.uint32))

    def pack(self, kernel: Kernel, buffers: list[Any], counts: tuple[int, ...], ctl: Ctl) -> Any:
        return buffers, counts, ctl

    def launch(self, kernel: Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
               packed: Any, timed: bool = False, phases: slice | None = None,
               last_grid: tuple[int, int, int] | None = None) -> Any:
        # the interpreter runs float atomics itself (S36): its kernels have no scratch, so
        # ``last_grid`` never comes
        (program, names), (buffers, counts, ctl) = kernel.handle, packed
        views = {n: _bytes(buf)[: c * program.buffer(n).dtype.size].view(program.buffer(n).dtype.storage)
                 for n, buf, c in zip(names, buffers, counts)}
        memory = dict(views)
        deadline = ctl.deadline

        def should_stop() -> bool:
            return bool(ctl.words[1]) or (deadline is not None and time.monotonic() > deadline)

        started = time.perf_counter_ns()
        try:
            reference.execute(program, Launch(tuple(sorted(zip(names, counts))), grid), memory,
                              should_stop, SUBGROUP)
        except ExecutionError as err:
            if err.kind == "indirect":
                raise indirect_failed(err.message, err.fix) from None
            if err.kind in CTL_ERRORS:
                ctl.words[0] |= CTL_ERRORS[err.kind]   # reported through the error word, as on every device
            elif err.kind == "limit" and should_stop():
                raise Cancelled() from None
            else:
                raise
        finally:
            for n, view in views.items():  # a batch replayed after a collision swaps arrays
                if memory[n] is not view:
                    view[...] = memory[n]
        return time.perf_counter_ns() - started if timed else None

    def elapsed_ns(self, token: Any) -> int | None:
        return token

    def fence(self) -> None:
        return None

    def done(self, fence: Any) -> bool:
        return True

    def wait(self, fence: Any, timeout: float | None) -> bool:
        return True

    def finish(self) -> None:
        return None

    def error(self, exc: BaseException) -> BackendError:
        return DispatchFailed(f"the reference interpreter failed: {type(exc).__name__}: {exc}.",
                              "this is a vyre bug: report it with the program (vyre.ir.wire.encode).",
                              backend=ID)


def backend() -> EngineBackend:
    """The reference backend: the engine over a `ReferenceDevice` (its factory)."""
    return EngineBackend(ReferenceDevice())


#: kept for callers that construct the backend by its old class name
ReferenceBackend = backend

