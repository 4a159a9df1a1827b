"""Shared benchmark plumbing: timing helpers and JSON output (numbers, machine, versions, git
commit, device)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def args(description: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--json", type=Path, default=None, help="write results here")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    return ap.parse_args()


def median_ns(fn: Callable[[], object], repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t)
    return statistics.median(samples)


def seconds_median(fn: Callable[[], object], reps: int) -> float:
    """Median wall seconds of ``reps`` calls of ``fn`` after one warm-up call."""
    return median_ns(fn, reps, warmup=1) / 1e9


def per_call_ns(fn: Callable[[], object], calls: int, sync: Callable[[], object], rounds: int = 5) -> float:
    """Median over rounds of (time for `calls` back-to-back calls + one sync) / calls."""
    fn()
    sync()
    out = []
    for _ in range(rounds):
        t = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter_ns() - t) / calls)
    return statistics.median(out)


def git_commit() -> str:
    """``VYRE_COMMIT`` where set (scripts/gpu-check sets it from the commit the carried wheel
    was built from: the device's copy of the tree may carry other git metadata), else ``git
    rev-parse --short HEAD`` of the checkout these benchmarks live in, or "unknown" outside a
    checkout (or without git)."""
    if os.environ.get("VYRE_COMMIT"):
        return os.environ["VYRE_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def gpu_name() -> str | None:
    """Name of the CUDA device the benchmark used, when it imported CuPy or cuda.core (never
    imports either itself, so CPU-only benchmarks start no CUDA context); None otherwise."""
    try:
        if "cupy" in sys.modules:
            cupy = sys.modules["cupy"]
            name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
            return name.decode() if isinstance(name, bytes) else str(name)
        if "cuda.core" in sys.modules:
            return str(sys.modules["cuda.core"].Device().name)
    except Exception:  # the name is optional metadata: no device, no name
        return None
    return None


def emit(name: str, results: dict, path: Path | None, device: str | None = None) -> None:
    """Print the results as JSON (and write them to ``path``) with what produced them: machine,
    Python, time, git commit and the device. ``device`` names the OpenCL/wgpu device when the
    benchmark passes it; otherwise a ``device``/``adapter`` entry of the results, else the CUDA
    device of an imported CuPy/cuda.core; absent when none is known."""
    doc = {"benchmark": name, "machine": platform.node(), "python": platform.python_version(),
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_commit()}
    found = device or results.get("device") or results.get("adapter") or gpu_name()
    if found:
        doc["device"] = str(found)
    doc["results"] = results
    text = json.dumps(doc, indent=1, default=float)
    print(text)
    if path:
        path.write_text(text)


def interleaved_median_us(variants: dict[str, Callable[[], object]], rounds: int = 10,
                          per_round: int = 200) -> dict[str, float]:
    """Median per-call time of each variant, measured in alternating rounds so clock ramps and
    warm-up affect every variant alike."""
    samples: dict[str, list[int]] = {k: [] for k in variants}
    for fn in variants.values():
        for _ in range(20):
            fn()
    for _ in range(rounds):
        for name, fn in variants.items():
            for _ in range(per_round):
                t = time.perf_counter_ns()
                fn()
                samples[name].append(time.perf_counter_ns() - t)
    return {k: statistics.median(v) / 1e3 for k, v in samples.items()}


#: Python prepended to a child process's code: ``trace("module.Class.method", ...)`` wraps
#: functions so that their wall time (ms, summed over calls) lands in ``TRACED``;
#: ``print_traced()`` prints it as one ``TRACED {json}`` line (see `traced_from`).
TRACE = r"""
import functools as _ft, importlib as _il, json as _js, time as _tm
TRACED = {}
def trace(*paths):
    for path in paths:
        head, _, attr = path.rpartition(".")
        try:
            owner = _il.import_module(head)
        except ImportError:
            mod, _, cls = head.rpartition(".")
            owner = getattr(_il.import_module(mod), cls)
        f = getattr(owner, attr)
        def g(*a, _f=f, _p=path, **k):
            t = _tm.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                TRACED[_p] = TRACED.get(_p, 0.0) + (_tm.perf_counter() - t) * 1e3
        setattr(owner, attr, _ft.wraps(f)(g))
def print_traced():
    print("TRACED " + _js.dumps({k.rsplit(".", 2)[-2] + "." + k.rsplit(".", 1)[-1]: round(v, 3) for k, v in TRACED.items()}))
"""


def traced_from(stdout: str) -> dict:
    """The ``TRACED`` line of a child's output (an empty dict if it printed none)."""
    for line in stdout.splitlines():
        if line.startswith("TRACED "):
            return json.loads(line[len("TRACED "):])
    return {}
