"""Persistent residency: buffers and launch arguments held across dispatches, and the
host-side model of upstream's persistent-thread work queue.

`bind(backend, program, resources)` returns a warm dispatch handle: backends that can pack
their arguments once (CUDA, OpenCL) return their own; others get `GenericBinding`, which
goes through `dispatch_resident_timed` each time. `WorkQueue` is the ring a persistent
kernel polls: producers `enqueue`, workers `claim` in FIFO order and mark slots `done`;
a slot is reused only after it is done.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.ir.program import Program

from .config import DispatchConfig
from .errors import InvalidProgram, Other


class GenericBinding:
    """A resident dispatch for backends without native argument packing."""

    def __init__(self, backend: Any, program: Program, resources: Sequence[Any],
                 config: DispatchConfig | None = None) -> None:
        self.backend, self.program, self.resources, self.config = backend, program, tuple(resources), config

    def launch(self) -> None:
        self.backend.dispatch_resident_timed(self.program, self.resources, self.config)

    def run(self) -> None:
        self.launch()

    def release(self) -> None:
        """Nothing is held between launches."""
        return None


def bind(backend: Any, program: Program, resources: Sequence[Any], config: DispatchConfig | None = None) -> Any:
    """A warm resident dispatch: `launch()` enqueues, `run()` also waits and checks errors."""
    return backend.bind_resident(program, resources, config)


class QueueFull(Other):
    def __init__(self, capacity: int) -> None:
        super().__init__(f"the work queue is full ({capacity} slots in flight).",
                         "wait for workers to mark slots done, or create a larger queue.")


@dataclass
class _Slot:
    item: Any = None
    state: str = "free"  # free -> queued -> claimed -> free


class WorkQueue:
    """A bounded ring of work items with enqueue / claim / done, safe across threads."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise InvalidProgram(f"work queue capacity {capacity}.", "use a capacity >= 1.")
        self.capacity = capacity
        self._slots = [_Slot() for _ in range(capacity)]
        self._head = 0  # next slot to claim
        self._tail = 0  # next slot to fill
        self._lock = threading.Lock()

    def enqueue(self, item: Any) -> int:
        with self._lock:
            slot = self._slots[self._tail % self.capacity]
            if slot.state != "free":
                raise QueueFull(self.capacity)
            slot.item, slot.state = item, "queued"
            index = self._tail % self.capacity
            self._tail += 1
            return index

    def claim(self) -> tuple[int, Any] | None:
        with self._lock:
            if self._head == self._tail:
                return None
            index = self._head % self.capacity
            slot = self._slots[index]
            if slot.state != "queued":
                return None
            slot.state = "claimed"
            self._head += 1
            return index, slot.item

    def done(self, index: int) -> None:
        with self._lock:
            if not 0 <= index < self.capacity or self._slots[index].state != "claimed":
                raise InvalidProgram(f"slot {index} is not claimed.", "mark only slots returned by claim() as done, once.")
            self._slots[index] = _Slot()

    def __len__(self) -> int:
        with self._lock:
            return self._tail - self._head

    @property
    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for s in self._slots if s.state != "free")
