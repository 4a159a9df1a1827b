"""Shadow execution: run a primary pipeline and the reference side by side and catch any
byte divergence (invariant 2 of the seeds: dispatch is deterministic and byte-identical on
every backend).

`ShadowedPipeline(main, reference)` compares every sampled dispatch; a difference raises a
`DivergenceError` (mode "raise") or is recorded as a `DivergenceEvent` (mode "record").
Sampling is deterministic (every 1/rate-th dispatch) so production runs are reproducible.
Every output must match byte for byte (transcendentals included: they are correctly
rounded, docs/semantics.md S13). The reference is injected — any pipeline or
callable ``(inputs, config) -> outputs`` — the driver never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.ir.program import Program

from .config import DispatchConfig
from .errors import Other


@dataclass(frozen=True)
class DivergenceEvent:
    backend: str
    program_fingerprint: str
    buffer_index: int
    buffer_name: str
    offset: int            # first differing byte
    main_bytes: bytes      # up to 16 bytes of each side from the element at `offset`
    reference_bytes: bytes
    main_len: int
    reference_len: int

    def describe(self) -> str:
        return (f"{self.backend} diverged from the reference on output {self.buffer_index} "
                f"({self.buffer_name!r}) at byte {self.offset}: main {self.main_bytes.hex()} vs "
                f"reference {self.reference_bytes.hex()} (lengths {self.main_len} / "
                f"{self.reference_len}; program {self.program_fingerprint})")


class DivergenceError(Other):
    def __init__(self, event: DivergenceEvent) -> None:
        self.event = event
        super().__init__(event.describe() + ".",
                         "this is a backend bug: report it with `vyre conform --backend "
                         f"{event.backend}`'s repro file, and run on the reference meanwhile.",
                         backend=event.backend)


def compare_outputs(program: Program, main: Sequence[Any], reference: Sequence[Any],
                    backend: str = "main") -> DivergenceEvent | None:
    """First divergence between two output lists, or None."""
    from vyre.ir.fingerprint import fingerprint, short

    outs = program.outputs
    for i in range(max(len(main), len(reference))):
        a = bytes(memoryview(main[i]).cast("B")) if i < len(main) else b""
        b = bytes(memoryview(reference[i]).cast("B")) if i < len(reference) else b""
        if a == b:
            continue
        name = outs[i].name if i < len(outs) else f"#{i}"
        n = min(len(a), len(b))
        diff = np.flatnonzero(np.frombuffer(a[:n], np.uint8) != np.frombuffer(b[:n], np.uint8))
        off = int(diff[0]) if diff.size else n
        start = off - off % 4
        return DivergenceEvent(backend, short(fingerprint(program)), i, name, off,
                               a[start:start + 16], b[start:start + 16], len(a), len(b))
    return None


Runner = Callable[[Sequence[Any], DispatchConfig | None], list]


def _runner(p: Any) -> Runner:
    if hasattr(p, "dispatch"):
        return lambda inputs, config: p.dispatch(inputs, config)
    return p


class ShadowedPipeline:
    def __init__(self, main: Any, reference: Any, *, sample_rate: float = 1.0,
                 mode: str = "raise", on_event: Callable[[DivergenceEvent], None] | None = None) -> None:
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError("sample_rate must be within [0, 1]")
        if mode not in ("raise", "record"):
            raise ValueError("mode must be 'raise' or 'record'")
        self.main, self.reference = main, reference
        self._main, self._ref = _runner(main), _runner(reference)
        self.sample_rate, self.mode, self.on_event = sample_rate, mode, on_event
        self.events: list[DivergenceEvent] = []
        self.dispatches = self.compared = 0
        self._credit = 0.0

    @property
    def program(self) -> Program:
        return self.main.program

    def _sampled(self) -> bool:
        self._credit += self.sample_rate
        if self._credit >= 1.0 - 1e-12:
            self._credit -= 1.0
            return True
        return False

    def dispatch(self, inputs: Sequence[Any], config: DispatchConfig | None = None) -> list:
        outputs = self._main(inputs, config)
        self.dispatches += 1
        if self._sampled():
            self.compared += 1
            expected = self._ref(inputs, config)
            backend = getattr(getattr(self.main, "key", None), "backend_id", None) or \
                (self.main.backend_id() if hasattr(self.main, "backend_id") else "main")
            event = compare_outputs(self.program, outputs, expected, backend)
            if event is not None:
                self.events.append(event)
                if self.on_event is not None:
                    self.on_event(event)
                if self.mode == "raise":
                    raise DivergenceError(event)
        return outputs

    __call__ = dispatch


def assert_exhaustive_byte_identity(pipeline: Any, reference: Any,
                                    cases: Iterable[Sequence[Any]],
                                    config: DispatchConfig | None = None) -> int:
    """Dispatch every case on both; raise `DivergenceError` on the first difference.
    Returns the number of cases checked."""
    shadow = ShadowedPipeline(pipeline, reference, sample_rate=1.0, mode="raise")
    n = 0
    for inputs in cases:
        shadow.dispatch(inputs, config)
        n += 1
    return n
