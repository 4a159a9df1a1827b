"""Batches: many dispatches of compiled programs on resident buffers, recorded once and
replayed as a unit (issue: graphs).

`Batch(backend).add(program, resources, config)...` then `run()`. Engine backends return an
`EngineBatch` from `compile_batch`: the items are bound once, enqueued back to back and waited
for once (captured as one CUDA graph on CUDA: `native` is True), with every rule of the engine
(freed resources refused, timeouts, error flags, counters). Other backends replay item by item
through `dispatch_resident_timed`. Either way the bytes are those of running the items one by
one, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.ir.program import Program

from .config import DispatchConfig
from .errors import InvalidProgram


@dataclass(frozen=True)
class BatchItem:
    program: Program
    resources: tuple[Any, ...]
    config: DispatchConfig | None = None


class Batch:
    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.items: list[BatchItem] = []
        self._native: Any = None
        self._compiled = False

    def add(self, program: Program, resources: Sequence[Any], config: DispatchConfig | None = None) -> Batch:
        if self._compiled:
            raise InvalidProgram("this batch was already compiled.", "create a new Batch to record more "
                                 "dispatches.", backend=self.backend.id())
        self.items.append(BatchItem(program, tuple(resources), config))
        return self

    def compile(self) -> Batch:
        """Record the batch once (a CUDA graph on the CUDA backend)."""
        if not self._compiled:
            self._native = self.backend.compile_batch(list(self.items))
            self._compiled = True
        return self

    @property
    def native(self) -> bool:
        """Whether the batch replays as one device graph."""
        got = self.compile()._native
        return got is not None and bool(getattr(got, "native", True))

    def run(self) -> None:
        """Replay every recorded dispatch, in order, and wait for them."""
        self.compile()
        if self._native is not None:
            self._native.replay()
            return
        for it in self.items:
            self.backend.dispatch_resident_timed(it.program, it.resources, it.config)
