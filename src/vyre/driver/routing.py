"""Routing: pick a backend for one program from what each available backend executes (ops,
capabilities, limits) and, once measured, from timings persisted per device set.

`Router.choose(program)` returns a `RouteDecision` naming the backend and why every other
one was not chosen. `Router.measure(program, inputs)` times each runnable backend and stores
the result, so later choices for that program take the fastest. The reference oracle is
only chosen when nothing else can run the program and ``allow_reference`` is set.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from vyre.ir.fingerprint import fingerprint
from vyre.ir.program import Program

from . import settings
from .atomic_file import write_atomic
from .errors import BackendError, UnsupportedFeature
from .pipeline.disk import cache_root
from .registry import acquire, registered_backends_by_precedence, why_not

log = logging.getLogger("vyre.routing")


@dataclass
class RouteDecision:
    backend: str | None
    reasons: dict[str, str] = field(default_factory=dict)   # backend id -> why it was (not) chosen
    timings_ns: dict[str, float] = field(default_factory=dict)

    def explain(self) -> str:
        lines = [f"chosen: {self.backend or 'none'}"]
        lines += [f"  {bid}: {why}" for bid, why in self.reasons.items()]
        return "\n".join(lines)


class Router:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._timings: dict[str, dict[str, float]] | None = None

    def _runnable(self, program: Program, allow_reference: bool) -> tuple[list[Any], dict[str, str]]:
        ok, reasons = [], {}
        for reg in registered_backends_by_precedence():
            if not reg.implicit:
                reasons[reg.id] = "only chosen explicitly (a cluster backend)"
                continue
            if reg.reference_oracle and not allow_reference:
                reasons[reg.id] = "reference oracle: only chosen explicitly"
                continue
            try:
                b = acquire(reg.id)
            except BackendError as err:
                reasons[reg.id] = f"unavailable: {err.message}"
                continue
            problems = why_not(program, b)
            if problems:
                reasons[reg.id] = "cannot run it: " + "; ".join(problems)
                continue
            ok.append(b)
        return ok, reasons

    def _file(self, backends: Sequence[Any]) -> Path:
        if self.path is not None:
            return self.path
        ids = "|".join(sorted(f"{b.id()}:{b.device_fingerprint().hex()}" for b in backends))
        return cache_root() / "routing" / f"{blake3.blake3(ids.encode()).hexdigest()[:24]}.json"

    def _load(self, backends: Sequence[Any]) -> dict[str, dict[str, float]]:
        """Persisted timings; a missing, unreadable or absurd file (non-finite or negative
        times, wrong shapes) is ignored with a warning, never an error."""
        if self._timings is None:
            from .pipeline.disk import read_small_file

            self._timings = {}
            text = read_small_file(self._file(backends), "routing timings")
            if text is not None:
                try:
                    data = json.loads(text)
                    for k, v in (data.items() if isinstance(data, dict) else ()):
                        if not isinstance(v, dict):
                            continue
                        row = {b: float(t) for b, t in v.items()
                               if isinstance(t, int | float) and not isinstance(t, bool)
                               and math.isfinite(float(t)) and 0 <= float(t) < 1e15}
                        if len(row) != len(v):
                            log.warning("vyre routing: ignoring absurd timings for %s", k)
                        self._timings[k] = row
                except (ValueError, TypeError, OverflowError, RecursionError) as exc:
                    log.warning("vyre routing: ignoring unreadable timings (%s)", exc)
                    self._timings = {}
        return self._timings

    def choose(self, program: Program, allow_reference: bool = False) -> RouteDecision:
        runnable, reasons = self._runnable(program, allow_reference)
        if not runnable and not allow_reference:
            return self.choose(program, allow_reference=True) if settings.flag("VYRE_ROUTE_REFERENCE") \
                else RouteDecision(None, reasons)
        if not runnable:
            return RouteDecision(None, reasons)
        measured = self._load(runnable).get(fingerprint(program).hex(), {})
        timed = {b.id(): measured[b.id()] for b in runnable if b.id() in measured}
        if len(timed) == len(runnable) and len(runnable) > 1:
            best = min(runnable, key=lambda b: timed[b.id()])
            for b in runnable:
                reasons[b.id()] = (f"fastest measured ({timed[b.id()] / 1e3:.1f} us)" if b is best
                                   else f"slower measured ({timed[b.id()] / 1e3:.1f} us)")
        else:
            best = runnable[0]
            for b in runnable:
                reasons[b.id()] = "first by precedence" if b is best else "later by precedence (not measured)"
        return RouteDecision(best.id(), reasons, timed)

    def measure(self, program: Program, inputs: Sequence[Any], repeats: int = 3) -> dict[str, float]:
        """Median wall time per runnable backend for ``inputs``; persisted for `choose`."""
        runnable, _ = self._runnable(program, allow_reference=False)
        result: dict[str, float] = {}
        for b in runnable:
            b.dispatch(program, inputs)  # compile and warm
            samples = [b.dispatch_borrowed_timed(program, inputs).wall_ns for _ in range(repeats)]
            result[b.id()] = float(statistics.median(samples))
        timings = self._load(runnable)
        timings[fingerprint(program).hex()] = result
        path = self._file(runnable)
        try:
            write_atomic(path, json.dumps(timings))   # a unique temp file: processes never clobber
        except OSError as exc:
            log.warning("vyre routing: cannot persist timings (%s)", exc)
        return result

    def acquire_for(self, program: Program) -> Any:
        d = self.choose(program)
        if d.backend is None:
            raise UnsupportedFeature(
                f"no backend can run this program ({'; '.join(f'{k}: {v}' for k, v in d.reasons.items())})",
                "vyre", "install a backend that can (`vyre doctor`), change the program, or set "
                "VYRE_BACKEND=reference to use the CPU reference explicitly.")
        return acquire(d.backend)
