"""What a dispatch of one pipeline needs for one set of input sizes, computed once:
`Prepared` (shape, limits checked, zero-fill and copy lists, reusable device buffers and
host staging), and `StageSet` (one dispatch's host staging, control block and packed
arguments, recycled once that dispatch has completed)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..dispatch_shape import DispatchShape
from .device import Ctl, Device, HostBuffer, Kernel


@dataclass(frozen=True)
class Limits:
    """A backend's declared limits, read once from its capability queries."""

    max_workgroup_size: tuple[int, int, int]
    max_invocations_per_workgroup: int
    max_grid: tuple[int, int, int]
    max_invocations_per_dispatch: int
    max_shared_memory_bytes: int
    max_buffer_bytes: int


class StageSet:
    """Host staging, control block and packed arguments of one dispatch in flight."""

    __slots__ = ("ctl", "ins", "outs", "packed")

    def __init__(self, ins: dict[int, HostBuffer], outs: list[HostBuffer], ctl: Ctl, packed: Any) -> None:
        self.ins, self.outs, self.ctl, self.packed = ins, outs, ctl, packed


class Prepared:
    """One pipeline at one set of input sizes and grid options."""

    __slots__ = ("_bufs", "_free", "_lock", "block", "copies_in", "counts", "evicted", "grid", "inflight",
                 "kernel", "out_nbytes", "outs", "shape", "zero")

    def __init__(self, kernel: Kernel, shape: DispatchShape) -> None:
        self.kernel, self.shape = kernel, shape
        self.grid, self.block = shape.grid, shape.workgroup
        gx = shape.global_size[0]
        # (bound position, input position, nbytes) for every buffer fed from an input
        self.copies_in = tuple((i, b.input_index, b.nbytes) for i, b in enumerate(shape.buffers)
                               if b.input_index is not None)
        # bound positions of outputs that must start zeroed (S18), unless fully overwritten
        self.zero = tuple((i, b.nbytes) for i, b in enumerate(shape.buffers)
                          if b.input_index is None and b.nbytes
                          and not kernel.skips_zero_fill(b.name, b.count, gx))
        # (bound position, nbytes, element count) per output, in output order
        self.outs = tuple((shape.buffers.index(b), b.nbytes, b.count) for b in shape.outputs)
        self.out_nbytes = sum(n for _, n, _ in self.outs)
        self.counts = shape.counts
        self._bufs: list[Any] | None = None
        self._free: list[StageSet] = []
        self._lock = threading.Lock()
        self.inflight = 0
        self.evicted = False

    @property
    def empty(self) -> bool:
        return self.shape.empty

    def buffers(self, dev: Device) -> list[Any]:
        """The device buffers of host-input dispatches (allocated on first use, then reused:
        every dispatch runs in one in-order queue)."""
        if self._bufs is None:
            self._bufs = [dev.alloc(b.nbytes) for b in self.shape.buffers]
        return self._bufs

    def take(self, dev: Device, ctl_take: Any) -> StageSet:
        with self._lock:
            self.inflight += 1
            if self._free:
                return self._free.pop()
        ins = {pos: dev.host_alloc(n) for _, pos, n in self.copies_in if n}
        outs = [dev.host_alloc(n) for _, n, _ in self.outs]
        ctl = ctl_take()
        packed = dev.pack(self.kernel, self.buffers(dev), self.counts, ctl)
        return StageSet(ins, outs, ctl, packed)

    def give(self, dev: Device, sset: StageSet | None) -> None:
        """Return a completed dispatch's staging (None: it must never be reused)."""
        with self._lock:
            self.inflight -= 1
            if sset is not None and not self.evicted:
                self._free.append(sset)
            release = self.evicted and self.inflight == 0
        if release:
            self.release(dev)

    def release(self, dev: Device) -> None:
        """Free the device buffers once nothing in flight uses them."""
        with self._lock:
            self.evicted = True
            if self.inflight:
                return
            bufs, self._bufs, self._free = self._bufs, None, []
        for b in bufs or ():
            try:
                dev.free(b)
            except Exception:
                pass
