"""Dispatch counters, latency histograms (per backend) and a tracing hook.

The driver records every enforced dispatch here; `snapshot()` exports a dict and
`prometheus_text()` the Prometheus exposition format. `set_trace_hook(fn)` receives one
``DispatchEvent`` per dispatch (for OpenTelemetry or logging bridges).
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

# Histogram bucket upper bounds in nanoseconds (1 us .. 10 s).
BUCKETS_NS = (1_000, 5_000, 10_000, 50_000, 100_000, 500_000, 1_000_000, 5_000_000,
              10_000_000, 50_000_000, 100_000_000, 1_000_000_000, 10_000_000_000)


@dataclass(frozen=True)
class DispatchEvent:
    backend: str
    wall_ns: int
    ok: bool
    label: str | None


@dataclass
class _Series:
    dispatches: int = 0
    errors: int = 0
    total_ns: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_NS) + 1))
    # launches counted on hot paths without the lock: ``next(launches)`` is atomic in CPython
    launches: itertools.count = field(default_factory=itertools.count)
    peeks: int = 0

    def taken(self) -> int:
        """Hot-path launches so far (each read itself advances the counter once)."""
        n = next(self.launches) - self.peeks
        self.peeks += 1
        return n


_lock = threading.Lock()
_series: dict[str, _Series] = {}
_hook: Callable[[DispatchEvent], None] | None = None


def set_trace_hook(hook: Callable[[DispatchEvent], None] | None) -> None:
    global _hook
    _hook = hook


def record_dispatch(backend: str, wall_ns: int, ok: bool, label: str | None = None) -> None:
    """Count one dispatch (every entry point of every engine backend calls this)."""
    record_dispatches(backend, 1, wall_ns, ok, (label,))


def record_dispatches(backend: str, count: int, wall_ns: int, ok: bool,
                      labels: tuple[str | None, ...]) -> None:
    """Count ``count`` dispatches that took ``wall_ns`` each (a batch replayed as one unit):
    the same counters as ``count`` calls of `record_dispatch`, under one lock. ``labels``
    holds each dispatch's label (or one label for all); the trace hook gets one event each."""
    bucket = _bisect(BUCKETS_NS, wall_ns)
    _lock.acquire()
    try:
        s = _series.get(backend)
        if s is None:
            s = _series[backend] = _Series()
        s.dispatches += count
        if not ok:
            s.errors += count
        s.total_ns += wall_ns * count
        s.buckets[bucket] += count
    finally:
        _lock.release()
    hook = _hook
    if hook is not None:
        for i in range(count):
            hook(DispatchEvent(backend, wall_ns, ok, labels[i] if len(labels) > 1 else labels[0]))


_bisect = bisect.bisect_left


def series(backend: str) -> _Series:
    """The counters of one backend, for hot paths that count with ``next(s.launches)``
    (bound launches: their wall time is only the enqueue, so no latency is recorded)."""
    with _lock:
        s = _series.get(backend)
        if s is None:
            s = _series[backend] = _Series()
        return s


def snapshot() -> dict[str, dict]:
    with _lock:
        return {b: {"dispatches": s.dispatches + (hot := s.taken()), "errors": s.errors,
                    "total_ns": s.total_ns, "enqueue_only": hot,
                    "latency_buckets_ns": dict(zip([*map(str, BUCKETS_NS), "+Inf"], s.buckets))}
                for b, s in _series.items()}


def reset() -> None:
    with _lock:
        for s in _series.values():
            s.dispatches = s.errors = s.total_ns = 0
            s.buckets = [0] * (len(BUCKETS_NS) + 1)
            s.peeks = next(s.launches) + 1


def prometheus_text() -> str:
    lines = ["# HELP vyre_dispatches_total Dispatches per backend.",
             "# TYPE vyre_dispatches_total counter"]
    snap = snapshot()
    for b, s in sorted(snap.items()):
        lines.append(f'vyre_dispatches_total{{backend="{b}"}} {s["dispatches"]}')
    lines += ["# HELP vyre_dispatch_errors_total Failed dispatches per backend.",
              "# TYPE vyre_dispatch_errors_total counter"]
    for b, s in sorted(snap.items()):
        lines.append(f'vyre_dispatch_errors_total{{backend="{b}"}} {s["errors"]}')
    lines += ["# HELP vyre_dispatch_seconds Dispatch wall time.",
              "# TYPE vyre_dispatch_seconds histogram"]
    for b, s in sorted(snap.items()):
        acc = 0
        for le, n in s["latency_buckets_ns"].items():
            acc += n
            bound = le if le == "+Inf" else repr(int(le) / 1e9)
            lines.append(f'vyre_dispatch_seconds_bucket{{backend="{b}",le="{bound}"}} {acc}')
        lines.append(f'vyre_dispatch_seconds_sum{{backend="{b}"}} {s["total_ns"] / 1e9}')
        lines.append(f'vyre_dispatch_seconds_count{{backend="{b}"}} {s["dispatches"]}')
    return "\n".join(lines) + "\n"
