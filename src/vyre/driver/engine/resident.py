"""Resident dispatches on the engine: `Bound` (arguments packed once, launched many times:
`dispatch_resident_timed`, `bind_resident` and `vyre.driver.persistent.bind` all use it) and
`EngineBatch` (many bound dispatches replayed as one unit, captured as a device graph where
the device has graphs).

The rules are the engine's: the program was validated and its limits and ``max_output_bytes``
checked when the shape was prepared; every launch checks that no resource was freed and that
the pipeline is still live; ``run`` waits within ``timeout`` (cancelling on expiry), turns the
dispatch's own error flag into `DispatchFailed`, re-launches for ``fixpoint_iterations`` and
records the counters. This module reaches the engine only through the interface it declares
(`Engine`, `Pipeline`), and imports nothing of `vyre.driver.engine.core` (which imports it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from threading import get_ident
from typing import Any, Protocol, runtime_checkable

from .. import observability
from ..backend import Resource
from ..config import DispatchConfig
from ..errors import DispatchFailed, InvalidProgram, ctl_failure, timed_out
from ..pending import TimedDispatchResult
from .device import Cancelled, Ctl, Device
from .plan import Prepared

_now = time.perf_counter_ns


@runtime_checkable
class Pipeline(Protocol):
    """What a resident dispatch needs of a compiled program (`EnginePipeline`)."""

    effective: Any                  # the program as compiled (`vyre.ir.Program`)
    generation: int                 # the backend generation it was compiled in
    bounds: dict[Any, Bound]        # its cached bindings (`EngineBackend.dispatch_resident_timed`)

    def check_live(self) -> None:
        """Raise `DeviceLost` when the backend recovered since it was compiled."""


@runtime_checkable
class Engine(Protocol):
    """What resident dispatches need of the engine (`EngineBackend` provides it): its device
    and queue lock, the state a warm launch compares (epoch, generation, closed, runaway), and
    the engine's own steps for shapes, control blocks, waits, errors and freeing."""

    device: Device
    lock: Any                       # the queue lock (an RLock): held while enqueueing
    name: str                       # the backend id, for counters
    epoch: int                      # bumped whenever the backend leaves its plain state
    generation: int                 # bumped by recovery: older pipelines are dead
    closed: bool                    # after shutdown()
    runaway: list                   # kernels that could not stop (non-empty: usable() raises)

    def id(self) -> str: ...

    def usable(self) -> None:
        """Raise unless dispatches may be enqueued."""

    def failure(self, exc: BaseException) -> BaseException:
        """The vyre error to raise for ``exc``."""

    def wait_fence(self, fence: Any, deadline: float | None, ctls: Sequence[Ctl], keep: tuple,
                   config: DispatchConfig, stoppable: bool = True) -> bool:
        """Wait for ``fence`` within ``deadline``, cancelling on expiry (`DispatchFailed`)."""

    def resident_prepared(self, pipe: Pipeline, resources: Sequence[Resource],
                          config: DispatchConfig) -> Prepared:
        """The checked shape of a dispatch of ``pipe`` on ``resources``."""

    def ctl_take(self) -> Ctl: ...

    def ctl_give(self, ctl: Ctl) -> None: ...

    def free_if_unheld(self, resource: Resource) -> None: ...

    def read_resident(self, resource: Resource) -> bytes: ...


class Bound:
    """A resident dispatch with its kernel arguments packed once. `launch()` enqueues and
    returns; `run()` launches, waits and reports errors (of every launch since the last run).
    One thread at a time per handle."""

    def __init__(self, backend: Engine, pipe: Pipeline, resources: Sequence[Resource],
                 config: DispatchConfig, cached: bool = False) -> None:
        if not isinstance(resources, Sequence) or isinstance(resources, str | bytes):
            raise InvalidProgram(f"resources must be a list of Resource, got {type(resources).__name__}.",
                                 "pass one resident buffer per non-workgroup buffer, in declaration "
                                 "order.", backend=backend.id())
        self.backend, self.pipe, self.config, self.cached = backend, pipe, config, cached
        self.resources = tuple(resources)
        self.prep = backend.resident_prepared(pipe, self.resources, config)
        dev = backend.device
        self.ctl = backend.ctl_take()
        bufs = [self.resources[b.decl_index].handle for b in self.prep.shape.buffers]
        bufs += self.prep.scratch_buffers(dev)   # this binding's own hidden scratch (float atomics)
        self.bufs = bufs
        self.packed = dev.pack(self.prep.kernel, bufs, self.prep.counts, self.ctl)
        self.zero = tuple((bufs[pos], n) for pos, n in self.prep.zero)
        self.uses_ctl = self.prep.kernel.uses_ctl
        self.released = False
        self.stale = False      # set when a resource is freed or the binding released
        self._epoch = -1        # the backend epoch this binding last checked clean in
        self._series = observability.series(backend.id())
        self._timer: Any = None
        self._armed = False
        self._lock = threading.Lock()
        self._fast: Any = None     # the device's prebound launch, where nothing else is due
        self._fast_thread = 0      # the thread it was bound in (it is valid there only)
        self._fast_ok = not self.zero and not self.uses_ctl and not self.prep.kernel.indirect \
            and not self.prep.kernel.scratch and not self.prep.empty
        outs = [b.name for b in pipe.effective.outputs]
        self._rw = [(r, outs.index(b.name)) for b, r in zip(
            (b for b in pipe.effective.buffers if b.is_bound), self.resources) if b.is_input and b.is_output]
        for r in self.resources:
            r.holders.add(self)

    def __repr__(self) -> str:
        state = "released" if self.released else f"grid={self.prep.grid}"
        return f"<Bound {self.backend.id()} {state} resources={[r.serial for r in self.resources]}>"

    def _check(self) -> None:
        b = self.backend
        if not (self.stale or b.closed or b.runaway or self.pipe.generation != b.generation):
            if self._fast_ok and (self._epoch != b.epoch or self._fast_thread != get_ident()):
                p = self.prep   # (re)bind to this epoch's queue, in this thread
                self._fast = b.device.launcher(p.kernel, p.grid, p.block, self.packed)
                self._fast_thread = get_ident()
            self._epoch = b.epoch
            return
        b.usable()
        if self.released:
            raise InvalidProgram("this bound dispatch was released.", "bind the program again.",
                                 backend=self.backend.id())
        for r in self.resources:
            if r.freed:
                raise InvalidProgram(f"resident buffer {r.backend}#{r.serial} was freed after this "
                                     "dispatch was bound.", "allocate new resident buffers and bind "
                                     "again.", backend=self.backend.id())
        self.pipe.check_live()

    def _enqueue(self, timed: Any = False, capture: bool = False, deadline: float | None = None) -> Any:
        """Zero the outputs, arm the control block, launch. Caller holds the backend lock."""
        dev = self.backend.device
        for buf, n in self.zero:
            dev.zero(buf, n)
        self.ctl.deadline = deadline
        if self.uses_ctl and not self._armed and not capture:
            dev.ctl_reset(self.ctl)
            self._armed = True
        return self.prep.launch(dev, self.packed, self.bufs, timed)

    def _launch_now(self, dev: Any) -> None:
        """`launch`'s enqueue: zero the outputs, arm the control block once (no deadline),
        launch."""
        for buf, n in self.zero:
            dev.zero(buf, n)
        if self.uses_ctl and not self._armed:
            self.ctl.deadline = None
            dev.ctl_reset(self.ctl)
            self._armed = True
        self.prep.launch(dev, self.packed, self.bufs)

    def launch(self) -> None:
        """Enqueue the dispatch and return at once."""
        if self._epoch == self.backend.epoch and not self.stale:
            # hot path: checked clean in this epoch and nothing freed since: the same rules
            # hold without re-checking; counted without the lock (enqueue only)
            fast = self._fast
            if fast is not None and self._fast_thread == get_ident():
                fast()
                next(self._series.launches)
                return
            if fast is None:
                self._launch_now(self.backend.device)
                next(self._series.launches)
                return
            # another thread: the locked path below binds the launch there
        t0 = _now()
        ok = False
        b = self.backend
        lock = b.lock
        lock.acquire()
        try:
            self._check()
            try:
                self._launch_now(b.device)
            except BaseException as exc:
                raise b.failure(exc) from None
            ok = True
        finally:
            lock.release()
            observability.record_dispatch(b.name, _now() - t0, ok, self.config.label)

    def run(self) -> None:
        """Launch, wait and raise on a device or i32 division error."""
        self.run_timed()

    def run_timed(self, config: DispatchConfig | None = None) -> TimedDispatchResult:
        config = config or self.config
        b, dev = self.backend, self.backend.device
        t0 = _now()
        ok = False
        mine = self._lock
        mine.acquire()
        try:
            deadline = None if config.timeout is None else time.monotonic() + config.timeout
            before = [b.read_resident(r) for r, _ in self._rw] if config.fixpoint_iterations > 1 else None
            device_ns: int | None = 0
            t1 = t0
            for it in range(config.fixpoint_iterations):
                lock = b.lock
                lock.acquire()
                try:
                    self._check()
                    if self._timer is None:   # this handle's own timing markers, reused
                        self._timer = dev.timer()
                    token = self._enqueue(timed=self._timer, deadline=deadline)
                    fence = None
                    if self.uses_ctl:
                        dev.ctl_fetch(self.ctl)
                    elif token is not None:
                        fence = dev.fence_of(token)
                    if fence is None:
                        fence = dev.fence()
                except Cancelled:
                    self._armed = False
                    raise timed_out(config.timeout, b.id()) from None
                except BaseException as exc:
                    self._armed = False
                    raise b.failure(exc) from None
                finally:
                    lock.release()
                t1 = _now()
                try:
                    b.wait_fence(fence, deadline, (self.ctl,) if self.uses_ctl else (), (self,), config,
                            self.prep.kernel.stoppable)
                except DispatchFailed:
                    self._armed = False   # the next launch resets the (raised) cancel word
                    raise
                if self.uses_ctl:
                    self._armed = False
                    if self.ctl.words[0]:
                        raise ctl_failure(int(self.ctl.words[0]), b.id())
                ns = dev.elapsed_ns(token) if token is not None else 0
                device_ns = None if ns is None or device_ns is None else device_ns + ns
                if before is None or it == config.fixpoint_iterations - 1:
                    break
                after = [b.read_resident(r) for r, _ in self._rw]
                if after == before:
                    break
                before = after
            ok = True
            t2 = _now()
            return TimedDispatchResult([], t2 - t0, device_ns, t1 - t0, t2 - t1)
        finally:
            mine.release()
            observability.record_dispatch(b.name, _now() - t0, ok, config.label)

    def release(self) -> None:
        """Drop the binding; resources freed meanwhile are released to the device now."""
        if self.released:
            return
        self.released = self.stale = True
        for key, bound in list(self.pipe.bounds.items()):
            if bound is self:
                del self.pipe.bounds[key]
        for r in self.resources:
            r.holders.discard(self)
            self.backend.free_if_unheld(r)
        if not self._armed:
            self.backend.ctl_give(self.ctl)

    def __del__(self) -> None:  # a dropped handle must not keep freed memory alive
        try:
            if not self.released:
                self.released = self.stale = True
                for r in self.resources:
                    r.holders.discard(self)
                    self.backend.free_if_unheld(r)
        except Exception:
            pass


class EngineBatch:
    """Bound dispatches replayed in order as one unit. On a device with graphs the launches
    are captured once and replayed as one graph; otherwise they are enqueued back to back.
    Either way: one wait, every item's error flag checked, counters per item."""

    def __init__(self, backend: Engine, bounds: list[Bound]) -> None:
        self.backend = backend
        self.bounds = bounds
        self.with_ctl = [bd for bd in self.bounds if bd.uses_ctl]
        # what a replay must re-check: the distinct resources and pipelines behind the items
        self.used = tuple({id(r): r for bd in self.bounds for r in bd.resources}.values())
        self.pipes = tuple({id(bd.pipe): bd.pipe for bd in self.bounds}.values())
        self._clean_epoch = -1     # the backend epoch every item last checked clean in
        self.labels = tuple(bd.config.label for bd in self.bounds)
        timeouts = [bd.config.timeout for bd in self.bounds if bd.config.timeout is not None]
        self.timeout = min(timeouts) if timeouts else None
        # fixpoints and indirect grids need the host between launches: no graph for them
        self.sequential = any(bd.config.fixpoint_iterations > 1 or bd.prep.kernel.indirect
                              for bd in self.bounds)
        self.stoppable = all(bd.prep.kernel.stoppable for bd in self.bounds)
        self.graph = None
        dev = backend.device
        if not self.sequential and getattr(dev, "supports_graphs", False):
            with backend.lock:
                try:
                    dev.begin_capture()
                    for bd in self.bounds:
                        bd._enqueue(capture=True)
                    self.graph = dev.end_capture()
                except BaseException as exc:
                    raise backend.failure(exc) from None

    @property
    def native(self) -> bool:
        return self.graph is not None

    def replay(self) -> None:
        b, dev = self.backend, self.backend.device
        if self.sequential:
            for bd in self.bounds:
                bd.run_timed()
            return
        t0 = _now()
        ok = False
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        cfg = DispatchConfig(timeout=self.timeout)
        try:
            with b.lock:
                b.usable()
                if self._clean_epoch != b.epoch or b.runaway or any(r.freed for r in self.used) or \
                        any(p.generation != b.generation for p in self.pipes):
                    for bd in self.bounds:   # the item-by-item checks, which raise with the reason
                        bd._check()
                    self._clean_epoch = b.epoch
                try:
                    if self.graph is not None:
                        for bd in self.with_ctl:
                            dev.ctl_reset(bd.ctl)
                            bd._armed = True
                        dev.launch_graph(self.graph)
                    else:
                        for bd in self.bounds:
                            bd._enqueue(deadline=deadline)
                    for bd in self.with_ctl:
                        dev.ctl_fetch(bd.ctl)
                    fence = dev.fence()
                except Cancelled:
                    for bd in self.bounds:
                        bd._armed = False
                    raise timed_out(cfg.timeout, b.id()) from None
                except BaseException as exc:
                    raise b.failure(exc) from None
            b.wait_fence(fence, deadline, [bd.ctl for bd in self.with_ctl], tuple(self.bounds), cfg,
                    self.stoppable)
            failed = 0
            for bd in self.with_ctl:
                failed |= int(bd.ctl.words[0])
                bd._armed = False
            if failed:
                raise ctl_failure(failed, b.id())
            ok = True
        finally:
            n = len(self.bounds)
            if n:
                observability.record_dispatches(b.name, n, (_now() - t0) // n, ok, self.labels)


__all__ = ["Bound", "DispatchFailed", "EngineBatch"]
