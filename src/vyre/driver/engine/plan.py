"""What a dispatch of one pipeline needs for one set of input sizes, computed once:
`Prepared` (shape, limits checked, zero-fill and copy lists, reusable device buffers and a
pool of host staging), and `StageSet` (one dispatch's host staging, control block and packed
arguments, returned to the pool once that dispatch has completed).

Lifetimes follow references: a dispatch in flight holds its `Prepared` and `StageSet`, so
device buffers of an evicted `Prepared` are released when its last dispatch is done (and a
timed-out dispatch whose kernel could not be stopped keeps them alive for as long as the
engine keeps it).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dispatch_shape import DispatchShape, padded
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
    """Host staging, control block and packed arguments of one dispatch in flight.
    ``ins[i]`` stages input ``i`` (None when it has no bytes); ``views`` are the outputs'
    exact bytes, ready to become `bytes`."""

    __slots__ = ("ctl", "ins", "outs", "packed", "views")

    def __init__(self, ins: list[HostBuffer | None], outs: list[HostBuffer], views: list[Any],
                 ctl: Ctl, packed: Any) -> None:
        self.ins, self.outs, self.views, self.ctl, self.packed = ins, outs, views, ctl, packed


class Prepared:
    """One pipeline at one set of input sizes and grid options."""

    __slots__ = ("_bufs", "_free", "block", "copies_in", "counts", "empty", "final_grid", "grid",
                 "kernel", "limits", "n_inputs", "out_nbytes", "outs", "scratch", "shape", "staged", "zero")

    def __init__(self, kernel: Kernel, shape: DispatchShape, n_inputs: int,
                 limits: Limits | None = None) -> None:
        self.kernel, self.shape, self.n_inputs, self.limits = kernel, shape, n_inputs, limits
        self.grid, self.block = shape.grid, shape.workgroup
        self.empty = shape.empty
        gx = shape.global_size[0]
        # (bound position, input position, padded nbytes) for every buffer fed from an input
        self.copies_in = tuple((i, b.input_index, b.padded) for i, b in enumerate(shape.buffers)
                               if b.input_index is not None)
        # (bound position, padded nbytes) of outputs that must start zeroed (S18), unless
        # every element is overwritten by the launch
        self.zero = tuple((i, b.padded) for i, b in enumerate(shape.buffers)
                          if b.input_index is None and b.nbytes
                          and not kernel.skips_zero_fill(b.name, b.count, gx))
        # (bound position, padded nbytes, exact nbytes) per output, in output order
        self.outs = tuple((shape.buffers.index(b), b.padded, b.nbytes) for b in shape.outputs)
        self.out_nbytes = sum(n for _, _, n in self.outs)
        self.counts = shape.counts
        # hidden scratch of float atomics (`Kernel.scratch`), bound after the shape's buffers:
        # its u32 words per buffer, zeroed before every launch, never read back; the last
        # phase finalises over one invocation per element of the largest target
        self.scratch = tuple(words * shape.buffers[pos].count for pos, words in kernel.scratch)
        self.final_grid: tuple[int, int, int] | None = None
        if kernel.scratch:
            n = len(shape.buffers)
            self.counts = shape.counts + self.scratch
            self.zero += tuple((n + j, padded(4 * w)) for j, w in enumerate(self.scratch) if w)
            most = max(shape.buffers[pos].count for pos, _ in kernel.scratch)
            per = shape.workgroup[0] * shape.workgroup[1] * shape.workgroup[2]
            self.final_grid = (-(-most // per), 1, 1)
        if kernel.items > 1:  # the vector form: fewer invocations, the logical x size passed
            gx, (wx, gy, gz) = shape.global_size[0], (shape.workgroup[0], shape.grid[1], shape.grid[2])
            self.grid = (-(-gx // (kernel.items * wx)), gy, gz)
            self.counts = shape.counts + (gx,)
            self.empty = any(g == 0 for g in self.grid)
        self._bufs: list[Any] | None = None
        self._free: list[StageSet] = []
        # every buffer small enough that host inputs and outputs always go through staging
        # (the engine sets it: it knows the size from which it copies directly)
        self.staged = False

    def buffers(self, dev: Device) -> list[Any]:
        """The device buffers of host-input dispatches (allocated on first use, then reused:
        every dispatch runs in one in-order queue)."""
        bufs = self._bufs
        if bufs is None:
            bufs = self._bufs = [dev.alloc(b.padded) for b in self.shape.buffers] + self.scratch_buffers(dev)
        return bufs

    def scratch_buffers(self, dev: Device) -> list[Any]:
        """Fresh device buffers for the hidden scratch (resident bindings own theirs)."""
        return [dev.alloc(padded(4 * w)) for w in self.scratch]

    def take(self, dev: Device, ctl_take: Any) -> StageSet:
        """A staging set no dispatch in flight uses (``list.pop`` is atomic under the GIL)."""
        try:
            return self._free.pop()
        except IndexError:
            pass
        ins: list[HostBuffer | None] = [None] * self.n_inputs
        for _, pos, n in self.copies_in:
            if n:
                ins[pos] = dev.host_alloc(n)
        outs = [dev.host_alloc(n) for _, n, _ in self.outs]
        views = [h.words.view(np.uint8)[:exact] for h, (_, _, exact) in zip(outs, self.outs)]
        ctl = ctl_take()
        return StageSet(ins, outs, views, ctl, dev.pack(self.kernel, self.buffers(dev), self.counts, ctl))

    def launch(self, dev: Device, packed: Any, bufs: list[Any], timed: Any = False) -> Any:
        """Enqueue the kernel's phases. A phase whose grid an ``indirect_dispatch`` names
        waits for the phases before it: its three grid words are read back (the device has
        no indirect launch), checked against the limits, then the phase is launched."""
        kernel = self.kernel
        final = self.final_grid
        if not kernel.indirect or dev.indirect_in_launch:
            if self.empty:    # no invocation, so no float atomic contributed: nothing to finalise
                return None
            if final is None:
                return dev.launch(kernel, self.grid, self.block, packed, timed)
            return dev.launch(kernel, self.grid, self.block, packed, timed, last_grid=final)
        n = len(kernel.indirect)
        cuts = sorted({0, n, *(i for i, x in enumerate(kernel.indirect) if x is not None)}
                      | ({n - 1} if final is not None else set()))
        for start, stop in itertools.pairwise(cuts):
            where = kernel.indirect[start]
            if final is not None and start == n - 1:
                grid = final
            else:
                grid = self.grid if where is None else self._read_grid(dev, bufs[where[0]], *where)
            if all(grid):
                dev.launch(kernel, grid, self.block, packed, False, slice(start, stop))
        return None

    def _read_grid(self, dev: Device, buf: Any, pos: int, offset: int) -> tuple[int, int, int]:
        from ..errors import indirect_failed

        need = 4 * (offset + 3)
        have = self.shape.buffers[pos].nbytes
        if need > have:
            raise indirect_failed(f"indirect_dispatch reads words {offset}..{offset + 2} of a buffer of "
                                  f"{have} bytes.", "size the buffer to hold the three grid words.")
        host = dev.host_alloc((need + 3) & ~3)
        dev.download(host, buf, need)
        dev.wait(dev.fence(), None)
        grid = tuple(int(w) for w in host.words[offset:offset + 3])
        wg = self.block
        lim = self.limits
        why = []   # each limit the grid exceeds, in the user's terms
        if any(g > 2**31 - 1 or g * w > 0xFFFFFFFF for g, w in zip(grid, wg)):
            why.append("over 2**31-1 workgroups or 2**32-1 invocations on an axis")
        if lim is not None:
            total = grid[0] * grid[1] * grid[2] * wg[0] * wg[1] * wg[2]
            if any(g > m for g, m in zip(grid, lim.max_grid)):
                why.append(f"over this device's {lim.max_grid} workgroups per axis")
            if total > lim.max_invocations_per_dispatch:
                why.append(f"{total} invocations in all, over this device's {lim.max_invocations_per_dispatch} "
                           "per dispatch")
        if why:
            raise indirect_failed(f"indirect_dispatch grid {grid} of {wg} workgroups is {'; '.join(why)}.",
                                  "write a grid the device can launch (split the work otherwise).")
        return grid  # type: ignore[return-value]

    def give(self, sset: StageSet) -> None:
        """Return a completed dispatch's staging to the pool."""
        self._free.append(sset)
